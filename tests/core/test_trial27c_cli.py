"""Trial 27c: the CLI scripted by a platform engineer.

Finding 3: ``--json`` for inspect, report, watch and validate (strict JSON, every value at full
precision, the keys docs/cli.md lists); finding 4: exit status 2 says its reason on one stderr line
(validate's list of errors: a header line and one line each, as documented); finding 5: a stdout
that cannot encode a path or name escapes it, no traceback; finding 6: small inconsistencies
(``report s3://``, ``--regex`` matching nothing, ``workers: []``, demo's banner, rule errors counted
as findings); finding 8: a file of the run that cannot be read is exit 2 and one line.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire._cli import main

_TRIPWIRE = str(Path(sys.executable).parent / "tripwire")

#: the keys docs/cli.md documents
INSPECT_KEYS = {"run", "status", "framework", "world_size", "workers", "workers_without_records", "abandoned_workers",
                "unknown_workers", "ends", "trial", "warnings", "notes", "steps", "collections", "tensors", "findings", "rule_errors"}
FINDING_KEYS = {"rule", "step", "mode", "message", "tensors", "severity", "kind", "worker", "wall_time", "details",
                "source"}
SUMMARY_KEYS = {"type", "run", "exit_code", "error", "status", "rules", "records", "findings", "new",
                "recorded_before", "recorded_during", "checks", "failing_checks", "rule_errors", "unjudged",
                "not_applicable", "unfed", "damaged", "write_errors", "abandoned", "unknown", "timed_out", "stop_requested",
                "stop_reasons",
                "failed_before_first_record", "notes", "failed_actions", "unwatched_stops"}
VALIDATE_KEYS = {"config", "valid", "framework", "errors", "out_dir", "default_out_dir", "rules", "collections",
                 "warnings"}


def _one_line(err: str) -> str:
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _strict(text: str) -> Any:
    """``text`` parsed as strict JSON (NaN and Infinity refused, as a JSON parser other than Python's does)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _make_run(path: Path, *, error: bool = False) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1},
                           "collections": {"weights": {"reductions": ["l2"]}, "losses": None}}) as s:
        for step in range(3):
            s.step("train", step, {"fc1.weight": (np.ones(4) * step, "weights"), "loss": (1.0 / (step + 3), "losses")})
        s.step("train", 3, {"grad_norm": (float("nan"), "losses")})
        s.step("eval", 0, {"val_loss": (2.0 / 3.0, "losses")})
        s.record_finding(tripwire.Finding("my_rule", 2, "train", "something odd: 3 > 2", details={"ratio": 1 / 7}))
        if error:
            s.record_finding(tripwire.Finding("team_rule", 2, "train", "raised ZeroDivisionError", kind="error",
                                              severity="error"))
    return path


