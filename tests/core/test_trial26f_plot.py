"""Trial 26d finding 5: ``tripwire plot`` and ``tripwire.plot`` draw on a log (or symlog) y scale, so a
diverging metric reads as a line, not a flat line with a spike; values <= 0 on a log scale are an error
that names them, not a crash nor points clipped without a word."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")  # (the plot extra: a run of -k jax without it collects the rest, trial 26e)
matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

import tripwire  # noqa: E402
from tripwire._cli import main  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(path: Path, values: list[float]) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "collections": ["losses"]}) as s:
        for step, value in enumerate(values):
            s.step("train", step, {"train-rmse": (value, "losses")})
    return path


#: A booster's train-rmse rising 4% ... then by orders of magnitude (trial 26d: 242 to 1.6e19).
_DIVERGING = [242.0 * 10.0 ** (0.9 * k) for k in range(20)]


def test_plot_draws_on_a_log_y_scale(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", _DIVERGING)
    ax = Figure().add_subplot()
    assert tripwire.plot(run, "train-rmse", ax=ax, yscale="log") is ax
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    assert low <= 242.0 and high >= _DIVERGING[-1]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), _DIVERGING, rtol=1e-6)
    ax = Figure().add_subplot()
    tripwire.plot(run, "train-rmse", ax=ax)
    assert ax.get_yscale() == "linear"  # (the default, as before)


def test_log_refuses_values_at_or_below_zero_and_symlog_draws_them(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", [3.0, 1.0, 0.0, -2.0, 5.0])
    ax = Figure().add_subplot()
    with pytest.raises(tripwire.ConfigError, match=r"^yscale: got 'log', but 'train-rmse' \(raw, worker 0\) has 2 "
                                                   r"value\(s\) <= 0, the first 0 at step 2, which a log scale cannot "
                                                   r"draw; accepted for such values: 'symlog'"):
        tripwire.plot(run, "train-rmse", ax=ax, yscale="log")
    assert not ax.get_lines()  # (refused before anything is drawn)
    tripwire.plot(run, "train-rmse", ax=ax, yscale="symlog")
    assert ax.get_yscale() == "symlog"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [3.0, 1.0, 0.0, -2.0, 5.0])
    ax = Figure().add_subplot()
    nan_run = _run(tmp_path / "nan", [1.0, float("nan"), 10.0, float("inf")])  # not drawn on any scale: no error
    tripwire.plot(nan_run, "train-rmse", ax=ax, yscale="log")
    assert ax.get_yscale() == "log"


def test_plot_refuses_an_unknown_yscale(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", [1.0, 2.0])
    with pytest.raises(tripwire.ConfigError, match=r"yscale: got 'logg'; accepted: linear, log, symlog; "
                                                   r"did you mean 'log'\?"):
        tripwire.plot(run, "train-rmse", ax=Figure().add_subplot(), yscale="logg")


def test_cli_plot_yscale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run", _DIVERGING)
    out = tmp_path / "rmse.png"
    assert main(["plot", str(run), "train-rmse", "--yscale", "log", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.read_bytes()[:8] == PNG_MAGIC
    bad = _run(tmp_path / "bad", [1.0, -1.0])
    assert main(["plot", str(bad), "train-rmse", "--yscale", "log", "--out", str(tmp_path / "bad.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tripwire plot: error: --yscale: got 'log', but 'train-rmse'") and "'symlog'" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "bad.png").exists()
    assert main(["plot", str(bad), "train-rmse", "--yscale", "symlog", "--out", str(tmp_path / "bad.png")]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["plot", str(bad), "train-rmse", "--yscale", "logg"])
    assert exc.value.code == 2 and "--yscale" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    assert "--yscale {linear,log,symlog}" in capsys.readouterr().out
