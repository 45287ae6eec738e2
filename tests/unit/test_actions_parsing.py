"""Action files: parsing and validation, Go's path.Match, event matching, Go durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.actions.glob import BadPatternError, path_match
from mirror.actions.model import ActionFileError, parse_action
from mirror.actions.runs import new_run_id
from mirror.actions.webhook import HookConfigError, parse_duration
from mirror.cli.main import main
from mirror.core.hooks import HookEvent

GOOD = b"""
name: Check schemas
description: checks
on:
  pre-merge:
    branches: [main, "release-*"]
  pre-commit:
hooks:
  - id: check_schema
    type: webhook
    if: failure()
    properties:
      url: http://svc/h
      timeout: 30s
  - id: dag
    type: airflow
    properties: {url: http://af, dag_id: d, username: u, password: p}
"""


def test_a_valid_file() -> None:
    action = parse_action("_lakefs_actions/a.yaml", GOOD)
    assert action.name == "Check schemas"
    assert action.on == {"pre-merge": ("main", "release-*"), "pre-commit": ()}
    assert [(h.id, h.type, h.condition) for h in action.hooks] == [
        ("check_schema", "webhook", "failure()"),
        ("dag", "airflow", "success()"),
    ]


@pytest.mark.parametrize(
    ("event", "branch", "matches"),
    [
        ("pre-merge", "main", True),
        ("pre-merge", "release-1", True),
        ("pre-merge", "release-1/x", False),
        ("pre-merge", "dev", False),
        ("pre-commit", "anything", True),
        ("post-commit", "main", False),
    ],
)
def test_matching(event: str, branch: str, matches: bool) -> None:
    action = parse_action("a", GOOD)
    assert action.matches(HookEvent(event, "repo", branch_id=branch)) is matches


HOOK = "hooks:\n  - id: hook1\n    type: webhook\n    properties: {url: http://x}\n"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("name: [", "invalid YAML"),
        ("- a", "not a YAML mapping"),
        ("on:\n  pre-commit:\n" + HOOK, "'name' is required"),
        ("name: -bad\non:\n  pre-commit:\n" + HOOK, "invalid action name"),
        ("name: A1\n" + HOOK, "'on' is required"),
        ("name: A1\non:\n  pre-push:\n" + HOOK, "event 'pre-push' is not supported"),
        ("name: A1\non:\n  pre-create-tag: {branches: [main]}\n" + HOOK, "takes no branches"),
        ("name: A1\non:\n  pre-commit: {branches: ['[a']}\n" + HOOK, "syntax error in pattern"),
        ("name: A1\non:\n  pre-commit:\nhooks: []\n", "'hooks' is required"),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n  - {id: 9x, type: webhook}\n",
            "invalid hook id '9x'",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n  - {id: hook1, type: webhook}\n",
            "property 'url' is required",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n  - {id: hook1, type: lua}\n",
            "'script' or 'script_path' must be supplied",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n"
            "  - {id: hook1, type: lua, properties: {script: 'x()', script_path: a.lua}}\n",
            "only one of 'script' and 'script_path' may be given",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n"
            "  - {id: hook1, type: lua, properties: {script: 'x()', args: [1]}}\n",
            "'args' should be a map: wrong value type",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n"
            "  - {id: hook1, type: lua, properties: {script_file: ''}}\n",
            "property 'script_file' must be a non-empty string",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n  - {id: hook1, type: shell}\n",
            "unknown hook type 'shell'",
        ),
        ("name: A1\non:\n  pre-commit:\n" + HOOK + HOOK[7:], "hook id 'hook1' is not unique"),
        (
            "name: A1\non:\n  pre-commit:\n" + HOOK + "    if: always()\n",
            "'if' must be success() or failure()",
        ),
        (
            "name: A1\non:\n  pre-commit:\nhooks:\n"
            "  - {id: hook1, type: airflow, properties: {url: u, dag_id: d, username: x}}\n",
            "property 'password' is required",
        ),
    ],
)
def test_invalid_files(text: str, why: str) -> None:
    with pytest.raises(ActionFileError) as caught:
        parse_action("_lakefs_actions/x.yaml", text.encode())
    assert "_lakefs_actions/x.yaml" in str(caught.value)
    assert why in str(caught.value)


def test_yes_and_on_are_strings_as_in_go() -> None:
    text = b"name: A1\non:\n  pre-commit:\n" + HOOK.encode() + b"      flag: yes\n"
    action = parse_action("a", text.replace(b"{url: http://x}", b"\n      url: http://x"))
    assert action.hooks[0].properties["flag"] == "yes"


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("*", "main", True),
        ("*", "a/b", False),
        ("ma?n", "main", True),
        ("[a-c]x", "bx", True),
        ("[^a-c]x", "bx", False),
        ("[^a-c]x", "/x", False),
        ("\\*", "*", True),
        ("\\*", "a", False),
        ("rel-[0-9]*", "rel-1x", True),
    ],
)
def test_go_path_match(pattern: str, name: str, matches: bool) -> None:
    assert path_match(pattern, name) is matches


@pytest.mark.parametrize("pattern", ["[", "[a", "a\\", "[z-a]", "[]"])
def test_bad_patterns(pattern: str) -> None:
    with pytest.raises(BadPatternError):
        path_match(pattern, "a")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m", 60.0), ("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0), ("0", 0.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1", "5 s", "1d", "s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(HookConfigError):
        parse_duration(text)


def test_run_ids_sort_newest_first() -> None:
    older, newer = new_run_id(1_000), new_run_id(2_000)
    assert newer < older
    assert len(older) == 20 and new_run_id(1_000) != older


def test_cli_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("name: Local\non:\n  pre-commit:\n" + HOOK)
    bad.write_text("name: Local\non:\n  pre-commit:\nhooks: []\n")
    assert main(["actions", "validate", str(good)]) == 0
    assert "valid: action 'Local' on pre-commit" in capsys.readouterr().out
    assert main(["actions", "validate", str(bad)]) == 1
    assert "'hooks' is required" in capsys.readouterr().out
    assert main(["actions", "validate", str(tmp_path / "missing.yaml")]) == 1
