"""The API's routes never compete for a request, so the app may include its hottest routers first.

Starlette tries routes in order and takes the first whose path and method match; the app
includes the routers of objects, branches and refs first, so a stat, read, upload or commit
tries fewer routes. That changes no answer as long as no path and method match two routes, and
as long as, for a path two routers share (with different methods), the same route comes first:
it is the one that answers another method's 405 and names its methods in ``Allow``.
"""

from __future__ import annotations

import itertools

from fastapi.routing import APIRoute

from mirror.block import BlockResolver
from tests.inprocess import region_app


def _routes(router: object, owner: str = "") -> list[tuple[str, str, frozenset[str]]]:
    found: list[tuple[str, str, frozenset[str]]] = []
    for route in getattr(router, "routes", []):
        if isinstance(route, APIRoute):
            found.append((owner, route.path, frozenset(route.methods)))
        elif hasattr(route, "original_router"):  # an included router
            inner = route.original_router
            found += _routes(inner, f"{owner}/{id(inner)}")
    return found


def _shapes_overlap(a: str, b: str) -> bool:
    """Return whether some path matches both templates (parameters match one segment)."""
    left, right = a.strip("/").split("/"), b.strip("/").split("/")
    if len(left) != len(right):
        return False
    pairs = zip(left, right, strict=True)
    return all(x.startswith("{") or y.startswith("{") or x == y for x, y in pairs)


FIRST_OF_SHARED_PATHS = {
    "/repositories/{repository}/branches/{branch}/objects": frozenset({"POST"}),
    "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}": frozenset({"POST"}),
}
"""Paths served by two routers, and the methods of the route tried first (its 405's ``Allow``)."""


def test_paths_two_routers_share_keep_the_route_tried_first(tmp_path: object) -> None:
    _, app = region_app(BlockResolver(str(tmp_path)))
    routes = _routes(app.router)
    assert len(routes) > 100
    shared = {
        a
        for (owner_a, a, _), (owner_b, b, _) in itertools.combinations(routes, 2)
        if owner_a != owner_b and _shapes_overlap(a, b)
    }
    assert shared == set(FIRST_OF_SHARED_PATHS)
    for path, methods in FIRST_OF_SHARED_PATHS.items():
        first = next(m for _, p, m in routes if p == path)
        assert first == methods, path


def test_no_path_and_method_match_two_routes(tmp_path: object) -> None:
    _, app = region_app(BlockResolver(str(tmp_path)))
    clashes = [
        (a, b)
        for (_, a, ma), (_, b, mb) in itertools.combinations(_routes(app.router), 2)
        if ma & mb and _shapes_overlap(a, b)
    ]
    assert clashes == []


def test_the_overlap_check_sees_a_clash() -> None:
    assert _shapes_overlap(
        "/repositories/{repository}/branches/{branch}", "/repositories/x/branches/y"
    )
    assert _shapes_overlap("/a/{b}/c", "/a/literal/c")
    assert not _shapes_overlap("/a/{b}/c", "/a/{b}/d")
    assert not _shapes_overlap("/a/{b}", "/a/{b}/c")
