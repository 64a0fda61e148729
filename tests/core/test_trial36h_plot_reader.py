"""Trial 36h: ``plot(run, "val_loss", ax=ax)`` after ``plot(run, "loss", ax=ax)`` drew the eval
values at their own eval steps (0..3) beside a train line over train steps 0..39, and relabelled
the x axis; the reader's damage warnings had no ``tripwire:`` prefix; ``tripwire plot``'s error for
a tensor of several modes said ``pass mode=`` (a Python keyword) where the option is ``--mode``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

import tripwire  # noqa: E402
from tripwire._cli import main  # noqa: E402


def _run(path: Path) -> tripwire.Run:
    with tripwire.Session(out_dir=str(path), save_interval=1, rules=[]) as s:
        for step in range(40):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
            if step % 10 == 9:
                s.step("eval", step // 10, {"val_loss": (2.0 / (step + 1), "losses")})
    return tripwire.open_run(path)


def _xs(ax: object) -> dict[str, list[float]]:
    return {ln.get_label(): list(ln.get_xdata()) for ln in ax.get_lines() if not ln.get_label().startswith("_")}  # type: ignore[attr-defined]


def test_eval_values_drawn_into_an_axes_of_train_lines_sit_at_their_train_steps(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    ax = Figure().subplots()
    tripwire.plot(run, "loss", ax=ax)
    tripwire.plot(run, "val_loss", ax=ax)
    xs = _xs(ax)
    assert xs["val_loss (eval)"] == [float(s) for s in run.train_steps("eval")] == [9.0, 19.0, 29.0, 39.0]
    assert xs["loss"] == [float(s) for s in range(40)]
    assert ax.get_xlabel() == "train step (other modes at the train step they followed)"
    one = tripwire.plot(run, ["loss", "val_loss"], ax=Figure().subplots())
    assert _xs(one) == xs  # as one call draws them


def test_train_values_into_an_axes_of_eval_values_drawn_alone_are_refused(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    ax = Figure().subplots()
    tripwire.plot(run, "val_loss", ax=ax)
    assert _xs(ax)["val_loss (eval)"] == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(tripwire.ConfigError, match=r"ax: it holds eval values drawn alone, at their own eval steps"):
        tripwire.plot(run, "loss", ax=ax)
    assert len(_xs(ax)) == 1  # (untouched)
    tripwire.plot(run, "val_loss", ax=ax, label="again")  # the same mode alone: fine
    assert ax.get_xlabel() == "eval step (eval batches)"


def test_reader_warnings_start_with_the_prefix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _run(tmp_path / "run")
    shard = next((tmp_path / "run" / "workers").glob("*.twr"))
    shard.write_bytes(shard.read_bytes()[:-10])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = tripwire.open_run(tmp_path / "run")
    assert run.warnings and not run.warnings[0].startswith("tripwire:")
    said = [r.getMessage() for r in caplog.records]
    assert said and all(m.startswith("tripwire: ") for m in said), said


def test_plot_cli_names_the_mode_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[]) as s:
        s.step("eval", 0, {"m": (1.0, "metrics")})
        s.step("test", 0, {"m": (2.0, "metrics")})
    assert main(["plot", str(tmp_path / "run"), "m", "--out", str(tmp_path / "m.png")]) == 2
    err = capsys.readouterr().err
    assert "pass --mode, one of them" in err and "mode=" not in err
    assert main(["plot", str(tmp_path / "run"), "m", "--mode", "test", "--out", str(tmp_path / "m.png")]) == 0

