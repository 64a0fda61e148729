"""Search strategies (plain typed configs with ``to_dict``/``from_dict``).

- :class:`RandomSearch`: configuration of trial ``t`` drawn from ``default_rng([seed, t])``; no
  early stopping (a trial stops only at ``max_resource``, when one is given).
- :class:`GridSearch`: the grid in lexicographic order of sorted parameter names; Continuous
  ranges need ``num_points``, which also thins Integer ranges with more values
  (``integer_grid="num_points"``, the default; ``"all"`` keeps every integer); ``max_jobs``
  defaults to the grid size.
- :class:`Hyperband`: asynchronous Hyperband stopping (see :mod:`._hyperband` and
  :mod:`._scheduler`); defaults ``min_resource=1``, ``max_resource=81``, ``reduction_factor=3``,
  ``sampler="random"`` (random configurations) or ``"tpe"`` (BOHB-style, also named ``"bohb"``, see :mod:`._bohb`;
  ``random_fraction=1/3``, ``min_points=None``: number of hyperparameters + 2),
  ``rung_system="shared"`` (or ``"per_bracket"``, see :mod:`._scheduler`), ``rung_warmup="promote_best"``
  (or ``"strict"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

from tripwire._validate import check_init_keys, did_you_mean
from tripwire._validate import checked_keywords

from ._bohb import TPESampler, _import_optuna, canonical_sampler, check_sampler_args
from ._errors import ConfigError
from ._hyperband import HyperbandPlan, _positive_int
from ._scheduler import FIFOScheduler, HyperbandScheduler, check_rung_system, check_rung_warmup
from ._space import Scalar, Space

__all__ = ["GridSearch", "Hyperband", "RandomSearch", "Strategy", "strategy_from_dict"]


class _Sampler:
    def __init__(self, space: Space, seed: int) -> None:
        self.space, self.seed = space, seed

    def __call__(self, number: int) -> dict[str, Scalar] | None:
        return self.space.sample(self.seed, number)

    def observe(self, number: int, params: dict[str, Scalar], step: int, value: float) -> None:
        return None  # configurations do not depend on results

    def forget(self, number: int) -> None:
        return None

    def trial_ended(self, number: int, params: dict[str, Scalar], status: str, value: float | None,
                    resource: int) -> None:
        return None  # configurations do not depend on results

    def size(self) -> int | None:
        return None


class _GridSampler(_Sampler):
    def __init__(self, space: Space, num_points: int | None, integer_grid: str = "num_points") -> None:
        super().__init__(space, 0)
        self._grid = space.grid(num_points, integer_grid)

    def __call__(self, number: int) -> dict[str, Scalar] | None:
        return self._grid[number] if number < len(self._grid) else None

    def size(self) -> int | None:
        return len(self._grid)


INTEGER_GRIDS = ("num_points", "all")


def _opt_resource(name: str, value: Any) -> int | None:
    return None if value is None else _positive_int(name, value, 1)


def _store(obj: Any, **values: Any) -> None:
    """Set fields of a frozen strategy (its checked values: a numpy integer as the int it is, so that
    the journal and ``to_dict`` hold plain numbers)."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


@checked_keywords
@dataclass(frozen=True)
class RandomSearch:
    """Random configurations, no early stopping. ``max_resource`` (optional) is passed to trials
    as ``trial.max_resource`` and stops a trial that reports a step ``>= max_resource``."""

    max_resource: int | None = None

    def __post_init__(self) -> None:
        _store(self, max_resource=_opt_resource("RandomSearch max_resource", self.max_resource))

    @property
    def min_resource(self) -> int | None:
        return self.max_resource

    def sampler(self, space: Space, seed: int, mode: str = "max") -> _Sampler:
        return _Sampler(space, seed)

    def scheduler(self, mode: str, seed: int) -> FIFOScheduler:
        return FIFOScheduler(self.max_resource, mode)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "random", "max_resource": self.max_resource}


