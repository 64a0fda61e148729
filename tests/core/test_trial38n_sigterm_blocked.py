"""Trial 38n: a SIGTERM to a DDP rank blocked in a collective (its peer stalled) was not handled until
the collective returned: Python runs a signal handler only between bytecodes, and the main thread
sat in gloo's wait. The rank outlived its SIGTERM by a minute (a deadlocked job: until torchrun's
SIGKILL, its run left ``running``). A watchdog thread now ends such a process after
``SIGTERM_GRACE`` seconds: the runs' queued records written, their end markers ``failed`` with the
signal as the reason, exit status 143."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

import tripwire  # noqa: E402

_RANK = textwrap.dedent("""
    import os, sys, time
    import torch, torch.distributed as dist
    rank, out, port = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    if rank == 1:
        time.sleep(60)  # (the stalled peer)
        sys.exit(0)
    import tripwire
    session = tripwire.Session(out_dir=out, rank=0, world_size=2, save_interval=1)
    for step in range(3):
        session.step("train", step, {"loss": (1.0, "losses")})
    print("blocking", flush=True)
    dist.all_reduce(torch.ones(1))  # (blocked: rank 1 stalls)
    print("returned", flush=True)
""")


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, gloo on loopback")
def test_sigterm_to_a_rank_blocked_in_a_collective_ends_it_and_its_run(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    port, out = _free_port(), str(tmp_path / "run")
    peer = subprocess.Popen([sys.executable, str(script), "1", out, port])
    rank0 = subprocess.Popen([sys.executable, str(script), "0", out, port], stdout=subprocess.PIPE, text=True)
    try:
        assert rank0.stdout is not None and rank0.stdout.readline().strip() == "blocking"
        time.sleep(0.5)
        began = time.monotonic()
        rank0.send_signal(signal.SIGTERM)
        status = rank0.wait(30)
        took = time.monotonic() - began
    finally:
        for p in (rank0, peer):
            p.kill()
            p.wait()
    assert status == 143
    assert took < 15, took  # (SIGTERM_GRACE, 3 s, and the writer's close; not the peer's 60 s)
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.steps() == [0, 1, 2]
    assert run.stop_reasons[0].startswith("SIGTERM: the process was asked to terminate")
    assert "the main thread was blocked" in run.stop_reasons[0]


_RAISE_THEN_TERM = textwrap.dedent("""
    import os, signal, threading, time
    import tripwire
    slow = {{"on": False}}
    def slow_rule(history, step, mode):
        if slow["on"]:
            time.sleep(2)  # (the exit handler's close runs the rules: a SIGTERM comes meanwhile)
        return None
    rule = tripwire.FunctionRule(slow_rule, requirements=[tripwire.Requirement("losses", ())])
    session = tripwire.Session(out_dir={out!r}, rules=[rule])
    for step in range(5):
        session.step("train", step, {{"loss": (1.0, "losses")}})
    slow["on"] = True
    threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGTERM)), daemon=True).start()
    raise RuntimeError("Connection closed by peer")
""")


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals")
def test_a_sigterm_while_an_exception_ends_the_process_keeps_that_exception_as_the_reason(tmp_path: Path) -> None:
    """Trial 38n: a SIGTERM that came while the exit handler closed a run an uncaught exception left open
    (a DDP launcher terminating the rank that crashed) made the signal the run's stop_reason."""
    out = str(tmp_path / "run")
    done = subprocess.run([sys.executable, "-c", _RAISE_THEN_TERM.format(out=out)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert tripwire.open_run(out).stop_reasons[0] == "RuntimeError: Connection closed by peer"
