"""Trial 30b: docs/architecture.md's hand-written DDP recipe (one ``tripwire.Session`` per rank,
``torchrun`` with two CPU processes, gloo), run as written.

- F2: a rank stopped by another rank's finding recorded no reason (``stopped`` with no
  ``stop_reason``; with ``writer.ranks: [0]`` the run said nowhere why): the recipe tells it
  ``session.stopped_by_rank(...)``, which records a ``distributed_stop`` as the Lightning callback does.
- F3: the stop line of each rank names it (``tripwire: rank 1: stopping training: ...``).
- F4: the gradients a loop offers after ``backward()`` are the all-reduced ones, the same on every rank.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tripwire  # noqa: E402

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import torch, torch.distributed as dist, torch.nn as nn, torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    import tripwire

    OUT, RANKS, NAN_AT = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)  # (each rank its own batches: local gradients differ)
    X, Y = torch.randn(80, 8, generator=g), torch.randint(0, 3, (80,), generator=g)
    session = tripwire.Session(out_dir=OUT, rank=rank, world_size=world, save_interval=1, writer={"ranks": RANKS},
                               collections=["losses", "gradients"], rules=["exploding_tensor"],
                               actions=["log", "stop_training"])
    local = {}
    for step in range(10):
        x, y = X[step * 8:(step + 1) * 8], Y[step * 8:(step + 1) * 8]
        loss = F.cross_entropy(ddp_model(x), y)
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces (averages) the gradients here
        offered = loss.detach() * float("nan") if rank == 1 and step == NAN_AT else loss.detach()
        plan = session.begin_step("train", step)
        plan.add("loss", offered, "losses")
        if plan.wants("gradients"):
            for name, p in model.named_parameters():
                plan.add(f"gradients/{name}", p.grad, "gradients")
        decision = session.end_step()
        optimizer.step()
        # the recipe: any rank's stop stops every rank, each told whose stop it is
        who = torch.tensor(rank if decision.stop else world)
        dist.all_reduce(who, op=dist.ReduceOp.MIN)
        if who.item() < world:
            stoppers = [None] * world
            dist.all_gather_object(stoppers, decision.stopped_by)
            session.stopped_by_rank(int(who.item()), stoppers[int(who.item())])
            break
    session.close()
    print(f"rank {rank}: stopped at step {step}, stopped_by={session.stopped_by.rule}", flush=True)
    dist.destroy_process_group()
''')


def _torchrun(tmp_path: Path, out: Path, ranks: str, nan_at: int) -> str:
    script = tmp_path / "ddp_recipe.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(script), str(out), ranks, str(nan_at)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-4000:]
    return said


@pytest.mark.slow
def test_the_ddp_recipe_says_why_every_rank_stopped_and_names_the_ranks(tmp_path: Path) -> None:
    out = tmp_path / "run"
    said = _torchrun(tmp_path, out, '"all"', nan_at=5)
    assert "rank 0: stopped at step 5, stopped_by=distributed_stop" in said, said[-4000:]
    assert "rank 1: stopped at step 5, stopped_by=exploding_tensor" in said, said[-4000:]
    assert "tripwire: rank 1: stopping training: rule 'exploding_tensor' at step 5 (train)" in said, said[-4000:]
    assert ("tripwire: rank 0: stopping training: rank 1's rule 'exploding_tensor' at step 5 (train)"
            in said), said[-4000:]
    assert "tripwire: stopping training" not in said  # (each rank's line names it)
    run = tripwire.open_run(out)
    assert run.status == "stopped"
    reasons = run.stop_reasons
    assert reasons[0].startswith("[warning] distributed_stop at step 5 (train, rank 0): rank 1's rule 'exploding_tensor' "
                                 "(train step 5: "), reasons
    assert reasons[1].startswith("[critical] exploding_tensor at step 5 (train, rank 1)"), reasons
    # F4: the gradients offered after backward are the averaged ones: the same on both ranks
    name = "gradients/0.weight"
    steps0, l2_0 = run.series(name, "l2", worker=0)
    steps1, l2_1 = run.series(name, "l2", worker=1)
    assert list(steps0) == list(steps1) and len(steps0) >= 5
    assert list(l2_0) == list(l2_1)


@pytest.mark.slow
def test_the_ddp_recipe_with_rank_0_writing_alone_says_why_it_stopped(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _torchrun(tmp_path, out, "[0]", nan_at=3)
    run = tripwire.open_run(out)
    assert run.workers == [0] and run.status == "stopped"
    # (it was {}: the finding was in findings/rank-00001.jsonl alone)
    assert list(run.stop_reasons) == [0]
    assert "rank 1's rule 'exploding_tensor' (train step 3: " in run.stop_reasons[0]
    assert sorted((f.rule, f.worker) for f in run.findings) == [("distributed_stop", 0), ("exploding_tensor", 1)]
