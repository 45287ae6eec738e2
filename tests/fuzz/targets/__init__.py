"""One module per fuzz target (see :mod:`tests.fuzz.harness` for what a target holds)."""
