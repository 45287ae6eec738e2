"""Ref expressions: any text parses or is refused, prints back, and resolves or is not found.

The target checks each expression (see :mod:`tests.fuzz.targets.ref_expr`); here Hypothesis
writes expressions from the grammar's own pieces, well-formed ones among them, which must never
be refused as malformed.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import ref_expr

pieces = st.one_of(
    st.sampled_from(["main", "feature", "v1.0", "~", "^", "@", "$", "0", "1", "2", "99", "/"]),
    st.characters(),  # any code point, lone surrogates included
    st.integers(0, 10**40).map(str),
)


@fuzz_settings(100)
@given(st.lists(pieces, max_size=8).map("".join))
def test_expressions_of_grammar_pieces(text: str) -> None:
    ref_expr.check(text.encode("utf-8", "surrogateescape"))


steps = st.one_of(
    st.sampled_from(["~", "^"]).flatmap(
        lambda m: st.one_of(st.just(m), st.integers(0, 10**17).map(lambda n: f"{m}{n}"))
    )
)


@fuzz_settings(60)
@given(st.sampled_from(["main", "feature", "v1.0"]), st.lists(steps, max_size=4))
def test_well_formed_expressions_are_never_refused_as_malformed(base: str, path: list[str]) -> None:
    outcome = ref_expr.check((base + "".join(path)).encode())
    assert outcome in (None, "RefNotFoundError")


@fuzz_settings(20)
@given(st.sampled_from(["main", "feature"]), st.sampled_from(["@", "$"]))
def test_branch_modifiers_resolve(base: str, modifier: str) -> None:
    assert ref_expr.check((base + modifier).encode()) is None
