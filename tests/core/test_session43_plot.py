"""Trial 43a F4: ``tripwire.plot`` of a tensor that only another worker wrote said "modes with values:
none" (``run.series`` names the worker that holds it); it now names that worker too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire

pytest.importorskip("matplotlib")


def test_plot_names_the_worker_that_holds_the_tensor(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    sessions = [tripwire.Session(out_dir=tmp_path / "run", save_interval=1, collections=["losses"], rank=r,
                                 world_size=2) for r in range(2)]
    for step in range(3):
        for r, s in enumerate(sessions):
            tensors = {"loss": (np.float32(1.0 - 0.1 * step), "losses")}
            if r == 1:
                tensors["aux_loss"] = (np.float32(0.5), "losses")
            s.step("train", step, tensors)
    for s in sessions:
        s.close()
    run = tripwire.open_run(tmp_path / "run")
    with pytest.raises(tripwire.TensorNotFoundError, match=r"tensor 'aux_loss' has no 'raw' values in mode 'train' "
                                                          r"\(worker 0\); modes with values: none; worker 1 holds it: "
                                                          r"pass worker=1$"):
        tripwire.plot(run, "aux_loss", worker=0)
    ax = tripwire.plot(run, "aux_loss", worker=1)
    assert [len(line.get_xdata()) for line in ax.get_lines()] == [3]
