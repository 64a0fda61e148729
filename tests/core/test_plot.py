from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")  # (the plot extra: a run of -k jax without it collects the rest, trial 26e)
matplotlib.use("Agg")  # no display; CI sets MPLBACKEND=Agg too

from matplotlib.figure import Figure  # noqa: E402

import tripwire  # noqa: E402
from tripwire._plot import default_out, default_reduction, plot, register  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _make_run(path: Path, workers: int = 1) -> Path:
    """A tiny real run: a weight (l2, mean), a gradient (mean, max), the loss every train step, an
    eval metric at eval step 1 (the first validation batch, after train step 3), a train finding at
    step 2 and an eval finding at eval step 1 (worker 0)."""
    for rank in range(workers):
        config = {"out_dir": str(path), "save": {"interval": 1},
                  "collections": {"weights": {"reductions": ["l2", "mean"]},
                                  "gradients": {"reductions": ["mean", "max"]}, "losses": None, "metrics": None}}
        with tripwire.Session(config, rank=rank, world_size=workers) as s:
            for step in range(4):
                s.step("train", step, {"net/fc1.weight": (np.ones(4) * (step + rank), "weights"),
                                       "net/fc1.grad": (np.arange(4.0) * (step + 1), "gradients"),
                                       "loss": (1.0 / (step + 1) + 10 * rank, "losses")})
            s.step("eval", 1, {"val_acc": (0.5 + 0.25 * rank, "metrics")})
            if rank == 0:
                s.record_finding(tripwire.Finding("loss_spike", 2, "train", "loss rose 3x"))
                s.record_finding(tripwire.Finding("acc_drop", 1, "eval", "accuracy fell"))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_run(tmp_path_factory.mktemp("plot") / "run")


@pytest.fixture(scope="module")
def run2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_run(tmp_path_factory.mktemp("plot2") / "run", workers=2)


def _ax():
    return Figure().add_subplot()


def _data_lines(ax) -> list:
    return [ln for ln in ax.get_lines() if ln.get_gid() != "tripwire-finding"]


def _finding_lines(ax) -> list:
    return [ln for ln in ax.get_lines() if ln.get_gid() == "tripwire-finding"]


