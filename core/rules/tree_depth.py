"""Tree depth: XGBoost grows trees deeper than ``max_depth``.

Condition: ``trees/depth > max_depth``, where the XGBoost integration writes ``trees/depth`` (collection
``trees``) at each save step as the largest depth among the trees added since the previous save step
(every tree is judged, whatever the save interval).

Defaults: ``max_depth=10`` (XGBoost's own default is 6; depth beyond ~10 isolates single samples on most
tabular data sets), ``tensor="trees/depth"`` (a name or a regular expression matched in full), mode ``train``.
"""

from __future__ import annotations

import math
from typing import Any

from .._history import History
from .._validate import check_int
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt, series_any_mode
from ._registry import register_rule


@register_rule
class TreeDepth(BuiltinRule):
    """Trees deeper than a limit (see the module docstring)."""

    name = "tree_depth"
    summary = "XGBoost grows trees deeper than max_depth"
    default_modes = ("train",)
    input_collections = ("trees",)

    def __init__(self, max_depth: int = 10, tensor: str = "trees/depth", **common: Any) -> None:
        super().__init__(**common)
        self.max_depth = check_int(max_depth, f"{self.name}.max_depth", minimum=0)
        # a name or a full-match regex, checked as the other rules' regexes are (trial 24f: "(" was taken)
        self.tensor = check_regex(tensor, f"{self.name}.tensor")

    def named_inputs(self) -> dict[str, str]:
        return {"tensor": self.tensor}

    def requirements(self) -> list[Requirement]:
        return [Requirement("trees", reductions=("raw",), modes=self.modes)]

    def check(self, history: History, step: int, mode: str) -> Any:
        if not history.has_tensor(self.tensor):
            return NO_DATA
        seen = False
        for worker in self.workers(history):
            steps, values, _ = series_any_mode(history, self.tensor, mode, worker)
            if not len(steps) or steps[-1] != step:
                continue
            seen = True
            depth = float(values[-1])
            if not math.isnan(depth) and depth > self.max_depth:
                # the deepest tree of the rounds since the last record: which of them added it is not
                # known (trial 21e: "round 10 added a tree of depth 9", added in round 7)
                start = self.training_start(mode)  # (rounds of the training the rule is armed for)
                since = max(int(steps[-2]) + 1, start) if len(steps) > 1 else (start or None)
                rounds = (f"round {step}" if since == step or (since is None and step == 0)
                          else f"rounds {since}-{step}" if since is not None else f"the rounds up to {step}")
                return self.finding(
                    step, mode,
                    f"{rounds} added a tree of depth {fmt(depth)} (limit {fmt(self.max_depth)}): deep trees "
                    "memorise the training data. Lower max_depth (with grow_policy='lossguide' and max_depth=0: "
                    "set one, or lower max_leaves), raise min_child_weight or gamma, or use subsample/"
                    "colsample_bytree.",
                    tensors=[self.tensor], depth=depth, worker=worker,
                )
        return None if seen else NO_DATA
