"""Stop requests (``control/stop.json``) apply to the trainings running when they were made, and
``tripwire watch``'s exit status and refusals (trial 15a, findings 1, 2, 4, 5)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tripwire
from tripwire import Finding
from tripwire._run import read_stop_requests
from tripwire._watch import Watcher, register


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers())
    args = parser.parse_args(["watch", *argv])
    return args.func(args)


def _step(s: tripwire.Session, i: int, loss: float = 1.0):
    s._stop_checked = 0.0  # (requests are read at most once a second)
    return s.step("train", i, {"loss": (loss, "losses")})


def _old_finding(step: int = 60) -> Finding:
    return Finding("exploding_tensor", step, "train", "loss holds the value nan", severity="critical", source="watch")


def _nan_run(out: Path) -> None:
    """A finished training with a NaN at step 3 and no rules of its own."""
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for i in range(6):
            s.step("train", i, {"loss": (float("nan") if i >= 3 else 1.0, "losses")})


STOP_CFG = {"rules": [{"name": "exploding_tensor", "actions": ["stop_training"]}]}


def test_a_stop_request_of_an_earlier_training_does_not_stop_the_next_one(tmp_path: Path, caplog) -> None:
    """A request made while one training ran stayed in the out_dir for ever: the next training
    there (a resume, a second fit) stopped at its first step for the earlier one's finding."""
    out = tmp_path / "run"
    first = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    _step(first, 0)
    tripwire.request_stop(out, _old_finding())  # made while the first training runs: it applies to it
    [request] = read_stop_requests(out)
    assert request["sessions"] == {"0": first.writer._meta["started"]} and request["requested"] <= time.time()
    assert request["run_id"] == tripwire.open_run(out).run_id
    first.close()  # (it ended before it read the request)
    second = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])  # e.g. resumed from a checkpoint
    with caplog.at_level(logging.INFO, logger="tripwire"):
        for i in range(1, 4):
            assert not _step(second, i).stop
    said = [r.getMessage() for r in caplog.records if "stop request" in r.getMessage()]
    assert len(said) == 1 and "ignoring the stop request" in said[0] and "'exploding_tensor' at step 60" in said[0]
    assert second.stopped_by is None and second.findings == []
    # a request made while the second training runs stops it
    tripwire.request_stop(out, _old_finding(2))
    d = _step(second, 4)
    assert d.stop and second.stopped_by.step == 2
    second.close()
    assert tripwire.open_run(out).status == "stopped"