@checked_keywords
@dataclass(frozen=True)
class GridSearch:
    """Every grid point once. ``num_points``: points per Continuous range, spaced on its scale; also
    per Integer range with more than ``num_points`` values (rounded, duplicates removed), unless
    ``integer_grid="all"``, which puts every integer of every Integer range on the grid (a journal
    without the key was written before the option and ran ``"all"``)."""

    max_resource: int | None = None
    num_points: int | None = None
    integer_grid: str = "num_points"

    def __post_init__(self) -> None:
        _store(self, max_resource=_opt_resource("GridSearch max_resource", self.max_resource))
        if self.num_points is not None:
            _store(self, num_points=_positive_int("GridSearch num_points", self.num_points, 1))
        if self.integer_grid not in INTEGER_GRIDS:
            raise ConfigError(f"GridSearch integer_grid={self.integer_grid!r} is not one of "
                              f"{', '.join(map(repr, INTEGER_GRIDS))}")

    @property
    def min_resource(self) -> int | None:
        return self.max_resource

    def sampler(self, space: Space, seed: int, mode: str = "max") -> _Sampler:
        return _GridSampler(space, self.num_points, self.integer_grid)

    def scheduler(self, mode: str, seed: int) -> FIFOScheduler:
        return FIFOScheduler(self.max_resource, mode)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "grid", "max_resource": self.max_resource, "num_points": self.num_points,
                "integer_grid": self.integer_grid}


@checked_keywords
@dataclass(frozen=True)
class Hyperband:
    """Asynchronous Hyperband over ``[min_resource, max_resource]`` with ``reduction_factor``.

    ``sampler``: ``"random"`` (default; trial ``t`` gets ``Space.sample(seed, t)``) or ``"tpe"``
    (BOHB-style: a TPE model of the highest resource level with ``min_points`` results proposes
    all but a ``random_fraction`` of the configurations; needs ``tripwire[bohb]``, see
    :mod:`tripwire.tune._bohb`); ``"bohb"`` is another name of ``"tpe"``, the same sampler, stored
    (``sampler_name``, ``to_dict``, the journal) as ``"tpe"``. ``random_fraction`` (default
    ``1/3``) and ``min_points`` (default ``None``: the number of hyperparameters + 2) only matter
    with ``sampler="tpe"``.
    ``rung_system``: ``"shared"`` (default; one rung system for all brackets) or ``"per_bracket"``
    (each bracket judges its trials only against its own: stronger hedging when early values
    mislead); see :mod:`tripwire.tune._scheduler`. A journal without the key ran ``"shared"``.
    ``rung_warmup``: ``"promote_best"`` (default; while a rung holds fewer than ``eta`` values the
    best so far continues, Optuna's and Ray Tune's rule) or ``"strict"`` (a trial continues only
    if fewer than ``floor(n / eta)`` values beat it, so a rung promotes nothing until it holds
    ``eta`` values). A journal without the key ran ``"promote_best"``.
    """

    min_resource: int = 1
    max_resource: int = 81
    reduction_factor: int = 3
    sampler_name: str = "random"
    random_fraction: float = 1 / 3
    min_points: int | None = None
    rung_system: str = "shared"
    rung_warmup: str = "promote_best"

    def __init__(self, min_resource: int = 1, max_resource: int = 81, reduction_factor: int = 3,
                 sampler: str = "random", random_fraction: float = 1 / 3, min_points: int | None = None,
                 rung_system: str = "shared", rung_warmup: str = "promote_best") -> None:
        for name, value in (("min_resource", min_resource), ("max_resource", max_resource),
                            ("reduction_factor", reduction_factor), ("sampler_name", sampler),
                            ("random_fraction", random_fraction), ("min_points", min_points),
                            ("rung_system", rung_system), ("rung_warmup", rung_warmup)):
            object.__setattr__(self, name, value)
        plan = self.plan  # validates
        # (the checked values: a numpy integer is kept as the int it is, trial 24f)
        _store(self, min_resource=plan.min_resource, max_resource=plan.max_resource,
               reduction_factor=plan.reduction_factor)
        check_rung_system(rung_system)
        check_rung_warmup(rung_warmup)
        check_sampler_args(sampler, random_fraction, min_points)
        sampler = canonical_sampler(sampler)  # ("bohb" is "tpe": one name in the journal, the repr, ==)
        _store(self, sampler_name=sampler)
        if min_points is not None:
            _store(self, min_points=int(min_points))
        if sampler == "tpe":
            _import_optuna()  # a missing extra fails here, not when the first model is built

    @property
    def plan(self) -> HyperbandPlan:
        return HyperbandPlan(self.min_resource, self.max_resource, self.reduction_factor)

    def sampler(self, space: Space, seed: int, mode: str = "max") -> _Sampler | TPESampler:
        if self.sampler_name == "random":
            return _Sampler(space, seed)
        plan = self.plan
        levels = [lvl for b in range(plan.n_brackets) for lvl in plan.rungs(b)] + [plan.max_resource]
        return TPESampler(space, seed, levels, mode, float(self.random_fraction), self.min_points)

    def scheduler(self, mode: str, seed: int) -> HyperbandScheduler:
        return HyperbandScheduler(self.plan, mode, seed, self.rung_system, self.rung_warmup)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "hyperband", "min_resource": self.min_resource,
                               "max_resource": self.max_resource, "reduction_factor": self.reduction_factor}
        if self.rung_system != "shared":
            out["rung_system"] = self.rung_system
        if self.rung_warmup != "promote_best":
            out["rung_warmup"] = self.rung_warmup
        if self.sampler_name != "random":
            out.update(sampler=self.sampler_name, random_fraction=self.random_fraction, min_points=self.min_points)
        return out

    def __repr__(self) -> str:
        extra = "" if self.sampler_name == "random" else \
            f", sampler={self.sampler_name!r}, random_fraction={self.random_fraction!r}, min_points={self.min_points!r}"
        if self.rung_system != "shared":
            extra = f", rung_system={self.rung_system!r}" + extra
        if self.rung_warmup != "promote_best":
            extra = f", rung_warmup={self.rung_warmup!r}" + extra
        return (f"Hyperband(min_resource={self.min_resource}, max_resource={self.max_resource}, "
                f"reduction_factor={self.reduction_factor}{extra})")


