"""Trial 30f finding 9 (a data scientist in Jupyter): ``Tuner.fit()`` showed nothing in a notebook
until it returned (docs: "The Python API has no built-in view"). ``fit(progress=True)`` draws the
live view ``tripwire tune`` draws: in a terminal as the CLI does, in a notebook as one output of the
cell updated in place, and once at the end where the output is a file."""

from __future__ import annotations

import io
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire.tune import Continuous, RandomSearch, Tuner
from tripwire.tune._errors import ConfigError

pytest.importorskip("rich")


def _tuner(tmp_path: Path) -> Tuner:
    return Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3), max_jobs=3,
                 max_parallel_jobs=2, seed=0, journal=str(tmp_path / "j.db"))


def _console_factory(monkeypatch: pytest.MonkeyPatch, **default: Any) -> io.StringIO:
    """``rich.console.Console()`` (no arguments: the view's own console) made with ``default`` and
    writing to the returned buffer; a console made with arguments is made as asked."""
    import rich.console

    real = rich.console.Console
    buf = io.StringIO()

    def make(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **kwargs) if args or kwargs else real(file=buf, width=100, **default)

    monkeypatch.setattr(rich.console, "Console", make)
    return buf


def test_progress_true_prints_the_last_view_where_the_output_is_not_a_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _tuner(tmp_path).fit(progress=True)
    out = capsys.readouterr().out
    assert f"Tuner.fit() {tmp_path / 'j.db'}" in out and "3 / 3 trials" in out, out
    header = next(line for line in out.splitlines() if "running" in line and "elapsed" in line)
    assert [c.strip() for c in header.split("┃") if c.strip()][:5] == [
        "running", "completed", "stopped", "failed", "best so far"]
    row = next(line for line in out.splitlines() if re.search(r"\d+\.\d s", line))
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[:4] == ["0", "3", "0", "0"] and result.best is not None
    assert out.count("3 / 3 trials") == 1 and out.endswith("\n")      # once: the end's view


def test_progress_true_redraws_in_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buf = _console_factory(monkeypatch, force_terminal=True)
    _tuner(tmp_path).fit(progress=True)
    out = buf.getvalue()
    frames = out.count("Tuner.fit()")
    assert frames >= 2, out                                   # drawn while it runs, not only at the end
    last = out[out.rindex("Tuner.fit()"):]
    assert "3 / 3 trials" in last


class _Handle:
    def __init__(self, shown: list[Any]) -> None:
        self.shown = shown

    def update(self, obj: Any) -> None:
        self.shown.append(obj)


def test_progress_true_updates_one_output_of_a_notebook_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             recwarn: pytest.WarningsRecorder) -> None:
    _console_factory(monkeypatch, force_jupyter=True)
    shown: list[Any] = []
    calls: list[dict[str, Any]] = []

    def display(obj: Any, **kwargs: Any) -> _Handle:
        calls.append(kwargs)
        shown.append(obj)
        return _Handle(shown)

    ipython = types.ModuleType("IPython")
    ipython_display = types.ModuleType("IPython.display")
    ipython_display.display = display  # type: ignore[attr-defined]
    ipython.display = ipython_display  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython_display)

    _tuner(tmp_path).fit(progress=True)
    assert calls == [{"display_id": True}]                    # one output, then updated in place
    assert len(shown) >= 3
    last = shown[-1]._repr_mimebundle_(include=[], exclude=[])
    assert "3 / 3 trials" in last["text/plain"] and "Tuner.fit()" in last["text/plain"]
    assert last["text/html"].startswith("<pre") and "3 / 3 trials" in last["text/html"]
    row = next(line for line in last["text/plain"].splitlines() if re.search(r"\d+\.\d s", line))
    assert [c.strip() for c in row.split("│") if c.strip()][:4] == ["0", "3", "0", "0"]
    assert not [w for w in recwarn if "ipywidgets" in str(w.message)]   # (rich's Live would ask for them)


@pytest.mark.parametrize("bad", ["yes", 1, 0, [print]])
def test_a_bad_progress_value_is_refused_before_the_job_starts(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"progress={bad!r} is not one of: None or False (no progress "
                                                    "view), True (the live view `tripwire tune` draws")):
        _tuner(tmp_path).fit(progress=bad)
    assert not (tmp_path / "j.db").exists()


def test_none_false_and_a_callable_work_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snaps: list[dict[str, Any]] = []
    _tuner(tmp_path).fit(progress=snaps.append)
    assert snaps[-1]["phase"] == "ended" and snaps[-1]["completed"] == 3
    for i, quiet in enumerate((None, False)):
        Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(1), max_jobs=1, seed=0,
              journal=str(tmp_path / f"q{i}.db")).fit(progress=quiet)
    assert "trials" not in capsys.readouterr().out
