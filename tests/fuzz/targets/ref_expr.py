"""Ref expressions: a branch, tag or commit followed by ``~N``, ``^N``, ``@`` or ``$``.

The input is the expression (UTF-8; bytes that are not become lone surrogates, as Python's
``surrogateescape`` reads them). It is parsed by :func:`parse_ref`; what parses must print back
to an expression that parses the same, and is resolved in a repository with a merge in its
history (``main``, ``feature``, tag ``v1.0``). It is also read inside a ``lakefs://`` URI, whose
parse must print back as given. Documented refusals: :class:`InvalidRefError`,
:class:`RefNotFoundError` (resolution), :class:`InvalidURIError` (URIs).
"""

from __future__ import annotations

import functools

from mirror.core import Catalog, open_memory
from mirror.core.errors import InvalidRefError, InvalidURIError, RefNotFoundError
from mirror.core.refexpr import Modifier, RefExpr, parse_ref
from mirror.core.uri import parse_uri

__all__ = ["catalog", "check", "text"]

_REPO = "repo"


@functools.cache
def catalog() -> Catalog:
    """Return the catalog of repository ``repo``: main c1 - c2 - merge of feature (f1), tag v1.0."""
    lake = open_memory()
    lake.create_repository(_REPO, f"mem://{_REPO}")
    lake.upload_object(_REPO, "main", "a", b"1")
    lake.commit(_REPO, "main", "c1")
    lake.create_branch(_REPO, "feature", "main")
    lake.upload_object(_REPO, "feature", "b", b"1")
    lake.commit(_REPO, "feature", "f1")
    lake.upload_object(_REPO, "main", "a", b"2")
    lake.commit(_REPO, "main", "c2")
    lake.merge(_REPO, "feature", "main")
    lake.create_tag(_REPO, "v1.0", "main~1")
    return lake


def text(data: bytes) -> str:
    """Return the expression an input spells."""
    return data.decode("utf-8", "surrogateescape")


def printed(expr: RefExpr) -> str:
    """Return ``expr`` written out, every number explicit."""
    steps = "".join(
        mod.value if mod in (Modifier.COMMITTED, Modifier.STAGING) else f"{mod.value}{n}"
        for mod, n in expr.steps
    )
    return expr.base + steps


def check(data: bytes) -> str | None:
    """Parse ``data`` as a ref expression, print it back, resolve it; read it in a URI."""
    ref = text(data)
    uri = f"lakefs://{_REPO}/{ref}/some/path"
    try:
        parsed = parse_uri(uri)
    except InvalidURIError:
        pass
    else:
        assert str(parsed) == uri, (str(parsed), uri)
    try:
        expr = parse_ref(ref)
    except InvalidRefError:
        return "InvalidRefError"
    assert parse_ref(printed(expr)) == expr, (ref, printed(expr))
    try:
        catalog().resolve_ref(_REPO, ref)
    except InvalidRefError:
        return "InvalidRefError"
    except RefNotFoundError:
        return "RefNotFoundError"
    return None
