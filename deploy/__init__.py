"""Deployment assets of LakeMirror: alert rules, the Grafana dashboard, the image."""
