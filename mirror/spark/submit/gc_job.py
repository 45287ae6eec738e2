"""``spark-submit gc_job.py REPO [options]``: ``lakemirror gc`` with spark-submit's master.

Takes the arguments of ``lakemirror gc`` (``--sweep``, ``--mark-id``, ``--grace-period``, ...);
the server and credentials come from lakectl's configuration (``LAKECTL_*``) as for the CLI.
"""

from __future__ import annotations

import sys

from mirror.cli.gc_cmd import submitted_main

if __name__ == "__main__":
    sys.exit(submitted_main())
