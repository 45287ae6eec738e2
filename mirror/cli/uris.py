"""``lakefs://`` arguments of the CLI, with the parts each command needs."""

from __future__ import annotations

from mirror.client.errors import UsageError
from mirror.core.errors import InvalidURIError
from mirror.core.uri import LakeFSURI, parse_uri

__all__ = ["object_uri", "ref_argument", "ref_uri", "repository_uri"]


def _parse(text: str) -> LakeFSURI:
    try:
        return parse_uri(text)
    except InvalidURIError as exc:
        raise UsageError(str(exc)) from exc


def repository_uri(text: str) -> str:
    """Return the repository of ``lakefs://repo``.

    Raises:
        UsageError: not a repository URI.
    """
    uri = _parse(text)
    if uri.ref is not None:
        raise UsageError(f"expected lakefs://<repository>, got {text!r}")
    return uri.repository


def ref_uri(text: str) -> tuple[str, str]:
    """Return the repository and ref (or branch, tag) of ``lakefs://repo/ref``.

    Raises:
        UsageError: not a ``lakefs://repo/ref`` URI (a path after the ref is refused).
    """
    uri = _parse(text)
    if uri.ref is None or uri.path:
        raise UsageError(f"expected lakefs://<repository>/<ref>, got {text!r}")
    return uri.repository, uri.ref


def object_uri(text: str) -> tuple[str, str, str]:
    """Return the repository, ref and path of ``lakefs://repo/ref[/path]`` (path may be empty).

    Raises:
        UsageError: no ref in the URI.
    """
    uri = _parse(text)
    if uri.ref is None:
        raise UsageError(f"expected lakefs://<repository>/<ref>/<path>, got {text!r}")
    return uri.repository, uri.ref, uri.path or ""


def ref_argument(text: str, repository: str) -> str:
    """Return the ref named by ``text``: a ``lakefs://`` URI in ``repository``, or a bare ref.

    Raises:
        UsageError: the URI names another repository or has a path.
    """
    if not text.startswith("lakefs://"):
        if not text:
            raise UsageError("empty ref")
        return text
    repo, ref = ref_uri(text)
    if repo != repository:
        raise UsageError(f"{text!r} is in repository {repo!r}, expected {repository!r}")
    return ref
