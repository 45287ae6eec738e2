"""Fixtures of the deployment tests: the image, the Helm chart, alert rules and dashboard.

These tests drive real programs (buildah, helm, promtool, prometheus, dynalite) that
``make tools`` installs; a missing program fails the test with the command to run, it never
skips it.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/deploy/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.deploy)
