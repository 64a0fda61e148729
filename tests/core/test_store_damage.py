"""The run reader over damaged, replaced and remote-looking runs, and its argument checks
(fresh-user trial 12b: a URL out_dir, truncated shards, damaged metadata, a run replaced under an
open reader, array kinds and workers)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, CorruptRunError, RunNotFoundError, RunWriter, StepRecord, open_run
from tripwire._format import shard_name
from tripwire._run import RunReplacedError


def _make_run(path: Path, steps: int = 30, offset: float = 0.0, interval: int = 1) -> None:
    config = {"out_dir": str(path), "save": {"interval": interval},
              "collections": {"weights": {"reductions": ["l2", "histogram", "raw"]}, "losses": None}}
    with tripwire.Session(config) as s:
        for step in range(steps):
            s.step("train", step, {"w": (np.ones(4) * step, "weights"), "loss": (offset + 1.0 / (step + 1), "losses")})
        for step in (2, 3):
            s.record_finding(tripwire.Finding("my_rule", step, "train", f"odd at {step}"))


def _shard(run: Path, rank: int = 0) -> Path:
    return run / "workers" / shard_name(rank)


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("intact") / "run"
    _make_run(path)
    return path


def _copy(intact: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(intact, dest)
    return dest


# ------------------------------------------------------------------------------- 1. no URL run store
@pytest.mark.parametrize("url", ["s3://team-runs/xgb/run1", "gs://b/run", "file:///tmp/x"])
def test_open_run_refuses_a_url_naming_it(url: str) -> None:
    with pytest.raises(RunNotFoundError, match=rf"no tripwire run at '{url}': .*accepted: a local run directory"):
        open_run(url)
    with pytest.raises(RunNotFoundError, match="not supported|not a URL"):
        open_run(Path(url))  # a Path made from a URL has lost a slash (s3:/b/x) and is still refused


def test_a_session_given_a_url_out_dir_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"out_dir: got 's3://team-runs/xgb/run1'; accepted: a local directory path "
                                          r"\(remote stores such as s3:// are not supported; write locally and copy the run directory\)"):
        tripwire.Session({"out_dir": "s3://team-runs/xgb/run1"})
    assert list(tmp_path.iterdir()) == []  # no ./s3:/team-runs/... folder


# ----------------------------------------------------------------- 3. a shard shorter than its marker
def test_a_truncated_shard_of_a_complete_run_is_named_as_damaged(intact: Path, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    full = open_run(intact)
    assert full.damaged == {} and full.warnings == []
    expected = json.loads((intact / "workers" / "worker-00000.end.json").read_text())["records"]
    assert expected == len(full.steps()) == 30
    run_dir = _copy(intact, tmp_path)
    shard = _shard(run_dir)
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size // 2)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = open_run(run_dir)
    read = len(run.steps())
    assert 0 < read < 30
    assert run.status == "complete"  # the end status stays; the damage is named beside it
    assert run.damaged == {0: (30, read)}
    assert run.series("loss")[1].tolist() == full.series("loss")[1][:read].tolist()  # what was read is intact
    assert len(run.warnings) == 1 and f"worker 0: its end marker says 30 records, {read} were read from {shard}" in run.warnings[0]
    assert [r.getMessage() for r in caplog.records if r.name == "tripwire"] == [f"tripwire: {w}" for w in run.warnings]


def test_an_emptied_shard_and_a_removed_one_are_damage(intact: Path, tmp_path: Path) -> None:
    run_dir = _copy(intact, tmp_path)
    _shard(run_dir).write_bytes(b"")
    run = open_run(run_dir)
    assert run.damaged == {0: (30, 0)} and run.steps() == []
    _shard(run_dir).unlink()
    run = open_run(run_dir)
    assert run.damaged == {0: (30, 0)} and "is missing" in run.warnings[0]


def test_records_are_counted_as_the_writer_counts_them_runs_of_steps_too(tmp_path: Path) -> None:
    """Every-step losses between save steps go out as ``steps`` records (several steps in one
    record): the end marker counts steps, so does the reader; an intact run is not damaged."""
    _make_run(tmp_path / "run", steps=50, interval=10)
    run = open_run(tmp_path / "run")
    marker = run.end_markers[0]
    assert marker["records"] == len(run.wall_times("train")[0]) == 50
    assert run.damaged == {} and run.warnings == []


def test_a_run_appended_to_is_not_damage(tmp_path: Path) -> None:
    """A second training into one out_dir: the last end marker counts both trainings' records."""
    _make_run(tmp_path / "run", steps=30)
    _make_run(tmp_path / "run", steps=10)
    run = open_run(tmp_path / "run")
    assert run.end_markers[0]["records"] == 40 and len(run.wall_times("train")[0]) == 40
    assert run.damaged == {}


