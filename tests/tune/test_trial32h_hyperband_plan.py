"""Trial 32h F1: ``Hyperband(min_resource=1, max_resource=2**40)`` stalled ``fit()`` before its first
trial (the bracket order of an iteration has ``P = sum(n_b)`` entries; 19 s and 212 MB at 10**7 with
eta 3, never returning at 2**40), with no word. Plans whose iteration exceeds
``MAX_ITERATION_SLOTS`` are refused at construction, and the order is built 4 times faster, with
exactly the brackets it gave before."""

from __future__ import annotations

import random
import time
from functools import lru_cache

import pytest

from tripwire.tune import Hyperband
from tripwire.tune._errors import ConfigError
from tripwire.tune._hyperband import MAX_ITERATION_SLOTS, HyperbandPlan, deficit_order


@lru_cache(maxsize=None)
def _reference_order(weights: tuple[int, ...]) -> tuple[int, ...]:
    """The order as the code before trial 32h built it (the documented largest-deficit rule)."""
    period = sum(weights)
    counts = [0] * len(weights)
    out: list[int] = []
    for p in range(period):
        best = max(range(len(weights)), key=lambda b: ((p + 1) * weights[b] - period * counts[b], -b))
        counts[best] += 1
        out.append(best)
    return tuple(out)


def _reference_bracket(plan: HyperbandPlan, seed: int, number: int) -> int:
    if plan.s_max == 0:
        return 0
    weights = tuple(plan.n_configs(b) for b in range(plan.n_brackets))
    order = _reference_order(weights)
    period = len(order)
    r = random.Random(f"tripwire-hyperband:{seed}:{number // period}").randrange(period)
    return (order[r:] + order[:r])[number % period]


def test_the_order_is_the_same_as_before_for_every_plan_up_to_a_ratio_of_1000() -> None:
    # n_b depends on s_max and eta only: every plan with max/min <= 1000 and eta 2..10 is one of these
    seen: set[tuple[int, ...]] = set()
    for eta in range(2, 11):
        for ratio in range(1, 1001):
            plan = HyperbandPlan(1, ratio, eta)
            weights = tuple(plan.n_configs(b) for b in range(plan.n_brackets))
            if weights not in seen:
                seen.add(weights)
                assert deficit_order(weights) == _reference_order(weights), (eta, ratio)
    assert len(seen) > 20


@pytest.mark.parametrize("eta", [2, 3, 4])
def test_bracket_of_is_the_same_as_before_for_the_first_thousands_of_trials(eta: int) -> None:
    for m, ratio in ((1, 1), (1, 2), (2, 9), (1, 27), (3, 100), (1, 1000)):
        plan = HyperbandPlan(m, m * ratio, eta)
        for seed in (0, 7):
            got = [plan.bracket_of(seed, t) for t in range(3000)]
            assert got == [_reference_bracket(plan, seed, t) for t in range(3000)], (m, ratio, eta, seed)


@pytest.mark.parametrize("low, high, eta", [(1, 2**40, 2), (1, 10**7, 3), (1, 10**30, 3), (2, 2 * 10**7, 3)])
def test_a_plan_too_large_to_order_is_refused_at_construction(low: int, high: int, eta: int) -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"^max_resource / min_resource: got {high} / {low} with "
                                          rf"reduction_factor={eta}, a Hyperband iteration of \d+ trials; "
                                          rf"accepted: at most {MAX_ITERATION_SLOTS} trials per iteration"):
        Hyperband(min_resource=low, max_resource=high, reduction_factor=eta)
    assert time.perf_counter() - start < 1.0


def test_the_largest_accepted_plans_order_their_first_trial_promptly() -> None:
    plan = HyperbandPlan(1, 10**6, 2)   # P = 1,111,429: accepted
    assert sum(plan.n_configs(b) for b in range(plan.n_brackets)) <= MAX_ITERATION_SLOTS
    start = time.perf_counter()
    assert 0 <= plan.bracket_of(0, 0) < plan.n_brackets
    assert time.perf_counter() - start < 20.0   # (about 1 s alone; the machine is shared)
