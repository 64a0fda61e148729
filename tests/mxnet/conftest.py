"""MXNet tests run only in the MXNet environment (``.venv-mxnet``, numpy<2).

Where mxnet is not installed (the main environment) every test module here is ignored, except
``test_mxnet_missing.py``, which checks the ImportError that a user without mxnet gets.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

_SPEC = importlib.util.find_spec("mxnet")
# origin None: not mxnet but a namespace folder of that name (this very folder, when tests/ is on sys.path)
HAVE_MXNET = _SPEC is not None and _SPEC.origin is not None

if HAVE_MXNET:
    # two shared cores: keep MXNet's engine and OpenMP small (read when mxnet is imported)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
    collect_ignore_glob: list[str] = []
else:
    collect_ignore_glob = sorted(
        p.name for p in Path(__file__).parent.glob("*.py") if p.name not in ("conftest.py", "test_mxnet_missing.py")
    )
