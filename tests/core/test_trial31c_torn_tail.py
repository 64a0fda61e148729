"""Trial 31c #6: a resumed session truncated the torn tail of its shard (the eval step 0 record of a
training killed while writing it) without a word: the record was gone from the run, and the resume's
WARNING named only the steps it went back over. The writer that removes a torn tail says so."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import tripwire
from tripwire import open_run

_KILLED_WHILE_WRITING = """
import os, sys, tripwire
s = tripwire.Session(out_dir=sys.argv[1], save_interval=1, rules=[])
for step in range(3):
    s.step("train", step, {"loss": (1.0, "losses")})
    s.flush()
s.step("eval", 0, {"val_loss": (0.5, "losses")})
s.flush()
os._exit(0)
"""


def _killed_while_writing_eval(out: Path, cut: int) -> None:
    subprocess.run([sys.executable, "-c", _KILLED_WHILE_WRITING, str(out)], check=True, timeout=120)
    shard = out / "workers" / "worker-00000.twr"
    shard.write_bytes(shard.read_bytes()[:-cut])  # (the eval record torn: the training died while writing it)


def test_a_writer_that_removes_a_torn_record_says_which(tmp_path: Path, caplog) -> None:
    out = tmp_path / "run"
    _killed_while_writing_eval(out, 5)
    assert open_run(out).steps("eval") == []
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
            s.step("train", 3, {"loss": (1.0, "losses")})
    said = [r.getMessage() for r in caplog.records if "removed before this training writes on" in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert said[0].startswith(f"tripwire: {out / 'workers' / 'worker-00000.twr'}: its last ")
    assert (", an eval step 0 record cut short (the training that wrote it was killed while writing it, or a crash "
            "lost its end), are removed before this training writes on: that record is not in the run, the 3 "
            "records before it are") in said[0]
    assert open_run(out).steps("train") == [0, 1, 2, 3]


def test_no_word_where_nothing_was_torn(tmp_path: Path, caplog) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
            s.step("train", 1, {"loss": (1.0, "losses")})
    assert "removed before this training writes on" not in caplog.text


def test_a_torn_findings_line_is_said_too(tmp_path: Path, caplog) -> None:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    findings = out / "findings" / "in-process-00000.jsonl"
    findings.write_text('{"rule": "x", "step"')
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
            s.step("train", 1, {"loss": (1.0, "losses")})
    assert (f"tripwire: {findings}: its last line (20 bytes) was cut short (the training that wrote it was killed "
            f"while writing it): removed before this training writes on; that finding is not in the run") in caplog.text
