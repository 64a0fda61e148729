"""Trial 33f L1: tripwire.plot's ax that is no matplotlib Axes is named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402


def test_an_ax_that_is_no_axes_is_a_config_error_naming_ax(tmp_path: Path) -> None:
    with tripwire.Session({"out_dir": str(tmp_path / "run"), "collections": {"losses": None}}) as s:
        for step in range(3):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    run = tripwire.open_run(tmp_path / "run")
    # (it was AttributeError: 'int' object has no attribute 'plot')
    with pytest.raises(ConfigError, match=r"^ax: got 5 \(int\); accepted: a matplotlib Axes .* or None"):
        tripwire.plot(run, "loss", ax=5)
    fig = Figure()
    with pytest.raises(ConfigError, match=r"ax: got <Figure.*\(Figure\); accepted: a matplotlib Axes"):
        tripwire.plot(run, "loss", ax=fig)  # the figure, not its Axes
    ax = fig.add_subplot()
    assert tripwire.plot(run, "loss", ax=ax) is ax and len(ax.lines) == 1
    assert np.allclose(ax.lines[0].get_ydata(), [1.0, 0.5, 1 / 3])
