"""Hyperband arithmetic, exact integer math (no float logarithms).

With ``m = min_resource``, ``M = max_resource``, ``eta = reduction_factor``:

- ``s_max = max{s >= 0 : m * eta**s <= M}`` and there are ``s_max + 1`` brackets
  (``m=1, M=243, eta=3``: ``3**5 = 243`` so 6 brackets; a float ``log(243, 3)`` gives 4.999...).
- Bracket ``b`` (``0 <= b <= s_max``, ``b = 0`` the most aggressive) has ``s = s_max - b`` rungs at
  the resource levels ``m * eta**j`` for ``b <= j < s_max``; a trial that passes them all runs to
  ``M``. Bracket ``s_max`` has no rung: full budget, like random search.
- Bracket ``b`` starts ``n_b = ceil((s_max + 1) * eta**s / (s + 1))`` configurations per Hyperband
  iteration (the paper's ``n``), keeps ``floor(n_b / eta**k)`` after ``k`` rungs.
- Trial ``t`` of a job seeded ``seed`` goes to a bracket chosen deterministically. With
  ``P = sum(n_b)``, Hyperband iteration ``i = t // P`` holds ``n_b`` slots of each bracket ``b``
  (brackets receive trials in proportion to ``n_b``, as in synchronous Hyperband and as Optuna's and
  Syne Tune's bracket weights). The slots are ordered by largest deficit: position ``p`` goes to
  the bracket with the largest ``(p + 1) * n_b - P * c_b`` (``c_b``: its slots so far; ties to the
  lower ``b``), in integers; this order is then rotated by ``r`` positions, ``r`` drawn in
  ``[0, P)`` from ``random.Random(f"tripwire-hyperband:{seed}:{i}")``. Before rotation every
  prefix of ``t`` slots holds ``t * n_b / P`` slots of bracket ``b`` up to less than 1; after it,
  up to less than 2 (a window of the cyclic order is a difference of two prefixes). So a job that
  ends early (a resource or time limit, a small ``max_jobs``) still runs Hyperband's mix of
  brackets, not a random-shuffle draw of it.
- The order of an iteration is built once (``P`` positions, cached), so ``P`` is bounded:
  ``P <= MAX_ITERATION_SLOTS`` (2**21 = 2,097,152; ``max_resource / min_resource`` up to about
  10**6 for ``reduction_factor`` 2 to 5). A plan with a larger ``P`` raises ``ConfigError``
  (trial 32h: ``max_resource=2**40`` stalled ``fit()`` before its first trial, and never returned).
"""

from __future__ import annotations

import numbers
import random
from functools import lru_cache
from typing import Any

from ._errors import ConfigError

__all__ = ["HyperbandPlan"]

#: The most trials one Hyperband iteration may hold (``P = sum(n_b)``): its bracket order is built
#: and cached whole (about 1 s and 20 MB at this bound).
MAX_ITERATION_SLOTS = 2**21


def _positive_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int ``>= minimum``; numpy's integers are integers, returned as Python ints
    (trial 24f: ``Hyperband(max_resource=np.int64(27))`` was refused); a bool is none."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name}={value!r} must be an int >= {minimum}")
    if value < minimum:
        raise ConfigError(f"{name}={value!r} must be an int >= {minimum}")
    return int(value)


