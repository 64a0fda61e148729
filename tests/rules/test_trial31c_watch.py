"""Trial 31c: ``tripwire watch`` as an operations user runs it (findings 1, 3, 4, 6).

#1: ``--stop`` beside a training that records findings itself asked the stop for the training's
warning at step 2520, read before the watch judged the records of that poll, instead of the watch's
own critical finding at step 2500 (printed after it, too). #3: SIGTERM (``timeout``, a scheduler)
ended the watch in silence. #4: a watch started beside a resumed job exited 3 at once, having read
the crashed run before the resumed writer reopened it. #6: "the 1 records missing".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire._watch import Watcher, register

LATE = f"{__name__}:_late_x"


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers())
    args = parser.parse_args(["watch", *argv])
    return args.func(args)


def _late_x(history: Any, step: int, mode: str) -> str | None:
    """A function rule: the latest ``x`` is above 5."""
    latest = history.latest("x", "raw", mode)
    return f"x {latest[1]} > 5" if latest is not None and latest[1] > 5 else None


def _step(s: tripwire.Session, i: int, loss: float, x: float):
    s._stop_checked = 0.0  # (requests are read at most once a second)
    return s.step("train", i, {"loss": (loss, "losses"), "x": (x, "metrics")})


def test_watch_stop_goes_to_the_first_finding_made_not_the_first_read(tmp_path: Path, capsys) -> None:
    """The training records a warning of its own at step 2 (actions: record, no stop); the watch's
    exploding_tensor finds the NaN loss at step 1, in the same poll. The stop request, the session's
    stopped_by and the run's stop reason name the watch's finding at step 1, printed first."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[{"name": LATE, "actions": ["record"]}])
    w = Watcher(out, {"rules": ["exploding_tensor", LATE], "actions": ["log"]}, stop=True, json_lines=True)
    _step(s, 0, 1.0, 1.0)
    s.flush()
    assert w.poll() == []
    _step(s, 1, float("nan"), 1.0)  # the watch's exploding_tensor: the training does not run it
    assert not _step(s, 2, 1.0, 9.0).stop  # the training's own _late_x: recorded, not a stop
    s.flush()
    assert [(f.rule, f.step, f.source) for f in s.findings] == [("_late_x", 2, "in-process")]
    assert [(f.rule, f.step) for f in w.poll()] == [("exploding_tensor", 1)]
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["origin"], d["rule"], d["step"]) for d in lines] == [("new", "exploding_tensor", 1),
                                                                    ("recorded_during", "_late_x", 2)]
    assert (w.stop_requested.rule, w.stop_requested.step, w.stop_requested.source) == ("exploding_tensor", 1, "watch")
    assert tripwire.open_run(out).stop_requests()[0]["finding"]["rule"] == "exploding_tensor"
    d = _step(s, 3, 1.0, 1.0)
    assert d.stop and (s.stopped_by.rule, s.stopped_by.step) == ("exploding_tensor", 1)
    s.close()
    reason = tripwire.open_run(out).stop_reasons[0]
    assert "exploding_tensor at step 1" in reason and "_late_x" not in reason


def test_watch_stop_for_a_finding_the_training_recorded_first(tmp_path: Path) -> None:
    """The other way round: the training's finding (step 1) was made before the record the watch's
    rule finds (step 2): it is the first, and ``--stop`` still asks the stop for it (the watch never
    makes a finding the run holds, so a training recording the watched rules is stopped this way)."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[{"name": LATE, "actions": ["record"]}])
    w = Watcher(out, {"rules": ["exploding_tensor", LATE], "actions": ["log"]}, stop=True, echo=lambda f: None)
    _step(s, 0, 1.0, 1.0)
    s.flush()
    assert w.poll() == []
    _step(s, 1, 1.0, 9.0)
    _step(s, 2, float("nan"), 1.0)
    s.flush()
    assert [(f.rule, f.step) for f in w.poll()] == [("exploding_tensor", 2)]
    assert (w.stop_requested.rule, w.stop_requested.step) == ("_late_x", 1)
    s.close()


# ------------------------------------------------------------------ #3 SIGTERM, #4 a resumed job
_TRAIN = """
import os, sys, time, tripwire
out, start, count, pause, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
s = tripwire.Session(out_dir=out, save_interval=1, rules=[])
for i in range(start, start + count):
    s.step("train", i, {"loss": (1.0 / (i + 1), "losses")})
    s.flush()
    time.sleep(pause)
