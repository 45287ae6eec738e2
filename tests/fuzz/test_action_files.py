"""Action files: a valid action written as YAML reads back as written; any shape only refuses.

The target parses each file, matches its events and calls its hooks (see
:mod:`tests.fuzz.targets.action_file`); here Hypothesis writes files from lakeFS's schema, with
every YAML value kind (timestamps, binary, nulls, nested collections) where the schema expects
another.
"""

from __future__ import annotations

import datetime
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from mirror.actions.model import parse_action
from mirror.core.hooks import EVENT_TYPES
from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import action_file

words = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=2, max_size=12)
names = st.tuples(st.sampled_from("abcXYZ_0"), words).map("".join)
hook_ids = st.tuples(st.sampled_from("abcXYZ_"), words).map("".join)
branch_events = [e for e in EVENT_TYPES if not e.endswith("-tag")]
hooks = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("webhook"),
            "properties": st.fixed_dictionaries(
                {"url": words.map(lambda w: f"http://hooks.example/{w}")}
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("airflow"),
            "properties": st.fixed_dictionaries(
                {
                    "url": st.just("http://airflow:8080"),
                    "dag_id": words,
                    "username": words,
                    "password": words,
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("lua"), "properties": st.fixed_dictionaries({"script": words})}
    ),
)


@fuzz_settings(25)
@given(
    names,
    st.dictionaries(
        st.sampled_from(branch_events), st.lists(st.sampled_from(["main", "release-*", "a/*"]))
    ).filter(bool),
    st.lists(
        st.tuples(hook_ids, hooks, st.sampled_from(["success()", "failure()"])),
        min_size=1,
        max_size=3,
        unique_by=lambda h: h[0],
    ),
    st.text(max_size=30),
)
def test_a_valid_action_reads_back_as_written(
    name: str,
    on: dict[str, list[str]],
    hook_list: list[tuple[str, dict[str, Any], str]],
    description: str,
) -> None:
    doc = {
        "name": name,
        "description": description,
        "on": {event: {"branches": branches} for event, branches in on.items()},
        "hooks": [{"id": i, "if": cond, **hook} for i, hook, cond in hook_list],
    }
    action = parse_action("_lakefs_actions/a.yaml", yaml.safe_dump(doc).encode())
    assert action.name == name
    assert action.description == description
    assert dict(action.on) == {event: tuple(branches) for event, branches in on.items()}
    assert [(h.id, h.type, dict(h.properties), h.condition) for h in action.hooks] == [
        (i, hook["type"], hook["properties"], cond) for i, hook, cond in hook_list
    ]
    assert action_file.check(yaml.safe_dump(doc).encode()) is None


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=8),
    st.dates(),
    st.datetimes(timezones=st.just(datetime.UTC)),
    st.sampled_from(["{{ ENV.LAKEFSACTION_TOKEN }}", "{{ ENV.OTHER }}", "1m30s", "500ms", "x"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@fuzz_settings(30)
@given(
    st.one_of(names, values),
    st.one_of(st.sampled_from(EVENT_TYPES), scalars),
    st.one_of(st.none(), st.fixed_dictionaries({"branches": values}), values),
    st.sampled_from(["webhook", "airflow", "lua"]),
    st.dictionaries(
        st.sampled_from(
            [
                "url",
                "timeout",
                "query_params",
                "headers",
                "dag_id",
                "dag_conf",
                "username",
                "password",
                "script",
                "script_path",
                "args",
            ]
        ),
        values,
        max_size=6,
    ),
    st.dictionaries(st.sampled_from(["if", "description", "id"]), values, max_size=2),
)
def test_files_of_any_values_only_refuse(
    name: Any, event: Any, spec: Any, kind: str, props: dict[str, Any], extra: dict[str, Any]
) -> None:
    hook = {"id": "hook_1", "type": kind, "properties": {"url": "http://h/x", **props}, **extra}
    try:
        text = yaml.safe_dump({"name": name, "on": {event: spec}, "hooks": [hook]})
    except yaml.YAMLError:
        return  # a key PyYAML cannot write (a mapping as a key)
    action_file.check(text.encode())


@fuzz_settings(30)
@given(
    st.sampled_from(["webhook", "airflow"]),
    st.dictionaries(
        st.sampled_from(["timeout", "query_params", "headers", "dag_conf"]), values, max_size=4
    ),
)
def test_hooks_called_with_properties_of_any_values_never_raise(
    kind: str, props: dict[str, Any]
) -> None:
    required = {"url": "http://hooks.example", "dag_id": "d", "username": "u", "password": "p"}
    hook = {"id": "hook_1", "type": kind, "properties": {**required, **props}}
    doc = {"name": "any values", "on": {"pre-commit": None}, "hooks": [hook]}
    action_file.check(yaml.safe_dump(doc).encode())
