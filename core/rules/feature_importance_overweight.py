"""Feature importance overweight: a few features hold almost all of the model's importance, and
their share is not falling.

Condition: ``p_t > threshold  and  b_t * P >= -max_fall``, judged at a save ``t >= max(start_step,
start_fraction * P_known)``, where ``p_s`` is the sum of the ``nfeatures`` largest shares at save
``s`` (the ``feature_importance/<importance_type>/<feature>`` values of a round normalised to sum to 1
over the features; the XGBoost integration writes them each saved round, collection
``feature_importance``), ``b_t`` the Theil-Sen slope of ``p`` against the round over the last
``trend_saves`` saves up to ``t`` (``median_(i<j) (p_j - p_i) / (s_j - s_i)``, per round; at least 2
saves, so a lone first save is never judged), ``P_known`` the planned rounds of the training
(``history.planned_steps``; the XGBoost callback sets it from ``num_boost_round``) and ``P`` the same,
100 when unknown. Only models with at least ``nfeatures + 2`` features are judged (those the record
lists, unused ones at 0: a model that puts all its importance on one of 8 features is the plainest
leak).

Why the trend: the first trees of a boosting run split on the strongest feature first, so a genuine
dominant feature holds 97-99.5% of the gain at round 10 and 84-87% in the finished model (trial 14b:
make_classification with 2 informative features of 10, 150 rounds at eta 0.1); its trend loses
5 to 30 points of share over the planned rounds (``b_t * P`` from -0.05 at round 10 to -0.3). A leak
(a feature equal to the label plus noise) holds ~99.5-100% from the first round on: flat, so it is
still judged at the first evaluation (round 10). A share that falls is judged again at every save;
one that stops falling above the threshold (a dominant feature that keeps its weight) then fires.
Why ``P`` and ``start_fraction``: at a learning rate ten times smaller the share falls ten times slower
per round, over ten times more rounds, and has not begun to fall at round 10 (1500 rounds at eta 0.01:
still 99.8% at round 10, 87% at the end), so the fall is measured over the planned run and judged from
5% of it on.

Defaults: ``nfeatures=1``, ``threshold=0.9``, ``importance_type="total_gain"`` (falls back to ``gain``,
then ``weight``, when the run lacks it), ``trend_saves=3`` (saves, at least 2), ``max_fall=0.02``
(share, over the planned rounds; ``inf`` judges the share alone, as the rule used to),
``start_fraction=0.05`` (of the planned rounds, when known), ``start_step=10``, mode ``train``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._history import History
from .._validate import check_float, check_int, check_str
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, fmt, names_in
from ._registry import register_rule

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
_FALLBACK = ("total_gain", "gain", "weight", "total_cover", "cover")
#: The planned rounds assumed when the training's length is unknown.
PLANNED_FALLBACK = 100


def theil_sen_slope(x: list[float], y: list[float]) -> float:
    """Median of the pairwise slopes ``(y_j - y_i) / (x_j - x_i)`` (0 with fewer than 2 points)."""
    slopes = [(y[j] - y[i]) / (x[j] - x[i]) for i in range(len(x)) for j in range(i + 1, len(x)) if x[j] != x[i]]
    return float(np.median(slopes)) if slopes else 0.0


@register_rule
class FeatureImportanceOverweight(BuiltinRule):
    """Importance concentrated on a few features (see the module docstring)."""

    name = "feature_importance_overweight"
    summary = "a few features hold almost all of the model's importance (leakage, a dominant feature)"
    default_modes = ("train",)

    def __init__(self, nfeatures: int = 1, threshold: float = 0.9, importance_type: str = "total_gain",
                 trend_saves: int = 3, max_fall: float = 0.02, start_fraction: float = 0.05, start_step: int = 10,
                 **common: Any) -> None:
        super().__init__(start_step=start_step, **common)
        self.nfeatures = check_int(nfeatures, f"{self.name}.nfeatures", minimum=1)
        self.threshold = check_float(threshold, f"{self.name}.threshold", minimum=0.0, maximum=1.0, min_inclusive=False, max_inclusive=False)
        self.importance_type = check_str(importance_type, f"{self.name}.importance_type", choices=IMPORTANCE_TYPES)
        self.trend_saves = check_int(trend_saves, f"{self.name}.trend_saves", minimum=2)
        self.max_fall = check_float(max_fall, f"{self.name}.max_fall", minimum=0.0)
        self.start_fraction = check_float(start_fraction, f"{self.name}.start_fraction", minimum=0.0, maximum=1.0)

    def _top_shares(self, history: History, names: list[str], mode: str, worker: int, step: int) -> Any:
        """``(save rounds, top share at each, top features now, features now, features used now, total
        now)`` over the last ``trend_saves`` saves up to ``step`` (None when ``step`` has no positive
        importance)."""
        by_step: dict[int, list[tuple[str, float]]] = {}
        for n in names:
            steps, values = history.series(n, "raw", mode, worker)
            upto = int(np.searchsorted(steps, step, side="right"))
            if np.any(steps[1:upto] < steps[: upto - 1]):  # written out of order (a resumed run): all of it
                at = {int(s): float(v) for s, v in zip(steps.tolist(), values.tolist()) if s <= step}
            else:  # the last few saves up to ``step`` (a step written twice: its latest value)
                lo = max(0, upto - 2 * self.trend_saves)
                at = {int(s): float(v) for s, v in zip(steps[lo:upto].tolist(), values[lo:upto].tolist())}
            for s in sorted(at)[-self.trend_saves:]:
                by_step.setdefault(s, []).append((n, at[s]))
        if not by_step.get(step):
            return None
        rounds: list[int] = []
        shares: list[float] = []
        now: tuple[list[tuple[str, float]], int, int, float] | None = None
        for s in sorted(by_step)[-self.trend_saves:]:
            vals = [(n, v) for n, v in by_step[s] if np.isfinite(v) and v >= 0]
            pos = sorted(((n, v) for n, v in vals if v > 0), key=lambda kv: -kv[1])
            if not pos:
                continue
            total = sum(v for _, v in pos)
            rounds.append(s)
            shares.append(sum(v for _, v in pos[: self.nfeatures]) / total)
            if s == step:
                now = (pos[: self.nfeatures], len(vals), len(pos), total)
        if now is None:
            return None
        return (rounds, shares, *now)

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
        known = getattr(history, "planned_steps", None)
        if known and step < self.start_fraction * known:
            return NO_DATA  # too early to tell a dominant feature from a leak at this learning rate
        planned = known or PLANNED_FALLBACK
        seen = False
        for worker in self.workers(history):
            got = self._top_shares(history, by_type[itype], mode, worker, step)
            if got is None:
                continue
            seen = True
            rounds, shares, top, features, used, total = got
            share = shares[-1]
            if features < self.nfeatures + 2 or not share > self.threshold or len(rounds) < 2:
                continue
            slope = theil_sen_slope([float(r) for r in rounds], shares)
            if slope * planned < -self.max_fall:
                continue  # still falling: the early trees favour the strongest feature; judged again later
            feats = ", ".join(f"{n.split('/', 2)[2]} ({fmt(v / total * 100)}%)" for n, v in top)
            return self.finding(
                step, mode,
                f"the top {self.nfeatures} of {features} features ({used} used) hold {fmt(share * 100)}% of the {itype} importance "
                f"(limit {fmt(self.threshold * 100)}%) and it is not falling ({fmt(shares[0] * 100)}% at round {rounds[0]}): {feats}. "
                "Usual causes: a feature that leaks the label "
                "(an ID, a timestamp, a post-outcome field) or a dominant feature hiding the others; check it, "
                "drop or regularise it (colsample_bytree, interaction constraints).",
                tensors=[n for n, _ in top], share=share, slope=slope, worker=worker,
            )
        return None if seen else NO_DATA
