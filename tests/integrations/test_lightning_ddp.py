"""DDP on two CPU processes (gloo), run as a script in a subprocess: under pytest,
``strategy="ddp"`` would re-launch the pytest command line for rank 1."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

import tripwire  # noqa: E402

SCRIPT = Path(__file__).parent / "scripts" / "lightning_ddp.py"


def _run(tmp_path: Path, *args: str, results_dir: str = "results") -> dict[int, dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out, results = tmp_path / "run", tmp_path / results_dir
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), str(results), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in results.glob("rank-*.json")}


@pytest.mark.slow
def test_fault_on_one_rank_stops_every_rank_at_the_same_step(tmp_path: Path) -> None:
    # NaN in rank 1's batch at step 4 (a save step); only rank 1's loss shows it
    res = _run(tmp_path, "--nan-rank", "1", "--nan-at", "4", "--collections", "losses")
    assert sorted(res) == [0, 1]
    assert res[0]["global_step"] == res[1]["global_step"] == 5  # 4 steps per epoch, 3 epochs planned
    assert res[0]["should_stop"] and res[1]["should_stop"]
    assert res[1]["stopped_by"] == {"rule": "exploding_tensor", "step": 4, "worker": 1}
    assert res[0]["stopped_by"]["rule"] == "distributed_stop" and res[0]["stopped_by"]["step"] == 4
    # it names the rank and the rule that stopped training (it said only "another rank's rule")
    said = next(f for f in tripwire.open_run(tmp_path / "run").findings if f.rule == "distributed_stop")
    assert said.message.startswith("rank 1's rule 'exploding_tensor' (train step 4: ") and said.details["stopped_by"][0]["rank"] == 1
    run = tripwire.open_run(tmp_path / "run")
    assert run.workers == [0, 1] and run.world_size == 2
    assert run.status == "stopped"
    # the loss of every step (every_step losses); nothing else was asked for
    assert run.steps("train", worker=0) == run.steps("train", worker=1) == [0, 1, 2, 3, 4]
    # rank 1's NaN loss stopped both; the all-reduced NaN gradient made both ranks' weights NaN, so
    # the validation after the stop gives rank 0 a NaN val_loss too (eval mode, its own finding)
    assert {(f.rule, f.worker, f.mode) for f in run.findings} == {
        ("exploding_tensor", 1, "train"), ("distributed_stop", 0, "train"), ("exploding_tensor", 0, "eval")}
    # the reader merges the workers: rank 1's NaN loss and rank 0's finite one at step 4
    assert math.isfinite(run.value("loss", "raw", 4, "train", 0))
    assert math.isnan(run.value("loss", "raw", 4, "train", 1))


@pytest.mark.slow
def test_rank_zero_only_writer(tmp_path: Path) -> None:
    res = _run(tmp_path, "--writers", "0", "--epochs", "1")
    assert res[0]["global_step"] == res[1]["global_step"] == 4 and not res[0]["should_stop"]
    run = tripwire.open_run(tmp_path / "run")
    assert run.workers == [0] and run.status == "complete"
    assert run.series("gradients/net.0.weight", "l2", "train")[0].tolist() == [0, 2]
    assert run.series("loss", "raw", "train")[0].tolist() == [0, 1, 2, 3]  # every_step losses
    assert "gradients/net.0.weight" in run.tensor_names("gradients")
    assert run.steps("eval") == [2]  # 2 validation batches of 16 per rank; epoch metrics on the last


@pytest.mark.slow
def test_rank_zero_only_writer_keeps_the_other_ranks_findings(tmp_path: Path) -> None:
    """With writer ranks [0], a finding of rank 1 whose actions stop nothing (record) was logged on
    rank 1 and lost: the run is written by rank 0 alone. Rank 0 now writes it, at the fit's end (a
    NaN loss of rank 1's at train step 2) and at the test's end (rank 1's NaN test loss)."""
    for where, nan_at in (("fit", "2"), ("test", "100")):  # (100: no fault in the fit's 4 steps)
        res = _run(tmp_path / where, "--writers", "0", "--nan-rank", "1", "--nan-at", nan_at, "--fault", "value",
                   "--actions", "record", "--collections", "losses", "--epochs", "1", "--test")
        assert not res[0]["should_stop"] and not res[1]["should_stop"]
    fit, test = (tripwire.open_run(tmp_path / where / "run") for where in ("fit", "test"))
    assert fit.workers == test.workers == [0]  # (rank 0's shard only: its records; the findings of both)
    assert [(f.rule, f.mode, f.step, f.worker) for f in fit.findings] == [("exploding_tensor", "train", 2, 1)]
    assert [(f.rule, f.mode, f.worker) for f in test.findings] == [("exploding_tensor", "test", 1)]


@pytest.mark.slow
def test_each_rank_resumes_with_its_own_rule_state(tmp_path: Path) -> None:
    """The checkpoint holds rank 0's callback state alone (Lightning writes it on rank 0), and every
    rank loaded it: exploding_tensor, fired on rank 0 before the checkpoint, was silent on rank 1
    after it (a NaN loss there went unseen, nothing stopped)."""
    ckpt = tmp_path / "a.ckpt"
    _run(tmp_path, "--nan-rank", "0", "--nan-at", "2", "--fault", "value", "--actions", "record", "--max-steps", "8",
         "--epochs", "10", "--collections", "losses", "--save-ckpt", str(ckpt), results_dir="results-a")
    res = _run(tmp_path, "--nan-rank", "1", "--nan-at", "12", "--fault", "value", "--max-steps", "16",
               "--epochs", "10", "--collections", "losses", "--resume", str(ckpt), results_dir="results-b")
    assert res[1]["stopped_by"] == {"rule": "exploding_tensor", "step": 12, "worker": 1}
    assert res[0]["should_stop"] and res[0]["global_step"] == res[1]["global_step"] == 13
    found = [(f.rule, f.step, f.worker) for f in tripwire.open_run(tmp_path / "run").findings if f.mode == "train"]
    assert ("exploding_tensor", 12, 1) in found and found.count(("exploding_tensor", 2, 0)) == 1


@pytest.mark.slow
def test_a_stop_agreed_at_a_validation_end_is_at_that_evaluations_step(tmp_path: Path) -> None:
    """Trial 17f: rank 0's distributed_stop after rank 1's NaN validation loss was recorded at eval
    step 0 (no such step: eval steps count from 1); its message named the right one."""
    res = _run(tmp_path, "--nan-rank", "1", "--nan-at", "4", "--fault", "val", "--collections", "losses",
               "--epochs", "3")
    assert res[1]["stopped_by"]["rule"] == "exploding_tensor" and res[0]["stopped_by"]["rule"] == "distributed_stop"
    run = tripwire.open_run(tmp_path / "run")
    found = {f.rule: f for f in run.findings}
    rank1, rank0 = found["exploding_tensor"], found["distributed_stop"]
    assert (rank1.mode, rank1.worker) == ("eval", 1) and (rank0.mode, rank0.worker) == ("eval", 0)
    assert rank0.step == rank1.step > 0 and rank0.step in run.steps("eval", worker=0)


@pytest.mark.slow
def test_ranks_that_would_save_different_steps_are_refused_not_hung(tmp_path: Path) -> None:
    # trial 17f: save_interval 5 on rank 0 and 7 on rank 1: rank 0 waited in the stop decision's
    # collective at step 5 while rank 1 was in the gradient all-reduce of step 6, for ever
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run"), str(tmp_path / "results"),
                           "--rank1-interval", "3", "--epochs", "1"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert "under DDP every rank must save the same steps" in said, said[-3000:]
    assert "save: {'interval': 3" in said or "save: {'interval': 2" in said, said[-3000:]
    assert tripwire.open_run(tmp_path / "run").status == "failed"
