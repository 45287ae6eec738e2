"""``python -m mirror.cli.demo``: the ``demo`` command on its own."""

from __future__ import annotations

import argparse
import sys

from mirror.cli.demo import register_demo_command, run_demo


def _main() -> int:
    parser = argparse.ArgumentParser(prog="lakemirror")
    register_demo_command(parser.add_subparsers(dest="command", required=True))
    return run_demo(parser.parse_args(), sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(_main())
