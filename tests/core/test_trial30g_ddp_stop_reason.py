"""Trial 30g F7: under DDP, rank 0's stored stop reason named no rank (``at step 20 (train): ...``)
while rank 1's did (``(train, rank 1)``), and the live log line names both."""
from __future__ import annotations

import math
from pathlib import Path

import tripwire
from tripwire import Session


def test_every_ranks_stored_stop_reason_names_its_rank(tmp_path: Path) -> None:
    out = tmp_path / "run"
    ranks = [Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=["exploding_tensor"],
                     actions=["stop_training"]) for r in (0, 1)]
    for s in ranks:
        s.step("train", 0, {"loss": (1.0, "losses")})
        assert s.step("train", 1, {"loss": (math.nan, "losses")}).stop
    for rank, s in enumerate(ranks):
        assert s.why_stopped is not None and s.why_stopped.startswith(f"[critical] exploding_tensor at step 1 (train, rank {rank}):")
        s.close()
    reasons = tripwire.open_run(out).stop_reasons
    assert [reasons[r].split(":", 1)[0] for r in (0, 1)] == [
        "[critical] exploding_tensor at step 1 (train, rank 0)", "[critical] exploding_tensor at step 1 (train, rank 1)"]
