"""Trials 32d F5 and 32c F6: a second training appended normally to a run (a second fit in one
process, each ended normally) made ``tripwire inspect`` say that the last step of the first "may
hold only some of its tensors (a crash inside that step)", though nothing crashed; and its sentence
("train steps 0 to 63 (64 steps) hold records; eval steps 4 to 16 (5 steps) hold records that a
later training or a resume went back over") read as if only the eval steps were gone back over,
where ``run.dataframe()`` marks every record of the first fit superseded. The step cut short is said
only where it lacks tensors that the later record of it holds (a training killed inside the step),
and one sentence names the records of every mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tripwire
from tripwire import Session
from tripwire._cli import main


def _fit(out: Path, steps: int = 10) -> None:
    """A training that ends normally: train steps with a loss and an accuracy, a validation every 5."""
    with Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for step in range(steps):
            s.step("train", step, {"loss": (1.0 / (1 + step), "losses"), "acc": (0.5, "metrics")})
            if step % 5 == 4:
                s.step("eval", step // 5, {"val_loss": (0.5, "losses")}, summary=True)


def _inspect(out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["inspect", str(out), "--width", "400"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_a_second_training_that_ended_normally_is_no_crash(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    _fit(out)
    _fit(out)
    run = tripwire.open_run(out)
    assert run.status == "complete" and len(run.trainings[0]) == 2
    df = run.dataframe()
    first = df.index < len(df) // 2  # (the first fit's values, written first: every one gone back over)
    assert df[first].superseded.all() and not df[~first].superseded.any()
    assert set(df[first & df.superseded]["mode"].astype(str)) == {"train", "eval"}
    text = _inspect(out, capsys)
    assert ("worker 0: a later training or a resume went back over (started again at or before) the records of train "
            "steps 0-9 (10 steps) and of eval steps 0-1 (2 steps): series() returns every record, value() the last "
            "written; run.dataframe()'s superseded column marks the records gone back over") in text, text
    assert "crash" not in text and "only some of its tensors" not in text and "cut off" not in text, text


_KILLED_INSIDE_A_STEP = """
import os, sys
import tripwire
s = tripwire.Session(out_dir=sys.argv[1], save_interval=1, rules=[])
for step in range(4):
    s.step("train", step, {"loss": (float(step), "losses"), "acc": (0.5, "metrics")})
s.step("train", 4, {"acc": (0.5, "metrics")})  # (step 4: killed before its loss was written)
s.flush()
os._exit(0)
"""


def test_a_later_training_after_one_killed_inside_a_step_names_that_step(tmp_path: Path, capsys) -> None:
    """A fresh training (no resume) by a later process, after one killed inside step 4: step 4 of the
    first lacks the loss that the later training's step 4 holds, and the line says so."""
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-c", _KILLED_INSIDE_A_STEP, str(out)], check=True, timeout=120)
    _fit(out)
    run = tripwire.open_run(out)
    assert run.series("loss")[0].tolist() == [0, 1, 2, 3, *range(10)]  # (step 4's loss once: the later one)
    text = _inspect(out, capsys)
    assert ("the records of train steps 0-4 (5 steps): series() returns every record, value() the last written; "
            "train step 4, the last step the earlier training wrote, lacks loss, which the later record of that step "
            "holds (that training was cut off inside the step, a crash say, or saved other tensors there): it holds "
            "that step once, the later record; run.dataframe()'s superseded column marks") in text, text
