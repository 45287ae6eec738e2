"""``lakemirror`` whose workers are slow to start: ``python -m`` this module ``server ...``.

uvicorn spawns each worker, and a spawned process imports the parent's main module again (as
``__mp_main__``) before it can answer its supervisor's health checks. Here that import sleeps
``SLOW_START_SECONDS`` (default 6): a worker starting on a machine whose CPUs are busy.
"""

from __future__ import annotations

import os
import sys
import time

SECONDS_ENV = "SLOW_START_SECONDS"

if __name__ == "__mp_main__":
    time.sleep(float(os.environ.get(SECONDS_ENV, "6")))  # the slow start this module stands for

if __name__ == "__main__":
    from mirror.cli.main import main

    sys.exit(main())
