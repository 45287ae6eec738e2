"""HTTP plumbing the front doors share: error answers, request metrics, body streaming.

The REST API, the S3 gateway, the replicant's API and the web UI are siblings; what more than
one of them needs lives here, one layer below them, instead of one front door reaching into
another's modules (as lakeFS's ``pkg/httputil`` stands beside ``pkg/api`` and ``pkg/gateway``).
"""
