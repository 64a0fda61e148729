"""Dead ReLU: a ReLU layer outputs almost only zeros.

Condition: ``zero_fraction(relu output) >= threshold`` for a layer (``relu_outputs`` tensor matching
``include``), on ``patience`` consecutive saves. Healthy ReLU layers are ~50% zeros; a layer whose
units died (stuck at a negative pre-activation) is far above that.

An ``include`` that leaves out every ``relu_outputs`` tensor the run captured leaves the rule nothing to
read: the run's end says so ("rule 'dead_relu' had nothing to read: include=... leaves out every ...
captured (<names>), so the rule never judged"), and ``tripwire watch`` counts the rule unjudged (exit
3).

The ReLU outputs are those of ReLU layers, as the integrations capture them (PyTorch's ``nn.ReLU``
modules, Keras layers applying ``relu``): a ReLU called as a function in a forward pass (``F.relu``,
``torch.relu``, the default ``activation`` of ``nn.TransformerEncoderLayer``) is no layer, and is not
captured; given as a module (``activation=nn.ReLU()``) it is.

Defaults: ``threshold=0.95`` (``DEFAULT_THRESHOLD``), ``include=".*"``, ``patience=5``, mode ``train``.
"""

from __future__ import annotations

from typing import Any

from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, filtered_out, fmt_vs, in_capture_order, names_in, value_at
from ._registry import register_rule

#: The default ``threshold``: a layer whose outputs are this fraction zeros or more is dead
#: (``vanishing_gradient`` names such layers in its message too).
DEFAULT_THRESHOLD = 0.95


@register_rule
class DeadRelu(BuiltinRule):
    """A ReLU layer whose outputs are almost all zero (see the module docstring)."""

    name = "dead_relu"
    summary = "a ReLU layer outputs almost only zeros (its units died)"
    default_modes = ("train",)

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, include: str = ".*", patience: int = 5, **common: Any) -> None:
        super().__init__(patience=patience, **common)
        self.threshold = check_float(threshold, f"{self.name}.threshold", minimum=0.0, maximum=1.0, min_inclusive=False)
        self.include = check_regex(include, f"{self.name}.include")

    def requirements(self) -> list[Requirement]:
        return [Requirement("relu_outputs", reductions=("zero_fraction",), modes=("train",))]

    def nothing_read(self, history: History) -> str | None:
        """Where ``include`` leaves out every ``relu_outputs`` tensor captured (:func:`filtered_out`)."""
        return filtered_out(self, history, "relu_outputs", "relu_outputs tensor", self.include)

    def check(self, history: History, step: int, mode: str) -> Any:
        names = in_capture_order(history, names_in(history, "relu_outputs", self.include))
        if not names:
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            dead = []
            for n in names:
                z = value_at(history, n, "zero_fraction", step, mode, worker)
                if z is None:
                    continue
                seen = True
                if z >= self.threshold:
                    dead.append((n, z))
            if dead:
                n, z = dead[0]
                shown, limit = fmt_vs(z * 100, self.threshold * 100)
                return self.finding(
                    step, mode,
                    f"{len(dead)} ReLU layer(s) output {shown}% zeros, e.g. {n} (limit {limit}%; "
                    "healthy layers are near 50%): most units are dead and pass no gradient. Usual causes: a "
                    "learning rate too high, a large negative bias, or a poor initialisation; lower the learning "
                    "rate, use He initialisation, or LeakyReLU/GELU.",
                    tensors=[d[0] for d in dead], zero_fraction=z, worker=worker,
                )
        return None if seen else NO_DATA