Strategy = Union[RandomSearch, GridSearch, Hyperband]
_TYPES: dict[str, type] = {"random": RandomSearch, "grid": GridSearch, "hyperband": Hyperband}


def strategy_from_dict(data: Mapping[str, Any]) -> Strategy:
    """``{"type": "hyperband"|"random"|"grid", ...}`` to a strategy."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"strategy={data!r} must be a mapping with a 'type' key (one of {', '.join(_TYPES)})")
    if "type" not in data:
        alias = next((k for k in ("name", "kind", "strategy", "algorithm") if k in data), None)
        hint = f": {alias!r} is no strategy key, say type: {data[alias]!r}" if alias else ""
        raise ConfigError(f"strategy={dict(data)!r} has no 'type' key (one of {', '.join(_TYPES)}){hint}")
    kind = str(data["type"]).lower()
    if kind not in _TYPES:
        raise ConfigError(f"strategy type={data['type']!r} is not one of {', '.join(_TYPES)}"
                          f"{did_you_mean(kind, _TYPES)}")
    rest = {k: v for k, v in data.items() if k != "type"}
    check_init_keys(_TYPES[kind], rest, f"strategy ({kind})")
    try:
        return _TYPES[kind](**rest)  # type: ignore[no-any-return]
    except ConfigError as exc:  # (a value the strategy refuses: say where it was written)
        raise ConfigError(f"strategy ({kind}): {exc}") from None
    except TypeError as exc:
        raise ConfigError(f"strategy {dict(data)!r}: {exc}") from None


for _cls in (RandomSearch, GridSearch, Hyperband):
    _cls.from_dict = staticmethod(strategy_from_dict)  # type: ignore[attr-defined]
