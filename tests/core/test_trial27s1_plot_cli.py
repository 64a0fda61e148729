"""Trial 27c finding 6 (plot's part): ``tripwire plot`` names RUN, not ``--out``, when RUN is no run;
``--worker`` says what the CLI accepts (not the Python API's ``None``); the title of RUN ``.`` is the
directory's name; every error is one line (``error_text`` / ``os_error_text``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import tripwire  # noqa: E402
import tripwire._plot as tw_plot  # noqa: E402
from tripwire._cli import main  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _run(path: Path) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["l2"]}, "losses": None}}) as s:
        for step in range(4):
            s.step("train", step, {"fc1.weight": (np.ones(4) * step, "weights"), "loss": (1.0 / (step + 1), "losses")})
    return path


def test_a_run_that_is_a_file_is_named_as_such_not_as_a_bad_default_out(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # trial 27c: "--out (default 'bad/afile.txt/plots/loss.png'): ... 'bad/afile.txt' is a file", a flag not given
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    assert main(["plot", str(afile), "loss"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"tripwire plot: error: no tripwire run at {str(afile)!r}: it is a file; a run is a "
                           f"directory"), line
    assert "--out" not in line
    # a missing RUN and a directory without run.json: RUN named, not --out, nothing created
    for run in (tmp_path / "nope", tmp_path):
        assert main(["plot", str(run), "loss"]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"tripwire plot: error: no tripwire run at {str(run)!r}: ") and "--out" not in line
    assert not (tmp_path / "nope").exists() and not (tmp_path / "plots").exists()


def test_a_bad_out_is_still_refused_before_the_run_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path / "run")

    def no_read(path: Any) -> Any:
        raise AssertionError("the run was read before --out was checked")

    monkeypatch.setattr(tw_plot, "open_run", no_read)
    assert main(["plot", str(run), "loss", "--out", str(tmp_path / "x.xyz")]) == 2
    assert "--out: got " in _one_line(capsys.readouterr().err)


def test_worker_out_of_range_says_leave_worker_out_not_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 27c: "accepted: one of the run's workers (0) or None (all)": None is the Python API's value
    run = _run(tmp_path / "run")
    for given in ("-1", "3"):
        assert main(["plot", str(run), "loss", "--worker", given, "--out", str(tmp_path / "w.png")]) == 2
        assert _one_line(capsys.readouterr().err) == (
            f"tripwire plot: error: --worker: got {given}; accepted: one of the run's workers (0), or leave --worker "
            f"out (every worker, one line each)")
    assert not (tmp_path / "w.png").exists()
    # the Python API keeps its own wording
    with pytest.raises(tripwire.ConfigError, match=r"worker: got -1; accepted: one of the run's workers \(0\) or None"):
        tw_plot.plot(run, "loss", worker=-1, findings=False)


def _titles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from matplotlib.figure import Figure

    seen: list[str] = []
    save = Figure.savefig

    def savefig(self: Figure, *args: Any, **kwargs: Any) -> Any:
        seen.append(self.axes[0].get_title())
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def test_the_title_of_run_dot_is_the_directorys_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # trial 27c: RUN '.' drew no title (Path('.').name is ''); 'loop1/' drew 'loop1'
    run = _run(tmp_path / "loop1")
    titles = _titles(monkeypatch)
    monkeypatch.chdir(run)
    assert main(["plot", ".", "loss", "--out", str(tmp_path / "dot.png")]) == 0
    monkeypatch.chdir(run / "workers")
    assert main(["plot", "..", "loss", "--out", str(tmp_path / "up.png")]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["plot", "loop1/", "loss", "--out", str(tmp_path / "slash.png")]) == 0
    assert main(["plot", "./loop1/.", "loss"]) == 0
    assert titles == ["loop1"] * 4
    assert (run / "plots" / "loss.png").read_bytes()[:8] == PNG_MAGIC
    capsys.readouterr()


def test_an_unreadable_run_file_is_os_error_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 27c finding 8's damage under plot: "[Errno 21] Is a directory: '...'", not the CLI's one line
    run = _run(tmp_path / "run")
    bad = run / "findings" / "watch-00000.jsonl"
    bad.mkdir()
    assert main(["plot", str(run), "loss", "--out", str(tmp_path / "x.png")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"tripwire plot: error: {str(bad)!r} cannot be used: Is a directory; accepted: "), line
    assert "[Errno" not in line


def test_an_error_of_several_lines_is_printed_on_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path / "run")

    def two_lines(*args: Any, **kwargs: Any) -> Any:
        raise tripwire.ConfigError("first part\n  second part\n")

    monkeypatch.setattr(tw_plot, "plot", two_lines)
    assert main(["plot", str(run), "loss", "--out", str(tmp_path / "x.png")]) == 2
    assert _one_line(capsys.readouterr().err) == "tripwire plot: error: first part; second part"
    assert os.listdir(tmp_path) == ["run"]
