"""``lakemirror kv init``: create the KV store the configuration names (table or SQLite file)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from mirror.cli.config_cmd import add_config_file_option

if TYPE_CHECKING:
    from mirror.config import LakeMirrorConfig
    from mirror.kv.dynamodb import DynamoSettings

__all__ = ["dynamo_settings", "init_kv", "register_kv_command"]


def register_kv_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``kv init`` to the subcommands ``sub``."""
    group = sub.add_parser("kv", help="manage the server's KV store")
    cmds = group.add_subparsers(dest="kv_command", required=True, metavar="COMMAND")
    init = cmds.add_parser(
        "init",
        help="create the configured KV store: the DynamoDB table (kv.type dynamodb) or the "
        "SQLite file; does nothing when it exists",
    )
    add_config_file_option(init)


def dynamo_settings(config: LakeMirrorConfig) -> DynamoSettings:
    """Return the driver settings for the ``kv.dynamodb`` section of ``config``.

    Raises:
        ImportError: the ``s3`` extra (boto3) is not installed.
    """
    from mirror.kv.dynamodb import DynamoSettings

    section = config.kv.dynamodb
    secret = section.secret_access_key
    return DynamoSettings(
        table=section.table,
        partition=section.partition,
        endpoint_url=section.endpoint_url,
        region=section.region,
        access_key_id=section.access_key_id,
        secret_access_key=secret.get_secret_value() if secret is not None else None,
        max_attempts=section.max_attempts,
    )


def init_kv(config_file: str | None, *, out: TextIO, err: TextIO) -> int:
    """Create the KV store ``config_file`` (and ``LAKEMIRROR_*``) configure; return the exit code.

    Prints ``created …`` or ``exists …`` to ``out``. An invalid configuration returns 2, an
    unreachable or refusing store 1; either prints one line to ``err``.
    """
    from mirror.config import ConfigurationError, load_config
    from mirror.errors import UnavailableError

    prog = "lakemirror kv init"
    try:
        config = load_config(config_file)
    except ConfigurationError as exc:
        print(f"{prog}: {exc}", file=err, flush=True)
        return 2
    if config.kv.type == "sqlite":
        from mirror.kv.sqlite import SqliteKV

        path = config.sqlite_path()
        existed = path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            SqliteKV(path).close()
        except (OSError, UnavailableError) as exc:
            print(f"{prog}: SQLite file {str(path)!r}: {exc}", file=err, flush=True)
            return 1
        print(f"{'exists' if existed else 'created'} SQLite file {path}", file=out, flush=True)
        return 0
    try:
        from botocore.exceptions import BotoCoreError

        from mirror.kv.dynamodb import create_table

        settings = dynamo_settings(config)
    except ImportError as exc:
        print(
            f"{prog}: kv.type 'dynamodb' needs the s3 extra (pip install 'lakemirror[s3]'): {exc}",
            file=err,
            flush=True,
        )
        return 2
    try:
        created = create_table(settings)
    except (UnavailableError, BotoCoreError) as exc:
        print(f"{prog}: {exc}", file=err, flush=True)
        return 1
    word = "created" if created else "exists"
    print(f"{word} DynamoDB table {settings.table}", file=out, flush=True)
    return 0
