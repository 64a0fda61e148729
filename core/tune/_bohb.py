"""Model-based sampling inside Hyperband (BOHB-style), through Optuna's TPE sampler in ask/tell mode.

``Hyperband(..., sampler="tpe")`` (``sampler="bohb"`` is the same, journaled as ``"tpe"``) proposes
the configuration of trial ``t`` as follows:

1. With probability ``random_fraction`` (default ``1/3``, decided by ``default_rng([seed, t])``)
   or while no resource level holds ``min_points`` results, ``t`` gets the random configuration
   ``Space.sample(seed, t)`` (the one plain Hyperband would give it).
2. Otherwise, ``L`` is the highest level of ``{rung levels} U {max_resource}`` at which at least
   ``min_points`` trials have reported a (non-NaN) value; a TPE model (Optuna's ``TPESampler``,
   ``multivariate=True``) fitted to the values reported at ``L`` proposes the configuration.
   ``min_points`` defaults to ``d + 2`` for ``d`` hyperparameters (BOHB's ``N_min = d + 1``, plus
   one so that the good and bad densities both hold points).

Observations (``observe(number, params, step, value)``): a report at step ``s`` counts at the
highest level ``L <= s`` (a rung level or ``max_resource``) where the trial has no value yet, so a
``train`` that reports every 2 epochs (steps 2, 4, ..., 26, 27 for levels 1, 3, 9, 27) gives the
model its values at 1 (step 2), 3 (step 4), 9 (step 10) and 27 (trial 30e: only a step equal to a
level counted, and such a train fed the model at ``max_resource`` only). A report below the lowest
level, or a NaN one, is no observation. A trial that returned its objective without ever
reporting (an sklearn fit that returns a score) is observed at its resource, ``max_resource``
(:meth:`TPESampler.trial_ended`; trial 30e: such a job never fed the model, and its "model-based"
proposals were random search's, without a word). Where trials end with an objective but no level
holds ``min_points`` values once ``min_points`` of them have ended (every trial returned before its
first level, or reported NaN), a WARNING says once that the proposals stay random, and why.

This is BOHB (Falkner et al., 2018) with Optuna's TPE for the KDE pair: it models the largest budget
with enough data (BOHB's "largest budget with at least N_min observations"), so early on the cheap
rungs guide the search and later the full-budget results do. Hyperband's survivors reach the top
level, so once it holds ``min_points`` values the model sees good configurations only there: its
"bad" density is made of the survivors' worse half, and it no longer sees what the low rungs
rejected (trial 30e; BOHB models this way, and ``docs/tune.md`` gives the benchmark's figures).

Determinism: a model-based proposal is a pure function of ``(seed, trial number, level, the
values observed at that level when the trial starts)``: each proposal builds a fresh TPE study from
those values in trial-number order, its sampler seeded from ``(seed, number, level)``. Nothing else
carries over between proposals (an Optuna sampler's random state would: a study that asked before
answers differently). So a job with one worker proposes the same configurations whether it ran
uninterrupted or was killed and resumed (:meth:`Tuner.resume` replays the journaled reports; an
interrupted trial's partial reports are set aside, in the journal's ``earlier_reports``, and its
rerun reports afresh). With
parallel workers the values that have arrived when a trial starts vary from run to run, and so can
the proposals, as with any asynchronous model-based method.

Needs the extra ``tripwire[bohb]`` (Optuna).
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any

import numpy as np

from tripwire._errors import missing_extra
from tripwire._validate import did_you_mean

from ._errors import ConfigError
from ._space import Categorical, Continuous, Integer, Scalar, Space

__all__ = ["TPESampler"]

logger = logging.getLogger("tripwire.tune")


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:
        raise missing_extra("optuna", "bohb", exc) from None
    return optuna


class TPESampler:
    """Proposes configurations for :class:`~tripwire.tune.Hyperband` from the results so far
    (see the module docstring). ``levels``: the resource levels to model (rung levels and
    ``max_resource``); ``mode``: ``"max"`` or ``"min"``."""

    def __init__(self, space: Space, seed: int, levels: list[int], mode: str, random_fraction: float,
                 min_points: int | None) -> None:
        self._optuna = optuna = _import_optuna()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space, self.seed, self.mode = space, int(seed), mode
        self.levels = sorted(set(int(x) for x in levels))
        self._level_set = set(self.levels)
        self.random_fraction = float(random_fraction)
        self.min_points = len(space.ranges) + 2 if min_points is None else int(min_points)
        self._dist: dict[str, Any] = {}
        self._reverse: set[str] = set()
        fd, idist, cd = (optuna.distributions.FloatDistribution, optuna.distributions.IntDistribution,
                         optuna.distributions.CategoricalDistribution)
        for name, p in space.ranges.items():
            if isinstance(p, Categorical):
                self._dist[name] = cd(p.values)
            elif isinstance(p, Integer):
                self._dist[name] = idist(int(p.low), int(p.high), log=p._resolved == "log")
            elif isinstance(p, Continuous) and p._resolved == "reverse_log":
                # modelled on t = -log(1 - x), the scale the range is sampled on
                self._reverse.add(name)
                self._dist[name] = fd(-math.log(1.0 - p.low), -math.log(1.0 - p.high))
            else:
                self._dist[name] = fd(p.low, p.high, log=p._resolved == "log")
        self._obs: dict[int, dict[int, float]] = {}     # level -> trial -> value
        self._params: dict[int, dict[str, Scalar]] = {}
        self._reported: set[int] = set()   # the trials that reported (a value or NaN)
        self._ended_ok = 0                 # trials ended with an objective
        self._warned = False

    # ---- observations ------------------------------------------------------------------------
    def observe(self, number: int, params: dict[str, Scalar], step: int, value: float) -> None:
        """A trial reported ``value`` after ``step`` resource units: it counts at the highest level
        ``<= step`` where the trial has no value yet (none below the lowest level; NaN: none)."""
        self._reported.add(int(number))
        if value is None or math.isnan(value):
            return
        level = next((lvl for lvl in reversed(self.levels) if lvl <= step), None)
        if level is None:
            return
        at = self._obs.setdefault(level, {})
        if int(number) in at:  # (the first report that reached it counts)
            return
        self._params[number] = dict(params)
        at[int(number)] = float(value)

    def trial_ended(self, number: int, params: dict[str, Scalar], status: str, value: float | None,
                    resource: int) -> None:
        """Trial ``number`` ended (``status``, its objective ``value``, its ``resource``). One that
        returned its objective without ever reporting is observed at ``resource`` (its
        ``max_resource``: the tuner charges it so), as a report there would be. Says once, in a
        WARNING, when ``min_points`` trials have ended with an objective and no level holds
        ``min_points`` values (the proposals stay random: see the module docstring)."""
        ok = status in ("completed", "stopped") and value is not None and not math.isnan(value)
        if ok and int(number) not in self._reported and resource:
            self.observe(number, params, int(resource), float(value))  # type: ignore[arg-type]
        if not ok:
            return
        self._ended_ok += 1
        if self._warned or self._ended_ok < self.min_points or self.model_level() is not None:
            return
        self._warned = True
        logger.warning(
            "tripwire.tune: sampler='tpe' has no model: %d trials ended with an objective, but no resource level "
            "(%s) holds min_points=%d values; the model learns from the reports at or past a level (each counts at "
            "the highest level it reached) and from the objective of a trial that returned without reporting. "
            "These trials reported only below the lowest level %d, or NaN, so the configurations stay random "
            "search's: report the metric at least once at or past that level (trial.report(step, value)), or "
            "return it without reporting", self._ended_ok, ", ".join(map(str, self.levels)), self.min_points,
            self.levels[0])

    def forget(self, number: int) -> None:
        """Drop a trial's observations (an interrupted trial that will be rerun)."""
        for vals in self._obs.values():
            vals.pop(number, None)
        self._reported.discard(int(number))

    def model_level(self) -> int | None:
        """The level the next model-based proposal would use (``None``: not enough results yet)."""
        for level in reversed(self.levels):
            if len(self._obs.get(level, ())) >= self.min_points:
                return level
        return None

    # ---- proposals ---------------------------------------------------------------------------
    def __call__(self, number: int) -> dict[str, Scalar]:
        rng = np.random.default_rng([self.seed, int(number), 0x7B0B])
        if float(rng.random()) < self.random_fraction:
            return self.space.sample(self.seed, number)
        level = self.model_level()
        if level is None:
            return self.space.sample(self.seed, number)
        return self._propose(level, number)

    def size(self) -> int | None:
        return None

    def _study(self, level: int, number: int) -> Any:
        """A fresh study of the values at ``level`` in trial-number order, its sampler seeded from
        ``(seed, number, level)``: the proposal depends on nothing else (see the module docstring)."""
        optuna = self._optuna
        seed = int(np.random.SeedSequence([self.seed, int(number), int(level), 0x7B0B]).generate_state(1)[0])
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=0, constant_liar=False)
        study = optuna.create_study(direction="maximize" if self.mode == "max" else "minimize", sampler=sampler)
        values = self._obs.get(level, {})
        study.add_trials([optuna.trial.create_trial(params=self._to_internal(self._params[t]), distributions=self._dist,
                                                    value=values[t]) for t in sorted(values)])
        return study

    def _propose(self, level: int, number: int) -> dict[str, Scalar]:
        trial = self._study(level, number).ask(self._dist)
        return self._from_internal(dict(trial.params))

    def _to_internal(self, params: dict[str, Scalar]) -> dict[str, Any]:
        out = dict(params)
        for name in self._reverse:
            out[name] = -math.log(1.0 - float(params[name]))  # type: ignore[arg-type]
        return out

    def _from_internal(self, params: dict[str, Any]) -> dict[str, Scalar]:
        out: dict[str, Scalar] = {}
        for name, p in self.space.ranges.items():
            v = params[name]
            if name in self._reverse:
                v = min(max(1.0 - math.exp(-float(v)), p.low), p.high)  # type: ignore[attr-defined]
            elif isinstance(p, Integer):
                v = int(v)
            elif isinstance(p, Continuous):
                v = float(v)
            out[name] = v
        return out


