"""Trial 26h (Lightning DDP on two CPU processes, gloo; run as a script: under pytest,
``strategy="ddp"`` would re-launch the pytest command line for rank 1): a rank stopped by another
rank's rule had no ``stop_reason`` in its end marker (``tripwire inspect`` gave a reason for the
other worker alone), and the rank whose rule fired logged "stopping training: rule ... at step 5"
where training stopped at step 6, the save step that judged step 5's NaN loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

import tripwire  # noqa: E402

SCRIPT = Path(__file__).parent / "scripts" / "lightning_ddp.py"


@pytest.mark.slow
def test_every_rank_stopped_says_why_and_the_stop_names_both_steps(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    # rank 1's loss NaN from step 5 on (not a save step: save_interval 2), its gradients finite
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run"), str(tmp_path / "results"),
                           "--nan-rank", "1", "--nan-at", "5", "--fault", "value", "--collections", "losses"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    res = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in (tmp_path / "results").glob("rank-*.json")}
    assert res[0]["global_step"] == res[1]["global_step"] == 7  # (stopped after train step 6)
    assert res[1]["stopped_by"] == {"rule": "exploding_tensor", "step": 5, "worker": 1}
    assert "tripwire: rank 1: stopping training at train step 6: rule 'exploding_tensor' at step 5 (train)" in said, \
        said[-3000:]
    assert ("tripwire: rank 0: stopping training at train step 6: rank 1's rule 'exploding_tensor' at step 5 (train)"
            in said), said[-3000:]
    run = tripwire.open_run(tmp_path / "run")
    markers = run.end_markers
    assert markers[0]["status"] == markers[1]["status"] == "stopped"
    assert "exploding_tensor" in markers[1]["stop_reason"]
    assert "distributed_stop" in markers[0]["stop_reason"], markers[0]  # (it had none)
    assert "rank 1's rule 'exploding_tensor' (train step 5" in markers[0]["stop_reason"]
    inspect = subprocess.run([sys.executable, "-m", "tripwire", "inspect", str(tmp_path / "run")], env=env,
                             capture_output=True, text=True, timeout=120)
    assert "worker 0 stopped:" in inspect.stdout and "worker 1 stopped:" in inspect.stdout, inspect.stdout


TUNER_SCRIPT = '''
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STRATEGY, JOURNAL, RUNS = sys.argv[1], sys.argv[2], sys.argv[3]


class M(L.LightningModule):  # (at module level: ddp_spawn pickles it)
    def __init__(self, lr):
        super().__init__()
        self.lr = lr
        self.net = nn.Linear(4, 1)

    def training_step(self, b, i):
        return nn.functional.mse_loss(self.net(b[0]).squeeze(-1), b[1])

    def validation_step(self, b, i):
        self.log("val_loss", nn.functional.mse_loss(self.net(b[0]).squeeze(-1), b[1]), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def train(params, trial):
    from tripwire.integrations.lightning import TripwireCallback

    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x[:, 0]), batch_size=16)
    cb = TripwireCallback(trial=trial, trial_metric="val_loss", out_dir=f"{RUNS}/trial-{trial.number}")
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=STRATEGY, max_epochs=trial.max_resource, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[cb])
    trainer.fit(M(params["lr"]), data, data)


if __name__ == "__main__":
    from tripwire.tune import Continuous, Hyperband, Tuner

    tuner = Tuner(train, space={"lr": Continuous(0.001, 0.1, scale="log")}, objective="val_loss", mode="min",
                  strategy=Hyperband(min_resource=1, max_resource=3, reduction_factor=3), max_jobs=6,
                  max_parallel_jobs=1, seed=0, journal=JOURNAL, trial_timeout=120)
    result = tuner.fit()
    for t in result.trials:
        print("TRIAL", t.number, t.status, t.reason, (t.error or "").strip().splitlines()[-1])
    print("SUMMARY", result.summary().replace("\\n", " | "))
'''


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_a_tuning_trial_with_a_multi_process_strategy_is_refused_and_fails_fast(tmp_path: Path, strategy: str) -> None:
    """Trial 26h finding 3: with strategy="ddp" Lightning's launcher ran the tuner's script again as
    rank 1, up to a second Tuner.fit() (stopped by the journal lock alone); the trial failed as
    "worker died with exit code -9", nothing named DDP, and every trial of the job did the same. Now
    the callback refuses the strategy before the ranks set up, with a ConfigError naming it and
    devices=1, and the job ends on fail fast."""
    script = tmp_path / "tune_ddp.py"
    script.write_text(TUNER_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, str(script), strategy, str(tmp_path / "j.db"), str(tmp_path / "runs")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    trials = [line for line in proc.stdout.splitlines() if line.startswith("TRIAL")]
    assert len(trials) == 2, said[-3000:]  # (fail fast after the second: the same error, every trial repeats it)
    for line in trials:
        assert (f"failed failed (error) tripwire._errors.ConfigError: TripwireCallback(trial=...): the trial's Trainer trains "
                f"in 2 processes (strategy '{strategy}'), and a tuning trial trains in one") in line, line
        assert "accepted: Trainer(devices=1) in the trial function" in line
    assert "fail_fast: 2 trials failed with the same error" in proc.stdout
    assert "JournalLockedError" not in said and "exit code -9" not in said, said[-3000:]
