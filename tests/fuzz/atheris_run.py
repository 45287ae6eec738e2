"""One target under atheris (libFuzzer, coverage-guided): ``python -m tests.fuzz.atheris_run``.

Usage: ``python -m tests.fuzz.atheris_run <target> <work dir> <seconds>``. The code of
``mirror`` (and PyYAML) is instrumented as it is imported; the inputs that reach new code are
kept in ``<work dir>/corpus`` (the committed seeds are read, never written), and an input that
crashes or hangs (over 20 s) is written to ``<work dir>/artifacts``. libFuzzer's statistics go to
standard error. Normally started by ``python -m tests.fuzz``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fuzz.harness import CORPUS, TARGETS
from tests.fuzz.tokens import libfuzzer_dictionary

__all__ = ["main"]

HANG_SECONDS = 20
"""An input running longer than this is a hang (libFuzzer's ``-timeout``)."""


def main(argv: list[str]) -> None:
    """Fuzz target ``argv[0]`` in work dir ``argv[1]`` for ``argv[2]`` seconds."""
    import atheris

    name, work, seconds = argv[0], Path(argv[1]), int(argv[2])
    if name not in TARGETS:
        raise SystemExit(f"unknown fuzz target {name!r}: one of {', '.join(TARGETS)}")
    corpus, artifacts = work / "corpus", work / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    dictionary = work / "tokens.dict"
    dictionary.write_text(libfuzzer_dictionary(name))
    with atheris.instrument_imports(include=["mirror", "yaml"]):
        from tests.fuzz.harness import load

        target = load(name)

    def one_input(data: bytes) -> None:
        target.check(data)

    atheris.Setup(
        [
            sys.argv[0],
            f"-max_total_time={seconds}",
            f"-timeout={HANG_SECONDS}",
            "-rss_limit_mb=3072",
            "-max_len=16384",
            "-print_final_stats=1",
            f"-dict={dictionary}",
            f"-artifact_prefix={artifacts}/",
            str(corpus),
            str(CORPUS / name),
        ],
        one_input,
    )
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv[1:])
