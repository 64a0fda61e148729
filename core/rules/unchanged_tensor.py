"""Unchanged tensor: tensors that should change during training stay the same.

Condition: for at least ``min_fraction`` of the tensors of ``collection`` matching ``include``, every
stored reduction ``r`` satisfies ``|r_i - r_last| <= atol + rtol * |r_last|`` over the last ``num_steps``
saves (reductions such as l2, mean, min, max identical: the tensor did not move). Not judged in the
last 2% of a training whose planned length ``P`` is known (``s >= P - max(1, P // 50)``): a learning
rate annealed to 0 there (a cosine schedule's last steps, 1e-8) holds the weights still by design.

Defaults: ``collection="weights"``, ``include=".*"``, ``num_steps=3``, ``rtol=1e-6``, ``atol=0.0``,
``min_fraction=1.0`` (all of them: a deliberately frozen part of a model does not fire), mode ``train``.
``rtol`` and ``atol`` are finite (an infinite tolerance would hold every tensor unchanged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_int, check_str
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_finite, check_regex, fmt, names_in
from ._registry import register_rule

_TENSOR_COLLECTIONS = ("weights", "biases", "gradients", "activations", "activation_inputs", "relu_outputs", "inputs")
_SKIP = ("nonfinite_count", "numel")
_PARAMETER_CAUSES = ("Usual causes: parameters frozen (requires_grad=False / trainable=False / grad_req='null') or not passed "
                     "to the optimizer, a learning rate of 0, a missing optimizer.step(), or zero gradients.")
# (trial 27g: a loader that repeated one batch was found on inputs, and told of frozen parameters)
_CAUSES = {
    "inputs": ("The model is fed the same batch at every step: a data loader that repeats one batch (a next(iter(loader)) "
               "taken once outside the loop, a dataset indexed with a constant, a cached batch), or inputs not "
               "shuffled or advanced. The training loss then falls to ~0 while the validation loss does not."),
    "activations": ("Usual causes: the same batch at every step (a loader that repeats one batch) with weights that do not "
                    "move either (frozen, a learning rate of 0, a missing optimizer.step()), or a layer whose output "
                    "does not depend on its input (dead units, a constant output)."),
}
_CAUSES["activation_inputs"] = _CAUSES["relu_outputs"] = _CAUSES["activations"]


@register_rule
class UnchangedTensor(BuiltinRule):
    """Tensors that do not change over several saves (see the module docstring)."""

    name = "unchanged_tensor"
    summary = "tensors that should change (weights by default) stay the same over several saves"
    default_modes = ("train",)

    def __init__(self, collection: str = "weights", include: str = ".*", num_steps: int = 3, rtol: float = 1e-6,
                 atol: float = 0.0, min_fraction: float = 1.0, **common: Any) -> None:
        super().__init__(**common)
        self.collection = check_str(collection, f"{self.name}.collection", choices=_TENSOR_COLLECTIONS)
        self.include = check_regex(include, f"{self.name}.include")
        self.num_steps = check_int(num_steps, f"{self.name}.num_steps", minimum=2)
        # finite: an infinite tolerance holds every tensor "unchanged", and the rule fires on any run (trial 24f)
        self.rtol = check_finite(rtol, f"{self.name}.rtol", minimum=0.0)
        self.atol = check_finite(atol, f"{self.name}.atol", minimum=0.0)
        self.min_fraction = check_float(min_fraction, f"{self.name}.min_fraction", minimum=0.0, maximum=1.0, min_inclusive=False)

    def requirements(self) -> list[Requirement]:
        return [Requirement(self.collection, reductions=("l2", "mean"), modes=self.modes)]

    def check(self, history: History, step: int, mode: str) -> Any:
        names = names_in(history, self.collection, self.include)
        if not names:
            return NO_DATA
        planned = history.planned_steps
        if planned and step >= planned - max(1, planned // 50):
            return None  # (trial 17h: every cosine-to-zero schedule saved at interval 1 fired at its end)
        seen = False
        for worker in self.workers(history):
            unchanged, checked = [], 0
            for n in names:
                reds = [r for r in history.reductions(n) if r not in _SKIP]
                same = None
                for r in reds:
                    steps, values = history.series(n, r, mode, worker)
                    if not len(steps) or steps[-1] != step:
                        same = None
                        break
                    # (the saves of the training the rule is armed for: trials 25a, 25c)
                    if len(values) < self.num_steps or steps[-self.num_steps] < self.training_start(mode):
                        same = None
                        break
                    last = values[-self.num_steps :]
                    ok = bool(np.all(np.abs(last - last[-1]) <= self.atol + self.rtol * np.abs(last[-1])))
                    same = ok if same is None else (same and ok)
                if same is None:
                    continue
                checked += 1
                if same:
                    unchanged.append(n)
            if checked:
                seen = True
            if checked and len(unchanged) / checked >= self.min_fraction:
                return self.finding(
                    step, mode,
                    f"{len(unchanged)} of {checked} {self.collection} tensors did not change over the last "
                    f"{self.num_steps} saves beyond atol {fmt(self.atol)} + rtol {fmt(self.rtol)} x |last value| "
                    f"(e.g. {unchanged[0]}): training does not update them. "
                    f"{_CAUSES.get(self.collection, _PARAMETER_CAUSES)}",
                    tensors=unchanged, fraction=len(unchanged) / checked, worker=worker,
                )
        return None if seen else NO_DATA
