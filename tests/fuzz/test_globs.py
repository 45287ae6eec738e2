"""Glob patterns of branch protection and of actions: any pattern compiles or is refused.

The targets check each pattern against names (see :mod:`tests.fuzz.targets.protection_glob`
and :mod:`tests.fuzz.targets.actions_glob`, which hold the round trips and the comparison of
the two dialects); here Hypothesis writes patterns and names from the dialects' characters.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import actions_glob, protection_glob
from tests.fuzz.targets.glob_input import render_glob_input

pattern_chars = st.one_of(st.sampled_from("*?[]{},!^-\\/ab-_.01"), st.characters())
patterns = st.text(pattern_chars, max_size=20)
names = st.lists(st.text(st.one_of(st.sampled_from("ab-_/.01"), st.characters()), max_size=24))


@fuzz_settings(100)
@given(patterns, names)
def test_protection_patterns(pattern: str, branches: list[str]) -> None:
    protection_glob.check(render_glob_input(pattern, branches))


@fuzz_settings(60)
@given(patterns, names)
def test_actions_patterns(pattern: str, branches: list[str]) -> None:
    actions_glob.check(render_glob_input(pattern, branches))


@fuzz_settings(40)
@given(st.lists(st.sampled_from(["*", "**", "?", "a", "-", "[a-c]", "{a,b*}"]), max_size=8))
def test_many_stars_match_long_names_in_time(parts: list[str]) -> None:
    # backtracking over several stars is where a matcher can take exponential time
    long_names = ["a-" * 200, "a" * 300 + "b", "ab" * 150 + "-"]
    protection_glob.check(render_glob_input("".join(parts), long_names))
    actions_glob.check(render_glob_input("".join(parts).replace("{a,b*}", "*"), long_names))