if end == "crash":
    os._exit(0)  # (as a training killed: no end marker, its shard's lock released)
s.close()
"""


def _train(out: Path, start: int, count: int, pause: float, end: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _TRAIN, str(out), str(start), str(count), str(pause), end],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _watch(tmp_path: Path, *argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tripwire", "watch", *argv], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.parametrize("json_out", [False, True])
def test_sigterm_ends_the_watch_with_its_summary_and_exit_status_143(tmp_path: Path, json_out: bool) -> None:
    """``timeout 6 tripwire watch RUN`` beside a live training: SIGTERM ended the watch with no word,
    no summary line and no ``--json`` summary. It now says why on stderr, prints its summary and
    exits 143 (128 + SIGTERM)."""
    out = tmp_path / "run"
    trainer = _train(out, 0, 600, 0.1, "close")
    try:
        _wait_for(out / "run.json")
        watch = _watch(tmp_path, str(out), "--interval", "0.3", *(["--json"] if json_out else []))
        time.sleep(3.0)  # (the watch has read the run: it imports, opens it, polls)
        assert watch.poll() is None
        watch.send_signal(signal.SIGTERM)
        stdout, stderr = watch.communicate(timeout=120)
    finally:
        trainer.kill()
        trainer.wait(timeout=60)
    assert watch.returncode == 143, (stdout, stderr)
    assert "Traceback" not in stderr
    assert ("tripwire watch: terminated by SIGTERM (the timeout command, a scheduler, kill) before the watch ended: "
            "judged what was read by then") in stderr
    last = stdout.splitlines()[-1]
    if json_out:
        summary = json.loads(last)
        assert summary["type"] == "summary" and summary["exit_code"] == 143 and summary["status"] == "running"
        assert summary["records"]["train"] > 0 and any("SIGTERM" in n for n in summary["notes"])
    else:
        assert last.startswith(f"tripwire watch: {str(out)!r} (running), ")
        assert last.endswith("terminated by SIGTERM before the watch ended: judged what was read by then; exit status 143")


def test_sigterm_before_any_run_appeared(tmp_path: Path) -> None:
    """A watch waiting for a run that never came, ended by SIGTERM: its line says so, not
    "--timeout ran out"."""
    watch = _watch(tmp_path, str(tmp_path / "nothing"), "--interval", "0.3")
    time.sleep(2.5)
    watch.send_signal(signal.SIGTERM)
    stdout, stderr = watch.communicate(timeout=120)
    assert watch.returncode == 143, (stdout, stderr)
    assert stdout.splitlines()[-1] == (f"tripwire watch: no run at {str(tmp_path / 'nothing')!r} (terminated by "
                                       f"SIGTERM before one appeared): nothing judged; exit status 143")
    # (trial 42f: stderr said "judged what was read by then", where nothing was read)
    assert stderr.splitlines()[-1] == ("tripwire watch: terminated by SIGTERM (the timeout command, a scheduler, kill) "
                                       "before the watch ended: no run had appeared, nothing judged"), stderr


def test_a_watch_started_beside_a_resumed_job_says_how_to_wait_for_it(tmp_path: Path) -> None:
    """The run crashed; the watch starts before the resumed training reopens it: it exits 3 (as
    documented), and now says that the run had ended so before the watch began and how to wait
    (``--wait-resume``)."""
    out = tmp_path / "run"
    crashed = _train(out, 0, 5, 0.0, "crash")
    assert crashed.wait(timeout=120) == 0, crashed.stderr.read()
    watch = _watch(tmp_path, str(out), "--interval", "0.2")
    stdout, stderr = watch.communicate(timeout=120)
    assert watch.returncode == 3, (stdout, stderr)
    assert ("tripwire watch: worker 0 ended without closing the run (killed, out of memory, a crash) before this "
            "watch began: what was written is judged; a training that resumes it later is not watched: to follow a "
            "resumed (restarted) job, give --wait-resume SECONDS (wait that long for a training to reopen the run), "
            "or start the watch once the resumed training has reopened it") in stderr


def test_wait_resume_follows_the_training_that_reopens_a_crashed_run(tmp_path: Path) -> None:
    """``--wait-resume 60``: the watch waits for the resumed training (started 2 s after it), follows
    it to its end marker and exits 0, having judged the resumed steps too."""
    out = tmp_path / "run"
    crashed = _train(out, 0, 5, 0.0, "crash")
    assert crashed.wait(timeout=120) == 0, crashed.stderr.read()
    (tmp_path / "rules.yaml").write_text("rules: [exploding_tensor]\n")
    watch = _watch(tmp_path, str(out), "--interval", "0.2", "--wait-resume", "60", "--json", "--config", "rules.yaml")
    time.sleep(2.0)
    resumed = _train(out, 5, 10, 0.05, "close")
    assert resumed.wait(timeout=120) == 0, resumed.stderr.read()
    stdout, stderr = watch.communicate(timeout=120)
    assert watch.returncode == 0, (stdout, stderr)
    summary = json.loads(stdout.splitlines()[-1])
    assert summary["status"] == "complete" and summary["records"] == {"train": 15} and summary["abandoned"] == []
    assert ("tripwire watch: worker 0 ended without closing the run (killed, out of memory, a crash): waiting up to "
            "60 s (--wait-resume) for a training to reopen it (a resume)") in stderr


def test_wait_resume_that_runs_out_exits_3_and_says_so(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    crashed = _train(out, 0, 3, 0.0, "crash")
    assert crashed.wait(timeout=120) == 0, crashed.stderr.read()
    started = time.monotonic()
    assert _cli([str(out), "--interval", "0.2", "--wait-resume", "1.5"]) == 3
    assert time.monotonic() - started >= 1.5
    err = capsys.readouterr().err
    assert ("worker 0 ended without closing the run (killed, out of memory, a crash): what was written is judged; no "
            "training reopened it within --wait-resume=1.5 s") in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--wait-resume", "-1"], "--wait-resume: got -1.0; accepted: a number of seconds >= 0"),
    (["--wait-resume", "5", "--once"], "--wait-resume with --once: --once judges what is there now"),
])
def test_wait_resume_refusals(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    assert _cli([str(out), *argv]) == 2
    assert message in capsys.readouterr().err


def test_wait_resume_refused_with_once_in_python(tmp_path: Path) -> None:
    with pytest.raises(tripwire.ConfigError, match=r"wait_resume: got 5 with once=True"):
        Watcher(tmp_path / "run").watch(once=True, wait_resume=5)
    with pytest.raises(tripwire.ConfigError, match=r"wait_resume"):
        Watcher(tmp_path / "run").watch(wait_resume=-1)


def test_one_record_missing_is_singular(tmp_path: Path, capsys) -> None:
    """"the 1 records missing were not judged" (trial 31c #6)."""
    from tripwire._format import WORKERS_DIR

    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for i in range(3):
            s.step("train", i, {"loss": (1.0, "losses")})
            s.flush()  # (a record each)
    shard = out / WORKERS_DIR / "worker-00000.twr"
    data = shard.read_bytes()
    shard.write_bytes(data[:-20])  # (the last record cut short after the run ended)
    assert _cli([str(out), "--once", "--no-record"]) == 3
    err = capsys.readouterr().err
    assert "the 1 record missing was not judged" in err and "records missing" not in err
