"""The tags of one mirror: made once their commit validates, deleted as the source deletes them.

A tag is copied once every file of its commit has arrived (until then it is *pending*), moved
when the source moves it, and deleted when the source deletes it, except the mirror's preserved
tags. While the source's tags stay as the mirror's were last made, a round lists only the
source's; the mirror's are listed again every :data:`TAG_RECHECK_ROUNDS` rounds all the same.
"""

from __future__ import annotations

from collections.abc import Awaitable

from mirror.errors import LakeMirrorError, NotFoundError
from mirror.replicant.commit_records import CommitRecords
from mirror.validator import Validator

__all__ = ["TAG_RECHECK_ROUNDS", "TagMirror"]

TAG_RECHECK_ROUNDS = 20
"""Rounds after which the mirror's tags are listed again even if the source's stay the same."""


class TagMirror:
    """Mirror the tags of one source repository.

    Args:
        records: The mirror's commit records (a tag's commit is copied before it is tagged);
            the mirror, both regions' APIs, the metrics and the log are theirs.
        validator: Checks a tag's commit against the mirror's storage namespace.
    """

    def __init__(self, records: CommitRecords, validator: Validator) -> None:
        self.records = records
        self.validator = validator
        self.config = records.config
        self.source = records.source
        self.dest = records.dest
        self._pending: dict[str, str] = {}
        # the source's tags the mirror's were last seen equal to, and the round after which the
        # mirror's tags are listed again even if the source's stay the same
        self._in_sync: dict[str, str] | None = None
        self._recheck = 0

    @property
    def pending(self) -> dict[str, str]:
        """Return tags waiting for their commit's files, with their commits."""
        return dict(self._pending)

    async def sync(self, round_number: int) -> None:
        """Make the mirror's tags the source's, as far as their commits have arrived."""
        try:
            source_tags = await self.source.list_tags(self.config.source_repo)
            if source_tags == self._in_sync and round_number < self._recheck:
                return  # the mirror's tags were made these, and only the replicant writes them
            mirror_tags = await self.dest.list_tags(self.config.name)
        except LakeMirrorError as exc:
            self.records.metrics.source_errors.labels(self.config.name).inc()
            self.records.log.warning("listing tags failed", error=str(exc))
            return
        self._in_sync = None
        done = True
        for tag in sorted(set(mirror_tags) - set(source_tags) - set(self.config.preserved_tags)):
            call = self.dest.delete_tag(self.config.name, tag)
            done = await self._try(call, "deleting a tag", tag) and done
        for tag, commit_id in sorted(source_tags.items()):
            if mirror_tags.get(tag) == commit_id:
                continue
            done = False  # known done only when a later round lists the mirror's tags again
            if tag in mirror_tags:
                await self._try(self.dest.delete_tag(self.config.name, tag), "moving a tag", tag)
            try:
                await self.records.copy_chain(commit_id)
                commit = await self.records.source_commit(commit_id)
                report = await self.validator.validate(commit.meta_range_id)
            except LakeMirrorError as exc:
                self.records.log.warning("mirroring a tag failed", tag=tag, error=str(exc))
                continue
            if not report.complete:
                self._pending[tag] = commit_id
                continue
            self._pending.pop(tag, None)
            await self._try(self.dest.set_tag(self.config.name, tag, commit_id), "tagging", tag)
        if done:
            self._in_sync = source_tags
            self._recheck = round_number + TAG_RECHECK_ROUNDS

    async def _try(self, call: Awaitable[None], what: str, tag: str) -> bool:
        """Await a tag change; return whether it was made (or had nothing to do)."""
        try:
            await call
        except NotFoundError:
            return True
        except LakeMirrorError as exc:
            self.records.log.warning(f"{what} failed", tag=tag, error=str(exc))
            return False
        return True
