"""Trial 26f finding 3: the Python that ``tripwire demo`` prints runs in the quick start's environment
(``pip install -e ".[lightning]"``: no pandas)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("lightning")
pytest.importorskip("sklearn")

from tripwire._cli import main  # noqa: E402


def test_the_demos_python_runs_without_pandas(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--healthy", "--out-dir", str(out), "--max-epochs", "1"]) == 0
    text = capsys.readouterr().out
    python = text.split("or in Python:\n", 1)[1].split("\n\n", 1)[0]
    assert "run.dataframe()" in python and "pandas extra" in python  # (an aside, with what it needs)
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError, as with no pandas
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(python), namespace)  # noqa: S102 - the demo's own output, as pasted
    assert namespace["run"].status == "complete"  # type: ignore[attr-defined]
    assert "[]" in capsys.readouterr().out  # print(run.findings): none on the healthy twin