# ------------------------------------------------------------------------------------- drawing
def test_lines_hold_the_runs_series(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    ax = plot(run, ["loss", "net/fc1.weight"], findings=False, ax=_ax())
    lines = ax.get_lines()
    assert len(lines) == 2
    for line, (name, red) in zip(lines, [("loss", "raw"), ("net/fc1.weight", "l2")]):
        steps, values = run.series(name, red, "train", 0)
        xy = line.get_xydata()
        np.testing.assert_array_equal(xy[:, 0], steps)
        np.testing.assert_allclose(xy[:, 1], values)
    assert [ln.get_label() for ln in lines] == ["loss", "net/fc1.weight (l2)"]
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "value"  # mixed reductions
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["loss", "net/fc1.weight (l2)"]


def test_default_reduction_raw_then_l2_then_first_stored(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    assert default_reduction(run, "loss") == "raw"
    assert default_reduction(run, "net/fc1.weight") == "l2"  # also has mean
    assert default_reduction(run, "net/fc1.grad") == "max"  # mean, max stored: the first (sorted)
    ax = plot(run, "net/fc1.grad", ax=_ax(), findings=False)
    np.testing.assert_allclose(ax.get_lines()[0].get_xydata()[:, 1], [3.0, 6.0, 9.0, 12.0])  # max of 0..3 x (step+1)
    assert ax.get_ylabel() == "max"


def test_explicit_reduction(run_dir: Path) -> None:
    ax = plot(run_dir, "net/fc1.weight", "mean", ax=_ax(), findings=False)  # run given as a path
    np.testing.assert_allclose(ax.get_lines()[0].get_xydata()[:, 1], [0.0, 1.0, 2.0, 3.0])
    assert ax.get_ylabel() == "mean"


def test_eval_metric_is_plotted_in_its_own_mode(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    ax = plot(run, ["loss", "val_acc"], ax=_ax(), findings=False)
    loss, val = ax.get_lines()
    assert val.get_label() == "val_acc (eval)" and loss.get_label() == "loss"
    # eval steps count validation batches: beside the training loss the value is drawn at the
    # train step it followed (a fresh user's val_loss sat at x=2 and 4, after train steps 22 and 45)
    assert val.get_xydata().tolist() == [[3.0, 0.5]]
    assert ax.get_xlabel() == "train step (other modes at the train step they followed)"
    assert val.get_marker() == "o"  # one point: visible
    assert ax.get_ylabel() == "value"  # raw values
    ax = plot(run, "val_acc", ax=_ax(), findings=False)  # alone: its own steps
    assert ax.get_lines()[0].get_xydata().tolist() == [[1.0, 0.5]] and ax.get_xlabel() == "eval step (eval batches)"
    with pytest.raises(tripwire.TensorNotFoundError, match=r"'val_acc' has no 'raw' values in mode 'train'.*modes with values: eval"):
        plot(run, "val_acc", mode="train", ax=_ax())


def test_two_workers_two_lines(run2_dir: Path) -> None:
    run = tripwire.open_run(run2_dir)
    ax = plot(run, "loss", ax=_ax(), findings=False)
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["loss (worker 0)", "loss (worker 1)"]
    for w, line in enumerate(lines):
        np.testing.assert_allclose(line.get_xydata()[:, 1], run.series("loss", "raw", "train", w)[1])
    np.testing.assert_allclose(lines[1].get_xydata()[:, 1], [11.0, 10.5, 10.0 + 1 / 3, 10.25])
    ax = plot(run, "loss", worker=1, ax=_ax(), findings=False)
    assert [ln.get_label() for ln in ax.get_lines()] == ["loss"]
    np.testing.assert_allclose(ax.get_lines()[0].get_xydata()[:, 1], lines[1].get_xydata()[:, 1])


def test_findings_drawn_at_their_steps_for_the_plotted_modes(run_dir: Path) -> None:
    run = tripwire.open_run(run_dir)
    ax = plot(run, "loss", ax=_ax())
    found = _finding_lines(ax)
    assert [ln.get_xdata()[0] for ln in found] == [2]  # the eval finding is not on a train plot
    assert found[0].get_linestyle() == ":"
    assert [t.get_text().strip() for t in ax.texts] == ["loss_spike"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["loss"]  # findings stay out of the legend
    ax = plot(run, ["loss", "val_acc"], ax=_ax())
    assert sorted((t.get_text().strip(), t.get_position()[0]) for t in ax.texts) == [("acc_drop", 3), ("loss_spike", 2)]
    ax = plot(run, "loss", ax=_ax(), findings=False)
    assert _finding_lines(ax) == [] and len(ax.texts) == 0


def test_regex_selects_every_matching_tensor(run_dir: Path) -> None:
    ax = plot(run_dir, re.compile(r"fc1\."), ax=_ax(), findings=False)
    assert [ln.get_label() for ln in _data_lines(ax)] == ["net/fc1.grad (max)", "net/fc1.weight (l2)"]


def test_new_pyplot_figure_when_no_ax(run_dir: Path) -> None:
    import matplotlib.pyplot as plt

    ax = plot(run_dir, "loss")
    try:
        assert len(_data_lines(ax)) == 1 and ax.figure in [plt.figure(n) for n in plt.get_fignums()]
    finally:
        plt.close(ax.figure)


# ------------------------------------------------------------------------------------ validation
def test_unknown_tensor_names_close_names(run_dir: Path) -> None:
    ax = _ax()
    with pytest.raises(tripwire.TensorNotFoundError, match=r"tensor 'los' not in this run; did you mean 'loss'\?; available: loss, net/fc1.grad"):
        plot(run_dir, ["loss", "los"], ax=ax)
    assert ax.get_lines() == []  # nothing drawn before the error
    with pytest.raises(tripwire.TensorNotFoundError, match=r"names are matched exactly.*re\.compile\('fc1\.\*'\)"):
        plot(run_dir, "fc1.*", ax=ax)
    with pytest.raises(tripwire.TensorNotFoundError, match=r"no tensor matches the regex 'zzz'; available: loss"):
        plot(run_dir, re.compile("zzz"), ax=ax)


def test_unknown_reduction_names_the_stored_ones(run_dir: Path) -> None:
    with pytest.raises(tripwire.TensorNotFoundError, match=r"'net/fc1.weight' has no reduction 'l3'; did you mean 'l2'\?; stored: l2, mean"):
        plot(run_dir, "net/fc1.weight", "l3", ax=_ax())
    with pytest.raises(tripwire.TensorNotFoundError, match=r"'loss' has no reduction 'l2'.*stored: raw"):
        plot(run_dir, ["net/fc1.weight", "loss"], "l2", ax=_ax())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tensors": []}, r"tensors: got \[\]; accepted: a tensor name, a non-empty list"),
        ({"tensors": ["loss", 3]}, r"tensors: got \['loss', 3\]"),
        ({"tensors": "loss", "mode": "val"}, r"mode: got 'val'; accepted: train, eval, test, predict.*did you mean 'eval'"),
        ({"tensors": "loss", "worker": 4}, r"worker: got 4; accepted: one of the run's workers \(0\)"),
        ({"tensors": "loss", "reduction": 2}, r"reduction: got 2; accepted: a reduction name"),
        ({"tensors": "loss", "findings": "yes"}, r"findings: got 'yes'; accepted: True or False"),
    ],
)
def test_bad_arguments(run_dir: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(tripwire.ConfigError, match=match):
        plot(run_dir, ax=_ax(), **kwargs)


def test_missing_run(tmp_path: Path) -> None:
    with pytest.raises(tripwire.RunNotFoundError, match="no tripwire run at"):
        plot(tmp_path / "nope", "loss", ax=_ax())


def test_missing_matplotlib_names_the_extra(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(tripwire.MissingDependencyError, match=r"'matplotlib' is not installed; install it with: pip install 'tripwire\[plot\]' "
                                                             r"\(in a clone of tripwire: pip install -e '\.\[plot\]'\)"):
        plot(run_dir, "loss")  # (trial 24c: the bare command finds no distribution: README, "Install")
    with pytest.raises(ImportError):  # also an ImportError
        plot(run_dir, "loss")


def test_import_does_not_import_matplotlib() -> None:
    code = "import sys, tripwire._plot; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------- CLI
def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_writes_a_png_to_the_default_path(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_dir / "plots" / "net_fc1.weight.png"
    assert default_out(run_dir, "net/fc1.weight") == out
    # trial 18a: a --regex named the file after itself, '*' included; its error's position was in the joined pattern
    assert default_out(run_dir, "gradients/.*weight") == run_dir / "plots" / "gradients_._weight.png"
    assert _cli(["plot", str(run_dir), "--regex", "fc("]) == 2
    assert "--regex: got 'fc('; accepted: a regular expression (missing ), unterminated subpattern at position 2)" \
        in capsys.readouterr().err
    assert _cli(["plot", str(run_dir), "net/fc1.weight", "loss"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_cli_out_reduction_mode_worker(run2_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sub" / "w.png"
    assert _cli(["plot", str(run2_dir), "net/fc1.weight", "--reduction", "mean", "--mode", "train",
                 "--worker", "1", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes()[:8] == PNG_MAGIC
    svg = tmp_path / "w.svg"
    assert _cli(["plot", str(run2_dir), "val_acc", "--out", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["los"], "tensor 'los' not in this run; did you mean 'loss'?"),
        (["loss", "--reduction", "l2"], "tensor 'loss' has no reduction 'l2'"),
        (["loss", "--worker", "3"], "worker: got 3"),
        (["loss", "--out", "x.xyz"], "--out: got 'x.xyz'; accepted: a path ending in .png"),
        # the library's hint (re.compile) is not something a shell user can pass
        (["net/.*"], "names are matched exactly: to select tensors by regular expression add --regex"),
        (["--regex", "("], "--regex: got '('; accepted: a regular expression"),
        (["--regex", "nothing_like_this"], "no tensor matches the regex"),
    ],
)
def test_cli_bad_input_exits_2(run_dir: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["plot", str(run_dir), *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.startswith("tripwire plot: ") and captured.out == ""


def test_cli_missing_run_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["plot", str(tmp_path / "nope"), "loss"]) == 2
    assert "no tripwire run at" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()


def test_cli_missing_matplotlib(run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert _cli(["plot", str(run_dir), "loss", "--out", str(run_dir / "never.png")]) == 2
    assert "pip install 'tripwire[plot]'" in capsys.readouterr().err
    assert not (run_dir / "never.png").exists()


def test_cli_regex_selects_every_matching_tensor(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.png"
    assert _cli(["plot", str(run_dir), "--regex", "net/.*weight", "^loss$", "--out", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC) and capsys.readouterr().out.strip() == str(out)


def test_label_tells_two_runs_in_one_axes_apart(run_dir: Path) -> None:
    ax = _ax()
    plot(run_dir, ["loss"], findings=False, ax=ax, label="healthy")
    plot(run_dir, ["loss"], findings=False, ax=ax, label="faulty")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["healthy: loss", "faulty: loss"]
    with pytest.raises(tripwire.ConfigError, match=r"label: got 3; accepted: a string or None"):
        plot(run_dir, ["loss"], ax=_ax(), label=3)  # type: ignore[arg-type]


def test_cli_takes_a_tensor_after_an_option(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 23a: ``plot RUN loss --out F val_loss`` failed with the top-level usage ("tripwire: error:
    # unrecognized arguments"); a tensor after an option is a tensor, an unknown option is plot's own error
    from tripwire._cli import main

    out = tmp_path / "two.png"
    assert main(["plot", str(run_dir), "net/fc1.weight", "--out", str(out), "loss"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(SystemExit) as exc:
        main(["plot", str(run_dir), "loss", "--bogus"])
    assert exc.value.code == 2
    # (one line, the usage at its end: trial 27c)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tripwire plot: error: unrecognized arguments: --bogus (usage: tripwire plot [-h] ")
