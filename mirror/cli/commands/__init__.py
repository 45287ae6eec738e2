"""The client commands of ``lakemirror``, one module per group, registered on the parser."""

from __future__ import annotations

import argparse

from mirror.cli.commands import actions as actions_commands
from mirror.cli.commands import audit as audit_commands
from mirror.cli.commands import branch as branch_commands
from mirror.cli.commands import commit as commit_commands
from mirror.cli.commands import diff as diff_commands
from mirror.cli.commands import fs as fs_commands
from mirror.cli.commands import imports as import_commands
from mirror.cli.commands import login as login_commands
from mirror.cli.commands import merge as merge_commands
from mirror.cli.commands import protect as protect_commands
from mirror.cli.commands import pulls as pulls_commands
from mirror.cli.commands import refs_dump as refs_dump_commands
from mirror.cli.commands import repo as repo_commands
from mirror.cli.commands import tag as tag_commands

__all__ = ["register_all"]

_GROUPS = (
    repo_commands,
    branch_commands,
    protect_commands,
    tag_commands,
    commit_commands,
    diff_commands,
    merge_commands,
    pulls_commands,
    fs_commands,
    import_commands,
    login_commands,
    refs_dump_commands,
    actions_commands,
    audit_commands,
)


def register_all(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add every client command group to ``sub``; ``common`` holds the shared options."""
    for group in _GROUPS:
        group.register(sub, common)
