"""Trial 40b: a fresh user's findings in the core API (Session.step, the config loader's rule names,
the run reader)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire


@pytest.mark.parametrize("bad", [
    {"loss": 1.0},                     # the kind left out
    {"loss": (1.0, "lossess")},        # a misspelled kind
    {"loss": ("x", "losses")},         # no value
    {3: (1.0, "losses")},              # a name that is no string
    {"acc": (0.5, "metrics"), "loss": 1.0},  # a good entry before a bad one
])
def test_a_refused_step_call_leaves_no_step_behind(tmp_path: Path, bad: dict, caplog: pytest.LogCaptureFixture) -> None:
    # F1: step() began the step, then refused an entry: the corrected call warned of an open step and
    # of a repeated one, and the step was stored twice
    s = tripwire.Session(out_dir=tmp_path / "r", save_interval=1)
    with pytest.raises(tripwire.ConfigError, match=r"^(step|add)"):
        s.step("train", 1, bad)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s.step("train", 1, {"loss": (0.9, "losses")})
    s.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    steps, values = tripwire.open_run(tmp_path / "r").series("loss")
    assert steps.tolist() == [1] and values.tolist() == [0.9]
    assert s.mode_steps["train"] == 2 and s.global_step == 1


def test_the_demo_refuses_an_out_dir_that_holds_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # F2: --out-dir of a Keras run had the demo's Lightning training appended to it (a WARNING only)
    pytest.importorskip("lightning", reason="tripwire demo runs Lightning")
    pytest.importorskip("sklearn", reason="tripwire demo trains on scikit-learn's digits")
    from tripwire._cli import main

    out = tmp_path / "keras-run"
    s = tripwire.Session(out_dir=out, framework="keras", save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.close()
    before = sorted(p.name for p in out.rglob("*"))
    assert main(["demo", "--out-dir", str(out), "--max-epochs", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (f"tripwire demo: error: --out-dir: got {str(out)!r}, which holds a run already; "
                                    f"accepted: a new or empty directory (the demo writes a run of its own; leave "
                                    f"--out-dir out for a new tripwire-runs/demo-<time>)")
    assert sorted(p.name for p in out.rglob("*")) == before  # (nothing written there)


def test_a_read_in_a_mode_the_tensor_has_no_value_in_names_its_modes(tmp_path: Path) -> None:
    # F4: value("raw", 10, mode="train") of a metric recorded in eval only said "steps with one: []"
    s = tripwire.Session(out_dir=tmp_path / "r", save_interval=1)
    for step in range(3):
        s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
        s.step("eval", step, {"val_loss": (2.0, "losses")})
    s.close()
    run = tripwire.open_run(tmp_path / "r")
    with pytest.raises(tripwire.TensorNotFoundError, match=r"has no 'raw' at step 1 in mode 'train' \(worker 0\); "
                       r"steps with one: \[\]; it has no value in mode 'train' at all: its values are in mode 'eval' "
                       r"\(pass mode='eval'\)$"):
        run.tensor("val_loss").value("raw", 1, mode="train")
    with pytest.raises(tripwire.TensorNotFoundError, match=r"its values are in mode 'eval'"):
        run.tensor("val_loss").reduction_values(1, mode="train")
    assert run.tensor("val_loss").value("raw", 1, mode="eval") == 2.0
    # (a step the tensor lacks in a mode it has values in: no such hint)
    with pytest.raises(tripwire.TensorNotFoundError) as err:
        run.tensor("loss").value("raw", 7, mode="train")
    assert "at all" not in str(err.value)


def test_numpy_integer_steps_leave_plain_ints_in_the_state(tmp_path: Path) -> None:
    # trial 40e F1: a numpy step was kept as np.int64 in mode_steps, and state_dict() held it: a checkpoint
    # that torch.load(weights_only=True) refuses, and json.dumps too
    import json

    import numpy as np

    s = tripwire.Session(out_dir=tmp_path / "r", save_interval=5)
    for step in np.arange(12):
        if s.quiet_until("train", step) > step:
            s.quiet_step("train", step, [("loss", np.float32(1.0), "losses")])
        else:
            s.step("train", step, {"loss": (np.float32(1.0), "losses")})
    s.step("eval", np.int64(3), {"val_loss": (2.0, "losses")})
    state = s.state_dict()
    s.close()
    assert all(type(v) is int for v in state["mode_steps"].values()), state["mode_steps"]
    assert state["mode_steps"]["train"] == 12 and state["mode_steps"]["eval"] == 4
    json.dumps(state["mode_steps"])


def test_plot_of_a_mode_without_values_names_its_one_worker(tmp_path: Path) -> None:
    # trial 40e F4: "(workers 0)"
    pytest.importorskip("matplotlib")
    s = tripwire.Session(out_dir=tmp_path / "r", save_interval=1)
    for step in range(3):
        s.step("train", step, {"loss": (1.0, "losses")})
    s.close()
    with pytest.raises(tripwire.TensorNotFoundError, match=r"has no 'raw' values in mode 'eval' \(worker 0\); modes "
                                                           r"with values: train$"):
        tripwire.plot(tripwire.open_run(tmp_path / "r"), "loss", mode="eval")
