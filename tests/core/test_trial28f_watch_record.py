"""Trial 28f F3: ``tripwire watch --once`` on a run it cannot write to (a read-only mount or copy)
exited 2 without printing the finding it made, its ``--json`` summary said ``new: 1`` beside
``status: null`` and ``rules: []``, its error said "something else replaced it" for "Read-only
file system", and there was no way to judge a run without writing into it. Now each finding is
printed before it is recorded, the summary says what was read, the error names the system's reason
and ``--no-record``, which judges a run writing nothing into it."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

import tripwire
import tripwire._watch as tw_watch
from tripwire._cli import main, os_error_text
from tripwire._watch import FindingNotRecordedError, Watcher, watch

_RULE_YAML = "rules:\n  - name: exploding_tensor\n"


def _run(path: Path) -> Path:
    """A complete run whose loss is NaN at step 3, judged by no rule in training."""
    with tripwire.Session(out_dir=str(path), save_interval=1, rules=[]) as s:
        for i in range(5):
            s.step("train", i, {"loss": (float("nan") if i == 3 else 1.0, "losses")})
    return path


def _config(tmp_path: Path) -> str:
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(_RULE_YAML, encoding="utf-8")
    return str(cfg)


def _files(run: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(run)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(run.rglob("*"))}


def _findings_a_file(run: Path) -> Path:
    """The run's findings folder made a file: the watch's write fails, as root too (chmod would not)."""
    findings = run / "findings"
    for p in findings.iterdir():
        p.unlink()
    findings.rmdir()
    findings.write_text("x", encoding="utf-8")
    return findings


def test_a_finding_that_cannot_be_recorded_is_printed_first(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run")
    findings = _findings_a_file(run)
    assert main(["watch", str(run), "--once", "--config", _config(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("[critical] exploding_tensor at step 3 (train): loss holds the value nan"), out
    assert err == (f"tripwire watch: error: could not record the finding of 'exploding_tensor' at step 3 (train) in "
                   f"{str(findings)!r}: File exists (EEXIST); it was printed above, and is not in the run; to judge "
                   f"a run without writing into it (a read-only copy): tripwire watch --no-record (record=False in "
                   f"Python)\n")
    assert "replaced" not in err

    # --json: the finding's line, then a summary that says what was read and judged
    assert main(["watch", str(run), "--once", "--config", _config(tmp_path), "--json"]) == 2
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(x["type"], x.get("rule"), x.get("origin")) for x in lines] == [
        ("finding", "exploding_tensor", "new"), ("summary", None, None)]
    summary = lines[-1]
    assert summary["exit_code"] == 2
    assert summary["error"].startswith("could not record the finding of 'exploding_tensor'")
    assert summary["status"] == "complete" and summary["rules"] == ["exploding_tensor"]
    assert summary["records"] == {"train": 5} and summary["findings"] == summary["new"] == 1


def test_a_read_only_file_system_is_named_with_no_record(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path / "run")
    target = run / "findings" / "watch-00000.jsonl"

    def read_only(path: Path, finding: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(tw_watch, "append_finding_line", read_only)
    assert main(["watch", str(run), "--once", "--config", _config(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"in {str(target)!r}: Read-only file system (EROFS); it was printed above" in err
    assert "--no-record" in err and "replaced" not in err
    # the Python API: an OSError (and a TripwireError), with the system's errno and the file
    watcher = Watcher(run, {"rules": ["exploding_tensor"]}, echo=lambda f: None)
    with pytest.raises(FindingNotRecordedError, match=r"Read-only file system \(EROFS\); it was passed to echo") as got:
        watcher.watch(once=True)
    assert isinstance(got.value, OSError) and got.value.errno == errno.EROFS and got.value.path == str(target)
    assert [f.rule for f in watcher.findings] == ["exploding_tensor"]


def test_no_record_judges_a_run_writing_nothing_into_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run")
    before = _files(run)
    assert main(["watch", str(run), "--once", "--config", _config(tmp_path), "--no-record"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[critical] exploding_tensor at step 3 (train)")
    assert out[-1] == ("tripwire watch: " + repr(str(run)) + " (complete), 1 rule watched over 5 train records: "
                       "1 finding (1 new); exit status 1")
    assert _files(run) == before
    assert tripwire.open_run(run).findings == []
    # a findings folder that cannot be written is no matter then
    _findings_a_file(run)
    assert main(["watch", str(run), "--once", "--config", _config(tmp_path), "--no-record", "--json"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["rule"] == "exploding_tensor" and lines[-1]["error"] is None and lines[-1]["new"] == 1
    # a second --no-record watch makes the finding again: nothing held it
    assert len(watch(run, {"rules": ["exploding_tensor"]}, once=True, record=False,
                              echo=lambda f: None)) == 1


def test_no_record_with_stop_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run")
    assert main(["watch", str(run), "--once", "--no-record", "--stop"]) == 2
    assert capsys.readouterr().err == ("tripwire watch: error: --stop with --no-record: --stop writes a stop request "
                                       "into RUN (control/stop.json), --no-record writes nothing there; accepted: one "
                                       "of them\n")
    with pytest.raises(tripwire.ConfigError, match=r"record: got 'no'; accepted: True .* or False"):
        Watcher(run, record="no")  # type: ignore[arg-type]


def test_no_record_asks_no_stop_of_a_rule_that_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:  # (still written while watched)
        for i in range(5):
            s.step("train", i, {"loss": (float("nan") if i == 3 else 1.0, "losses")})
        s.flush()
        cfg = tmp_path / "stop.yaml"
        cfg.write_text("rules:\n  - name: exploding_tensor\n    actions: [stop_training]\n", encoding="utf-8")
        assert main(["watch", str(out), "--once", "--config", str(cfg), "--no-record"]) == 1
        err = capsys.readouterr().err
        assert (f"tripwire watch: --no-record (record=False): no stop request was written into {str(out)!r} for "
                f"'exploding_tensor' at step 3 (train)") in err
        assert not (out / "control" / "stop.json").exists()
        assert tripwire.open_run(out).findings == []


@pytest.mark.parametrize(("code", "said"), [
    (errno.EROFS, "the file system is read-only (a read-only mount)"),
    (errno.EACCES, "its permissions (or its folder's) refuse it"),
    (errno.ENOSPC, "the disk is full"),
    (errno.EISDIR, "something else is in its place (a folder where a file belongs)"),
])
def test_an_os_error_says_what_to_check_for_its_cause(code: int, said: str) -> None:
    text = os_error_text(OSError(code, os.strerror(code), "/runs/a/plots/loss.png"))
    assert text == (f"'/runs/a/plots/loss.png' cannot be used: {os.strerror(code)}; accepted: a file tripwire can "
                    f"read there (or write: a plot, a watch's findings); {said}")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes where chmod refuses")
def test_a_read_only_copy_by_chmod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run")
    paths = [run, *run.rglob("*")]
    try:
        for p in paths:
            p.chmod(p.stat().st_mode & ~0o222)
        assert main(["watch", str(run), "--once", "--config", _config(tmp_path)]) == 2
        out, err = capsys.readouterr()
        assert out.startswith("[critical] exploding_tensor") and "Permission denied (EACCES)" in err
        assert main(["watch", str(run), "--once", "--config", _config(tmp_path), "--no-record"]) == 1
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | 0o200)
