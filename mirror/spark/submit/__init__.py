"""Entry scripts for ``spark-submit``, in a directory of their own.

``spark-submit`` runs a Python file as ``__main__`` with the file's directory first on
``sys.path``; modules next to it would shadow the standard library's (``mirror/spark`` holds an
``io.py`` and a ``gc.py``), so the scripts live here, alone. Their path:
``python -c 'import mirror.spark.submit as s; print(s.GC_JOB)'``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["GC_JOB"]

GC_JOB = str(Path(__file__).with_name("gc_job.py"))
"""The file to ``spark-submit`` for ``lakemirror gc`` on a cluster."""