# ------------------------------------------------------------------------------------ finding 3
def test_inspect_json_is_one_strict_object_with_every_value_at_full_precision(tmp_path: Path, capsys) -> None:
    run = _make_run(tmp_path / "run", error=True)
    assert main(["inspect", str(run), "--json", "--tensors"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one line
    data = _strict(out)
    assert set(data) == INSPECT_KEYS
    assert data["status"] == "complete" and data["workers"] == [0] and data["world_size"] == 1
    assert data["steps"] == [{"mode": "train", "count": 4, "first": 0, "last": 3},
                             {"mode": "eval", "count": 1, "first": 0, "last": 0}]
    assert data["collections"]["weights"] == ["fc1.weight"]
    last = {t["name"]: t["last"] for t in data["tensors"]}
    assert last["loss"] == {"kind": "reduction", "reduction": "raw", "value": 1.0 / 5.0, "step": 2, "mode": "train",
                            "worker": 0}
    assert last["val_loss"]["value"] == 2.0 / 3.0 and last["val_loss"]["mode"] == "eval"  # every digit
    assert last["grad_norm"]["value"] == "NaN"  # (JSON has no NaN: a string, documented)
    # a rule that raised is no finding (trial 27c: "findings (2)" for one finding)
    assert [f["rule"] for f in data["findings"]] == ["my_rule"]
    assert [f["rule"] for f in data["rule_errors"]] == ["team_rule"]
    assert set(data["findings"][0]) == FINDING_KEYS and data["findings"][0]["details"]["ratio"] == 1 / 7


def test_inspect_json_without_tensors_has_tensors_null(tmp_path: Path, capsys) -> None:
    assert main(["inspect", str(_make_run(tmp_path / "run")), "--json"]) == 0
    assert _strict(capsys.readouterr().out)["tensors"] is None


def test_inspect_text_counts_rule_errors_apart_from_findings(tmp_path: Path, capsys) -> None:
    assert main(["inspect", str(_make_run(tmp_path / "run", error=True)), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "findings (1)" in out and "rule errors (1)" in out and "findings (2)" not in out


def test_report_json_of_a_run_is_inspects_and_a_run_option_is_refused_for_a_journal(tmp_path: Path, capsys) -> None:
    run = _make_run(tmp_path / "run")
    assert main(["report", str(run), "--json"]) == 0
    reported = _strict(capsys.readouterr().out)
    assert main(["inspect", str(run), "--json"]) == 0
    assert reported == _strict(capsys.readouterr().out)
    journal = tmp_path / "tuning.db"
    journal.write_bytes(b"SQLite format 3\x00" + bytes(100))
    # (a journal's --json is tune-report --json's object since trial 27c's follow-up: tests/tune/test_trial27c2_report.py)
    assert main(["report", str(journal), "--json", "--regex", "loss"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert _one_line(captured.err) == (
        f"tripwire report: error: --regex: {str(journal)!r} is a tuning journal; accepted for a journal: --top, "
        "--full-only, --errors, --json, --csv (--tensors and --regex are for a run directory)")


def test_validate_json_valid_and_not(tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("name: exp1\nsave: {interval: 5}\ncollections: [weights]\nrules: [exploding_tensor]\n")
    assert main(["validate", str(good), "--json"]) == 0
    data = _strict(capsys.readouterr().out)
    assert set(data) == VALIDATE_KEYS
    assert data["valid"] is True and data["errors"] == [] and data["rules"] == ["exploding_tensor"]
    assert "weights" in data["collections"] and data["out_dir"] is None and data["default_out_dir"].endswith("exp1")
    bad = tmp_path / "bad.yaml"
    bad.write_text("save: {interval: 0}\nrules: [{name: nosuchrule}]\n")
    assert main(["validate", str(bad), "--json"]) == 2
    captured = capsys.readouterr()
    data = _strict(captured.out)
    assert data["valid"] is False and len(data["errors"]) == 2 and data["rules"] is None
    assert data["errors"][0].startswith("save.interval: got 0") and "unknown rule 'nosuchrule'" in data["errors"][1]
    assert captured.err.startswith(f"tripwire validate: error: 2 errors in {bad}:\n")


def _losses_run(path: Path, nan_at: int | None = None) -> Path:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": [], "collections": ["losses"]}) as s:
        for step in range(30):
            s.step("train", step, {"loss": (float("nan") if step == nan_at else 1.0 / (step + 1), "losses")})
        s.step("eval", 0, {"val_loss": (0.5, "losses")})
    return path


def test_watch_json_of_a_healthy_run_is_its_summary(tmp_path: Path, capsys) -> None:
    # trial 27c: a healthy watch printed nothing at all, its exit status alone said what happened
    run = _losses_run(tmp_path / "run")
    cfg = tmp_path / "watch.yaml"
    cfg.write_text("rules: [exploding_tensor, loss_not_decreasing]\n")
    assert main(["watch", str(run), "--config", str(cfg), "--once", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    summary = _strict(lines[0])
    assert set(summary) == SUMMARY_KEYS
    assert summary["type"] == "summary" and summary["exit_code"] == 0 and summary["error"] is None
    assert summary["status"] == "complete" and summary["records"] == {"train": 30, "eval": 1}
    assert summary["rules"] == ["exploding_tensor", "loss_not_decreasing"]
    assert summary["findings"] == 0 and summary["unjudged"] == [] and summary["notes"] == []


def test_watch_json_names_each_finding_and_where_it_came_from(tmp_path: Path, capsys) -> None:
    run = _losses_run(tmp_path / "run", nan_at=20)
    cfg = tmp_path / "watch.yaml"
    cfg.write_text("rules: [exploding_tensor]\n")
    assert main(["watch", str(run), "--config", str(cfg), "--once", "--json"]) == 1
    lines = [_strict(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["type"] for line in lines] == ["finding", "summary"]
    finding, summary = lines
    assert finding["origin"] == "new" and finding["rule"] == "exploding_tensor" and finding["step"] == 20
    assert set(finding) == FINDING_KEYS | {"type", "origin"}
    assert summary["exit_code"] == 1 and summary["findings"] == 1 and summary["new"] == 1
    # again: the run holds it now, recorded before
    assert main(["watch", str(run), "--config", str(cfg), "--once", "--json"]) == 1
    lines = [_strict(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["origin"] == "recorded_before" and lines[-1]["recorded_before"] == 1 and lines[-1]["new"] == 0


def test_watch_json_ends_with_a_summary_on_bad_input_too(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("rules: []\n")
    assert main(["watch", str(tmp_path / "nope"), "--config", str(empty), "--json"]) == 2
    captured = capsys.readouterr()
    summary = _strict(captured.out)
    assert summary["exit_code"] == 2 and "lists no rules" in summary["error"] and summary["status"] is None
    assert _one_line(captured.err).startswith("tripwire watch: error: --config:")


# ------------------------------------------------------------------------------------ finding 4
def test_a_usage_error_is_one_line_with_the_usage_in_it(capsys) -> None:
    # trial 27c: argparse printed its usage line, then the error: 2 lines
    with pytest.raises(SystemExit) as exc:
        main(["inspect"])
    assert exc.value.code == 2
    assert _one_line(capsys.readouterr().err) == (
        "tripwire inspect: error: the following arguments are required: run "
        "(usage: tripwire inspect [-h] [--tensors] [--regex REGEX] [--json] run)")
    with pytest.raises(SystemExit):
        main(["inspect", "a", "--nosuchflag"])
    assert _one_line(capsys.readouterr().err).startswith("tripwire inspect: error: unrecognized arguments: --nosuchflag")


def test_no_command_is_one_line_on_stderr(capsys) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert _one_line(captured.err).startswith("tripwire: error: no command given; accepted: inspect, validate, ")


def test_a_yaml_syntax_error_is_one_line(tmp_path: Path, capsys) -> None:
    # trial 27c: the YAML parser's message took 4 lines
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules: [default\n  - x: :\n")
    assert main(["validate", str(broken)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"tripwire validate: error: config: {str(broken)!r} is not valid YAML: ")
    assert "line 1, column 8; expected ',' or ']'" in line


def test_validate_lists_each_error_on_a_line_under_a_header_as_its_help_says(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("save: {interval: 0}\nrules: [{name: nosuchrule}]\n")
    assert main(["validate", str(bad)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"tripwire validate: error: 2 errors in {bad}:" and len(lines) == 3
    assert all(line.startswith("  ") for line in lines[1:])
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "for several, a line 'N errors in CONFIG:' and one indented line per error" in helptext


# ------------------------------------------------------------------------------------ finding 5
def test_a_stdout_that_cannot_encode_the_run_path_escapes_it(tmp_path: Path) -> None:
    run = _make_run(tmp_path / "my run ü✓")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    for argv in (["inspect", str(run), "--tensors"], ["report", str(run)], ["watch", str(run), "--once"]):
        done = subprocess.run([_TRIPWIRE, *argv], capture_output=True, env=env, timeout=120)
        assert done.returncode in (0, 1), done.stderr.decode("ascii", "replace")
        assert b"Traceback" not in done.stderr
    done = subprocess.run([_TRIPWIRE, "inspect", str(run)], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0 and b"my run \\xfc\\u2713" in done.stdout, done.stderr


# ------------------------------------------------------------------------------------ finding 6
def test_report_of_a_url_says_remote_stores_are_not_supported(capsys) -> None:
    assert main(["report", "s3://bucket/run"]) == 2
    assert _one_line(capsys.readouterr().err) == (
        "tripwire report: error: path='s3://bucket/run': remote stores such as s3:// are not supported; write locally "
        "and copy the run directory; accepted: a local run directory (a callback's out_dir) or a tuning job's SQLite "
        "journal")


def test_inspect_regex_matching_nothing_is_exit_2_as_plot(tmp_path: Path, capsys) -> None:
    run = _make_run(tmp_path / "run")
    assert main(["inspect", str(run), "--regex", "nomatch"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert _one_line(captured.err) == (
        "tripwire inspect: error: --regex: no tensor matches the regex 'nomatch' (re.search); available: fc1.weight, "
        "grad_norm, loss, val_loss")


def test_inspect_names_a_worker_whose_shard_is_missing(tmp_path: Path, capsys) -> None:
    # trial 27c: "workers: []" on the status line, and a warning below naming worker 0
    run = _make_run(tmp_path / "run")
    (run / "workers" / "worker-00000.twr").unlink()
    assert main(["inspect", str(run), "--width", "200"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("workers: [0] (no records read of worker 0)"), first
    assert main(["inspect", str(run), "--json"]) == 0
    data = _strict(capsys.readouterr().out)
    assert data["workers"] == [0] and data["workers_without_records"] == [0] and data["steps"] == []


def test_demo_refuses_an_out_dir_before_its_banner(tmp_path: Path, capsys) -> None:
    pytest.importorskip("lightning")
    pytest.importorskip("sklearn")
    afile = tmp_path / "afile.txt"
    afile.write_text("")
    assert main(["demo", "--out-dir", str(afile)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # (trial 27c: the banner came first, on stdout)
    assert "which is a file" in _one_line(captured.err)


# ------------------------------------------------------------------------------------ finding 8
def test_a_findings_file_that_is_a_directory_is_exit_2_and_one_line(tmp_path: Path, capsys) -> None:
    run = _make_run(tmp_path / "run")
    bad = run / "findings" / "watch-00000.jsonl"
    bad.mkdir()
    for verb in (["inspect", str(run)], ["report", str(run)], ["watch", str(run), "--once"]):
        assert main(verb) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"tripwire {verb[0]}: error: {str(bad)!r} cannot be used: Is a directory; "), line


def test_a_file_of_the_run_without_permission_is_exit_2_and_one_line(tmp_path: Path, capsys,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = _make_run(tmp_path / "run")
    denied = run / "findings" / "in-process-00000.jsonl"
    real_open = builtins.open

    def open_(file: Any, *args: Any, **kwargs: Any) -> Any:  # (root reads a chmod 000 file: refused here instead)
        if os.fspath(file) == os.fspath(denied):
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    assert main(["inspect", str(run)]) == 2
    assert _one_line(capsys.readouterr().err).startswith(
        f"tripwire inspect: error: {str(denied)!r} cannot be used: Permission denied; ")