class HyperbandPlan:
    """The brackets, rungs and bracket assignment of a Hyperband job (pure, immutable)."""

    __slots__ = ("min_resource", "max_resource", "reduction_factor", "s_max", "_rungs", "_n")

    def __init__(self, min_resource: int, max_resource: int, reduction_factor: int = 3) -> None:
        self.min_resource = _positive_int("min_resource", min_resource, 1)
        self.max_resource = _positive_int("max_resource", max_resource, 1)
        self.reduction_factor = _positive_int("reduction_factor", reduction_factor, 2)
        if self.max_resource < self.min_resource:
            raise ConfigError(f"max_resource={max_resource!r} must be >= min_resource={min_resource!r}")
        eta, m = self.reduction_factor, self.min_resource
        s = 0
        while m * eta ** (s + 1) <= self.max_resource:
            s += 1
        self.s_max = s
        self._rungs = tuple(tuple(m * eta**j for j in range(b, s)) for b in range(s + 1))
        self._n = tuple(-(-(s + 1) * eta ** (s - b) // (s - b + 1)) for b in range(s + 1))
        period = sum(self._n)
        if period > MAX_ITERATION_SLOTS:
            # trial 32h F1: the iteration's order has P entries; 2**40 never finished building it
            raise ConfigError(
                f"max_resource / min_resource: got {self.max_resource} / {self.min_resource} with "
                f"reduction_factor={eta}, a Hyperband iteration of {period} trials; accepted: at most "
                f"{MAX_ITERATION_SLOTS} trials per iteration (max_resource / min_resource up to about 10**6 for "
                f"reduction_factor 2 to 5): count the resource in coarser units (epochs, not steps), or raise "
                f"min_resource or reduction_factor")

    @property
    def n_brackets(self) -> int:
        """``s_max + 1``."""
        return self.s_max + 1

    def rungs(self, bracket: int) -> tuple[int, ...]:
        """Resource levels where bracket ``bracket`` decides to stop or continue a trial."""
        return self._rungs[bracket]

    def n_configs(self, bracket: int) -> int:
        """``n_b``: configurations bracket ``bracket`` starts per Hyperband iteration."""
        return self._n[bracket]

    def survivors(self, bracket: int) -> list[int]:
        """Trials alive at each rung and at ``max_resource``: ``floor(n_b / eta**k)``."""
        n, eta = self._n[bracket], self.reduction_factor
        return [n // eta**k for k in range(len(self._rungs[bracket]) + 1)]

    def budget(self, bracket: int) -> int:
        """Resource bracket ``bracket`` spends per iteration with synchronous successive halving."""
        levels = [*self._rungs[bracket], self.max_resource]
        alive = self.survivors(bracket)
        spent, prev = 0, 0
        for level, count in zip(levels, alive):
            spent += count * (level - prev)
            prev = level
        return spent

    def bracket_of(self, seed: int, number: int) -> int:
        """The bracket of trial ``number`` (deterministic in ``seed`` and ``number``)."""
        if self.s_max == 0:
            return 0
        period = sum(self._n)
        return _iteration_order(self._n, int(seed), number // period)[number % period]

    def table(self) -> list[dict[str, Any]]:
        """One row per bracket: ``bracket``, ``n_configs``, ``rungs``, ``survivors``, ``budget``."""
        return [{"bracket": b, "n_configs": self._n[b], "rungs": list(self._rungs[b]),
                 "survivors": self.survivors(b), "budget": self.budget(b)}
                for b in range(self.n_brackets)]

    def to_dict(self) -> dict[str, int]:
        return {"min_resource": self.min_resource, "max_resource": self.max_resource,
                "reduction_factor": self.reduction_factor}

    def __repr__(self) -> str:
        return (f"HyperbandPlan(min_resource={self.min_resource}, max_resource={self.max_resource}, "
                f"reduction_factor={self.reduction_factor})")


def deficit_order(weights: tuple[int, ...]) -> tuple[int, ...]:
    """One iteration's brackets before rotation (pure; see the module docstring)."""
    period = sum(weights)
    brackets = range(len(weights))
    # deficit[b] = (p + 1) * weights[b] - period * c_b, updated in place (4 times faster than
    # recomputing it; the strict > keeps ties to the lower b)
    deficit = [0] * len(weights)
    out: list[int] = []
    for _ in range(period):
        best, top = 0, None
        for b in brackets:
            value = deficit[b] + weights[b]
            deficit[b] = value
            if top is None or value > top:
                best, top = b, value
        deficit[best] -= period
        out.append(best)
    return tuple(out)


@lru_cache(maxsize=64)
def _iteration_order(weights: tuple[int, ...], seed: int, iteration: int) -> tuple[int, ...]:
    order = _deficit_order_cached(weights)
    r = random.Random(f"tripwire-hyperband:{seed}:{iteration}").randrange(len(order))
    return order[r:] + order[:r]


@lru_cache(maxsize=16)
def _deficit_order_cached(weights: tuple[int, ...]) -> tuple[int, ...]:
    return deficit_order(weights)
