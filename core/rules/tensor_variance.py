"""Tensor variance: a tensor's variance leaves the range [min_variance, max_variance].

Condition: ``var(t) < min_variance or var(t) > max_variance`` for a tensor ``t`` of ``collection``
matching ``include``, on ``patience`` consecutive saves.

An ``include`` that leaves out every tensor of its ``collection`` the run captured leaves the rule
nothing to read: the run's end says so ("rule 'tensor_variance' had nothing to read: include=... leaves
out every ... captured (<names>), so the rule never judged"), and ``tripwire watch`` counts the rule
unjudged (exit 3).

Defaults: ``collection="weights"``, ``include=".*"``, ``min_variance=0.0`` (the lower bound is off),
``max_variance=1e4``, ``patience=3``, mode ``train``.
"""

from __future__ import annotations

import math
from typing import Any

from .._history import History
from .._validate import check_float, check_str
from ._base import Requirement
from ._common import (
    NO_DATA, BuiltinRule, check_ordered, check_regex, filtered_out, fmt, fmt_vs, in_capture_order, names_in,
    value_at
)
from ._registry import register_rule

_TENSOR_COLLECTIONS = ("weights", "biases", "gradients", "activations", "activation_inputs", "relu_outputs", "inputs")


@register_rule
class TensorVariance(BuiltinRule):
    """Variance outside a range (see the module docstring)."""

    name = "tensor_variance"
    summary = "a tensor's variance leaves [min_variance, max_variance]"
    default_modes = ("train",)

    def __init__(self, collection: str = "weights", include: str = ".*", min_variance: float = 0.0,
                 max_variance: float = 1e4, patience: int = 3, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.collection = check_str(collection, f"{self.name}.collection", choices=_TENSOR_COLLECTIONS)
        self.include = check_regex(include, f"{self.name}.include")
        self.min_variance = check_float(min_variance, f"{self.name}.min_variance", minimum=0.0)
        self.max_variance = check_float(max_variance, f"{self.name}.max_variance", minimum=0.0, min_inclusive=False)
        # (trial 23m: the error named max_variance where only min_variance was set)
        check_ordered(self.name, "min_variance", self.min_variance, "max_variance", self.max_variance, 1e4)

    def requirements(self) -> list[Requirement]:
        return [Requirement(self.collection, reductions=("variance",), modes=self.modes)]

    def nothing_read(self, history: History) -> str | None:
        """Where ``include`` leaves out every tensor of ``collection`` captured (:func:`filtered_out`)."""
        return filtered_out(self, history, self.collection, f"{self.collection} tensor", self.include)

    def check(self, history: History, step: int, mode: str) -> Any:
        names = in_capture_order(history, names_in(history, self.collection, self.include))
        if not names:
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            for n in names:
                v = value_at(history, n, "variance", step, mode, worker)
                if v is None or math.isnan(v):
                    continue
                seen = True
                if v < self.min_variance or v > self.max_variance:
                    low = v < self.min_variance
                    shown, limit = fmt_vs(v, self.min_variance if low else self.max_variance)
                    lower, upper = (limit, fmt(self.max_variance)) if low else (fmt(self.min_variance), limit)
                    return self.finding(
                        step, mode,
                        f"the variance of {n} is {shown}, {'below' if low else 'above'} the accepted range [{lower}, "
                        f"{upper}]. Too large: exploding values (lower the learning rate, clip, "
                        "normalise); too small: collapsed or constant values (initialisation, dead units).",
                        tensors=[n], variance=v, worker=worker,
                    )
        return None if seen else NO_DATA
