"""Run moto's HTTP server handling one request at a time: ``python -m ... HOST PORT``.

``moto_server`` serves each request on its own thread, and moto's DynamoDB checks a condition
expression and writes the item without a lock, so two racing conditional writes can both
succeed: a lost update that real DynamoDB never allows. Serving requests one after another makes
every conditional write atomic, as it is on AWS; clients still race each other over HTTP.
"""

from __future__ import annotations

import sys

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, app, threaded=False, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
