"""Tests of the S3-compatible gateway."""
