"""Trial 31h F6: ``repr(Session)`` was the default ``<tripwire._session.Session object at 0x...>``. It
says where the session writes, its rank in a distributed job, its rules, the steps it counted and
whether its run is open, closed or stopped."""

from __future__ import annotations

from pathlib import Path

import tripwire


def test_a_session_says_where_it_writes_its_rules_steps_and_state(tmp_path: Path) -> None:
    s = tripwire.Session(rules=["exploding_tensor"], out_dir=tmp_path / "r", actions=["stop_training"])
    assert repr(s) == f"Session({str(tmp_path / 'r')!r}, rules=['exploding_tensor'], steps={{}}, open)"
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.step("train", 1, {"loss": (float("nan"), "losses")}, summary=True)
    assert repr(s).endswith("rules=['exploding_tensor'], steps={'train': 2}, stopped)"), repr(s)
    s.close()
    quiet = tripwire.Session(write=False, rank=1, world_size=2)
    assert repr(quiet) == "Session(not written, rank=1 of 2, rules=[], steps={}, open)"
    done = tripwire.Session(out_dir=tmp_path / "d")
    done.close()
    assert repr(done).endswith(", closed)"), repr(done)