def test_a_live_reader_does_not_take_records_not_yet_read_for_damage(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, rank=0, world_size=1)
    run = open_run(tmp_path)
    for step in range(3):
        writer.write(StepRecord("train", step, step, 0.0, 0, [("loss", ("raw",), np.array([1.0]))]))
    writer.close()  # the records and the end marker are written after the reader's last read
    assert run.status == "complete" and run.damaged == {}
    run.refresh()
    assert run.steps() == [0, 1, 2] and run.damaged == {}


# -------------------------------------------------------------------------------- 4. damaged metadata
def test_a_damaged_findings_line_is_skipped_with_a_warning(intact: Path, tmp_path: Path) -> None:
    run_dir = _copy(intact, tmp_path)
    path = run_dir / "findings" / "in-process-00000.jsonl"
    first, second = path.read_text().splitlines()
    path.write_text(first[: len(first) // 2] + "\n" + first + "\n" + second + "\n")  # half a line, then the rest
    run = open_run(run_dir)
    assert [f.message for f in run.findings] == ["odd at 2", "odd at 3"]
    assert len(run.warnings) == 1
    assert f"{path}: line 1 is damaged, not valid JSON" in run.warnings[0] and "skipped" in run.warnings[0]
    assert run.steps() == list(range(30))
    with open(path, "a") as f:  # a later line, read by refresh: numbered from the start of the file
        f.write('{"rule": "x"}\n')
    run.refresh()
    assert "line 4 is damaged, not a finding (KeyError" in run.warnings[-1]


def test_a_damaged_end_marker_reads_as_absent(intact: Path, tmp_path: Path) -> None:
    run_dir = _copy(intact, tmp_path)
    marker = run_dir / "workers" / "worker-00000.end.json"
    marker.write_text(marker.read_text()[:10])
    run = open_run(run_dir)
    assert run.status == "running" and not run.is_complete and run.end_markers == {}
    assert run.steps() == list(range(30)) and len(run.findings) == 2
    assert len(run.warnings) == 1
    assert str(marker) in run.warnings[0] and "not valid JSON (line" in run.warnings[0] and "read as absent" in run.warnings[0]


def test_a_damaged_worker_meta_file_is_ignored_with_a_warning(intact: Path, tmp_path: Path) -> None:
    run_dir = _copy(intact, tmp_path)
    meta = run_dir / "workers" / "worker-00000.json"
    meta.write_text(meta.read_text()[:10])
    run = open_run(run_dir)
    assert run.steps() == list(range(30)) and run.status == "complete"
    assert str(meta) in run.warnings[0] and "ignored" in run.warnings[0]


def test_a_damaged_run_json_is_a_corrupt_run_error_naming_the_file_and_line(intact: Path, tmp_path: Path) -> None:
    run_dir = _copy(intact, tmp_path)
    info = run_dir / "run.json"
    info.write_text(info.read_text()[:40])
    with pytest.raises(CorruptRunError, match=rf"{info}: damaged, not valid JSON \(line \d+ column \d+: "):
        open_run(run_dir)
    info.write_text("[1, 2]")
    with pytest.raises(CorruptRunError, match="holds list where a JSON object belongs"):
        open_run(run_dir)


# ------------------------------------------------------------------------- 6. a run replaced under a reader
def test_a_run_replaced_under_an_open_reader_says_so(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _make_run(path, steps=10)
    run = open_run(path)
    old_id = run.run_id
    shutil.rmtree(path)
    _make_run(path, steps=30, offset=5.0)  # a longer run: its shard outgrows the one read
    new_id = json.loads((path / "run.json").read_text())["run_id"]
    with pytest.raises(RunReplacedError, match=rf"the run at '{path}' was replaced \(run id {old_id} -> {new_id}\).*open it again"):
        run.refresh()
    assert isinstance(RunReplacedError("x"), CorruptRunError)
    assert len(open_run(path).steps()) == 30


def test_a_shard_that_shrank_under_a_reader_is_named(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _make_run(path, steps=10)
    run = open_run(path)
    shard = _shard(path)
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size // 2)
    with pytest.raises(RunReplacedError, match=rf"{shard} shrank from \d+ bytes read to \d+"):
        run.refresh()


def test_a_run_removed_under_a_reader_is_run_not_found(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _make_run(path, steps=3)
    run = open_run(path)
    shutil.rmtree(path)
    with pytest.raises(RunNotFoundError, match="any more: run.json is missing"):
        run.refresh()


def test_refresh_of_an_untouched_run_reads_nothing_new(intact: Path) -> None:
    run = open_run(intact)
    os.utime(intact / "workers")  # the directory may change; run.json does not
    assert run.refresh() == 0 and run.warnings == []


# ----------------------------------------------------------------------------------- 7. reader arguments
def test_array_steps_accepts_the_kinds_array_kinds_lists(intact: Path) -> None:
    run = open_run(intact)
    assert run.array_kinds("w") == ["raw", "histogram"]
    assert run.array_steps("w", kind="histogram") == list(range(30))
    assert run.array_steps("w", kind="hist_edges") == run.array_steps("w", kind="raw") == list(range(30))
    assert run.array_steps("loss", kind="histogram") == []  # a known kind the tensor lacks: empty
    with pytest.raises(ConfigError, match=r"kind: got 'bogus'; accepted: raw, histogram, hist_counts, hist_edges; "
                                          r"stored for 'w': raw, histogram"):
        run.array_steps("w", kind="bogus")
    with pytest.raises(ConfigError, match=r"kind: got 'histogram' \(a histogram: histogram\('w', step\)\)"):
        run.array("w", 3, kind="histogram")
    np.testing.assert_array_equal(run.array("w", 3, kind="raw"), np.full(4, 3.0))


def test_a_worker_the_run_does_not_have_is_an_error_naming_its_workers(intact: Path) -> None:
    run = open_run(intact)
    for read in (lambda: run.series("loss", worker=3), lambda: run.steps("train", worker=3),
                 lambda: run.array_steps("w", worker=3), lambda: run.array("w", 1, worker=3),
                 lambda: run.value("loss", "raw", 1, worker=3), lambda: run.tensor("loss").series(worker=3)):
        with pytest.raises(ConfigError, match=r"worker: got 3; accepted: one of the run's workers \(0\)"):
            read()
    steps, values = run.series("loss", mode="eval", worker=0)  # an existing worker without values: empty
    assert len(steps) == len(values) == 0


def test_a_regex_that_does_not_compile_is_named(intact: Path) -> None:
    with pytest.raises(ConfigError, match=r"regex: invalid regular expression '\(' \(missing \), unterminated subpattern"):
        open_run(intact).tensor_names(regex="(")


def test_a_shard_removed_after_the_run_ended_keeps_the_end_status(tmp_path: Path) -> None:
    # trial 18f: docs/format.md's damage table says a shard removed after the run ended keeps the end
    # status; it read "running"
    _make_run(tmp_path / "run", steps=10)
    (tmp_path / "run" / "workers" / "worker-00000.twr").unlink()
    run = open_run(tmp_path / "run")
    assert run.status == "complete" and run.is_complete and run.damaged == {0: (10, 0)}


def test_an_out_dir_that_cannot_be_written_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 18f: a bare PermissionError from pathlib's mkdir
    from pathlib import Path as P

    real = P.mkdir

    def refuse(self: P, *args: object, **kwargs: object) -> None:
        if "locked" in str(self):
            raise PermissionError(1, "Operation not permitted", str(self))
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(P, "mkdir", refuse)
    with pytest.raises(tripwire.ConfigError, match=r"out_dir: got '.*locked/run', which this process cannot create or "
                                                   r"write \(Operation not permitted: .*\); accepted: a directory it can write"):
        RunWriter(tmp_path / "locked" / "run")
