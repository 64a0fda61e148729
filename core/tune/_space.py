"""Search space: :class:`Integer`, :class:`Continuous` and :class:`Categorical` ranges.

Scaling (as SageMaker AMT), for a range ``[low, high]``:

- ``linear``: uniform on ``[low, high]``.
- ``log``: ``exp(U(log low, log high))``; needs ``low > 0``.
- ``reverse_log``: ``1 - exp(U(log(1 - high), log(1 - low)))``; continuous only, needs
  ``0 <= low < high < 1`` (dense near 1, e.g. momentum).
- ``auto`` (default): ``log`` when ``low > 0`` and ``high / low >= 100``, otherwise ``linear``.

Integers are sampled on the continuous scale over ``[low, high + 1)`` and floored, so every
integer of the range has the probability its width on that scale gives it.

Grids (:class:`~tripwire.tune.GridSearch`): a Continuous range gives ``num_points`` points spaced
evenly on its scale, both bounds included. An Integer range with more than ``num_points`` values
gives the same points rounded to integers, duplicates removed (so a log range may give fewer); one
with at most ``num_points`` values, or any Integer range when ``num_points`` is None or
``integer_grid="all"``, gives every integer. A Categorical range gives its values.
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
from typing import Any, Mapping, Union

import numpy as np

from tripwire._validate import check_init_keys, did_you_mean
from tripwire._validate import checked_keywords

from ._errors import ConfigError
from ._hyperband import _positive_int

__all__ = ["Categorical", "Continuous", "Integer", "Parameter", "Space"]

SCALES = ("auto", "linear", "log", "reverse_log")
INTEGER_SCALES = ("auto", "linear", "log")
_SPACE_ACCEPTED = "a non-empty mapping of parameter names to ranges (Integer, Continuous or Categorical)"
Scalar = Union[str, int, float, bool, None]


def _number(value: Any, what: str) -> float:
    """``value`` as a float, or a ConfigError naming ``what`` (``"Continuous low"``), the value and what
    is accepted: a finite real number (numpy's too; not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{what}: got {value!r} ({type(value).__name__}); accepted: a real number (an int or a "
                          f"float)")
    if not math.isfinite(float(value)):
        raise ConfigError(f"{what}: got {value!r}; accepted: a finite real number")
    return float(value)


def _resolve_scale(kind: str, low: float, high: float, scale: str, scales: tuple[str, ...] = SCALES) -> str:
    """The scale ``scale`` (one of ``scales``) resolves to for ``[low, high]``: ``auto`` is ``log`` or
    ``linear`` (see the module docstring); a ConfigError for a scale not in ``scales`` and for ``log``
    with ``low <= 0``, each naming ``kind``'s argument (trial 32a F4: the library's "got ...;
    accepted: ..." format)."""
    if scale not in scales:
        only = " (reverse_log is only for Continuous ranges)" if scale == "reverse_log" else ""
        guess = "" if only else did_you_mean(str(scale), scales)
        raise ConfigError(f"{kind} scale: got {scale!r}{guess}; accepted: {', '.join(map(repr, scales))}{only}")
    if scale == "auto":
        # (a relative tolerance: 7 / 0.07 is 99.99999999999999 in binary; trial 19c)
        return "log" if low > 0 and high / low >= 100 * (1 - 1e-12) else "linear"
    if scale == "log" and low <= 0:
        least = "a low >= 1" if kind == "Integer" else "a low > 0"
        raise ConfigError(f"{kind} low: got {low:g} with scale='log'; accepted: {least} (a log scale starts above 0), "
                          f"or scale='linear'")
    return scale


class Parameter:
    """Base class of a range; subclasses validate in ``__init__``."""

    kind: str = ""

    def sample(self, rng: np.random.Generator) -> Scalar:
        raise NotImplementedError

    def grid(self, num_points: int | None) -> list[Scalar]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "type")
        return f"{type(self).__name__}({args})"

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "Parameter":
        """Build a range from ``{"type": "integer"|"continuous"|"categorical", ...}``."""
        if not isinstance(data, Mapping) or "type" not in data:
            raise ConfigError(f"range {data!r} must be a mapping with a 'type' key "
                              "(integer, continuous or categorical)")
        kind = str(data["type"]).lower()
        rest = {k: v for k, v in data.items() if k != "type"}
        classes = {"integer": Integer, "continuous": Continuous, "categorical": Categorical}
        if kind not in classes:
            raise ConfigError(f"range type: got {data['type']!r}{did_you_mean(kind, list(classes))}; accepted: "
                              f"integer, continuous, categorical")
        check_init_keys(classes[kind], rest, f"{kind} range")
        params = inspect.signature(classes[kind].__init__).parameters.values()
        missing = [q.name for q in params if q.name != "self" and q.default is q.empty
                   and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY) and q.name not in rest]
        if missing:
            raise ConfigError(f"{kind} range {dict(data)!r} is missing the key(s) {missing}")
        try:
            return classes[kind](**rest)  # type: ignore[no-any-return]
        except TypeError as exc:
            raise ConfigError(f"{kind} range {dict(data)!r}: {exc}") from None


