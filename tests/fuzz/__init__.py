"""Fuzzing the parsers that read what a client sends: one target per parser.

Targets (:mod:`tests.fuzz.targets`, corpus under ``tests/fuzz/corpus/<target>/``):

- ``sigv4``, ``sigv2``: the AWS signatures, header and presigned forms, through the gateway's
  whole authentication (:mod:`mirror.gateway.sig`, :mod:`mirror.gateway.auth`);
- ``aws_chunked``: ``aws-chunked`` bodies, their chunk signatures and trailers
  (:mod:`mirror.gateway.sig.chunked`);
- ``delete_objects``, ``complete_multipart``: the S3 request documents (:mod:`mirror.gateway.xml`
  and the operations reading them);
- ``ref_expr``: ``~N``, ``^N``, ``@``, ``$`` and ``lakefs://`` URIs (:mod:`mirror.core.refexpr`);
- ``protection_glob``, ``actions_glob``: the two glob dialects (branch protection's gobwas,
  actions' Go ``path.Match``);
- ``action_file``: the YAML of ``_lakefs_actions/`` and the hooks it configures
  (:mod:`mirror.actions.model`, :mod:`mirror.actions.webhook`);
- ``range_header``: GetObject's ``Range`` header, for the REST API and the gateway
  (:mod:`mirror.httputil.streams`).

A target either gets a value from its parser or the parser's documented refusal (the S3 error,
``InvalidRefError``, ...); any other exception, a hang, or a broken round trip is a finding.

Short run (CI): the ``test_*.py`` modules here are ordinary pytest tests: the corpus, mutated
seeds, random bytes, structured inputs and round trips, each bounded and derandomized
(Hypothesis, the same examples on every run); ``test_regressions.py`` keeps every input a
fuzzer found. ``LAKEMIRROR_FUZZ_SCALE=20 pytest tests/fuzz`` multiplies the examples.

Long run: ``python -m tests.fuzz --seconds 600`` fuzzes every target for its share of the time
with atheris (coverage-guided libFuzzer; ``pip install atheris``, in the ``dev`` extra on
Linux), or with Hypothesis where atheris is missing (``--engine hypothesis``). ``--targets
sigv4,ref_expr`` picks targets, ``--work DIR`` keeps the grown corpora, logs and crashing
inputs (a temporary directory otherwise). It prints a table: inputs executed per target, time,
corpus growth and findings (exit status 1 if any). ``python -m tests.fuzz.atheris_run <target>
<dir> <seconds>`` runs one target alone, libFuzzer's output as is. A crash is reproduced with
``load(target).check(open(path, "rb").read())`` (:mod:`tests.fuzz.harness`).

``python -m tests.fuzz.seeds`` writes the generated seeds again (boto3's requests at a fixed
time, framed bodies, documents); the ``bad-found-*`` seeds are inputs the fuzzers found.
"""
