"""Trial 31c / 31b: reading a run as a user does (31b F1, 31b F3's inspect note, 31c #2, #6).

31b F1: a tensor only rank 1 logged (a DDP rank's NaN ``aux_loss``, which its finding names) read
as empty with the default readers (``run.series(name)``, ``run.tensor(name).steps()``) and showed
a blank last value in ``tripwire inspect`` (None in ``--json``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import TensorNotFoundError, open_run
from tripwire._cli import main


def _ddp_run(out: Path) -> None:
    """Two ranks: both log ``loss``; only rank 1 logs ``aux_loss`` (NaN at step 3) and an eval
    ``val_aux``."""
    for rank in range(2):
        with tripwire.Session({"out_dir": str(out), "save": {"interval": 1}}, rank=rank, world_size=2,
                              rules=[]) as s:
            for step in range(4):
                values = {"loss": (1.0 + rank + step, "losses")}
                if rank == 1:
                    values["aux_loss"] = (float("nan") if step == 3 else 0.5, "losses")
                s.step("train", step, values)
            if rank == 1:
                s.step("eval", 0, {"val_aux": (0.25, "losses")})


def test_a_tensor_only_another_worker_logged_is_not_read_as_empty(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _ddp_run(out)
    run = open_run(out)
    hint = r"tensor 'aux_loss' has no value from worker 0, which worker=None reads .*worker 1 holds it: pass worker=1"
    with pytest.raises(TensorNotFoundError, match=hint):
        run.series("aux_loss")
    with pytest.raises(TensorNotFoundError, match=hint):
        run.tensor("aux_loss").steps()
    with pytest.raises(TensorNotFoundError, match=hint):
        run.value("aux_loss", "raw", 3)
    with pytest.raises(TensorNotFoundError, match=hint):
        run.latest("aux_loss")
    with pytest.raises(TensorNotFoundError, match=hint):
        run.tensor("aux_loss").series()
    with pytest.raises(TensorNotFoundError, match=hint):
        run.tensor("aux_loss").dataframe()
    with pytest.raises(TensorNotFoundError, match=r"'val_aux' has no value from worker 0.*pass worker=1"):
        run.series("val_aux")
    # the worker given: read as before (rank 0's is empty, as documented)
    steps, values = run.series("aux_loss", worker=1)
    assert steps.tolist() == [0, 1, 2, 3] and math.isnan(values[-1])
    assert run.tensor("aux_loss").steps(worker=1) == [0, 1, 2, 3]
    assert run.series("aux_loss", worker=0)[0].tolist() == []
    assert run.series("val_aux", worker=1)[1].tolist() == [0.25]
    # a tensor rank 0 holds: rank 0's, as before
    assert run.series("loss")[1].tolist() == [1.0, 2.0, 3.0, 4.0]
    # a mode rank 0 holds no value of, where rank 1 does: named too
    with pytest.raises(TensorNotFoundError, match=r"'aux_loss' has no value in mode 'train' from worker 0"):
        run.series("aux_loss", "raw", "train")
    # a tensor nobody holds in a mode: empty, as before
    assert run.series("loss", "raw", "eval")[0].tolist() == []


def test_inspect_shows_the_last_value_of_the_worker_that_holds_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    _ddp_run(out)
    assert main(["inspect", str(out), "--json", "--tensors"]) == 0
    data = json.loads(capsys.readouterr().out)
    last = {t["name"]: t["last"] for t in data["tensors"]}
    assert last["aux_loss"] == {"kind": "reduction", "reduction": "raw", "value": "NaN", "step": 3, "mode": "train",
                                "worker": 1}
    assert last["val_aux"]["worker"] == 1 and last["val_aux"]["value"] == 0.25
    assert last["loss"]["worker"] == 0 and last["loss"]["value"] == 4.0
    assert main(["inspect", str(out), "--tensors", "--width", "200"]) == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip().startswith(("aux_loss", "val_aux",
                                                                                            "loss "))}
    assert rows["aux_loss"].rstrip().endswith("raw=nan @ 3 (worker 1)")
    assert rows["val_aux"].rstrip().endswith("raw=0.25 @ 0 (eval, worker 1)")
    assert rows["loss"].rstrip().endswith("raw=4 @ 3")


def _resumed_run(out: Path) -> None:
    """Steps 0..5 (loss = step), checkpoint after step 2; the resume writes steps 3..7 again
    (loss = 100 + step)."""
    first = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    for step in range(6):
        first.step("train", step, {"loss": (float(step), "losses"), "acc": (0.5, "metrics")})
        if step == 2:
            state = first.state_dict()
    first.close()
    second = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    second.load_state_dict(state)
    for step in range(3, 8):
        second.step("train", step, {"loss": (100.0 + step, "losses"), "acc": (0.9, "metrics")})
    second.close()


def test_dataframe_tells_the_records_a_resume_went_back_over(tmp_path: Path) -> None:
    """31c #2: ``run.dataframe()`` of a resumed run held the old and the resumed record of each
    step run again, with no column to tell them apart: a pivot averaged the stale value with the
    current one. ``superseded`` is True for the old ones, the columns before it unchanged."""
    out = tmp_path / "run"
    _resumed_run(out)
    run = open_run(out)
    df = run.dataframe()
    assert list(df.columns) == ["step", "mode", "worker", "tensor", "reduction", "value", "superseded"]
    assert df["superseded"].dtype == bool
    loss = df[df.tensor == "loss"]
    assert loss[["step", "value", "superseded"]].values.tolist() == [
        [0, 0.0, False], [1, 1.0, False], [2, 2.0, False], [3, 3.0, True], [4, 4.0, True], [5, 5.0, True],
        [3, 103.0, False], [4, 104.0, False], [5, 105.0, False], [6, 106.0, False], [7, 107.0, False]]
    current = df[~df.superseded]
    assert not current.duplicated(["step", "mode", "worker", "tensor", "reduction"]).any()
    pivot = current.pivot_table(index="step", columns="tensor", values="value", observed=True)
    for step in range(8):
        assert pivot.loc[step, "loss"] == run.value("loss", "raw", step)
    assert (df[df.tensor == "acc"]["superseded"] == loss["superseded"].values).all()


def test_dataframe_of_a_run_written_once_supersedes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _ddp_run(out)
    df = open_run(out).dataframe()
    assert df.columns[-1] == "superseded" and not df["superseded"].any() and len(df) == 4 + 8 + 1


_CRASH_INSIDE_A_STEP = """
import os, pickle, sys, tripwire
out, state_file = sys.argv[1], sys.argv[2]
s = tripwire.Session(out_dir=out, save_interval=1, rules=[])
for step in range(4):
    s.step("train", step, {"loss": (float(step), "losses"), "acc": (0.5, "metrics")})
    if step == 2:
        with open(state_file, "wb") as f:
            pickle.dump(s.state_dict(), f)