class _Numeric(Parameter):
    low: float
    high: float
    scale: str
    _resolved: str

    def _to_unit(self, x: float) -> float:
        lo, hi = self._bounds()
        t = self._forward(x)
        return (t - self._forward(lo)) / (self._forward(hi) - self._forward(lo))

    def _bounds(self) -> tuple[float, float]:
        return self.low, self.high

    def _forward(self, x: float) -> float:
        if self._resolved == "log":
            return math.log(x)
        if self._resolved == "reverse_log":
            return -math.log(1.0 - x)
        return x

    def _inverse(self, t: float) -> float:
        if self._resolved == "log":
            return math.exp(t)
        if self._resolved == "reverse_log":
            return 1.0 - math.exp(-t)
        return t

    def _draw(self, rng: np.random.Generator, lo: float, hi: float) -> float:
        a, b = self._forward(lo), self._forward(hi)
        return self._inverse(a + (b - a) * float(rng.random()))

    def _grid_points(self, lo: float, hi: float, num: int) -> list[float]:
        a, b = self._forward(lo), self._forward(hi)
        if num == 1:
            return [_tidy(self._inverse((a + b) / 2))]
        inner = [_tidy(self._inverse(a + (b - a) * i / (num - 1))) for i in range(1, num - 1)]
        return [float(lo), *inner, float(hi)]  # the bounds exactly, not exp(log(x))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _tidy(x: float) -> float:
    """``x`` to 12 significant digits: a log grid gives 0.01, not 0.010000000000000004."""
    return float(f"{x:.12g}")


@checked_keywords
class Continuous(_Numeric):
    """A real range ``[low, high]`` with ``scale`` in ``auto`` (default), ``linear``, ``log``,
    ``reverse_log``."""

    kind = "continuous"

    def __init__(self, low: float, high: float, scale: str = "auto") -> None:
        self.low = _number(low, "Continuous low")
        self.high = _number(high, "Continuous high")
        if not self.low < self.high:
            raise ConfigError(f"Continuous low, high: got low={self.low:g}, high={self.high:g}; accepted: low < high")
        self.scale = scale
        self._resolved = _resolve_scale("Continuous", self.low, self.high, scale)
        if self._resolved == "linear" and not math.isfinite(self.high - self.low):
            # (trial 32h F8: Continuous(-1e308, 1e308) drew 1e308 every time: low + (high - low) * u overflows)
            raise ConfigError(f"Continuous low, high: got low={self.low:g}, high={self.high:g}; accepted: a range whose "
                              f"width high - low is a finite float (below {sys.float_info.max:.3g}) on a linear scale")
        if self._resolved == "reverse_log" and not (0 <= self.low and self.high < 1):
            raise ConfigError(f"Continuous low, high: got low={self.low:g}, high={self.high:g} with "
                              f"scale='reverse_log'; accepted: 0 <= low < high < 1")

    def sample(self, rng: np.random.Generator) -> float:
        return min(max(self._draw(rng, self.low, self.high), self.low), self.high)

    def grid(self, num_points: int | None) -> list[Scalar]:
        if num_points is None:
            raise ConfigError("a Continuous range needs GridSearch(num_points=N) to be put on a grid (in YAML: "
                              "strategy: {type: grid, num_points: N})")
        return list(self._grid_points(self.low, self.high, _grid_count(num_points)))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "continuous", "low": self.low, "high": self.high, "scale": self.scale}


