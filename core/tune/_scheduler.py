"""Stopping decisions (pure: plain values in, a :class:`Decision` with a reason out).

Asynchronous successive halving (ASHA, stopping variant) inside Hyperband. ``rung_system="shared"``
(the default): one rung system shared by all brackets (Syne Tune's default
``rung_system_per_bracket=False``), described first; ``"per_bracket"``: one per bracket, below. The levels are
``L_j = min_resource * eta**j`` for ``0 <= j < s_max``; bracket ``b`` has its rungs at ``L_j``,
``j >= b`` (see :mod:`._hyperband`). When trial ``t`` of bracket ``b`` first reports a step
``>= L_j``, its value ``v`` is recorded at level ``j``, whatever its bracket (a report that jumps
over several levels records ``v`` at each of them, also above a rung that stops the trial in that
report; the lowest rung that stops it gives the decision): below its first rung
(``j < b``) the value is only a reference for the others; at a rung (``j >= b``), with ``V`` the
values recorded at level ``j`` so far by every trial of every bracket (``v`` included, plus
warm-start priors at ``L_j``), ``n = |V|`` and ``k = max(1, floor(n / eta))``::

    continue  <=>  #{u in V : u better than v} < k

(``better``: strictly greater with ``mode="max"``, strictly smaller with ``mode="min"``, so ties
continue; a NaN value is recorded as the worst and always stops the trial at the rung; while
``n < eta``, ``k = 1``: only a value that nothing recorded there beats continues).
Brackets differ only in how long a trial runs before its first decision (its grace period); the
decisions of every bracket use everything observed at that resource level, so a small job's rungs
are not judged from a handful of values each.

``rung_system="per_bracket"`` (the asynchronous Hyperband of the ASHA paper, Li et al. 2020, whose
brackets are independent ASHA runs; Optuna's ``HyperbandPruner``; AutoGluon's default): a trial
records values only at its own bracket's rungs (``j >= b``), and ``V`` holds the values recorded at
level ``j`` by the trials of its bracket (plus the priors at ``L_j``). Each bracket then filters
only on the fidelities it trusts, Hyperband's hedge against misleading low-resource values (the
Syne Tune documentation: "the hedging is stronger if rung_system_per_bracket is True"); in a
shared system the survivors of the aggressive brackets, selected on low-resource values, join the
pools that judge the other brackets' trials (on the tuning benchmark's simulated family the most
aggressive bracket spent 35% of the resource shared, 26% per bracket; 19% in synchronous
Hyperband). Which one finds the
better configuration for a given resource depends on how far early values predict final ones:
see ``docs/tune.md`` (the tuning benchmark measures both).
``rung_warmup`` sets ``k`` while a rung is nearly empty: ``"promote_best"`` (the default, Optuna's
and Ray Tune's rule) ``k = max(1, floor(n / eta))``, so while ``n < eta`` the best value so far
continues; ``"strict"`` ``k = floor(n / eta)``, so a rung promotes nothing until it holds ``eta``
values (the first ``eta - 1`` trials to reach it stop there). Measured on the tuning benchmark,
neither is better on both of its objective families (``docs/tune.md``).
A decision is taken on arrival, so no worker ever waits for a rung to fill (stopping, not pausing).
A report with ``step >= max_resource`` always stops the trial (reason ``reached max_resource``, even
where a rung it jumps over would have stopped it: it ran its full budget);
no rung lies below ``min_resource``, so no trial is stopped before it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from tripwire._validate import did_you_mean

from ._errors import ConfigError
from ._format import format_value
from ._hyperband import HyperbandPlan

__all__ = ["Decision", "FIFOScheduler", "HyperbandScheduler", "rank_decision"]


@dataclass(frozen=True)
class Decision:
    """``stop``: whether the trial must stop; ``reason``: why, in words (a rung is named by its
    resource level: ``"bracket 1, rung at resource 9: ..."``); ``rung``: the index, within the
    trial's bracket, of the rung the decision was taken at (0: the bracket's first rung; ``None``
    when no rung was involved)."""

    stop: bool
    reason: str
    rung: int | None = None
    records: tuple[tuple[int, int, float], ...] = ()


def _key(value: float, mode: str) -> float:
    if math.isnan(value):
        return -math.inf
    return value if mode == "max" else -value


def rank_decision(sorted_keys: list[float], key: float, reduction_factor: int,
                  strict: bool = False) -> tuple[bool, int, int, int]:
    """Pure rank rule. ``sorted_keys``: ascending keys recorded at the rung, ``key`` included
    (higher is better). ``k = max(1, n // eta)``, or ``n // eta`` with ``strict``
    (``rung_warmup="strict"``). Returns ``(continue, better, n, k)``."""
    n = len(sorted_keys)
    k = n // reduction_factor if strict else max(1, n // reduction_factor)
    better = n - bisect.bisect_right(sorted_keys, key)
    return better < k, better, n, k


RUNG_SYSTEMS = ("per_bracket", "shared")
RUNG_WARMUPS = ("promote_best", "strict")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}"
                          f"{did_you_mean(str(value), choices) if isinstance(value, str) else ''}")
    return value


def check_rung_system(rung_system: Any) -> str:
    """Validation of ``rung_system`` (one of :data:`RUNG_SYSTEMS`)."""
    return _check_choice("rung_system", rung_system, RUNG_SYSTEMS)


def check_rung_warmup(rung_warmup: Any) -> str:
    """Validation of ``rung_warmup`` (one of :data:`RUNG_WARMUPS`)."""
    return _check_choice("rung_warmup", rung_warmup, RUNG_WARMUPS)


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

    def on_report(self, number: int, step: int, value: float, passed: bool = False) -> Decision:
        """Stop at ``max_resource`` only (``passed`` is :meth:`HyperbandScheduler.on_report`'s; no rung
        decides here)."""
        if self.max_resource is not None and step >= self.max_resource:
            return Decision(True, f"reached max_resource={self.max_resource}")
        return Decision(False, "no early stopping")

    def rung_reached(self, number: int) -> int:
        return 0

    def forget(self, number: int) -> None:
        return None

    def trim(self, number: int) -> list[tuple[int, int]]:
        """Nothing to remove: no rungs."""
        return []

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
    """Asynchronous Hyperband: brackets from :class:`HyperbandPlan`, ASHA decisions at rung levels
    shared by all brackets (``rung_system="shared"``) or per bracket (``"per_bracket"``); see the
    module docstring."""

    def __init__(self, plan: HyperbandPlan, mode: str = "max", seed: int = 0,
                 rung_system: str = "shared", rung_warmup: str = "promote_best") -> None:
        self.plan = plan
        self.mode = _check_mode(mode)
        self.seed = int(seed)
        self.rung_system = check_rung_system(rung_system)
        self._shared = self.rung_system == "shared"
        self.rung_warmup = check_rung_warmup(rung_warmup)
        self._strict = self.rung_warmup == "strict"
        self.min_resource = plan.min_resource
        self.max_resource = plan.max_resource
        self._eta = plan.reduction_factor
        self._levels = tuple(plan.min_resource * self._eta ** j for j in range(plan.s_max))
        self._values: dict[int, dict[int, float]] = {}               # level index -> trial -> value
        self._pools: dict[tuple[int, int], list[float]] = {}         # (system, level index) -> sorted keys
        self._priors: dict[int, list[float]] = {}                     # level -> values
        self._next: dict[int, int] = {}                               # trial -> next level index
        self._bracket: dict[int, int] = {}                            # running trial -> bracket
        self._rec_bracket: dict[int, int] = {}                        # trial with records -> bracket
        self._stopped_at: dict[int, int] = {}                         # trial stopped at a rung -> its level index

    def bracket(self, number: int) -> int:
        b = self._bracket.get(number)
        if b is None:
            b = self._bracket[number] = self.plan.bracket_of(self.seed, number)
        return b

    def _pool(self, b: int, j: int) -> list[float]:
        """Sorted keys of the values a bracket-``b`` trial is compared with at level ``j`` (priors
        included): every bracket's with ``rung_system="shared"``, bracket ``b``'s otherwise."""
        sid = (-1 if self._shared else b, j)
        keys = self._pools.get(sid)
        if keys is None:
            keys = self._pools[sid] = sorted(_key(v, self.mode) for v in self._priors.get(self._levels[j], ()))
        return keys

    def on_report(self, number: int, step: int, value: float, passed: bool = False) -> Decision:
        """Record ``value`` at every level that ``step`` reaches, decide at the trial's rungs.

        A report that jumps over several levels records its value at each of them, also above a
        rung that stops the trial in that report (trial 23o: a trial stopped at level 1 by a report
        at step 5 was missing from level 3, where the later decisions must see it); the decision is
        the lowest rung's that stops it. A report with ``step >= max_resource`` records the same and
        always stops with ``reached max_resource`` (trial 23o: not a rung's reason, a trial run to
        ``max_resource`` has reached every rung of its bracket).

        A value the trial has at a level already (an interrupted attempt's, kept by a resume) is
        replaced, not recorded a second time (trial 27b). ``passed=True``: the trial passed the rungs
        of this step before, with this very value (its interrupted attempt's journaled decision):
        the value is recorded as usual and no rung stops it (a report at ``max_resource`` still
        does), so a resumed job decides as the uninterrupted one did."""
        b = self.bracket(number)
        value = float(value)
        j = self._next.get(number, 0)
        records: list[tuple[int, int, float]] = []
        stop_at: tuple[int, str] | None = None      # (level index, reason) of the first rung that stops it
        if not self._shared:
            j = max(j, b)    # per bracket: nothing is recorded below the bracket's first rung
        while j < len(self._levels) and step >= self._levels[j]:
            level = self._levels[j]
            vals = self._values.setdefault(j, {})
            keys = self._pool(b, j)
            if number in vals:   # an interrupted attempt's value (kept by a resume): this one replaces it
                del keys[bisect.bisect_left(keys, _key(vals[number], self.mode))]
            vals[number] = value
            self._rec_bracket[number] = b
            bisect.insort(keys, _key(value, self.mode))
            records.append((b, j - b, value))
            j += 1
            self._next[number] = j
            if j - 1 < b or stop_at is not None or passed:
                continue     # below the bracket's first rung (a reference for the others), already stopped,
                             # or passed before with this value
            keep, better, n, k = rank_decision(keys, _key(value, self.mode), self._eta, self._strict)
            if math.isnan(value):
                stop_at = (j - 1, f"bracket {b}, rung at resource {level}: value is NaN")
            elif not keep:
                rule = f"{n}//{self._eta}" if self._strict else f"max(1, {n}//{self._eta})"
                stop_at = (j - 1, f"bracket {b}, rung at resource {level}: value {format_value(value)} has {better} "
                                  f"better of {n} (continue needs < {k} = {rule})")
        rec = tuple(records)
        passed = j - b
        if step >= self.max_resource:
            self._stopped_at.pop(number, None)
            return Decision(True, f"reached max_resource={self.max_resource}", passed - 1 if passed > 0 else None, rec)
        if stop_at is not None:
            self._stopped_at[number] = stop_at[0]
            return Decision(True, stop_at[1], stop_at[0] - b, rec)
        if records:
            self._stopped_at.pop(number, None)
        if passed <= 0:
            return Decision(False, "below the first rung", None, rec)
        return Decision(False, f"bracket {b}: passed the rung at resource {self._levels[j - 1]}", passed - 1, rec)

    def rung_reached(self, number: int) -> int:
        """How many of its bracket's rungs the trial has passed or been judged at: a trial stopped
        at a rung by a report that also reached higher levels (recorded there) counts up to that
        rung (trial 23o)."""
        j = self._next.get(number)
        if j is None:
            return 0
        stop = self._stopped_at.get(number)
        if stop is not None:
            j = min(j, stop + 1)
        return max(0, j - self.bracket(number))

    def end(self, number: int) -> None:
        """The trial ended; its recorded values stay (they are the rung state; the tuner calls
        :meth:`forget` first for a broken run: a trial a tripwire rule stopped, or one that failed)."""
        self._next.pop(number, None)
        self._bracket.pop(number, None)
        self._stopped_at.pop(number, None)

    def forget(self, number: int) -> None:
        """Remove every trace of a trial: an interrupted trial that will be rerun, or a broken run,
        whose values must judge no later trial (a trial a tripwire rule stopped, or one that failed:
        raised, timed out, lost its worker, trial 25f; the decisions already taken with its values
        stay). The removal is part of the state: :meth:`state_dict` no longer holds the trial's
        records."""
        self._stopped_at.pop(number, None)
        b = self._rec_bracket.pop(number, None)
        if b is None:
            self._next.pop(number, None)
            return
        for j, vals in self._values.items():
            if number in vals:
                v = vals.pop(number)
                keys = self._pool(b, j)
                del keys[bisect.bisect_left(keys, _key(v, self.mode))]
        self._next.pop(number, None)

    def trim(self, number: int) -> list[tuple[int, int]]:
        """Remove the trial's values at the levels its current run has not reported at: values of
        an interrupted attempt that a resume kept (trial 27b), where the rerun ended lower (stopped
        at an earlier rung, or by a completion criterion). Call it before :meth:`end`. Returns the
        ``(bracket, rung index)`` rows removed (the rung index relative to the bracket, as
        :meth:`records`)."""
        b = self._rec_bracket.get(number)
        if b is None:
            return []
        reached = self._next.get(number, 0)
        removed = []
        for j, vals in sorted(self._values.items()):
            if j >= reached and number in vals:
                v = vals.pop(number)
                keys = self._pool(b, j)
                del keys[bisect.bisect_left(keys, _key(v, self.mode))]
                removed.append((b, j - b))
        if not any(number in vals for vals in self._values.values()):
            self._rec_bracket.pop(number, None)
        return removed

    def add_prior(self, level: int, value: float) -> None:
        """A warm-start value observed at resource ``level`` by an earlier job."""
        self._priors.setdefault(int(level), []).append(float(value))
        for (_sid, j), keys in self._pools.items():
            if self._levels[j] == level:
                bisect.insort(keys, _key(float(value), self.mode))

    def records(self) -> list[tuple[int, int, int, float]]:
        """``(bracket, rung index, trial, value)`` for every recorded value; the rung index is
        relative to the trial's bracket (level ``min_resource * eta**(bracket + rung)``), negative
        for a level below the bracket's first rung."""
        out = []
        for j, vals in sorted(self._values.items()):
            for t, v in vals.items():
                b = self._rec_bracket[t]
                out.append((b, j - b, t, v))
        return sorted(out)

    def state_dict(self) -> dict[str, Any]:
        return {"type": "hyperband", "version": 2, "plan": self.plan.to_dict(), "mode": self.mode,
                "rung_system": self.rung_system, "rung_warmup": self.rung_warmup, "seed": self.seed,
                "records": [list(r) for r in self.records()],
                "priors": {str(k): list(v) for k, v in self._priors.items()},
                "progress": {str(t): j for t, j in self._next.items()},
                "stopped": {str(t): j for t, j in self._stopped_at.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("type") != "hyperband":
            raise ConfigError(f"state type={state.get('type')!r} does not match HyperbandScheduler ('hyperband')")
        if state.get("plan") != self.plan.to_dict() or state.get("mode") != self.mode:
            raise ConfigError(f"state plan={state.get('plan')!r} mode={state.get('mode')!r} does not match "
                              f"{self.plan.to_dict()!r} mode={self.mode!r}")
        if state.get("rung_system", self.rung_system) != self.rung_system:
            raise ConfigError(f"state rung_system={state.get('rung_system')!r} does not match "
                              f"rung_system={self.rung_system!r}")
        if state.get("rung_warmup", self.rung_warmup) != self.rung_warmup:
            # the recorded values do not depend on the rule: a state without the key (older journals,
            # or the Tuner's rebuild from the rungs table) loads into either
            raise ConfigError(f"state rung_warmup={state.get('rung_warmup')!r} does not match "
                              f"rung_warmup={self.rung_warmup!r}")
        self.seed = int(state["seed"])
        self._values, self._pools, self._priors, self._next, self._bracket, self._rec_bracket = {}, {}, {}, {}, {}, {}
        self._stopped_at = {}
        for level, vals in state.get("priors", {}).items():
            self._priors[int(level)] = [float(v) for v in vals]
        for b, i, t, v in state.get("records", []):
            b, t = int(b), int(t)   # the journaled bracket is the truth (older jobs assigned them differently)
            j = b + int(i)
            if not 0 <= j < len(self._levels) or not 0 <= b < self.plan.n_brackets:
                raise ConfigError(f"state record (bracket={b}, rung={i}, trial={t}) names no level of {self.plan!r}")
            self._bracket[t] = b
            if j < b and not self._shared:
                continue     # a reference of a shared-rung job: per bracket it compares with nothing
            self._rec_bracket[t] = b
            self._values.setdefault(j, {})[t] = float(v)
            bisect.insort(self._pool(b, j), _key(float(v), self.mode))
        version = int(state.get("version", 1))
        for t, i in state.get("progress", {}).items():
            # version 1 counted rungs of the trial's bracket, version 2 counts levels
            self._next[int(t)] = int(i) + (self.bracket(int(t)) if version == 1 else 0)
        for t, j in state.get("stopped", {}).items():
            # the level index a trial was stopped at below its last recorded level (trial 23o; a state
            # written before has none: a stop was then always at the last level recorded)
            self._stopped_at[int(t)] = int(j)
