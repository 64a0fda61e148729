"""Trial 25b: ``tripwire inspect`` (and ``report``) of a two-rank run whose rank 1 was SIGKILLed says
how each worker ended (the survivor's ``failed`` end marker, the killed one's missing end), not only
the dead rank."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import tripwire
from tripwire._cli import main


def _killed_rank_1(out: Path) -> None:
    """Rank 1 of a two-rank run writes 5 steps, then is killed (no end marker, its lock released)."""
    script = textwrap.dedent(f"""
        import os, signal, tripwire
        s = tripwire.Session(out_dir={str(out)!r}, save_interval=1, rank=1, world_size=2)
        for i in range(5):
            s.step("train", i, {{"loss": (1.0, "losses")}})
        s.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", script], timeout=60)


def _headline_and_ends(capsys, argv: list[str]) -> list[str]:
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()[:2]


def test_inspect_says_each_workers_end_when_one_rank_was_killed(tmp_path: Path, capsys) -> None:
    # trial 25b: "no training writes this run: worker 1 ended without closing it (...)", and nothing
    # of rank 0, which failed (gloo's "Connection reset by peer") and wrote its end marker
    out = tmp_path / "run"
    rank0 = tripwire.Session(out_dir=str(out), save_interval=1, rank=0, world_size=2)
    for i in range(5):
        rank0.step("train", i, {"loss": (1.0, "losses")})
    rank0.flush()
    _killed_rank_1(out)
    # rank 0 still writes: the killed rank is said, and that rank 0 goes on
    head, ends = _headline_and_ends(capsys, ["inspect", str(out)])
    assert "status: running" in head
    assert ends == ("worker 1 no longer writes this run: worker 0 still writes it; worker 1 ended without closing it "
                    "(killed, out of memory, a crash); what they wrote is readable"), ends
    rank0.close("failed")
    run = tripwire.open_run(out)
    assert run.status == "running" and run.abandoned_workers() == [1]  # (the documented status)
    for verb in ("inspect", "report"):
        head, ends = _headline_and_ends(capsys, [verb, str(out)])
        assert "status: running" in head
        assert ends == ("no process writes this run any more: worker 0 ended with status failed; worker 1 ended "
                        "without closing it (killed, out of memory, a crash); what they wrote is readable"), ends


def test_inspect_of_a_single_killed_worker(tmp_path: Path, capsys) -> None:
    out = tmp_path / "one"
    script = textwrap.dedent(f"""
        import os, signal, tripwire
        s = tripwire.Session(out_dir={str(out)!r}, save_interval=1)
        s.step("train", 0, {{"loss": (1.0, "losses")}})
        s.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", script], timeout=60)
    _, ends = _headline_and_ends(capsys, ["inspect", str(out)])
    assert ends == ("no process writes this run any more: worker 0 ended without closing it (killed, out of memory, "
                    "a crash); what it wrote is readable"), ends
