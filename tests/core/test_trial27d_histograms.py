"""Trial 27d finding 3: a tensor in two collections that ask for different histograms kept the first
one's where both were due, and the other's where only that one was: its histogram series switched
between 6 bins over [-0.05, 0.05] and 3 bins over its own range from step to step, while the WARNING
named one collection's. A tensor now keeps one binning for the whole run."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import tripwire


@pytest.mark.parametrize("first", ["weights", "zoom"])
def test_a_tensor_keeps_one_histogram_binning_whichever_collection_is_due(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, first: str) -> None:
    settings = {
        "weights": {"reductions": ["l2", "histogram"], "histogram_bins": 7, "save": {"interval": 2}},
        "zoom": {"include": ["^w$"], "kinds": ["weights"], "reductions": ["histogram"], "histogram_bins": 4,
                 "histogram_range": [-1, 1], "save": {"interval": 1}},
    }
    order = [first] + [n for n in settings if n != first]
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], collections={n: settings[n] for n in order})
    rng = np.random.default_rng(0)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(5):  # weights due at 0, 2, 4; zoom at every step
            s.step("train", step, {"w": (rng.normal(size=50), "weights")})
    s.close()
    run = tripwire.open_run(out)
    steps = run.array_steps("w", "histogram")
    assert steps == [0, 1, 2, 3, 4]
    bins = {len(run.histogram("w", step)[0]) for step in steps}
    ranges = {(float(run.histogram("w", step)[1][0]), float(run.histogram("w", step)[1][-1])) for step in steps}
    if first == "weights":
        assert bins == {7} and len(ranges) == 5  # (its own range at each step)
    else:
        assert bins == {4} and ranges == {(-1.0, 1.0)}
    said = [r.getMessage() for r in caplog.records if "different histograms" in r.getMessage()]
    assert len(said) == 1 and f"a tensor keeps one histogram a step: collection {first!r}'s" in said[0]
