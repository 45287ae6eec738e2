"""Every target against its corpus, mutations of it, and random bytes (the short run).

A target raises only on a finding (see :mod:`tests.fuzz.harness`); the corpus also proves each
target reaches its parser's accepting path (``ok-*`` seeds) and its refusals (``bad-*``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import TARGETS, load, seeds
from tests.fuzz.strategies import fuzz_settings, mutated


@pytest.mark.parametrize("name", TARGETS)
def test_the_corpus_is_accepted_or_refused_as_its_names_say(name: str) -> None:
    target = load(name)
    corpus = seeds(name)
    assert any(f.startswith("ok-") for f, _ in corpus)
    assert any(f.startswith("bad-") for f, _ in corpus)
    for file, data in corpus:
        outcome = target.check(data)
        assert (outcome is None) == file.startswith("ok-"), (file, outcome)


# examples per target in the short run: the YAML ones parse in pure Python, the slowest
EXAMPLES = {"actions_glob": 50, "action_file": 60}


@pytest.mark.parametrize("name", TARGETS)
def test_mutated_seeds(name: str) -> None:
    target = load(name)

    @fuzz_settings(EXAMPLES.get(name, 100))
    @given(mutated(name))
    def run(data: bytes) -> None:
        target.check(data)

    run()


@pytest.mark.parametrize("name", TARGETS)
def test_random_bytes(name: str) -> None:
    target = load(name)

    @fuzz_settings(EXAMPLES.get(name, 100) // 2)
    @given(st.binary(max_size=256))
    def run(data: bytes) -> None:
        target.check(data)

    run()
