"""Tree depth: XGBoost grows trees deeper than ``max_depth``, or grows no split at all.

Condition: ``trees/depth > max_depth``, where the XGBoost integration writes ``trees/depth`` (collection
``trees``) at each save step as the largest depth among the trees added since the previous save step
(every tree is judged, whatever the save interval); or no split from the training's start:
``trees/depth == 0`` at every record since the training's first step, over at least
``no_split_rounds`` rounds (``step - start + 1 >= no_split_rounds``): every tree is a single leaf, so
the model predicts one value for every row. A booster whose late trees make no split (nothing left to
gain) or are stumps (depth 1) does not fire: its first trees split.

Defaults: ``max_depth=10`` (an integer >= 1: XGBoost's ``max_depth`` 0, no limit, is refused here; XGBoost's
own default is 6; depth beyond ~10 isolates single samples on most tabular data sets), ``no_split_rounds=3`` (0 switches the no-split test off), ``tensor="trees/depth"`` (a
name or a regular expression matched in full), mode ``train``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._errors import ConfigError
from .._history import History
from .._validate import check_int
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt_vs, series_any_mode, since_step
from ._registry import register_rule

#: Why no tree of a booster splits, for the no-split finding (trial 27f: all-NaN and constant features
#: made depth-0 trees from round 0, and the only finding came at round 50, with a neural network's causes).
_NO_SPLIT_CAUSES = (
    "Usual causes: the features carry nothing to split on (every column constant, or all missing: NaN, or "
    "the missing value given to the DMatrix); min_child_weight too large for the data (each side of a split "
    "needs that much hessian: with binary:logistic at most 0.25 a row, so min_child_weight 50 asks for 200 "
    "rows or more on each side); gamma (min_split_loss) larger than any split's gain; labels that are all "
    "the same (one class, one target value: nothing to learn)"
)


@register_rule
class TreeDepth(BuiltinRule):
    """Trees deeper than a limit, or no tree that splits (see the module docstring)."""

    name = "tree_depth"
    summary = "XGBoost grows trees deeper than max_depth, or no split at all"
    default_modes = ("train",)
    input_collections = ("trees",)

    def __init__(self, max_depth: int = 10, tensor: str = "trees/depth", no_split_rounds: int = 3,
                 **common: Any) -> None:
        super().__init__(**common)
        if max_depth == 0 and not isinstance(max_depth, bool):
            # (trial 29d: XGBoost's max_depth 0 is "no limit"; copied here it fired at the first split)
            raise ConfigError(f"{self.name}.max_depth: got {max_depth!r}; accepted: an integer >= 1, the depth the trees "
                              "must stay within (XGBoost's max_depth 0 means no limit; here 0 would fire at the first "
                              "tree that makes a split)")
        self.max_depth = check_int(max_depth, f"{self.name}.max_depth", minimum=1)
        # a name or a full-match regex, checked as the other rules' regexes are (trial 24f: "(" was taken)
        self.tensor = check_regex(tensor, f"{self.name}.tensor")
        self.no_split_rounds = check_int(no_split_rounds, f"{self.name}.no_split_rounds", minimum=0)

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
            start = self.training_start(mode)  # (rounds of the training the rule is armed for)
            if not math.isnan(depth) and depth > self.max_depth:
                # the deepest tree of the rounds since the last record: which of them added it is not
                # known (trial 21e: "round 10 added a tree of depth 9", added in round 7)
                since = max(int(steps[-2]) + 1, start) if len(steps) > 1 else (start or None)
                rounds = (f"round {step}" if since == step or (since is None and step == 0)
                          else f"rounds {since}-{step}" if since is not None else f"the rounds up to {step}")
                shown, limit = fmt_vs(depth, self.max_depth)
                return self.finding(
                    step, mode,
                    f"{rounds} added a tree of depth {shown} (limit {limit}): deep trees "
                    "memorise the training data. Lower max_depth (with grow_policy='lossguide' and max_depth=0: "
                    "set one, or lower max_leaves), raise min_child_weight or gamma, or use subsample/"
                    "colsample_bytree.",
                    tensors=[self.tensor], depth=depth, worker=worker,
                )
            found = self._no_split(steps, values, step, start, mode, worker)
            if found is not None:
                return found
        return None if seen else NO_DATA

    def _no_split(self, steps: np.ndarray, values: np.ndarray, step: int, start: int, mode: str,
                  worker: int) -> Any:
        """The no-split finding at ``step``: every depth recorded since the training's first step
        ``start`` is 0, over at least ``no_split_rounds`` rounds; else None."""
        rounds = step - start + 1
        if not self.no_split_rounds or rounds < self.no_split_rounds:
            return None
        depths = values[since_step(steps, start):]
        if not len(depths) or not bool(np.all(depths == 0)):
            return None
        continued = (f"; or a model continued from round {start} (xgb_model=) that has nothing left to learn at "
                     "these settings" if start > 0 else "")
        return self.finding(
            step, mode,
            f"no tree of {f'round {step}' if rounds == 1 else f'rounds {start}-{step}'} ({rounds} "
            f"round{'' if rounds == 1 else 's'}, every tree this training added) made a split: "
            "each is a single leaf (depth 0), so the model predicts the same value for every row and learns "
            f"nothing from the features. {_NO_SPLIT_CAUSES}{continued}. Check the training data's columns "
            "(np.isnan(X).all(axis=0), X.std(axis=0)) and lower min_child_weight or gamma.",
            tensors=[self.tensor], depth=0.0, rounds=rounds, test="no_split", worker=worker,
        )