s.step("train", 4, {"acc": (0.5, "metrics")})  # (step 4: the crash came before its loss was written)
s.flush()
os._exit(0)
"""


def test_inspect_says_the_interrupted_step_may_hold_some_tensors_only(tmp_path: Path, capsys) -> None:
    """31b F3: inspect's note on the steps a resume went back over said "series() returns every
    record": for the step the crash interrupted, a tensor it lacks is there once. It names that
    step now (as the resume's WARNING does), and the dataframe's superseded column."""
    import pickle
    import subprocess
    import sys

    out, state_file = tmp_path / "run", tmp_path / "state.pkl"
    subprocess.run([sys.executable, "-c", _CRASH_INSIDE_A_STEP, str(out), str(state_file)], check=True, timeout=120)
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    s.load_state_dict(pickle.loads(state_file.read_bytes()))
    for step in range(3, 6):
        s.step("train", step, {"loss": (100.0 + step, "losses"), "acc": (0.9, "metrics")})
    s.close()
    run = open_run(out)
    assert run.series("loss")[0].tolist() == [0, 1, 2, 3, 3, 4, 5]  # step 4's loss once: the resumed one
    assert main(["inspect", str(out), "--width", "400"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("worker 0: a later training or a resume went back over (started again at or before) the records of train "
            "steps 3-4 (2 steps): series() returns every record, value() the last written; train step 4, the last "
            "step the earlier training wrote, lacks loss, which the later record of that step holds (that training was "
            "cut off inside the step, a crash say, or saved other tensors there): it holds that step once, the later "
            "record; run.dataframe()'s superseded column marks the records gone back over") in text
    assert main(["inspect", str(out), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("train step 4, the last step the earlier training wrote, lacks loss, which" in n for n in notes)
    df = run.dataframe()
    assert df[(df.tensor == "loss") & df.superseded].step.tolist() == [3]
    assert df[(df.tensor == "acc") & df.superseded].step.tolist() == [3, 4]


def test_inspect_status_of_a_run_whose_writer_is_gone(tmp_path: Path, capsys) -> None:
    """31c #6: ``status: running`` for a run whose only writer was killed read as a live job: the
    status line says that no process writes it any more (the value itself stays ``running``)."""
    import subprocess
    import sys

    out, state_file = tmp_path / "run", tmp_path / "state.pkl"
    subprocess.run([sys.executable, "-c", _CRASH_INSIDE_A_STEP, str(out), str(state_file)], check=True, timeout=120)
    assert main(["inspect", str(out), "--width", "300"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "status: running (but no process writes it any more: see below)" in head
    assert main(["inspect", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "running" and data["abandoned_workers"] == [0]


def test_tensor_names_of_a_mode_lists_what_any_worker_logged(tmp_path: Path) -> None:
    """Trial 38j (session 41): ``tensor_names(mode=...)`` with ``worker=None`` looked at worker 0 only,
    so ``aux_loss`` (rank 1's) was missing from it while ``tensor_names()`` listed it."""
    out = tmp_path / "run"
    _ddp_run(out)
    run = open_run(out)
    assert "aux_loss" in run.tensor_names()
    assert run.tensor_names(mode="train") == ["aux_loss", "loss"]
    assert run.tensor_names(mode="eval") == ["val_aux"]
    assert run.tensor_names(step=3, mode="train") == ["aux_loss", "loss"]
    # a worker given: that worker's, as before
    assert run.tensor_names(mode="train", worker=0) == ["loss"]
    assert run.tensor_names(mode="eval", worker=0) == []
    assert run.tensor_names(mode="train", worker=1) == ["aux_loss", "loss"]


def test_tensor_names_of_a_worker_without_a_mode(tmp_path: Path) -> None:
    """Trial 41j: ``tensor_names(worker=1)`` without a mode listed every worker's tensors."""
    out = tmp_path / "run"
    _ddp_run(out)
    run = open_run(out)
    assert run.tensor_names(worker=0) == ["loss"]
    assert run.tensor_names(worker=1) == ["aux_loss", "loss", "val_aux"]
    assert run.tensor_names() == ["aux_loss", "loss", "val_aux"]
