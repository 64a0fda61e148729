"""The reader answers an unknown attribute with smdebug's equivalent or a did-you-mean (trial 20b:
an smdebug user's ``run.tensor(n).values(mode)`` got a bare AttributeError that named nothing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire


@pytest.fixture
def run(tmp_path: Path) -> tripwire.Run:
    with tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[]) as s:
        for step in range(3):
            s.step("train", step, {"loss": (np.float64(1.0 / (step + 1)), "losses")})
    return tripwire.open_run(tmp_path / "run")


def test_smdebug_tensor_names_point_to_tripwires(run: tripwire.Run) -> None:
    tensor = run.tensor("loss")
    with pytest.raises(AttributeError, match=r"'values' \(smdebug's name\); in tripwire: tensor\.series\("):
        tensor.values("train")
    with pytest.raises(AttributeError, match=r"'reduction_value' \(smdebug's name\); in tripwire: tensor\.value"):
        tensor.reduction_value(1, "raw")
    # and what it points to works
    steps, values = tensor.series()
    assert steps.tolist() == [0, 1, 2] and values[1] == pytest.approx(0.5)


def test_an_unknown_name_gets_a_did_you_mean_and_the_list(run: tripwire.Run) -> None:
    with pytest.raises(AttributeError, match=r"has no attribute 'serie'; did you mean 'series'\?; available: .*steps"):
        run.tensor("loss").serie()
    with pytest.raises(AttributeError, match=r"'Run' object has no attribute 'tensor_name'; did you mean 'tensor_names'\?"):
        run.tensor_name()
    with pytest.raises(AttributeError, match=r"'mode_steps' \(smdebug's name\); in tripwire: run\.steps\(mode\)"):
        run.mode_steps()
    assert not hasattr(run, "_private_thing")  # (a private name: a plain AttributeError, getattr defaults work)
    assert getattr(run, "no_such_thing", 7) == 7
