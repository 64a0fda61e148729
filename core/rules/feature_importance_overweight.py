"""Feature importance overweight: a few features hold almost all of the model's importance.

Condition: ``sum of the nfeatures largest shares > threshold``, where the shares are the
``feature_importance/<importance_type>/<feature>`` values of a round normalised to sum to 1 over the
features (the XGBoost integration writes them each round, collection ``feature_importance``);
evaluated from round ``start_step`` on, for models with at least ``nfeatures + 2`` features (those the
record lists, unused ones at 0: a model that puts all its importance on one of 8 features is the
plainest leak). A model with fewer features is not judged, and the rule says so once, in a WARNING
at the first round it evaluates (trial 31d: a 2-feature model whose one feature was the label plus
noise, 100% of the importance, went by in silence): with so few features, the top ``nfeatures``
hold most of the importance by construction. An importance that is not a number >= 0 (NaN, from NaN
gradients; an infinity) counts its feature among those the record lists, is left out of the shares
(the other features' importances make them up), and is named in a WARNING once, at the first round
evaluated that holds one.

Defaults: ``nfeatures=1``, ``threshold=0.9``, ``importance_type="total_gain"`` (falls back to ``gain``,
then ``weight``, when the run lacks it), ``start_step=10``, mode ``train``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_int, check_str
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, fmt, names_in, value_at
from ._registry import register_rule

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
_FALLBACK = ("total_gain", "gain", "weight", "total_cover", "cover")

logger = logging.getLogger("tripwire")


@register_rule
class FeatureImportanceOverweight(BuiltinRule):
    """Importance concentrated on a few features (see the module docstring)."""

    name = "feature_importance_overweight"
    summary = "a few features hold almost all of the model's importance (leakage, a dominant feature)"
    default_modes = ("train",)

    def __init__(self, nfeatures: int = 1, threshold: float = 0.9, importance_type: str = "total_gain",
                 start_step: int = 10, **common: Any) -> None:
        super().__init__(start_step=start_step, **common)
        self.nfeatures = check_int(nfeatures, f"{self.name}.nfeatures", minimum=1)
        self.threshold = check_float(threshold, f"{self.name}.threshold", minimum=0.0, maximum=1.0, min_inclusive=False, max_inclusive=False)
        self.importance_type = check_str(importance_type, f"{self.name}.importance_type", choices=IMPORTANCE_TYPES)
        self._said_few = False  # (the WARNING that a model has too few features to judge: said once)
        self._said_wrong = False  # (the WARNING that an importance is not a number >= 0: said once)

    def requirements(self) -> list[Requirement]:
        return [Requirement("feature_importance", reductions=("raw",), modes=self.modes)]

    def check(self, history: History, step: int, mode: str) -> Any:
        names = names_in(history, "feature_importance")
        if not names:
            return NO_DATA
        by_type: dict[str, list[str]] = {}
        for n in names:
            parts = n.split("/", 2)
            if len(parts) == 3 and parts[0] == "feature_importance":
                by_type.setdefault(parts[1], []).append(n)
        order = (self.importance_type,) + tuple(t for t in _FALLBACK if t != self.importance_type)
        itype = next((t for t in order if t in by_type), None)
        if itype is None:
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            vals, features, wrong = [], 0, []
            for n in by_type[itype]:
                v = value_at(history, n, "raw", step, mode, worker)
                if v is None:
                    continue
                features += 1  # (every feature the record lists: trial 32e F8, a NaN one was not counted)
                if not (np.isfinite(v) and v >= 0):
                    wrong.append((n, v))
                elif v > 0:
                    vals.append((n, v))
            if wrong:
                self._say_wrong(wrong, itype, step)
            if not vals:
                continue
            seen = True
            if features < self.nfeatures + 2:
                self._say_too_few(features, itype, step)
                continue
            total = sum(v for _, v in vals)
            vals.sort(key=lambda kv: -kv[1])
            top = vals[: self.nfeatures]
            share = sum(v for _, v in top) / total
            if share > self.threshold:
                feats = ", ".join(f"{n.split('/', 2)[2]} ({fmt(v / total * 100)}%)" for n, v in top)
                left = f", {len(wrong)} not a number >= 0, left out" if wrong else ""
                return self.finding(
                    step, mode,
                    f"the top {self.nfeatures} of {features} features ({len(vals)} used{left}) hold "
                    f"{fmt(share * 100)}% of the {itype} importance "
                    f"(limit {fmt(self.threshold * 100)}%): {feats}. Usual causes: a feature that leaks the label "
                    "(an ID, a timestamp, a post-outcome field) or a dominant feature hiding the others; check it, "
                    "drop or regularise it (colsample_bytree, interaction constraints).",
                    tensors=[n for n, _ in top], share=share, worker=worker,
                )
        return None if seen else NO_DATA

    def _say_wrong(self, wrong: list[tuple[str, float]], itype: str, step: int) -> None:
        """Say once, in a WARNING, that importances of this round are not numbers >= 0 (NaN, an
        infinity, a negative value): they are left out of the shares, which the others make up (see
        the module docstring). Trial 32e F8: a NaN importance dropped its feature in silence, and no
        rule said it (``exploding_tensor`` leaves ``feature_importance`` out by default)."""
        if self._said_wrong:
            return
        self._said_wrong = True
        shown = ", ".join(f"{n} = {v!r}" for n, v in wrong[:3]) + (
            f" and {len(wrong) - 3} more" if len(wrong) > 3 else "")
        logger.warning(
            "tripwire: rule %r: at round %d the %s feature importance holds %s, not a number >= 0 (a NaN gain comes "
            "from NaN or infinite gradients or hessians: a custom objective, NaN labels or weights); such an "
            "importance counts its feature among the model's features and is left out of the importance shares, at "
            "this round and any later one that holds one (said once). Check the objective and the data; "
            "exploding_tensor judges the importances too when its collections name feature_importance.",
            self.name, step, itype, shown)

    def _say_too_few(self, features: int, itype: str, step: int) -> None:
        """Say once, in a WARNING, that the model's ``features`` are too few to be judged (see the
        module docstring)."""
        if self._said_few:
            return
        self._said_few = True
        needed = self.nfeatures + 2
        lower = (f"; nfeatures={features - 2} would judge it" if features >= 3 else
                 "; no nfeatures judges a model of fewer than 3 features")
        logger.warning(
            "tripwire: rule %r cannot judge this model: it has %d feature%s (those its %s feature importance lists, "
            "unused ones included) and the rule judges models with at least nfeatures + 2 = %d (with fewer, the top "
            "%d hold most of the importance by construction), so it stays silent from round %d on%s. The importance is "
            "still recorded: read run.tensor('feature_importance/%s/<feature>') to check for a feature that leaks "
            "the label.", self.name, features, "" if features == 1 else "s", itype, needed, self.nfeatures, step,
            lower, itype)
