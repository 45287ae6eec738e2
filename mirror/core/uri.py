"""``lakefs://<repository>/<ref>/<path>`` URIs."""

from __future__ import annotations

from dataclasses import dataclass

from mirror.core.errors import InvalidNameError, InvalidURIError
from mirror.core.ids import Ref, RepositoryID
from mirror.core.refexpr import parse_ref
from mirror.core.validate import validate_repository_id

__all__ = ["LakeFSURI", "parse_uri"]

_SCHEME = "lakefs://"


@dataclass(frozen=True, slots=True)
class LakeFSURI:
    """A parsed URI: a repository, optionally a ref, optionally a path (or prefix) under it."""

    repository: RepositoryID
    ref: Ref | None = None
    path: str | None = None

    def __str__(self) -> str:
        out = _SCHEME + self.repository
        if self.ref is not None:
            out += "/" + self.ref
            if self.path is not None:
                out += "/" + self.path
        return out


def parse_uri(uri: str) -> LakeFSURI:
    """Parse ``lakefs://repo``, ``lakefs://repo/ref`` or ``lakefs://repo/ref/path``.

    A trailing ``/`` after the ref gives an empty path (the whole ref as a prefix).

    Raises:
        InvalidURIError: wrong scheme, bad repository name or malformed ref; names ``uri``.
    """
    if not isinstance(uri, str) or not uri.startswith(_SCHEME):
        raise InvalidURIError(f"invalid lakefs URI {uri!r}: must start with {_SCHEME!r}")
    rest = uri[len(_SCHEME) :]
    repo, sep, tail = rest.partition("/")
    try:
        repository = validate_repository_id(repo)
    except InvalidNameError as exc:
        raise InvalidURIError(f"invalid lakefs URI {uri!r}: {exc}") from exc
    if not sep:
        return LakeFSURI(repository)
    ref, sep, path = tail.partition("/")
    if not ref:
        raise InvalidURIError(f"invalid lakefs URI {uri!r}: empty ref")
    try:
        parse_ref(ref)
    except InvalidURIError:
        raise
    except Exception as exc:
        raise InvalidURIError(f"invalid lakefs URI {uri!r}: {exc}") from exc
    if "\x00" in path:
        raise InvalidURIError(f"invalid lakefs URI {uri!r}: path contains NUL")
    return LakeFSURI(repository, Ref(ref), path if sep else None)
