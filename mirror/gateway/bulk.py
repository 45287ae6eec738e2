"""DeleteObjects through the gateway: ``POST /<bucket>?delete`` with up to 1,000 keys.

Each key is ``<ref>/<path>`` and needs ``fs:DeleteObject`` on its path; a key the caller may not
delete, a key on a protected branch or a malformed key becomes a per-key ``<Error>`` while the
others are deleted. As S3 and lakeFS, a missing key counts as deleted, and so does ``main/`` (an
empty path: Spark deletes such "directory" keys). A read-only repository refuses the whole
request before its body is read. Deletions on one branch are staged in one batch.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mirror.auth.permissions import Action, object_arn
from mirror.core.errors import ObjectNotFoundError
from mirror.core.validate import validate_branch_id
from mirror.errors import InvalidValueError, LakeMirrorError
from mirror.gateway import xml
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.mapping import call, check_path, mirror_write_error, to_s3_error

if TYPE_CHECKING:
    from starlette.responses import Response

    from mirror.core.catalog import Catalog
    from mirror.gateway.context import S3Request

__all__ = ["MAX_DELETE_KEYS", "delete_objects"]

MAX_DELETE_KEYS = 1000
"""S3's most keys in one DeleteObjects request."""


@dataclass
class _Outcome:
    deleted: list[str]
    errors: list[tuple[str, S3Error]]


def _check_repository(catalog: Catalog, bucket: str) -> None:
    repo = catalog.get_repository(bucket)
    if repo.read_only:
        raise mirror_write_error(repo)


def _delete_all(catalog: Catalog, bucket: str, keys: list[str]) -> _Outcome:
    """Delete ``keys`` (``<ref>/<path>``), batched per branch; return what happened per key."""
    outcome = _Outcome([], [])
    by_branch: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in keys:
        ref, _, path = key.partition("/")
        if not path:
            outcome.deleted.append(key)
            continue
        try:
            check_path(ref, path, bucket=bucket)
            validate_branch_id(ref)
        except S3Error as err:
            outcome.errors.append((key, err))
            continue
        except InvalidValueError as exc:
            outcome.errors.append((key, to_s3_error(exc, bucket=bucket, key=path, write=True)))
            continue
        by_branch[ref].append((key, path))
    for branch, items in by_branch.items():
        try:
            if not catalog.branch_exists(bucket, branch):
                # as a single DeleteObject: nothing there to delete
                outcome.deleted.extend(k for k, _ in items)
                continue
            paths = list(dict.fromkeys(p for _, p in items))
            if len(paths) == 1:
                # one path raises when missing; many return the missing ones
                with contextlib.suppress(ObjectNotFoundError):
                    catalog.delete_object(bucket, branch, paths[0])
            else:
                catalog.delete_objects(bucket, branch, paths)
        except LakeMirrorError as exc:
            for key, path in items:
                mapped = to_s3_error(exc, bucket=bucket, key=path, catalog=catalog, write=True)
                outcome.errors.append((key, mapped))
            continue
        outcome.deleted.extend(k for k, _ in items)
    return outcome


async def delete_objects(req: S3Request) -> Response:
    """Answer DeleteObjects: ``DeleteResult`` with the deleted keys (unless ``Quiet``) and errors.

    Raises:
        S3Error: MalformedXML for a body that is not a ``Delete`` document of 1 to 1,000 keys;
            NoSuchBucket; the read-only refusal.
    """
    bucket = req.bucket
    if bucket is None:
        raise S3Error(S3Code.NO_SUCH_BUCKET)
    catalog = req.state.catalog
    await call(req, _check_repository, catalog, bucket, write=True)
    doc = await xml.read_xml(req, "Delete")
    quiet = (xml.text_of(doc, "Quiet") or "").strip().lower() == "true"
    keys: list[str] = []
    for obj in xml.children(doc, "Object"):
        key = xml.text_of(obj, "Key")
        if key is None:
            raise S3Error(
                S3Code.MALFORMED_XML,
                f"{S3Code.MALFORMED_XML.description} (an <Object> without <Key>)",
                bucket=bucket,
            )
        keys.append(key)
    if not 1 <= len(keys) <= MAX_DELETE_KEYS:
        raise S3Error(
            S3Code.MALFORMED_XML,
            f"{S3Code.MALFORMED_XML.description} ({len(keys)} keys: 1 to {MAX_DELETE_KEYS})",
            bucket=bucket,
        )
    allowed: list[str] = []
    denied: list[tuple[str, S3Error]] = []
    for key in keys:
        path = key.partition("/")[2]
        try:
            req.require(Action.DELETE_OBJECT, object_arn(bucket, path))
        except S3Error as err:
            denied.append((key, err))
            continue
        allowed.append(key)
    outcome = await call(req, _delete_all, catalog, bucket, allowed, write=True)
    root = xml.document("DeleteResult")
    if not quiet:
        for key in outcome.deleted:
            xml.add(xml.add(root, "Deleted"), "Key", key)
    for key, refusal in [*denied, *outcome.errors]:
        el = xml.add(root, "Error")
        xml.add(el, "Key", key)
        xml.add(el, "Code", refusal.code.code)
        xml.add(el, "Message", refusal.message)
    return xml.xml_response(root)
