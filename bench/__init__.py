"""Benchmarks of LakeMirror (run as ``python -m bench.<name>``); never part of the test suite."""
