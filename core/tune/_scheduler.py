"""Stopping decisions (pure: plain values in, a :class:`Decision` with a reason out).

Asynchronous successive halving (ASHA, stopping variant) inside each Hyperband bracket. When trial
``t`` of bracket ``b`` first reports a step ``>= r`` for a rung level ``r`` of ``b``, its value
``v`` is recorded at ``(b, r)``; with ``V`` the values recorded there so far (``v`` included, plus
warm-start priors at level ``r``), ``n = |V|`` and ``k = max(1, floor(n / eta))``::

    continue  <=>  #{u in V : u better than v} < k

(``better``: greater with ``mode="max"``, smaller with ``mode="min"``; a NaN value is recorded as
the worst and always stops the trial at the rung).
A decision is taken on arrival, so no worker ever waits for a rung to fill (stopping, not pausing).
A report with ``step >= max_resource`` always stops the trial (reason ``reached max_resource``);
no rung lies below ``min_resource``, so no trial is stopped before it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from ._errors import ConfigError
from ._hyperband import HyperbandPlan

__all__ = ["Decision", "FIFOScheduler", "HyperbandScheduler", "rank_decision"]


@dataclass(frozen=True)
class Decision:
    """``stop``: whether the trial must stop; ``reason``: why, in words; ``rung``: the rung index
    the decision was taken at (``None`` when no rung was involved)."""

    stop: bool
    reason: str
    rung: int | None = None


def _key(value: float, mode: str) -> float:
    if math.isnan(value):
        return -math.inf
    return value if mode == "max" else -value


def rank_decision(sorted_keys: list[float], key: float, reduction_factor: int) -> tuple[bool, int, int, int]:
    """Pure rank rule. ``sorted_keys``: ascending keys recorded at the rung, ``key`` included
    (higher is better). Returns ``(continue, better, n, k)``."""
    n = len(sorted_keys)
    k = max(1, n // reduction_factor)
    better = n - bisect.bisect_right(sorted_keys, key)
    return better < k, better, n, k


def _check_mode(mode: str) -> str:
    if mode not in ("max", "min"):
        raise ConfigError(f"mode={mode!r} is not one of 'max', 'min'")
    return mode


class FIFOScheduler:
    """No early stopping: a trial stops only when it reports ``step >= max_resource``."""

    def __init__(self, max_resource: int | None, mode: str = "max") -> None:
        self.max_resource = max_resource
        self.mode = _check_mode(mode)
        self.min_resource = max_resource

    def bracket(self, number: int) -> int:
        return 0

    def on_report(self, number: int, step: int, value: float) -> Decision:
        if self.max_resource is not None and step >= self.max_resource:
            return Decision(True, f"reached max_resource={self.max_resource}")
        return Decision(False, "no early stopping")

    def rung_reached(self, number: int) -> int:
        return 0

    def forget(self, number: int) -> None:
        return None

    def end(self, number: int) -> None:
        return None

    def add_prior(self, level: int, value: float) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"type": "fifo", "max_resource": self.max_resource, "mode": self.mode}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("type") != "fifo":
            raise ConfigError(f"state type={state.get('type')!r} does not match FIFOScheduler ('fifo')")


class HyperbandScheduler:
    """Asynchronous Hyperband: brackets from :class:`HyperbandPlan`, ASHA decisions per rung."""

    def __init__(self, plan: HyperbandPlan, mode: str = "max", seed: int = 0) -> None:
        self.plan = plan
        self.mode = _check_mode(mode)
        self.seed = int(seed)
        self.min_resource = plan.min_resource
        self.max_resource = plan.max_resource
        self._eta = plan.reduction_factor
        self._values: dict[tuple[int, int], dict[int, float]] = {}   # (bracket, rung) -> trial -> value
        self._sorted: dict[tuple[int, int], list[float]] = {}        # same, sorted keys (priors too)
        self._priors: dict[int, list[float]] = {}                     # level -> values
        self._next: dict[int, int] = {}                               # trial -> next rung index
        self._bracket: dict[int, int] = {}

    def bracket(self, number: int) -> int:
        b = self._bracket.get(number)
        if b is None:
            b = self._bracket[number] = self.plan.bracket_of(self.seed, number)
        return b

    def on_report(self, number: int, step: int, value: float) -> Decision:
        """Record ``value`` at every rung of the trial's bracket that ``step`` reaches, decide."""
        b = self.bracket(number)
        levels = self.plan.rungs(b)
        i = self._next.get(number, 0)
        while i < len(levels) and step >= levels[i]:
            key = _key(float(value), self.mode)
            slot = (b, i)
            self._values.setdefault(slot, {})[number] = float(value)
            keys = self._sorted.get(slot)
            if keys is None:
                keys = self._sorted[slot] = sorted(_key(v, self.mode) for v in self._priors.get(levels[i], ()))
            bisect.insort(keys, key)
            i += 1
            self._next[number] = i
            keep, better, n, k = rank_decision(keys, key, self._eta)
            if math.isnan(value):
                return Decision(True, f"bracket {b} rung {levels[i - 1]}: value is NaN", i - 1)
            if not keep:
                return Decision(True, f"bracket {b} rung {levels[i - 1]}: value {value:.6g} has {better} better "
                                      f"of {n} (continue needs < {k} = max(1, {n}//{self._eta}))", i - 1)
        if step >= self.max_resource:
            return Decision(True, f"reached max_resource={self.max_resource}", i - 1 if i else None)
        if i == 0:
            return Decision(False, "below the first rung", None)
        return Decision(False, f"bracket {b}: passed rung {levels[i - 1]}", i - 1)

    def rung_reached(self, number: int) -> int:
        """How many rungs the trial has passed or been judged at."""
        return self._next.get(number, 0)

    def end(self, number: int) -> None:
        """The trial ended; its rung values stay (they are the rung state)."""
        self._next.pop(number, None)
        self._bracket.pop(number, None)

    def forget(self, number: int) -> None:
        """Remove every trace of a trial (an interrupted trial that will be rerun)."""
        b = self.bracket(number)
        for (bb, i), vals in self._values.items():
            if bb == b and number in vals:
                v = vals.pop(number)
                keys = self._sorted[(bb, i)]
                del keys[bisect.bisect_left(keys, _key(v, self.mode))]
        self._next.pop(number, None)

    def add_prior(self, level: int, value: float) -> None:
        """A warm-start value observed at resource ``level`` by an earlier job."""
        self._priors.setdefault(int(level), []).append(float(value))
        for (b, i), keys in self._sorted.items():
            if self.plan.rungs(b)[i] == level:
                bisect.insort(keys, _key(float(value), self.mode))

    def records(self) -> list[tuple[int, int, int, float]]:
        """``(bracket, rung index, trial, value)`` for every recorded value."""
        return [(b, i, t, v) for (b, i), vals in sorted(self._values.items()) for t, v in vals.items()]

    def state_dict(self) -> dict[str, Any]:
        return {"type": "hyperband", "plan": self.plan.to_dict(), "mode": self.mode, "seed": self.seed,
                "records": [list(r) for r in self.records()],
                "priors": {str(k): list(v) for k, v in self._priors.items()},
                "progress": {str(t): i for t, i in self._next.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("type") != "hyperband":
            raise ConfigError(f"state type={state.get('type')!r} does not match HyperbandScheduler ('hyperband')")
        if state.get("plan") != self.plan.to_dict() or state.get("mode") != self.mode:
            raise ConfigError(f"state plan={state.get('plan')!r} mode={state.get('mode')!r} does not match "
                              f"{self.plan.to_dict()!r} mode={self.mode!r}")
        self.seed = int(state["seed"])
        self._values, self._sorted, self._priors, self._next, self._bracket = {}, {}, {}, {}, {}
        for level, vals in state.get("priors", {}).items():
            self._priors[int(level)] = [float(v) for v in vals]
        for b, i, t, v in state.get("records", []):
            slot = (int(b), int(i))
            self._values.setdefault(slot, {})[int(t)] = float(v)
        for slot, vals in self._values.items():
            level = self.plan.rungs(slot[0])[slot[1]]
            self._sorted[slot] = sorted([_key(v, self.mode) for v in vals.values()]
                                        + [_key(v, self.mode) for v in self._priors.get(level, ())])
        self._next = {int(t): int(i) for t, i in state.get("progress", {}).items()}
