"""Saturated activation: most inputs of a tanh or sigmoid layer sit where its gradient is ~0.

Condition: ``fraction(|x| > tanh_threshold) > max_fraction`` for the input ``x`` of a tanh layer, or
``fraction(|x| > sigmoid_threshold) > max_fraction`` for a sigmoid layer, on ``patience`` consecutive
saves. Layers are told apart by name (``activation_inputs`` tensors ``<layer>/input`` matching
``sigmoid_regex`` or ``tanh_regex``); a layer whose name tells neither is a ReLU when ``<layer>/output``
is a ``relu_outputs`` tensor (never checked), else it is judged with the tanh threshold.

Both thresholds are finite numbers above 0.

Defaults: ``tanh_threshold=5.0`` (tanh'(5) = 1.8e-4), ``sigmoid_threshold=10.0`` (sigmoid'(10) = 4.5e-5),
``max_fraction=0.5``, ``tanh_regex="(?i)tanh"``, ``sigmoid_regex="(?i)(sigmoid|logistic)"``,
``exclude=None`` (a regex of layer names not judged: a sigmoid output layer trained with binary
cross-entropy saturates by design as its predictions grow confident, e.g. ``exclude: "^out/"``),
``patience=3``, mode ``train``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .._errors import ConfigError
from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt, names_in, value_at
from ._registry import register_rule


@register_rule
class SaturatedActivation(BuiltinRule):
    """tanh/sigmoid inputs mostly in the flat tails (see the module docstring)."""

    name = "saturated_activation"
    summary = "most inputs of a tanh/sigmoid layer sit in its flat tails"
    default_modes = ("train",)

    def __init__(self, tanh_threshold: float = 5.0, sigmoid_threshold: float = 10.0, max_fraction: float = 0.5,
                 tanh_regex: str = "(?i)tanh", sigmoid_regex: str = "(?i)(sigmoid|logistic)", patience: int = 3,
                 exclude: str | None = None, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.tanh_threshold = self._threshold(tanh_threshold, "tanh_threshold")
        self.sigmoid_threshold = self._threshold(sigmoid_threshold, "sigmoid_threshold")
        self.max_fraction = check_float(max_fraction, f"{self.name}.max_fraction", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.tanh_regex = check_regex(tanh_regex, f"{self.name}.tanh_regex")
        self.sigmoid_regex = check_regex(sigmoid_regex, f"{self.name}.sigmoid_regex")
        self.exclude = check_regex(exclude, f"{self.name}.exclude", allow_none=True)

    def _threshold(self, value: Any, param: str) -> float:
        """``value`` as a threshold of |x|: a finite number above 0, else a :class:`ConfigError` naming
        the parameter, the value and what is accepted (trial 32e F7: ``tanh_threshold: .inf`` was
        refused by the reduction it makes, ``fraction_abs_gt:inf``, in an error that named neither)."""
        path = f"{self.name}.{param}"
        number = check_float(value, path, minimum=0.0, min_inclusive=False)
        if math.isinf(number):
            raise ConfigError(f"{path}: got {value!r}; accepted: a finite number > 0.0 (no input lies beyond an "
                              f"infinite threshold: the rule could never fire)")
        return number

    def _reduction(self, threshold: float) -> str:
        return f"fraction_abs_gt:{threshold!r}"

    def requirements(self) -> list[Requirement]:
        reds = tuple(dict.fromkeys((self._reduction(self.tanh_threshold), self._reduction(self.sigmoid_threshold))))
        return [
            Requirement("activation_inputs", reductions=reds, modes=("train",)),
            Requirement("relu_outputs", reductions=("zero_fraction",), modes=("train",), optional=True),
        ]

    def check(self, history: History, step: int, mode: str) -> Any:
        names = names_in(history, "activation_inputs", ".*", self.exclude)
        if not names:
            return NO_DATA
        tanh = re.compile(self.tanh_regex)
        sig = re.compile(self.sigmoid_regex)
        relus = set(names_in(history, "relu_outputs"))
        seen = False
        for worker in self.workers(history):
            for n in names:
                if sig.search(n):
                    kind, thr = "sigmoid", self.sigmoid_threshold
                elif tanh.search(n):
                    kind, thr = "tanh", self.tanh_threshold
                elif n.endswith("/input") and n[: -len("/input")] + "/output" in relus:
                    continue  # a ReLU layer: large inputs are not saturation
                else:
                    kind, thr = "tanh/sigmoid", self.tanh_threshold
                frac = value_at(history, n, self._reduction(thr), step, mode, worker)
                if frac is None:
                    continue
                seen = True
                if frac > self.max_fraction:
                    return self.finding(
                        step, mode,
                        f"{fmt(frac * 100)}% of the inputs of the {kind} layer {n} lie beyond +-{fmt(thr)} (limit "
                        f"{fmt(self.max_fraction * 100)}%), where its gradient is almost 0. Usual fixes: normalise the "
                        "inputs, use a smaller initialisation (Xavier), add normalisation layers before the "
                        "activation, lower the learning rate, or use ReLU-family activations.",
                        tensors=[n], fraction=frac, worker=worker,
                    )
        return None if seen else NO_DATA
