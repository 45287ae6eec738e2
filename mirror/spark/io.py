"""Read and write ``lakefs://`` datasets with Spark's own file readers and writers.

A read resolves the ref to a commit ID once, lists the objects under the path through the API,
and hands Spark the physical files of the local region (``file://`` for ``local://``
namespaces, ``s3a://`` for ``s3://`` ones). A write puts the DataFrame's files under a fresh
``data/`` prefix of the repository's namespace, stages them all by physical address with the
bulk staging endpoint, and optionally commits.

Every check that can fail (URI, format, mode, repository, ref, branch) runs before any Spark
job starts. pyspark is only needed by the functions that take or return DataFrames.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from mirror.client.client import LakeFSClient
from mirror.client.config import load_config
from mirror.client.errors import AuthError, CLIError, RejectedError
from mirror.client.errors import NotFoundError as CLINotFoundError
from mirror.client.errors import UnavailableError as CLIUnavailableError
from mirror.core.errors import InvalidURIError
from mirror.core.ids import CommitID
from mirror.core.paths import DataPathProvider
from mirror.core.uri import LakeFSURI, parse_uri
from mirror.spark.errors import (
    DatasetExistsError,
    EmptyDatasetError,
    NotABranchError,
    RefNotFoundError,
    RepositoryNotFoundError,
    RepositoryReadOnlyError,
    ServerAuthError,
    ServerError,
    ServerUnavailableError,
    SparkIOError,
    UnsupportedAddressError,
    UnsupportedFormatError,
    UnsupportedModeError,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "FORMATS",
    "MAX_STAGE_BATCH",
    "MODES",
    "SparkRead",
    "SparkWrite",
    "read",
    "read_at",
    "spark_uri",
    "write",
]

FORMATS = frozenset({"parquet", "csv", "json", "text", "orc"})
"""The data source formats :func:`read` and :func:`write` accept."""

MODES = frozenset({"error", "errorifexists", "append", "overwrite", "ignore"})
"""Spark's save modes, all of which :func:`write` accepts."""

MAX_STAGE_BATCH = 10_000
"""Objects staged per bulk staging call (the server's limit)."""

_DELETE_BATCH = 1000
_PATHS = DataPathProvider()


@dataclass(frozen=True, slots=True)
class SparkRead:
    """A DataFrame read at one commit.

    Attributes:
        dataframe: The data (lazy: Spark reads the files when an action runs).
        commit_id: The commit the ref resolved to; read ``lakefs://repo/<commit_id>/path`` to
            get the same rows again.
        uri: The ``lakefs://`` URI of the dataset pinned at ``commit_id``.
        files: The physical URIs handed to Spark, in path order.
    """

    dataframe: DataFrame
    commit_id: CommitID
    uri: str
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SparkWrite:
    """What a write did to the branch.

    Attributes:
        repository: The repository written to.
        branch: The branch written to.
        path: The dataset's path on the branch (ends with ``/``).
        location: The physical URI of the fresh prefix the files went to (``""`` if skipped).
        staged: The paths staged, in path order.
        deleted: The paths whose deletion was staged (mode ``overwrite``), in path order.
        commit_id: The new commit, when a commit message was given.
        skipped: ``True`` when mode ``ignore`` found the dataset present and wrote nothing.
    """

    repository: str
    branch: str
    path: str
    location: str
    staged: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    commit_id: CommitID | None = None
    skipped: bool = False


# -- physical addresses ------------------------------------------------------------------------


