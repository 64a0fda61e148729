"""Input not normalized: the model's inputs are far from zero mean and unit scale.

Condition: ``|mean(x)| > max_abs_mean or std(x) > max_std`` for an ``inputs`` tensor ``x`` matching
``include``, unless the model normalises its inputs itself: a captured tensor whose name matches
``normalized_by`` (a layer output, a parameter, or an input named so; a normalisation inside the
network, a name such as ``batch_normalization`` or ``layer_normalization``, counts only where its layer
is the model's first: the first of the captured weights, else gradients, in capture order, or where
neither is captured). The Keras callback captures
an input that a model's own ``Rescaling``/``Normalization`` layer takes as that layer's output (what
the model learns from, judged as such); such a layer it cannot place in the model's graph (a
subclassed or nested model's) is captured as the input ``<layer>/output``, read by its name here.

Integer inputs that are no features (token ids fed to an embedding, category indices) are judged as
numbers too: leave them out with ``include`` (a regex of the inputs judged) or keep them out of the
``inputs`` collection.

An ``include`` that leaves out every ``inputs`` tensor the run captured leaves the rule nothing to read:
the run's end says so ("rule 'input_not_normalized' had nothing to read: include=... leaves out every
... captured (<names>), so the rule never judged"), and ``tripwire watch`` counts the rule unjudged
(exit 3).

Defaults: ``max_abs_mean=5.0``, ``max_std=5.0``, ``include=".*"``,
``normalized_by="(?i)(rescal|normali[sz]|standardi[sz])"``, mode ``train``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .._history import History
from .._validate import check_float
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, filtered_out, fmt_vs, in_capture_order, names_in, value_at
from ._registry import register_rule


@register_rule
class InputNotNormalized(BuiltinRule):
    """Inputs not scaled to ~zero mean and unit variance (see the module docstring)."""

    name = "input_not_normalized"
    summary = "the model's inputs are far from zero mean and unit scale"
    default_modes = ("train",)

    def __init__(self, max_abs_mean: float = 5.0, max_std: float = 5.0, include: str = ".*",
                 normalized_by: str | None = "(?i)(rescal|normali[sz]|standardi[sz])", **common: Any) -> None:
        super().__init__(**common)
        self.max_abs_mean = check_float(max_abs_mean, f"{self.name}.max_abs_mean", minimum=0.0)
        self.max_std = check_float(max_std, f"{self.name}.max_std", minimum=0.0, min_inclusive=False)
        self.include = check_regex(include, f"{self.name}.include")
        self.normalized_by = check_regex(normalized_by, f"{self.name}.normalized_by", allow_none=True)

    def requirements(self) -> list[Requirement]:
        return [Requirement("inputs", reductions=("mean", "std"), modes=self.modes)]

    def nothing_read(self, history: History) -> str | None:
        """Where ``include`` leaves out every input captured (:func:`filtered_out`)."""
        return filtered_out(self, history, "inputs", "input", self.include)

    def check(self, history: History, step: int, mode: str) -> Any:
        names = in_capture_order(history, names_in(history, "inputs", self.include))
        if not names:
            return NO_DATA
        if self.normalized_by:
            pat = re.compile(self.normalized_by)
            if any(_rescales_inputs(history, n, m) for n in history.tensor_names() if (m := pat.search(n))):
                return NO_DATA  # the model rescales its inputs itself
        seen = False
        for worker in self.workers(history):
            for n in names:
                mean = value_at(history, n, "mean", step, mode, worker)
                std = value_at(history, n, "std", step, mode, worker)
                if mean is None or std is None or math.isnan(mean) or math.isnan(std):
                    continue
                seen = True
                if abs(mean) > self.max_abs_mean or std > self.max_std:
                    shown_mean, max_mean = fmt_vs(abs(mean), self.max_abs_mean)
                    shown_std, max_std = fmt_vs(std, self.max_std)
                    limits = (f"input {n!r} has mean {'-' if mean < 0 else ''}{shown_mean} and std {shown_std} "
                              f"(limits |mean| <= {max_mean}, std <= {max_std})")
                    if mode == "train":
                        why = ("unnormalised inputs slow training and saturate activations. Standardise the features "
                               "(subtract the mean, divide by the std), scale images to [0, 1], or put a "
                               "Rescaling/Normalization layer first.")
                    else:  # (the training's inputs may be fine: then this data missed their preprocessing)
                        why = (f"the model sees {mode} data far from unit scale. Where the training inputs are "
                               f"normalised, this data missed that preprocessing: apply the same scaling (the "
                               f"training data's mean and std) to it.")
                    return self.finding(step, mode, f"{limits}: {why}", tensors=[n], mean=mean, std=std, worker=worker)
        return None if seen else NO_DATA


#: A normalisation inside the network (Keras's default layer names ``batch_normalization``,
#: ``layer_normalization``, ...): it rescales its own layer's input, the inputs only where it is the
#: model's first layer.
_PER_LAYER = re.compile(r"(?i)(batch|layer|group|instance|unit|spectral)_?$")


def _rescales_inputs(history: History, name: str, match: re.Match[str]) -> bool:
    """Whether the captured tensor ``name``, matched by ``normalized_by`` at ``match``, tells that the
    model rescales its inputs: a ``Rescaling``/``Normalization`` layer, a standardisation, anywhere;
    a per-layer normalisation (the match preceded by ``batch``, ``layer``, ``group``, ...) only where
    its layer is the first the run's weights (else gradients) list in capture order, or where neither
    was captured (trial 43c: a BatchNormalization after the first Dense silenced the rule, whose
    inputs had mean 100 and std 30)."""
    if not _PER_LAYER.search(name[: match.start()]):
        return True
    order = in_capture_order(history, names_in(history, "weights")) or in_capture_order(
        history, names_in(history, "gradients"))
    if not order:
        return True
    matched = match.group(0).lower()
    layer = next((p for p in re.split(r"[/.]", name) if matched in p.lower()), None)
    return layer is not None and layer in re.split(r"[/.]", order[0])
