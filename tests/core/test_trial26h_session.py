"""Trial 26h (core/_session.py): a DDP rank that ``writer.ranks`` leaves out, resumed from rank 0's
checkpoint state, rebuilt its rule state from no findings at all (not even its own
``findings/rank-0000N.jsonl``), so a rule that had fired on it before the checkpoint fired again."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tripwire
from tripwire import Session

RULES = [{"name": "exploding_tensor", "actions": ["log", "record"]}]


def _ranks(out: Path, **kw: Any) -> tuple[Session, Session]:
    return tuple(Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=RULES, **kw)  # type: ignore[return-value]
                 for r in (0, 1))


def _steps(sessions: tuple[Session, Session], steps: range, nan_on_1: set[int]) -> None:
    for step in steps:
        for s in sessions:
            loss = math.nan if s.rank == 1 and step in nan_on_1 else 1.0 / (step + 1)
            s.step("train", step, {"loss": (loss, "losses")})


def _rank1_findings(out: Path) -> list[tuple[str, int]]:
    return [(f.rule, f.step) for f in tripwire.open_run(out).findings if f.worker == 1]


def test_a_rank_that_writes_no_records_keeps_what_fired_on_it_across_a_resume(tmp_path: Path) -> None:
    for variant, writer in (("rank0", {"ranks": [0]}), ("all", {"ranks": "all"})):
        out = tmp_path / variant
        first = _ranks(out, writer=writer)
        _steps(first, range(0, 6), nan_on_1={3})
        state = first[0].state_dict()  # (Lightning saves rank 0's callback state; every rank loads it)
        _steps(first, range(6, 9), nan_on_1=set())
        for s in first:
            s.close()
        resumed = _ranks(out, writer=writer)
        for s in resumed:
            s.load_state_dict(state)
        _steps(resumed, range(6, 12), nan_on_1={10})  # the fault again, after the checkpoint
        for s in resumed:
            s.close()
        assert [f.rule for f in resumed[1].findings] == [], (variant, resumed[1].findings)
        assert _rank1_findings(out) == [("exploding_tensor", 3)], variant
