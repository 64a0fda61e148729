"""Trial 33f M6 and L2: TensorView.value without a step; an empty path is no run and no config."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, RunNotFoundError
from tripwire._cli import main


def _make_run(path: Path) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["l2", "raw"]}, "losses": None}}) as s:
        for step in range(3):
            s.step("train", step, {"fc.weight": (np.ones(3) * step, "weights"), "loss": (1.0 / (step + 1), "losses")})
    return path


def test_value_of_a_reduction_without_a_step_names_the_call_and_the_accepted_forms(tmp_path: Path) -> None:
    run = tripwire.open_run(_make_run(tmp_path / "run"))
    loss, weight = run.tensor("loss"), run.tensor("fc.weight")
    # (it was Python's "TensorView.reduction() missing 1 required positional argument: 'step'")
    with pytest.raises(ConfigError, match=r"tensor 'loss': value\('raw'\): no step given; accepted: value\(step\) "
                                          r"\(the raw array at step\) or value\(reduction, step\).*tensor\.value\(step\)"):
        loss.value("raw")
    with pytest.raises(TypeError, match=r"value\('l2'\): no step given; accepted: value\(step\).*tensor\.value\('l2', step\)"):
        weight.value("l2")
    with pytest.raises(ConfigError, match=r"value\(reduction='l2', mode='train'\): no step given"):
        weight.value(reduction="l2", mode="train")
    with pytest.raises(TypeError, match=r"tensor 'fc\.weight': value\(\): no step given; accepted: value\(step\)"):
        weight.value()
    # the forms that name a step still read
    assert loss.value("raw", 1) == pytest.approx(0.5) and float(loss.value(2)) == pytest.approx(1 / 3)
    assert weight.value("l2", step=2) == pytest.approx(2 * np.sqrt(3)) and weight.value(step=1).tolist() == [1.0] * 3
    with pytest.raises(ConfigError, match=r"the order is \(reduction, step\)"):
        weight.value(1, "l2")


def test_an_empty_path_is_refused_as_empty_not_read_as_the_current_directory(tmp_path: Path, monkeypatch,
                                                                                capsys) -> None:
    _make_run(tmp_path / "inner")
    (tmp_path / "tripwire.yaml").write_text("collections: [losses]\n")
    monkeypatch.chdir(tmp_path)  # '.' holds a run and a config: neither is what '' names
    with pytest.raises(RunNotFoundError, match=r"^path: got '' \(an empty path, not read as the current directory\); "
                                               r"accepted: a run directory \('\.' for the current one\)$"):
        tripwire.open_run("")
    with pytest.raises(RunNotFoundError, match=r"path: got ''"):
        tripwire.Run("")
    with pytest.raises(ConfigError, match=r"^config: got '' \(an empty path, not read as the current directory\); "
                                          r"accepted: the path of a YAML file"):
        tripwire.load_config("")
    assert main(["inspect", ""]) == 2
    err = capsys.readouterr().err
    assert "path: got '' (an empty path" in err and "'.'" in err and "holds runs" not in err
    assert tripwire.open_run("inner").status == "complete"  # a real path still opens
