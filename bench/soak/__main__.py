"""``python -m bench.soak``: see :mod:`bench.soak`."""

import sys

from bench.soak.run import main

sys.exit(main())
