"""A client command starts without loading what only the server, the core or Spark need.

``lakemirror repo list`` and the other lakectl-like commands talk HTTP; importing the
columnar tree code (pyarrow, pandas), the configuration models (pydantic) or the server's
packages would cost most of a second at every invocation. Checked in a fresh interpreter, so
that nothing this test process imported counts.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pyarrow", "pandas", "numpy", "pydantic", "fastapi", "uvicorn", "pyspark", "boto3")

_PROBE = """
import json, sys
from mirror.cli.main import main
try:
    main(["repo", "list"])
except SystemExit:
    pass
import mirror.core.errors, mirror.core.uri
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {heavy})))
"""


def _loaded(tmp_path: object) -> list[str]:
    env = {"PATH": "", "HOME": str(tmp_path), "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=repr(set(HEAVY)))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_a_client_command_loads_none_of_the_heavy_packages(tmp_path: object) -> None:
    assert _loaded(tmp_path) == []


def test_the_core_package_still_offers_every_name() -> None:
    import mirror.core as core

    for name in core.__all__:
        assert getattr(core, name) is not None, name
    assert set(core.__all__) <= set(dir(core))