def test_a_reopened_session_ignores_a_request_made_while_it_was_closed(tmp_path: Path) -> None:
    """A second fit through one callback (Session.reopen) is a new training: a request made after
    the first ended does not stop it; one made after it reopened does, although the first fit was
    stopped by one."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    _step(s, 0)
    tripwire.request_stop(out, _old_finding(0))
    assert _step(s, 1).stop
    s.close()
    tripwire.request_stop(out, _old_finding(1))  # no training runs now
    assert "sessions" not in read_stop_requests(out)[0]  # (worker 0 has ended)
    s.reopen()
    assert not _step(s, 2).stop
    tripwire.request_stop(out, _old_finding(2))
    d = _step(s, 3)
    assert d.stop and d.stopped_by.step == 2
    s.close()


def test_a_request_names_the_sessions_it_is_for(tmp_path: Path) -> None:
    """The sessions a request names decide, not the clocks (a watch on another host, its clock
    ahead or behind the training's); a request without them (written by hand, or by an older
    tripwire: no time either, its file's modification time stands for it) is judged by time."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    _step(s, 0)
    started = s.writer._meta["started"]
    stop = out / "control" / "stop.json"
    finding = _old_finding().to_dict()
    stop.write_text(json.dumps({"finding": finding, "requested": started + 3600, "sessions": {"0": started - 5}}))
    assert not _step(s, 1).stop  # for an earlier session of worker 0 (this clock is behind the watch's)
    finding["step"] = 61
    stop.write_text(json.dumps({"finding": finding, "requested": started - 3600, "sessions": {"0": started}}))
    assert _step(s, 2).stop  # for this session (this clock is ahead of the watch's)
    s.close()

    legacy = tmp_path / "legacy"
    (legacy / "control").mkdir(parents=True)
    (legacy / "control" / "stop.json").write_text(json.dumps({"finding": _old_finding().to_dict()}))
    os.utime(legacy / "control" / "stop.json", (time.time() - 60, time.time() - 60))
    assert read_stop_requests(legacy)[0]["requested"] == pytest.approx(time.time() - 60, abs=5)
    s = tripwire.Session(out_dir=str(legacy), save_interval=1, rules=[])
    assert not _step(s, 0).stop  # older than this session: stale
    finding["step"] = 62
    (legacy / "control" / "stop.json").write_text(json.dumps({"finding": finding}))  # written while it runs
    assert _step(s, 1).stop
    s.close()


def test_a_damaged_stop_request_stops_nothing_and_is_named_once(tmp_path: Path, caplog) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    (out / "control" / "stop.json").write_text('{"finding": ')
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert not _step(s, 0).stop and not _step(s, 1).stop
    said = [r.getMessage() for r in caplog.records if "stop request" in r.getMessage()]
    assert len(said) == 1 and "cannot be read" in said[0] and "not valid JSON" in said[0]
    s.close()


def test_watch_asks_no_stop_of_a_run_whose_training_ended(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``watch --once`` over a finished run wrote control/stop.json, which stopped the next training
    in that out_dir at its first step. It says that nothing runs, and still exits 1."""
    out = tmp_path / "run"
    _nan_run(out)
    cfg = tmp_path / "stop.yaml"
    cfg.write_text("rules: [default]\nactions: [log, stop_training]\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 1
    printed = capsys.readouterr()
    assert printed.out.startswith("[critical] exploding_tensor at step 3 (train)")
    assert (f"tripwire watch: no training is running in {str(out)!r} (every worker has ended): nothing to stop "
            "for 'exploding_tensor' at step 3 (train)") in printed.err
    assert not (out / "control" / "stop.json").exists()
    w = Watcher(tmp_path / "run", STOP_CFG, stop=True, echo=lambda f: None)
    w.watch(once=True)
    assert w.stop_requested is None and w.earlier[0].step == 3  # (recorded by the watch before)
    # the next training in that out_dir runs to its end
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        assert not any(_step(s, i).stop for i in range(6, 9))
    assert tripwire.open_run(out).status == "complete"


def test_watch_asks_no_stop_of_a_run_whose_training_was_killed(tmp_path: Path) -> None:
    """A worker that ended without closing the run (killed: no end marker, no lock) runs no more."""
    out = tmp_path / "run"
    train = ("import os, tripwire\n"
             f"s = tripwire.Session(out_dir={str(out)!r}, save_interval=1, rules=[])\n"
             "for i in range(5):\n"
             "    s.step('train', i, {'loss': (float('nan') if i >= 3 else 1.0, 'losses')})\n"
             "s.flush()\n"
             "os._exit(0)  # (as a training killed: no end marker, its shard's lock released)\n")
    subprocess.run([sys.executable, "-c", train], check=True, timeout=120)
    w = Watcher(out, STOP_CFG, echo=lambda f: None)
    assert [f.step for f in w.watch(once=True)] == [3]
    assert w.stop_requested is None and w.stop_skipped is w.findings[0]
    assert not (out / "control" / "stop.json").exists()


def test_watch_stop_for_a_finding_the_training_recorded_adds_no_copy(tmp_path: Path) -> None:
    """``watch --stop`` beside a training that records its own findings: the request for one sent
    it back to the session, which appended it a second time (end marker: 2 findings, the run 1)."""
    out = tmp_path / "run"
    rules = [{"name": "exploding_tensor", "actions": ["record"]}]
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=rules)
    w = Watcher(out, stop=True, echo=lambda f: None)
    assert not _step(s, 0).stop
    s.flush()
    assert w.poll() == [] and w.earlier == []
    assert not _step(s, 1, float("nan")).stop  # recorded, not stopped (its action is record)
    s.flush()
    assert w.poll() == [] and [f.step for f in w.recorded] == [1]
    assert read_stop_requests(out)[0]["finding"]["source"] == "in-process"
    d = _step(s, 2)
    assert d.stop and len(s.findings) == 1 and s.stopped_by is s.findings[0] and d.stopped_by is s.findings[0]
    s.close()
    end = json.loads((out / "workers" / "worker-00000.end.json").read_text())
    assert end["status"] == "stopped" and end["findings"] == 1 == len(tripwire.open_run(out).findings)


def test_watch_exits_3_when_a_watched_rule_had_nothing_to_read(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Every rule watched read nothing (misspelled losses, collections the run lacks), and watch
    exited 0, "no finding": a CI gate passed a run that no rule judged."""
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for i in range(5):
            s.step("train", i, {"loss": (1.0 / (1 + i), "losses")})
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules:\n  - {name: loss_not_decreasing, loss: lsos}\n  - dead_relu\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 3
    err = capsys.readouterr().err
    assert "loss='lsos' matches no loss or metric of this run; did you mean 'loss'?" in err
    assert "rule 'dead_relu' had nothing to read: no tensor of the 'relu_outputs' collection was captured" in err
    assert err.endswith("tripwire watch: no finding, but not everything was judged: rules 'dead_relu', "
                        "'loss_not_decreasing' judged nothing (said above)\n")
    assert Watcher(out, cfg).unjudged() == ["dead_relu", "loss_not_decreasing"]
    cfg.write_text("rules:\n  - {name: loss_not_decreasing, loss: loss}\n")
    assert _cli([str(out), "--config", str(cfg), "--once"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("once", [True, False])
def test_watch_refuses_a_url_or_a_file_as_open_run_does(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        once: bool) -> None:
    """``watch --once s3://x/y`` said "the directory does not exist", and ``watch --once FILE``
    "run.json is missing" (without --once it waited for ever for the file to become a run)."""
    a_file = tmp_path / "train.py"
    a_file.write_text("print()\n")
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    for path in ("s3://x/y", str(a_file), str(tmp_path / "missing")) + ((str(not_a_run),) if once else ()):
        with pytest.raises(tripwire.RunNotFoundError) as expected:
            tripwire.open_run(path)
        argv = [path, "--once"] if once else [path, "--timeout", "0", "--interval", "0.01"]
        rc = _cli(argv)
        err = capsys.readouterr().err
        if not once and path == str(tmp_path / "missing"):
            assert rc == 3 and "waiting for it to appear" in err  # (a directory may still appear)
            continue
        assert rc == 2 and err == f"tripwire watch: error: {expected.value}\n"
