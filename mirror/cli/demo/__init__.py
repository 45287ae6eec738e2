"""``lakemirror demo``: transactional mirroring between two local regions, watched live.

The demo starts what a two-region deployment runs, on the embedded default (SQLite + local
directories under ``--data-dir``): a ``lakemirror server`` per region, the ``lakemirror
replicant`` of region ``b`` signed in as a user with the built-in ``Replicator`` policy, and a
:class:`~mirror.simulate.ReplicationSimulator` copying region ``a``'s namespace into region
``b``'s late, out of order and with dropped deliveries, as S3 Replication would. It creates the
source repository ``origin``, mirrors it as ``origin-mirror`` through the replicant's
configuration API, and commits to ``origin`` every ``--commit-interval`` seconds (CSV, JSON and
Parquet objects of mixed sizes; now and then a deletion) while a terminal view shows both heads,
the lag and the replicant's counters. At the end (``--duration`` or Ctrl-C) it lets the mirror
catch up and compares it with the source, byte for byte, at the mirrored commit.

The package holds one job per module: :mod:`.options` (the arguments), :mod:`.processes` (child
processes), :mod:`.regions` (setting up both regions and the mirror), :mod:`.writer`,
:mod:`.observer`, :mod:`.view` (the live display), :mod:`.report` (the consistency check) and
:mod:`.run` (one run from start to clean-up).
"""

from mirror.cli.demo.options import register_demo_command
from mirror.cli.demo.regions import DemoRegions, demo_regions
from mirror.cli.demo.run import run_demo

__all__ = ["DemoRegions", "demo_regions", "register_demo_command", "run_demo"]
