"""Trial 41j F1: two trainings in one out_dir; the first (no exploding_tensor of its own) had a NaN
loss at step 2, the second (with it) recorded its NaN at step 4. ``tripwire watch`` with
exploding_tensor made nothing of the first training's NaN: the second training's finding of the
rule counted as held in the first training too. A training's own findings now hold in the training
they were made in (by their wall time); a watch's own hold as before."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire


def _training(out: Path, nan_at: int, rules: list[str]) -> None:
    with tripwire.Session(out_dir=out, rules=rules, save={"interval": 1}) as s:
        for step in range(6):
            s.step("train", step, {"loss": (float("nan") if step == nan_at else 0.5, "losses")})


def test_a_later_training_s_finding_does_not_hide_the_first_s(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    with caplog.at_level(logging.ERROR, logger="tripwire"):
        _training(out, 2, ["loss_not_decreasing"])
        _training(out, 4, ["exploding_tensor"])
    first = tripwire.watch(out, {"rules": ["exploding_tensor"]}, once=True, record=True)
    assert [(f.rule, f.step) for f in first] == [("exploding_tensor", 2)]
    again = tripwire.watch(out, {"rules": ["exploding_tensor"]}, once=True, record=True)  # (recorded: not again)
    assert again == []
    assert sorted((f.step, f.source) for f in tripwire.open_run(out).findings) == [(2, "watch"), (4, "in-process")]