#: The names ``Hyperband(sampler=...)`` takes: each to the name it is journaled (and shown) under.
#: ``"bohb"`` is ``"tpe"``, the BOHB-style sampler, under the name of its extra (``tripwire[bohb]``,
#: trial 33d F5: the README's "bohb (the tuner's model-based sampler)" was refused as a sampler).
SAMPLERS = {"random": "random", "tpe": "tpe", "bohb": "tpe"}


def canonical_sampler(sampler: Any) -> str:
    """The name ``sampler`` is journaled under (``"bohb"`` is ``"tpe"``); raises :class:`ConfigError`
    for a name that is none of :data:`SAMPLERS`."""
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        hint = did_you_mean(sampler.strip().lower(), SAMPLERS) if isinstance(sampler, str) else ""  # (TPE: tpe)
        raise ConfigError(f"Hyperband sampler: got {sampler!r}{hint}; accepted: 'random', 'tpe' (also 'bohb': the "
                          "same BOHB-style sampler, journaled as 'tpe')")
    return SAMPLERS[sampler]


def check_sampler_args(sampler: Any, random_fraction: Any, min_points: Any) -> None:
    """Validation of :class:`~tripwire.tune.Hyperband`'s sampler arguments."""
    canonical_sampler(sampler)
    if isinstance(random_fraction, bool) or not isinstance(random_fraction, (int, float)) \
            or not 0.0 <= float(random_fraction) <= 1.0:
        raise ConfigError(f"Hyperband random_fraction={random_fraction!r} must be a number in [0, 1]")
    if min_points is not None and (isinstance(min_points, bool) or not isinstance(min_points, numbers.Integral)
                                   or min_points < 2):  # (numpy's integers are ints: trial 24f)
        raise ConfigError(f"Hyperband min_points={min_points!r} must be None or an int >= 2")
