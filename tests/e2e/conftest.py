"""Fixtures of the two-region end-to-end tests (see :mod:`tests.e2e.regions`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.regions import TwoRegions, two_regions
from tests.integration.dynalite import (  # noqa: F401  (fixtures of regions on DynamoDB)
    dynalite,
    dynalite_second_region,
)
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures of regions on S3)
    moto_log_dir,
    moto_region,
    moto_second_region,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoRegions]:
    """Regions ``a`` and ``b`` with their servers, for every test of a module."""
    with two_regions(tmp_path_factory.mktemp("regions")) as regions:
        yield regions
        regions.close()