@checked_keywords
class Integer(_Numeric):
    """An integer range ``[low, high]`` (both included) with ``scale`` in ``auto`` (default),
    ``linear``, ``log``."""

    kind = "integer"

    def __init__(self, low: int, high: int, scale: str = "auto") -> None:
        for what, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ConfigError(f"Integer {what}: got {v!r} ({type(v).__name__}); accepted: an integer (numpy's too)")
        self.low, self.high = int(low), int(high)  # type: ignore[assignment]
        if not self.low <= self.high:
            raise ConfigError(f"Integer low, high: got low={self.low}, high={self.high}; accepted: low <= high "
                              f"(both are drawn)")
        if self.low < _INT64_MIN or self.high >= _INT64_MAX:
            # (trial 32h F8: Integer(0, 2**63) raised numpy's ValueError from fit(); numpy draws int64s)
            raise ConfigError(f"Integer low, high: got low={self.low}, high={self.high}; accepted: "
                              f"{_INT64_MIN} <= low <= high < {_INT64_MAX} (numpy draws 64-bit integers)")
        self.scale = scale
        self._resolved = _resolve_scale("Integer", self.low, self.high, scale, INTEGER_SCALES)

    def sample(self, rng: np.random.Generator) -> int:
        if self._resolved == "log":
            # log-uniform over [low - 0.5, high + 0.5] then round: each integer gets its log width
            x = self._draw(rng, self.low - 0.5 if self.low > 0.5 else self.low, self.high + 0.5)
            return int(min(max(round(x), self.low), self.high))
        return int(rng.integers(self.low, self.high + 1))

    def grid(self, num_points: int | None, integer_grid: str = "num_points") -> list[Scalar]:
        """Every integer, or ``num_points`` integers spaced on the range's scale (see the module
        docstring)."""
        lo, hi = int(self.low), int(self.high)
        num_points = None if num_points is None else _grid_count(num_points)
        if num_points is None or integer_grid == "all" or hi - lo + 1 <= num_points:
            return list(range(lo, hi + 1))
        points = sorted({int(round(x)) for x in self._grid_points(lo, hi, num_points)})
        return [min(max(p, lo), hi) for p in points]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "integer", "low": int(self.low), "high": int(self.high), "scale": self.scale}


@checked_keywords
class Categorical(Parameter):
    """A choice among ``values`` (str, int, float, bool or None; at least one, no duplicates: no two
    values equal to each other, ``1`` and ``True`` or ``1`` and ``1.0`` included, and no NaN, which
    equals nothing). numpy scalars are taken as the Python values they hold (``np.int64(1)`` is
    ``1``, ``np.float64(0.1)`` is ``0.1``, ``np.bool_(True)`` is ``True``): ``values`` and the
    trials' ``params`` hold Python values only."""

    kind = "categorical"

    def __init__(self, values: list[Scalar] | tuple[Scalar, ...]) -> None:
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)) or not values:
            what = f"{values!r}" if isinstance(values, (list, tuple)) else f"{values!r} ({type(values).__name__})"
            raise ConfigError(f"Categorical values: got {what}; accepted: a non-empty list (or tuple) of str, int, "
                              f"float, bool or None")
        # numpy's scalars as the Python values they hold (trial 24f: np.int64(1) was refused while
        # np.float64(0.1), a float, was kept as a numpy value)
        values = [v.item() if isinstance(v, np.generic) and isinstance(v.item(), (str, int, float, bool)) else v
                  for v in values]
        for i, v in enumerate(values):
            if v is not None and not isinstance(v, (str, int, float, bool)):
                raise ConfigError(f"Categorical values[{i}]: got {v!r} ({type(v).__name__}); accepted: str, int, "
                                  "float, bool or None")
        seen: list[Scalar] = []
        for v in values:
            if isinstance(v, float) and math.isnan(v):
                raise ConfigError(f"Categorical values: got {list(values)!r}, which holds nan, which equals no "
                                  "value (a trial's nan could not be told apart or matched); accepted: values that "
                                  "differ, none of them nan: use None or a string such as 'nan'")
            same = [s for s in seen if v == s]
            if same:
                what = "twice" if type(same[0]) is type(v) else (f"and {same[0]!r}, which are equal in Python "
                                                                 f"({same[0]!r} == {v!r})")
                raise ConfigError(f"Categorical values: got {list(values)!r}, which holds {v!r} {what}; accepted: "
                                  "values that differ (use strings to tell them apart, e.g. '1' and 'true')")
            seen.append(v)
        self.values = list(values)

    def sample(self, rng: np.random.Generator) -> Scalar:
        return self.values[int(rng.integers(len(self.values)))]

    def grid(self, num_points: int | None) -> list[Scalar]:
        return list(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "categorical", "values": list(self.values)}


def _grid_count(num_points: Any) -> int:
    """``num_points`` of a grid as :class:`GridSearch` takes it: an int >= 1 (numpy's too; a bool is none)."""
    return _positive_int("num_points", num_points, 1)


