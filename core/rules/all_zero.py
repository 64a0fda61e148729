"""All zero: every element of a tensor is exactly zero.

Condition: ``zero_fraction(t) == 1`` for a tensor ``t`` of ``collections`` matching ``include`` and not
``exclude``, on ``patience`` consecutive saves (a zero-initialised tensor that starts moving is fine).

Defaults: ``collections=("weights", "gradients")``, ``include=".*"``, ``exclude="(?i)bias|beta|moving_mean"``
(biases, a normalisation layer's shift ``beta`` and Keras's ``moving_mean``: zero by design until they
train, and for ever where they are frozen), ``patience=3``, mode ``train``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._history import History
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_collections, check_regex, in_capture_order, names_in, value_at
from ._registry import register_rule


@register_rule
class AllZero(BuiltinRule):
    """A tensor that is entirely zero (see the module docstring)."""

    name = "all_zero"
    summary = "every element of a tensor is exactly zero"
    default_modes = ("train",)
    reads_any = True  # each of its collections is judged on its own

    def __init__(self, collections: Sequence[str] = ("weights", "gradients"), include: str = ".*",
                 exclude: str = "(?i)bias|beta|moving_mean", patience: int = 3, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.collections = check_collections(collections, f"{self.name}.collections")
        for c in self.collections:  # type: ignore[union-attr]
            if c in ("losses", "metrics", "optimizer", "hyperparameters", "labels", "predictions", "trees", "feature_importance"):
                from .._errors import ConfigError

                raise ConfigError(
                    f"{self.name}.collections: got {c!r}; accepted: tensor collections (weights, biases, gradients, "
                    "activations, activation_inputs, relu_outputs, inputs)"
                )
        self.include = check_regex(include, f"{self.name}.include")
        self.exclude = check_regex(exclude, f"{self.name}.exclude")

    def requirements(self) -> list[Requirement]:
        return [Requirement(c, reductions=("zero_fraction",), modes=("train",)) for c in self.collections]  # type: ignore[union-attr]

    def check(self, history: History, step: int, mode: str) -> Any:
        seen = False
        for worker in self.workers(history):
            zeros = []
            for col in self.collections:  # type: ignore[union-attr]
                for n in in_capture_order(history, names_in(history, col, self.include, self.exclude)):
                    z = value_at(history, n, "zero_fraction", step, mode, worker)
                    if z is None:
                        continue
                    seen = True
                    if z >= 1.0:
                        zeros.append((col, n))
            if zeros:
                col, n = zeros[0]
                return self.finding(
                    step, mode,
                    f"{len(zeros)} tensor(s) are entirely zero, e.g. {n} ({col}). Zero weights keep every unit "
                    "identical; zero gradients mean the parameters get no learning signal (detached graph, dead "
                    "units, a loss that does not depend on them). Initialise weights randomly (He/Xavier) and check "
                    "the computation graph.",
                    tensors=[z[1] for z in zeros], worker=worker,
                )
        return None if seen else NO_DATA
