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
    assert "tripwire: stopping training at train step 6: rule 'exploding_tensor' at step 5 (train)" in said, said[-3000:]
    assert "stopping training: rule 'distributed_stop' at step 6 (train)" in said, said[-3000:]
    run = tripwire.open_run(tmp_path / "run")
    markers = run.end_markers
    assert markers[0]["status"] == markers[1]["status"] == "stopped"
    assert "exploding_tensor" in markers[1]["stop_reason"]
    assert "distributed_stop" in markers[0]["stop_reason"], markers[0]  # (it had none)
    assert "rank 1's rule 'exploding_tensor' (train step 5" in markers[0]["stop_reason"]
    inspect = subprocess.run([sys.executable, "-m", "tripwire", "inspect", str(tmp_path / "run")], env=env,
                             capture_output=True, text=True, timeout=120)
    assert "worker 0 stopped:" in inspect.stdout and "worker 1 stopped:" in inspect.stdout, inspect.stdout
