"""Trial 33h F1: on an ``xgboost.dask`` client (a callback that trained elsewhere), ``stopped_by`` and
``findings`` read the run back, each finding once though every worker recorded it; which worker's
copy stood for it was whichever wrote first, so ``stopped_by`` named rank 1 or rank 2 from one run to
the next while ``stop_reason`` gave rank 0's. The lowest rank's copy stands for a finding now, and
``stop_reason`` is the reason that rank wrote. (The client-side reading is driven here against a run
three Session workers wrote, in the order 2, 0, 1.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire import Session  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def leak(history: tripwire.History, step: int, mode: str) -> tripwire.Finding | None:
    if step == 2:
        return tripwire.Finding(rule="leak", step=step, mode=mode, severity="warning", message="f9 holds 95%")
    return None


def test_the_lowest_rank_stands_for_a_finding_every_worker_made(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rules = [{"name": f"{__name__}:leak", "actions": ["log", "stop_training"]}]
    for rank in (2, 0, 1):  # rank 2 writes first: it used to stand for the finding
        s = Session(out_dir=str(out), rules=rules, rank=rank, world_size=3, save_interval=1, framework="xgboost")
        for step in range(3):
            if s.step("train", step, {"train-logloss": (0.5, "metrics")}).stop:
                break
        s.close()
    run = tripwire.open_run(out)
    assert run.status == "stopped"
    assert sorted(f.worker for f in run.findings) == [0, 1, 2]
    cb = TripwireCallback(out_dir=str(out), rules=rules)
    assert [(f.rule, f.step, f.worker) for f in cb.findings] == [("leak", 2, 0)]
    assert cb.stopped_by is not None and cb.stopped_by.worker == 0
    assert cb.stop_reason is not None and "leak" in cb.stop_reason