def spark_uri(physical_address: str, local_root: str | Path | None = None) -> str:
    """Return the URI Spark reads and writes a physical address by.

    ``s3://bucket/key`` becomes ``s3a://bucket/key``; ``local:///abs/path`` becomes
    ``file:///abs/path``; a relative ``local://name/key`` is taken under ``local_root`` (the
    server's local root: its data directory unless configured otherwise).

    Raises:
        UnsupportedAddressError: another scheme (``mem://``, say), or a relative ``local://``
            address without ``local_root``.
    """
    scheme, sep, rest = physical_address.partition("://")
    if not sep:
        raise UnsupportedAddressError(f"physical address {physical_address!r} is not a URI")
    if scheme in ("s3", "s3a", "s3n"):
        return "s3a://" + rest
    if scheme == "local":
        if rest.startswith("/"):
            return "file://" + rest
        if local_root is None:
            raise UnsupportedAddressError(
                f"physical address {physical_address!r} is relative to the server's local root: "
                "pass local_root (the server's data directory)"
            )
        return "file://" + str(Path(local_root).resolve() / rest)
    raise UnsupportedAddressError(
        f"physical address {physical_address!r}: Spark cannot read scheme {scheme!r} "
        "(supported: local://, s3://)"
    )


def _default_local_root() -> Path:
    """Return the local root of a server configured like this process (``LAKEMIRROR_*``)."""
    from mirror.config import load_config as load_process_config

    return load_process_config().local_root().resolve()


@dataclass(frozen=True, slots=True)
class _Addresses:
    """Map the physical addresses of one region to Spark URIs, finding the local root lazily."""

    local_root: str | Path | None

    def uri(self, physical_address: str) -> str:
        root = self.local_root
        if (
            root is None
            and physical_address.startswith("local://")
            and not (physical_address.startswith("local:///"))
        ):
            root = _default_local_root()
        return spark_uri(physical_address, root)


# -- the API -----------------------------------------------------------------------------------


@contextmanager
def _connect(client: LakeFSClient | None) -> Iterator[LakeFSClient]:
    """Yield ``client``, or one configured like lakectl (``LAKECTL_*``, ``~/.lakectl.yaml``)."""
    if client is not None:
        yield client
        return
    try:
        own = LakeFSClient(load_config())
    except CLIError as exc:
        raise ServerError(exc.message) from exc
    with own:
        yield own


def _server_error(exc: CLIError, what: str = "") -> SparkIOError:
    message = f"{what}: {exc.message}" if what else exc.message
    if isinstance(exc, AuthError):
        return ServerAuthError(message)
    if isinstance(exc, CLIUnavailableError):
        return ServerUnavailableError(message)
    return ServerError(message)


