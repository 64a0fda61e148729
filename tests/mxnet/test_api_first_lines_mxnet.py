"""docs/api.md's MXNet entries begin with the first sentence of their docstrings, checked where MXNet
imports: the main environment's check (tests/core/test_trial32f_api_first_lines.py) skips them, and CI
runs this folder in the MXNet environment."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest


def _core_check() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "core" / "test_trial32f_api_first_lines.py"
    spec = importlib.util.spec_from_file_location("api_first_lines_check", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = _core_check()
MXNET = [e for e in CHECK.ENTRIES if e[0].startswith("tripwire.integrations.mxnet")]


def test_the_mxnet_rows_are_read() -> None:
    assert len(MXNET) >= 4


@pytest.mark.parametrize(("module", "name", "kind", "text"), MXNET, ids=[f"{m}.{n}" for m, n, _, _ in MXNET])
def test_each_mxnet_entry_begins_with_the_first_sentence_of_the_docstring(module: str, name: str, kind: str,
                                                                          text: str) -> None:
    import tripwire.integrations.mxnet  # noqa: F401  (here it imports: a failure is one, not a skip)

    CHECK.test_each_entry_begins_with_the_first_sentence_of_the_docstring(module, name, kind, text)
