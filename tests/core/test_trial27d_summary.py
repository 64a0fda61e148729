"""Trial 27d finding 5: ``summary=True`` saved a step whatever the mode's ``start_step`` and
``end_step`` (``modes: {eval: {end_step: 2}}`` stored eval steps 0..4), where the docs said only
"whatever the save interval". A summary overrides the interval only: it is saved inside the save
range (or at a listed step) of a mode that is enabled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tripwire


def _eval_summaries(tmp_path: Path, **kwargs: Any) -> list[int]:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], **kwargs)
    for step in range(6):
        s.step("eval", step, {"val_loss": (float(step), "losses"), "val_acc": (0.5, "metrics")}, summary=True)
    s.close()
    return tripwire.open_run(out).steps("eval")


@pytest.mark.parametrize("save, expected", [
    ({"modes": {"eval": {"end_step": 2}}}, [0, 1]),
    ({"start_step": 3}, [3, 4, 5]),                                   # (inherited by eval)
    ({"start_step": 3, "steps": [1]}, [1, 3, 4, 5]),                  # a listed step is in the range
    ({"end_step": 0, "steps": [2, 4]}, [2, 4]),                       # the listed steps only
    ({"interval": 100}, [0, 1, 2, 3, 4, 5]),                          # whatever the interval
    ({"modes": {"eval": {"enabled": False}}}, []),
])
def test_a_summary_step_is_saved_inside_the_save_range_whatever_the_interval(
        tmp_path: Path, save: dict, expected: list[int]) -> None:
    assert _eval_summaries(tmp_path, save=save) == expected


def test_a_collections_own_range_holds_for_its_summaries(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], collections={
        "losses": {"save": {"end_step": 2}}, "metrics": None})
    for step in range(4):
        s.step("eval", step, {"val_loss": (float(step), "losses"), "val_acc": (0.5, "metrics")}, summary=True)
    s.close()
    run = tripwire.open_run(out)
    assert run.tensor("val_loss").steps(mode="eval") == [0, 1]
    assert run.tensor("val_acc").steps(mode="eval") == [0, 1, 2, 3]