def _call(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a client method, turning its errors into :mod:`mirror.spark.errors`."""
    try:
        return call(*args, **kwargs)
    except CLIError as exc:
        raise _server_error(exc, what) from exc


def _repository(client: LakeFSClient, repo: str) -> dict[str, Any]:
    try:
        result: dict[str, Any] = client.get_repository(repo)
    except CLINotFoundError as exc:
        raise RepositoryNotFoundError(repo) from exc
    except CLIError as exc:
        raise _server_error(exc) from exc
    return result


def _commit_of(client: LakeFSClient, repo: str, ref: str) -> CommitID:
    try:
        commit = client.get_commit(repo, ref)
    except CLINotFoundError as exc:
        raise RefNotFoundError(repo, ref) from exc
    except CLIError as exc:
        raise _server_error(exc) from exc
    return CommitID(str(commit["id"]))


def _parse(uri: str, *, need_path: bool) -> LakeFSURI:
    parsed = parse_uri(uri)
    if parsed.ref is None:
        raise InvalidURIError(f"lakefs URI {uri!r} names no ref: use lakefs://repo/ref/path/")
    if need_path and not (parsed.path or "").strip("/"):
        raise InvalidURIError(
            f"lakefs URI {uri!r} names no path: write datasets under a path, "
            "lakefs://repo/branch/path/"
        )
    return parsed


def _check_format(format: str) -> str:
    name = format.lower()
    if name not in FORMATS:
        raise UnsupportedFormatError(
            f"unsupported format {format!r} (supported: {', '.join(sorted(FORMATS))})"
        )
    return name


def _hidden(relative: str) -> bool:
    """Return whether Spark would skip the file (``_SUCCESS``, ``.crc``, ``_temporary/``)."""
    return any(
        part.startswith(".") or (part.startswith("_") and "=" not in part)
        for part in relative.split("/")
    )


# -- read --------------------------------------------------------------------------------------


def _list_dataset(
    client: LakeFSClient, repo: str, commit: CommitID, path: str
) -> list[tuple[str, str]]:
    """Return ``(relative path, physical address)`` of the dataset's files at ``commit``.

    ``path`` names a directory (every object under ``path/``) or, failing that, one object.
    """
    prefix = path.rstrip("/") + "/" if path.strip("/") else ""
    listed = _call(
        f"list lakefs://{repo}/{commit}/{prefix}", client.list_objects, repo, commit, prefix=prefix
    )
    files = [
        (o["path"][len(prefix) :], str(o["physical_address"]))
        for o in listed
        if o.get("path_type", "object") == "object"
    ]
    if not files and prefix and not path.endswith("/"):
        try:
            stat = client.stat_object(repo, commit, path)
        except CLINotFoundError:
            return []
        except CLIError as exc:
            raise _server_error(exc) from exc
        return [("", str(stat["physical_address"]))]
    return [(rel, address) for rel, address in files if not _hidden(rel)]


def _groups(files: Sequence[tuple[str, str]], addresses: _Addresses) -> dict[str | None, list[str]]:
    """Group Spark URIs by the physical root their relative paths hang from.

    Files written by :func:`write` sit at ``<root><relative path>`` for one root per write, so
    each group can be read with ``basePath=<root>`` and get its ``col=value`` partition
    columns back. Other files (uploaded one by one) form the group ``None``.
    """
    groups: dict[str | None, list[str]] = {}
    for relative, address in files:
        uri = addresses.uri(address)
        root: str | None = None
        if relative and uri.endswith("/" + relative):
            root = uri[: len(uri) - len(relative)]
        groups.setdefault(root, []).append(uri)
    return groups


def read_at(
    spark: SparkSession,
    uri: str,
    format: str = "parquet",
    *,
    schema: StructType | str | None = None,
    client: LakeFSClient | None = None,
    local_root: str | Path | None = None,
    **options: Any,
) -> SparkRead:
    """Read the dataset at ``uri`` (``lakefs://repo/ref/path/``) at one commit.

    The ref (branch, tag, commit ID or expression) is resolved to a commit ID once; the
    objects are listed at that commit, so concurrent commits (or mirror head advances) never
    mix into the result. On a mirror, the local server answers with the mirror's namespace, so
    Spark reads this region's replicas.

    Args:
        spark: The session to read with.
        uri: ``lakefs://repo/ref/path/``; ``path`` is a directory, or a single object.
        format: ``parquet``, ``csv``, ``json``, ``text`` or ``orc``.
        schema: A schema for Spark (and the schema of the empty result when nothing is there).
        client: The API client; default: one configured like lakectl (``LAKECTL_*``).
        local_root: The local server's root of ``local://`` namespaces (its data directory);
            default: the one of ``LAKEMIRROR_*`` / ``$LAKEMIRROR_CONFIG``.
        **options: Options of Spark's reader (``header="true"``, ``mergeSchema="true"``, ...).

    Raises:
        InvalidURIError, UnsupportedFormatError, RepositoryNotFoundError, RefNotFoundError,
        EmptyDatasetError (nothing under the path and no ``schema``), UnsupportedAddressError,
        ServerError: all before any Spark job starts.
    """
    parsed = _parse(uri, need_path=False)
    fmt = _check_format(format)
    repo, ref, path = parsed.repository, str(parsed.ref), parsed.path or ""
    addresses = _Addresses(local_root)
    with _connect(client) as api:
        _repository(api, repo)
        commit = _commit_of(api, repo, ref)
        files = _list_dataset(api, repo, commit, path)
    pinned = f"lakefs://{repo}/{commit}/{path}"
    groups = _groups(files, addresses)
    uris = tuple(u for group in groups.values() for u in group)
    if not files:
        if schema is None:
            raise EmptyDatasetError(pinned, commit, uri)
        return SparkRead(spark.createDataFrame([], schema), commit, pinned, ())

    def load(root: str | None, group: list[str]) -> DataFrame:
        reader = spark.read.format(fmt).options(**options)
        if schema is not None:
            reader = reader.schema(schema)
        if root is not None and "basePath" not in options:
            reader = reader.option("basePath", root)
        return reader.load(group)

    frames = [load(root, group) for root, group in groups.items()]
    frame = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    return SparkRead(frame, commit, pinned, uris)


def read(
    spark: SparkSession,
    uri: str,
    format: str = "parquet",
    *,
    schema: StructType | str | None = None,
    client: LakeFSClient | None = None,
    local_root: str | Path | None = None,
    **options: Any,
) -> DataFrame:
    """Return the DataFrame of :func:`read_at` (use that to learn the commit ID read)."""
    return read_at(
        spark, uri, format, schema=schema, client=client, local_root=local_root, **options
    ).dataframe


# -- write -------------------------------------------------------------------------------------


def _check_branch(client: LakeFSClient, repo: str, ref: str) -> None:
    try:
        client.get_branch(repo, ref)
    except (CLINotFoundError, RejectedError) as exc:
        # 400: not even a valid branch name (an expression such as ``main~1``)
        _commit_of(client, repo, ref)  # raises RefNotFoundError when it is no ref at all
        raise NotABranchError(repo, ref) from exc
    except CLIError as exc:
        raise _server_error(exc) from exc


def _existing(
    client: LakeFSClient, repo: str, branch: str, prefix: str, limit: int | None
) -> list[str]:
    listed = _call(
        f"list lakefs://{repo}/{branch}/{prefix}",
        client.list_objects,
        repo,
        branch,
        prefix=prefix,
        limit=limit,
    )
    return [o["path"] for o in listed if o.get("path_type", "object") == "object"]


def _produced(df: DataFrame, location: str, key_prefix: str) -> list[str]:
    """Return the data files Spark wrote under ``location``, relative to it, in path order."""
    # Spark's own file index lists them, skipping what its readers skip (_SUCCESS, .crc, ...);
    # it works for every filesystem the session can write to (file://, s3a://)
    listed = df.sparkSession.read.format("binaryFile").load(location).inputFiles()
    out = []
    for file in listed:
        _, sep, relative = file.partition(key_prefix)
        if not sep:
            raise ServerError(f"Spark listed {file!r}, which is not under {location!r}")
        out.append(unquote(relative))
    return sorted(out)


def write(
    df: DataFrame,
    uri: str,
    format: str = "parquet",
    *,
    mode: str = "errorifexists",
    partition_by: Sequence[str] = (),
    commit_message: str | None = None,
    commit_metadata: Mapping[str, str] | None = None,
    client: LakeFSClient | None = None,
    local_root: str | Path | None = None,
    **options: Any,
) -> SparkWrite:
    """Write ``df`` as the dataset at ``uri`` (``lakefs://repo/branch/path/``).

    Spark writes the files under a fresh ``data/<partition>/<unique>/`` prefix of the
    repository's namespace; only once the job has succeeded is every produced file staged at
    ``path/<Spark's relative name>`` (``path/col=1/part-...parquet``). A failed job stages
    nothing; its partial files stay under the fresh prefix, unreachable from any commit.

    Modes behave like Spark's on the dataset's path: ``error`` / ``errorifexists`` (default)
    refuse if any object is under it; ``ignore`` then does nothing; ``append`` stages the new
    files alongside; ``overwrite`` stages the new files and the deletion of every other object
    under the path.

    Args:
        df: The data.
        uri: ``lakefs://repo/branch/path/``; the ref must be a branch and the path non-empty.
        format: ``parquet``, ``csv``, ``json``, ``text`` or ``orc``.
        mode: The save mode.
        partition_by: Columns to partition the files by (``col=value/`` directories).
        commit_message: Commit the branch with this message after staging.
        commit_metadata: The commit's metadata.
        client: The API client; default: one configured like lakectl (``LAKECTL_*``).
        local_root: The server's root of ``local://`` namespaces; default as in :func:`read_at`.
        **options: Options of Spark's writer (``compression="zstd"``, ``header="true"``, ...).

    Raises:
        InvalidURIError, UnsupportedFormatError, UnsupportedModeError, RepositoryNotFoundError,
        RefNotFoundError, NotABranchError, RepositoryReadOnlyError, DatasetExistsError,
        UnsupportedAddressError: before any Spark job starts. ServerError: staging or committing
        failed after the job. Whatever Spark raises when the job fails.
    """
    parsed = _parse(uri, need_path=True)
    fmt = _check_format(format)
    save_mode = mode.lower()
    if save_mode not in MODES:
        raise UnsupportedModeError(
            f"unsupported save mode {mode!r} (supported: {', '.join(sorted(MODES))})"
        )
    repo, branch = parsed.repository, str(parsed.ref)
    prefix = (parsed.path or "").strip("/") + "/"
    addresses = _Addresses(local_root)
    with _connect(client) as api:
        repository = _repository(api, repo)
        if repository.get("read_only"):
            raise RepositoryReadOnlyError(
                f"repository {repo!r} is read-only (a mirror?): write to its source instead"
            )
        _check_branch(api, repo, branch)
        namespace = str(repository["storage_namespace"]).rstrip("/")
        key_prefix = _PATHS.new_prefix()
        location = addresses.uri(f"{namespace}/{key_prefix}").rstrip("/")
        if save_mode in ("error", "errorifexists", "ignore") and _existing(
            api, repo, branch, prefix, 1
        ):
            if save_mode == "ignore":
                return SparkWrite(repo, branch, prefix, "", skipped=True)
            raise DatasetExistsError(
                f"lakefs://{repo}/{branch}/{prefix} already holds objects (mode {mode!r}); "
                "use mode 'append' or 'overwrite'"
            )
        writer = df.write.format(fmt).mode("errorifexists").options(**options)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(location)
        produced = _produced(df, location, key_prefix)
        objects = [
            {"path": prefix + rel, "physical_address": f"{namespace}/{key_prefix}{rel}"}
            for rel in produced
        ]
        old = _existing(api, repo, branch, prefix, None) if save_mode == "overwrite" else []
        for start in range(0, len(objects), MAX_STAGE_BATCH):
            _call(
                f"stage {len(objects)} objects on lakefs://{repo}/{branch}/{prefix}",
                api.request,
                "POST",
                f"/repositories/{quote(repo, safe='')}/branches/{quote(branch, safe='')}"
                "/staging/bulk",
                json={"objects": objects[start : start + MAX_STAGE_BATCH]},
            )
        new = {o["path"] for o in objects}
        deleted = [p for p in old if p not in new]
        for start in range(0, len(deleted), _DELETE_BATCH):
            _call(
                f"delete the old objects of lakefs://{repo}/{branch}/{prefix}",
                api.delete_objects,
                repo,
                branch,
                deleted[start : start + _DELETE_BATCH],
            )
        commit_id: CommitID | None = None
        if commit_message is not None:
            commit = _call(
                f"commit lakefs://{repo}/{branch}",
                api.commit,
                repo,
                branch,
                commit_message,
                dict(commit_metadata or {}),
            )
            commit_id = CommitID(str(commit["id"]))
    return SparkWrite(
        repo,
        branch,
        prefix,
        location,
        tuple(o["path"] for o in objects),
        tuple(deleted),
        commit_id,
    )
