"""``lakemirror fs upload|download|ls|stat|rm|cat``: objects on branches and refs."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from mirror.cli.commands.options import add_yes_option, positive_int
from mirror.cli.context import Context, parse_metadata
from mirror.cli.output import format_size, format_time
from mirror.cli.progress import Progress
from mirror.cli.uris import object_uri
from mirror.client.client import MAX_PAGE
from mirror.client.errors import CLIError, NotFoundError, UsageError

__all__ = ["register"]

_CHUNK = 1 << 20
_T = TypeVar("_T")


def _as_prefix(path: str) -> str:
    """Return ``path`` as a directory-like prefix: ending in ``/`` unless empty."""
    return path if not path or path.endswith("/") else path + "/"


def _progress(ctx: Context, args: argparse.Namespace, verb: str, files: int, size: int) -> Progress:
    enabled = not args.no_progress and ctx.stderr.isatty()
    return Progress(verb, files, size, ctx.stderr, enabled=enabled)


def _run_parallel(jobs: Sequence[_T], work: Callable[[_T], Any], parallelism: int) -> list[Any]:
    """Run ``work`` on every job with up to ``parallelism`` threads; results in job order.

    The first failure cancels the jobs not yet started and is raised once the running ones end.
    """
    if parallelism <= 1 or len(jobs) <= 1:
        return [work(job) for job in jobs]
    pool = ThreadPoolExecutor(max_workers=min(parallelism, len(jobs)))
    try:
        futures: list[Future[Any]] = [pool.submit(work, job) for job in jobs]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            error = future.exception() if future.done() else None
            if error is not None:
                raise error
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# -- upload ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Upload:
    source: Path
    path: str
    size: int


def _chunks(stream: BinaryIO, progress: Progress) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        progress.add_bytes(len(chunk))
        yield chunk


def _walk(root: Path) -> list[tuple[Path, str]]:
    """Return the regular files under ``root`` with their ``/``-separated relative paths, sorted."""
    found: list[tuple[Path, str]] = []
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        base = Path(directory)
        for name in sorted(files):
            file = base / name
            if file.is_file():
                found.append((file, file.relative_to(root).as_posix()))
    return found


def _upload(args: argparse.Namespace, ctx: Context) -> int:
    repo, branch, path = object_uri(args.destination)
    metadata = parse_metadata(args.meta)
    client = ctx.client
    if args.source == "-":
        if args.recursive:
            raise UsageError("--recursive needs a directory, not standard input")
        if not path or path.endswith("/"):
            raise UsageError("uploading standard input needs an object path in the URI")
        data = ctx.stdin.buffer.read()
        stats = client.upload_object(
            repo, branch, path, data, content_type=args.content_type, metadata=metadata
        )
        _report_uploads(ctx, repo, branch, [stats], single=True)
        return 0
    source = Path(args.source)
    if not source.exists():
        raise NotFoundError(f"{args.source}: no such file or directory")
    if args.recursive:
        if not source.is_dir():
            raise UsageError(f"{args.source}: --recursive needs a directory")
        prefix = _as_prefix(path)
        jobs = [_Upload(f, prefix + rel, f.stat().st_size) for f, rel in _walk(source)]
    else:
        if source.is_dir():
            raise UsageError(f"{args.source} is a directory: use --recursive")
        target = path + source.name if not path or path.endswith("/") else path
        jobs = [_Upload(source, target, source.stat().st_size)]

    with _progress(ctx, args, "uploading", len(jobs), sum(j.size for j in jobs)) as progress:

        def send(job: _Upload) -> Any:
            with open(job.source, "rb") as stream:
                stats = client.upload_object(
                    repo,
                    branch,
                    job.path,
                    _chunks(stream, progress),
                    size=job.size,
                    content_type=args.content_type,
                    metadata=metadata,
                )
            progress.file_done()
            return stats

        results = _run_parallel(jobs, send, args.parallelism)
    _report_uploads(ctx, repo, branch, results, single=not args.recursive, prefix=_as_prefix(path))
    return 0


def _report_uploads(
    ctx: Context, repo: str, branch: str, results: list[Any], *, single: bool, prefix: str = ""
) -> None:
    if ctx.output.json:
        ctx.output.data(results[0] if single else results)
    elif single:
        stats = results[0]
        size = format_size(stats.get("size_bytes"))
        ctx.output.line(f"uploaded lakefs://{repo}/{branch}/{stats['path']} ({size})")
    else:
        total = format_size(sum(s.get("size_bytes") or 0 for s in results))
        ctx.output.line(
            f"uploaded {len(results)} objects ({total}) to lakefs://{repo}/{branch}/{prefix}"
        )


# -- download ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Download:
    path: str
    target: Path
    size: int


def _local_target(root: Path, relative: str) -> Path:
    """Return where the object at ``relative`` (below the listed prefix) goes under ``root``.

    Raises:
        CLIError: the path would leave ``root`` or cannot be a local file name.
    """
    parts = relative.split("/")
    if relative.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in relative:
        raise CLIError(f"refusing to download {relative!r}: not a safe local file name")
    return root.joinpath(*parts)


def _fetch(ctx: Context, repo: str, ref: str, job: _Download, progress: Progress) -> int:
    """Download one object to a temporary file beside its target, then move it in place."""
    job.target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".lakemirror-", dir=job.target.parent)
    written = 0
    try:
        with os.fdopen(handle, "wb") as out, ctx.client.read_object(repo, ref, job.path) as resp:
            for chunk in resp.iter_bytes(_CHUNK):
                out.write(chunk)
                written += len(chunk)
                progress.add_bytes(len(chunk))
        os.replace(temporary, job.target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    progress.file_done()
    return written


def _download(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref, path = object_uri(args.source)
    client = ctx.client
    if args.recursive:
        prefix = _as_prefix(path)
        root = Path(args.destination or ".")
        jobs: list[_Download] = []
        for item in client.list_objects(repo, ref, prefix=prefix):
            relative = item["path"][len(prefix) :]
            if not relative or relative.endswith("/"):
                continue
            jobs.append(
                _Download(item["path"], _local_target(root, relative), item.get("size_bytes") or 0)
            )
    else:
        if not path or path.endswith("/"):
            raise UsageError("download needs an object path (or --recursive for a prefix)")
        stats = client.stat_object(repo, ref, path)
        if args.destination == "-":
            with client.read_object(repo, ref, path) as response:
                out = ctx.binary_stdout
                for chunk in response.iter_bytes(_CHUNK):
                    out.write(chunk)
                out.flush()
            return 0
        name = path.rsplit("/", 1)[-1]
        if args.destination is None:
            target = Path(name)
        elif args.destination.endswith(("/", os.sep)) or Path(args.destination).is_dir():
            target = Path(args.destination) / name
        else:
            target = Path(args.destination)
        jobs = [_Download(path, target, stats.get("size_bytes") or 0)]

    with _progress(ctx, args, "downloading", len(jobs), sum(j.size for j in jobs)) as progress:
        sizes = _run_parallel(
            jobs, lambda job: _fetch(ctx, repo, ref, job, progress), args.parallelism
        )
    rows = [
        {"path": j.path, "destination": str(j.target), "size_bytes": size}
        for j, size in zip(jobs, sizes, strict=True)
    ]
    if ctx.output.json:
        ctx.output.data(rows if args.recursive else rows[0])
        return 0
    if args.recursive:
        ctx.output.line(
            f"downloaded {len(rows)} objects ({format_size(sum(sizes))}) from "
            f"lakefs://{repo}/{ref}/{_as_prefix(path)} to {args.destination or '.'}"
        )
    else:
        row = rows[0]
        ctx.output.line(
            f"downloaded lakefs://{repo}/{ref}/{row['path']} to {row['destination']} "
            f"({format_size(row['size_bytes'])})"
        )
    return 0


# -- ls, stat, cat, rm -------------------------------------------------------------------------


def _ls(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref, path = object_uri(args.uri)
    items = list(
        ctx.client.list_objects(
            repo, ref, prefix=path, delimiter="" if args.recursive else "/", limit=args.amount
        )
    )
    if ctx.output.json:
        ctx.output.data(items)
        return 0
    rows = []
    for item in items:
        if item["path_type"] == "common_prefix":
            rows.append(("prefix", "", "", item["path"]))
        else:
            rows.append(
                (
                    "object",
                    format_time(item.get("mtime")),
                    format_size(item.get("size_bytes")),
                    item["path"],
                )
            )
    ctx.output.table(["type", "modified", "size", "path"], rows)
    return 0


def _stat(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref, path = object_uri(args.uri)
    if not path:
        raise UsageError("stat needs an object path: lakefs://REPO/REF/PATH")
    stats = ctx.client.stat_object(repo, ref, path)
    if ctx.output.json:
        ctx.output.data(stats)
        return 0
    size = stats.get("size_bytes")
    ctx.output.fields(
        [
            ("Path", stats["path"]),
            ("Modified Time", format_time(stats.get("mtime"))),
            ("Size", f"{size} bytes" if size is not None else ""),
            ("Human Size", format_size(size)),
            ("Physical Address", stats.get("physical_address")),
            ("Checksum", stats.get("checksum")),
            ("Content-Type", stats.get("content_type")),
        ]
    )
    metadata = stats.get("metadata") or {}
    if metadata:
        ctx.output.line("Metadata:")
        width = max(len(k) for k in metadata)
        for key, value in sorted(metadata.items()):
            ctx.output.line(f"    {key.ljust(width)} = {value}")
    return 0


def _cat(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref, path = object_uri(args.uri)
    if not path:
        raise UsageError("cat needs an object path: lakefs://REPO/REF/PATH")
    out = ctx.binary_stdout
    with ctx.client.read_object(repo, ref, path) as response:
        for chunk in response.iter_bytes(_CHUNK):
            out.write(chunk)
    out.flush()
    return 0


def _rm(args: argparse.Namespace, ctx: Context) -> int:
    repo, branch, path = object_uri(args.uri)
    client = ctx.client
    if not args.recursive:
        if not path or path.endswith("/"):
            raise UsageError("rm needs an object path (or --recursive for a prefix)")
        client.delete_object(repo, branch, path)
        deleted = [path]
    else:
        prefix = _as_prefix(path)
        where = f"lakefs://{repo}/{branch}/{prefix}"
        ctx.confirm(f"delete every object under {where}?", args.yes)
        deleted = [o["path"] for o in client.list_objects(repo, branch, prefix=prefix)]
        for start in range(0, len(deleted), MAX_PAGE):
            client.delete_objects(repo, branch, deleted[start : start + MAX_PAGE])
    if ctx.output.json:
        ctx.output.data({"deleted": deleted})
    elif args.recursive:
        ctx.output.line(f"deleted {len(deleted)} objects under lakefs://{repo}/{branch}/{prefix}")
    else:
        ctx.output.line(f"deleted lakefs://{repo}/{branch}/{path}")
    return 0


# -- registration ------------------------------------------------------------------------------


def _transfer_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p",
        "--parallelism",
        type=positive_int,
        default=8,
        help="how many objects to transfer at once (8)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar, even on a terminal"
    )


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``fs`` group."""
    group = sub.add_parser("fs", help="upload, download, list, inspect and delete objects")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = cmds.add_parser(
        "upload",
        parents=[common],
        help="upload a file, standard input, or a directory tree (--recursive)",
        description="Upload SOURCE to the branch. A URI path ending in '/' (or none) gets the "
        "file's name appended; with --recursive, every file under SOURCE goes below the path.",
    )
    p.add_argument("destination", metavar="lakefs://REPO/BRANCH/PATH")
    p.add_argument(
        "-s", "--source", required=True, help="local file or directory, or - for standard input"
    )
    p.add_argument("-r", "--recursive", action="store_true", help="upload a directory tree")
    p.add_argument("--content-type", default=None, help="the objects' Content-Type")
    p.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="user metadata (repeatable)"
    )
    _transfer_options(p)
    p.set_defaults(run=_upload)

    p = cmds.add_parser(
        "download",
        parents=[common],
        help="download an object, or every object under a prefix (--recursive)",
        description="Download an object to DEST (default: its name in the current directory; "
        "'-' for standard output). With --recursive, every object under the path goes below "
        "DEST (default: the current directory), keeping its relative path.",
    )
    p.add_argument("source", metavar="lakefs://REPO/REF/PATH")
    p.add_argument("destination", nargs="?", default=None, metavar="DEST")
    p.add_argument("-r", "--recursive", action="store_true", help="download a whole prefix")
    _transfer_options(p)
    p.set_defaults(run=_download)

    p = cmds.add_parser("ls", parents=[common], help="list objects and prefixes")
    p.add_argument("uri", metavar="lakefs://REPO/REF[/PREFIX]")
    p.add_argument("-r", "--recursive", action="store_true", help="list every object below")
    p.add_argument(
        "--amount", type=positive_int, default=None, help="list at most N entries (default: all)"
    )
    p.set_defaults(run=_ls)

    p = cmds.add_parser("stat", parents=[common], help="show an object's metadata")
    p.add_argument("uri", metavar="lakefs://REPO/REF/PATH")
    p.set_defaults(run=_stat)

    p = cmds.add_parser("cat", parents=[common], help="write an object to standard output")
    p.add_argument("uri", metavar="lakefs://REPO/REF/PATH")
    p.set_defaults(run=_cat)

    p = cmds.add_parser("rm", parents=[common], help="delete an object, or a prefix (--recursive)")
    p.add_argument("uri", metavar="lakefs://REPO/BRANCH/PATH")
    p.add_argument("-r", "--recursive", action="store_true", help="delete everything below")
    add_yes_option(p)
    p.set_defaults(run=_rm)
