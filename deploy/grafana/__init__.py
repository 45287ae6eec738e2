"""The Grafana dashboard of LakeMirror, generated from code (:mod:`deploy.grafana.dashboard`)."""
