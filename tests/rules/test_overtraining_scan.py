"""``overtraining`` scans its validation series incrementally (each evaluation read the whole run in a
Python loop: its cost grew with every XGBoost round), with the same decisions as the whole-series loop."""

from __future__ import annotations

import numpy as np
import pytest

from tripwire.rules.overtraining import Overtraining, _Scan


def whole_series(values: np.ndarray, sign: float, min_delta: float) -> tuple[float, int]:
    """The loop as it was: best value and the index of the last value that beat the best by > min_delta."""
    v = sign * values
    best, last = float(v[0]), 0
    for i in range(1, len(v)):
        if v[i] < best - min_delta * abs(best):
            last = i
        if v[i] < best:
            best = float(v[i])
    return best, last


@pytest.mark.parametrize("seed", range(5))
def test_the_incremental_scan_gives_the_whole_series_answer_at_every_evaluation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(2, 300))
        sign = float(rng.choice([-1.0, 1.0]))
        min_delta = float(rng.choice([0.0, 0.01, 0.1]))
        values = np.cumsum(rng.normal(size=n)) + float(rng.choice([0.0, 5.0]))
        values[rng.random(n) < 0.05] = values[0]  # ties
        scan = _Scan(sign)
        for cut in sorted(set(rng.integers(1, n + 1, size=6).tolist()) | {n}):
            assert scan.continues(values[:cut], sign)
            assert scan.extend(values[:cut], min_delta) == whole_series(values[:cut], sign, min_delta)
        assert scan.n == n  # every value was read once


def test_a_series_changed_before_its_end_is_scanned_again() -> None:
    values = np.array([1.0, 0.8, 0.7, 0.69])
    scan = _Scan(1.0)
    scan.extend(values, 0.01)
    changed = values.copy()
    changed[-1] = 0.5  # a step written again
    assert not scan.continues(changed, 1.0) and not scan.continues(values[:2], 1.0)
    assert not scan.continues(values, -1.0)
    assert scan.continues(np.append(values, 0.6), 1.0)


def test_the_rule_pickles_without_its_cache() -> None:
    import pickle

    rule = Overtraining()
    rule._scans[(0, "val_loss")] = _Scan(1.0)
    assert pickle.loads(pickle.dumps(rule))._scans == {}

