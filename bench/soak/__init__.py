"""Soak: days of production in an hour, two regions on the production path under faults.

``python -m bench.soak [--minutes 20] [--window 300] [--fault-every 180] [--seed 1]
[--faults worker,replicant,replication,kv] [--max-faults N] [--catch-up 300] [--keep 60]
[--think 0.3] [--workdir DIR]`` runs, as separate processes on 127.0.0.1 (:mod:`bench.soak.world`):
per region a dynalite (the KV, on LevelDB), a moto server (S3) and ``lakemirror server`` with two
workers; in the mirror region two replicant replicas; between the regions' buckets
``lakemirror simulate-replication``. A source repository in region ``a`` is mirrored, every
branch and tag, into region ``b``.

For ``--minutes`` a mixed load (:mod:`bench.soak.load`) writes to region ``a`` through the REST
API, the official SDK and the S3 gateway (uploads, commits, merges synchronous and asynchronous,
branches and tags created and deleted) and reads acknowledged objects back in region ``b`` by
commit ID through the SDK and the gateway, while a fault schedule (:mod:`bench.soak.faults`)
kills -9 a random process every ``--fault-every`` seconds or so and brings it back. A safety
checker reads every object of every new head of the mirror's ``main``; the ledger
(:mod:`bench.soak.ledger`) keeps every acknowledged write and when the mirror reached each
``main`` commit.

It prints, per window: requests and errors by status, p50/p99 latency, mirror lag, the KV's
items; the RSS and open files of every process; requests by kind, the faults; and at the end the
targets (:mod:`bench.soak.report`): acknowledged writes lost, mirror safety violations, growth
after warm-up, 5xx other than deliberate 503s, the mirror reaching the source's final state. The
exit code is 1 when a target is missed.
"""
