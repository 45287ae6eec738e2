"""Which branches are hidden from listings (lakeFS's ``hidden`` flag, kept beside the refs)."""

from __future__ import annotations

from mirror.core.deletion import CleanupRegistry
from mirror.core.model import Repository
from mirror.kv.errors import KeyNotFoundError
from mirror.kv.protocol import KV

__all__ = ["HiddenBranches", "register_hidden_branches_cleanup"]


class HiddenBranches:
    """Marks under ``api/hidden-branches/<repo>:<instance>/<branch>``.

    The repository's instance ID is part of the key, so a repository re-created under the same
    name never inherits marks.
    """

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    @staticmethod
    def _key(repo: Repository, branch: str) -> bytes:
        return f"api/hidden-branches/{repo.id}:{repo.instance_uid}/{branch}".encode()

    def delete_repository(self, repo: Repository) -> None:
        """Remove every mark of ``repo`` (a deleted repository's; none left: no error)."""
        for key in [k for k, _ in self.kv.scan(self._key(repo, ""))]:
            self.kv.delete(key)

    def set(self, repo: Repository, branch: str, hidden: bool) -> None:
        """Mark ``branch`` hidden or visible."""
        if hidden:
            self.kv.set(self._key(repo, branch), b"")
        else:
            self.kv.delete(self._key(repo, branch))

    def is_hidden(self, repo: Repository, branch: str) -> bool:
        """Return whether ``branch`` is hidden."""
        try:
            self.kv.get(self._key(repo, branch))
        except KeyNotFoundError:
            return False
        return True


def register_hidden_branches_cleanup(registry: CleanupRegistry, kv: KV) -> None:
    """Have deleted repositories' hidden-branch marks removed with them."""
    registry.add_repository_cleanup("hidden branches", HiddenBranches(kv).delete_repository)
