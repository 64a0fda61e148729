"""Bracket arithmetic against hand-computed sequences (Hyperband paper, Table 1 for R = 81)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tripwire._errors import ConfigError
from tripwire.tune import HyperbandPlan
from tripwire.tune._hyperband import deficit_order
from tripwire.tune._errors import ConfigError as TuneConfigError


def test_paper_table_r81() -> None:
    plan = HyperbandPlan(1, 81, 3)
    assert plan.n_brackets == 5
    assert [plan.n_configs(b) for b in range(5)] == [81, 34, 15, 8, 5]
    assert [plan.rungs(b) for b in range(5)] == [(1, 3, 9, 27), (3, 9, 27), (9, 27), (27,), ()]
    assert plan.survivors(0) == [81, 27, 9, 3, 1]
    assert plan.survivors(1) == [34, 11, 3, 1]
    assert plan.survivors(2) == [15, 5, 1]
    assert plan.survivors(3) == [8, 2]
    assert plan.survivors(4) == [5]
    # 81*1 + 27*(3-1) + 9*(9-3) + 3*(27-9) + 1*(81-27)
    assert plan.budget(0) == 81 + 54 + 54 + 54 + 54
    assert plan.budget(4) == 5 * 81


def test_exact_power_is_not_off_by_one() -> None:
    plan = HyperbandPlan(1, 243, 3)
    assert plan.n_brackets == 6
    assert int(math.log(243, 3)) + 1 == 5  # the float formula Optuna uses loses a bracket
    assert plan.rungs(0) == (1, 3, 9, 27, 81)
    assert HyperbandPlan(1, 1000, 10).n_brackets == 4   # log10(1000) = 2.9999999999999996
    assert HyperbandPlan(2, 1024, 2).n_brackets == 10


def test_non_power_ranges() -> None:
    plan = HyperbandPlan(2, 30, 3)
    assert plan.s_max == 2
    assert [plan.rungs(b) for b in range(3)] == [(2, 6), (6,), ()]
    assert HyperbandPlan(1, 30, 3).rungs(0) == (1, 3, 9)
    one = HyperbandPlan(5, 5, 3)
    assert one.n_brackets == 1 and one.rungs(0) == () and one.bracket_of(0, 7) == 0
    assert HyperbandPlan(5, 14, 3).n_brackets == 1


def test_no_rung_below_min_or_at_max() -> None:
    for m, big, eta in [(1, 81, 3), (3, 100, 2), (7, 7 * 4**3, 4), (10, 99, 3)]:
        plan = HyperbandPlan(m, big, eta)
        for b in range(plan.n_brackets):
            assert all(m <= r < big for r in plan.rungs(b))
        assert plan.rungs(plan.s_max) == ()


def test_bracket_assignment_deterministic_and_weighted() -> None:
    plan = HyperbandPlan(1, 81, 3)
    period = sum(plan.n_configs(b) for b in range(5))  # 143
    first = [plan.bracket_of(0, n) for n in range(2 * period)]
    assert first == [HyperbandPlan(1, 81, 3).bracket_of(0, n) for n in range(2 * period)]
    counts = Counter(first[:period])
    assert [counts[b] for b in range(5)] == [81, 34, 15, 8, 5]  # exact per iteration
    assert first != [plan.bracket_of(1, n) for n in range(2 * period)]  # the seed matters
    assert first[:period] != first[period:]  # each iteration reshuffled


def test_deficit_order_hand_computed() -> None:
    # weights (9, 5, 3), P = 17: position p goes to argmax_b (p + 1) * n_b - 17 * c_b (ties: lower b)
    # p=0: 9,5,3 -> 0; p=1: 1,10,6 -> 1; p=2: 10,-2,9 -> 0; p=3: 2,3,12 -> 2; p=4: 11,8,-2 -> 0;
    # p=5: 3,13,1 -> 1; p=6: 12,1,4 -> 0; p=7: 4,6,7 -> 2; p=8: 13,11,-7 -> 0; p=9: 5,16,-4 -> 1;
    # p=10: 14,4,-1 -> 0; p=11: 6,9,2 -> 1; p=12: 15,-3,5 -> 0; p=13: 7,2,8 -> 2; p=14: 16,7,-6 -> 0;
    # p=15: 8,12,-3 -> 1; p=16: 17,0,0 -> 0
    assert deficit_order((9, 5, 3)) == (0, 1, 0, 2, 0, 1, 0, 2, 0, 1, 0, 1, 0, 2, 0, 1, 0)
    plan = HyperbandPlan(1, 9, 3)
    assert [plan.n_configs(b) for b in range(3)] == [9, 5, 3]
    seq = deficit_order((9, 5, 3))
    for seed in range(3):   # each iteration is a seeded rotation of that order
        got = tuple(plan.bracket_of(seed, t) for t in range(17, 34))
        assert any(got == seq[r:] + seq[:r] for r in range(17))


def test_every_prefix_holds_the_hyperband_mix() -> None:
    for m, big, eta in [(1, 81, 3), (1, 30, 3), (1, 243, 3), (2, 64, 2)]:
        plan = HyperbandPlan(m, big, eta)
        n = [plan.n_configs(b) for b in range(plan.n_brackets)]
        period = sum(n)
        for seed in range(4):
            seq = [plan.bracket_of(seed, t) for t in range(2 * period)]
            for it in range(2):
                counts = [0] * len(n)
                for t in range(period):
                    counts[seq[it * period + t]] += 1
                    for b, w in enumerate(n):   # |count - t * n_b / P| < 2, in integers
                        assert abs(counts[b] * period - (t + 1) * w) < 2 * period, (m, big, seed, t, b)
            unrotated, c = deficit_order(tuple(n)), [0] * len(n)
            for t, b in enumerate(unrotated):   # before rotation: < 1
                c[b] += 1
                assert all(abs(c[k] * period - (t + 1) * w) < period for k, w in enumerate(n))
                assert counts == n   # exact per iteration


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 10, 3), r"min_resource=0 must be an int >= 1"),
        ((1, 0, 3), r"max_resource=0 must be an int >= 1"),
        ((5, 4, 3), r"max_resource=4 must be >= min_resource=5"),
        ((1, 10, 1), r"reduction_factor=1 must be an int >= 2"),
        ((1.0, 10, 3), r"min_resource=1.0 must be an int"),
    ],
)
def test_validation(args: tuple, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        HyperbandPlan(*args)
    assert ConfigError is TuneConfigError
    with pytest.raises(ValueError):
        HyperbandPlan(*args)


def test_table_rows() -> None:
    rows = HyperbandPlan(1, 9, 3).table()
    assert rows == [
        {"bracket": 0, "n_configs": 9, "rungs": [1, 3], "survivors": [9, 3, 1], "budget": 9 + 3 * 2 + 6},
        {"bracket": 1, "n_configs": 5, "rungs": [3], "survivors": [5, 1], "budget": 15 + 6},
        {"bracket": 2, "n_configs": 3, "rungs": [], "survivors": [3], "budget": 27},
    ]