class Space:
    """A named set of ranges; sampling is a pure function of ``(seed, trial number)``."""

    def __init__(self, ranges: Mapping[str, Parameter]) -> None:
        if not isinstance(ranges, Mapping) or not ranges:
            raise ConfigError(f"space: got {ranges!r}; accepted: {_SPACE_ACCEPTED}")
        for name, rng in ranges.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"space key: got {name!r} ({type(name).__name__}); accepted: a non-empty string (the "
                                  f"parameter's name)")
            if name.startswith("metric:"):
                # (trial 32h F7: result.dataframe() names the metrics train returns metric:<key>, so such a
                # parameter's column was written twice and its value lost)
                raise ConfigError(f"space key: got {name!r}; accepted: a name that does not start with 'metric:' "
                                  f"(result.dataframe() names the metrics train returns so: rename it)")
            if not isinstance(rng, Parameter):
                raise ConfigError(f"space[{name!r}]={rng!r} is not a range; use Integer, Continuous "
                                  "or Categorical")
        self.ranges = dict(sorted(ranges.items()))

    def sample(self, seed: int, number: int) -> dict[str, Scalar]:
        rng = np.random.default_rng([int(seed), int(number)])
        return {name: p.sample(rng) for name, p in self.ranges.items()}

    def grid(self, num_points: int | None = None, integer_grid: str = "num_points") -> list[dict[str, Scalar]]:
        """Every point of the grid, in lexicographic order of the sorted names (the last name varies
        fastest). ``integer_grid``: ``"num_points"`` or ``"all"`` (see the module docstring).
        ``num_points``: None or an int >= 1, as :class:`GridSearch` takes it (trial 32h: 0 and -3 gave
        the two bounds, ``True`` the midpoint)."""
        num_points = None if num_points is None else _grid_count(num_points)
        axes: list[list[Scalar]] = []
        for name, p in self.ranges.items():
            try:
                axes.append(p.grid(num_points, integer_grid) if isinstance(p, Integer) else p.grid(num_points))
            except ConfigError as exc:
                raise ConfigError(f"space[{name!r}]: {exc}") from None
        out: list[dict[str, Scalar]] = [{}]
        for name, axis in zip(self.ranges, axes):
            out = [{**row, name: v} for row in out for v in axis]
        return out

    def grid_size(self, num_points: int | None = None, integer_grid: str = "num_points") -> int:
        return math.prod(self.grid_sizes(num_points, integer_grid).values())

    def grid_sizes(self, num_points: int | None = None, integer_grid: str = "num_points") -> dict[str, int]:
        """Each parameter's number of grid points, in the grid's order (sorted names)."""
        sizes: dict[str, int] = {}
        for name, p in self.ranges.items():
            if isinstance(p, Integer):
                sizes[name] = len(p.grid(num_points, integer_grid))
            elif isinstance(p, Categorical):
                sizes[name] = len(p.values)
            elif num_points is None:
                raise ConfigError(f"space[{name!r}]: a Continuous range needs GridSearch(num_points=N) "
                                  "to be put on a grid (in YAML: strategy: {type: grid, num_points: N})")
            else:
                sizes[name] = num_points
        return sizes

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: p.to_dict() for name, p in self.ranges.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Space":
        if not isinstance(data, Mapping) or not data:
            raise ConfigError(f"space: got {data!r}; accepted: {_SPACE_ACCEPTED}")
        ranges: dict[str, Parameter] = {}
        for name, spec in data.items():
            if isinstance(spec, Parameter):
                ranges[name] = spec
                continue
            if isinstance(spec, (list, tuple)):
                nums = len(spec) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec)
                ints = nums and all(isinstance(v, int) for v in spec)
                bounds = f"({spec[0]!r}, {spec[1]!r})" if nums else ""
                hint = (f", or Integer{bounds} / Continuous{bounds} for a range" if ints else
                        f", or Continuous{bounds} for a range" if nums else "")
                yaml_range = (f", {{type: {'integer' if ints else 'continuous'}, low: {spec[0]!r}, high: "
                              f"{spec[1]!r}}} for a range" if nums else "")
                raise ConfigError(f"space[{name!r}]={spec!r} is a {type(spec).__name__}, not a range: use "
                                  f"Categorical({list(spec)!r}) for a choice{hint} (in YAML: "
                                  f"{{type: categorical, values: [...]}}{yaml_range})")
            if not isinstance(spec, Mapping):
                raise ConfigError(f"space[{name!r}]={spec!r} is not a range: use Integer, Continuous or "
                                  "Categorical (in YAML: a mapping with a 'type' key: integer, continuous or "
                                  "categorical)")
            try:
                ranges[name] = Parameter.from_dict(spec)
            except ConfigError as exc:
                raise ConfigError(f"space[{name!r}]: {exc}") from None
        return cls(ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and other.to_dict() == self.to_dict()

    __hash__ = None  # type: ignore[assignment]
