"""Tree statistics and feature importance from XGBoost's JSON model, without XGBoost or pandas.

The callback serialises only the rounds it has not read yet (``booster[a:b].save_raw("json")``) and
hands the parsed document here. Everything in this module is plain Python and numpy, so it is
tested against hand-made trees as well as real boosters.

Definitions (per tree, reachable nodes only, starting at node 0):

- ``depth``: the number of edges on the longest path from the root to a leaf (a lone leaf has
  depth 0, a stump depth 1). This is the depth ``max_depth`` bounds; smdebug reported
  ``log2(largest node id)`` instead, which overstates the depth of lossguide trees.
- ``leaves``: nodes with no children.
- ``gain``: the sum of ``loss_changes`` over split nodes.

Feature importance follows :meth:`xgboost.Booster.get_score` over every tree read so far:
``weight`` = number of splits on a feature, ``total_gain`` / ``total_cover`` = sums of the split
gain / cover (``sum_hessian``), ``gain`` = ``total_gain / weight``, ``cover`` = ``total_cover /
weight``. Each type is then normalised to sum to 1 over the features (all zeros before the first
split).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

IMPORTANCE_TYPES: tuple[str, ...] = ("weight", "gain", "cover", "total_gain", "total_cover")
"""Feature importance types, as in :meth:`xgboost.Booster.get_score`."""

__all__ = [
    "IMPORTANCE_TYPES", "ImportanceAccumulator", "RoundTrees", "TreeStats", "parse_model", "round_summary",
    "rounds_from", "tree_stats", "trees_from_round",
]


@dataclass(frozen=True)
class TreeStats:
    """One tree: ``depth`` (edges root to deepest leaf), ``leaves``, ``gain`` (sum over splits),
    and the split nodes' ``features`` (int indices), ``gains`` and ``covers`` (float arrays)."""

    depth: int
    leaves: int
    gain: float
    features: np.ndarray
    gains: np.ndarray
    covers: np.ndarray


@dataclass(frozen=True)
class RoundTrees:
    """The trees one boosting round added: ``depth`` (max over them; the callback's is the max
    over every tree since the last save step), ``leaves`` and ``gain`` (sums over the round's
    trees), ``count`` (number of trees)."""

    depth: int
    leaves: int
    gain: float
    count: int

    def as_tensors(self) -> dict[str, float]:
        """Scalars offered under kind ``trees``."""
        return {"trees/depth": float(self.depth), "trees/leaves": float(self.leaves), "trees/gain": float(self.gain)}


def tree_stats(tree: Mapping[str, Any]) -> TreeStats:
    """Statistics of one tree of the JSON model (keys ``left_children``, ``right_children``,
    ``split_indices``, ``loss_changes``, ``sum_hessian``)."""
    left: Sequence[int] = tree["left_children"]
    right: Sequence[int] = tree["right_children"]
    split_idx: Sequence[int] = tree["split_indices"]
    loss: Sequence[float] = tree["loss_changes"]
    hess: Sequence[float] = tree["sum_hessian"]
    if not left:
        return TreeStats(0, 0, 0.0, np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    depth = leaves = 0
    splits: list[int] = []
    stack = [(0, 0)]
    while stack:  # iterative walk over reachable nodes only (pruned/deleted slots are skipped)
        node, d = stack.pop()
        lc = left[node]
        if lc < 0:
            leaves += 1
            if d > depth:
                depth = d
            continue
        splits.append(node)
        stack.append((lc, d + 1))
        stack.append((right[node], d + 1))
    idx = np.asarray(splits, dtype=np.int64)
    features = np.asarray(split_idx, dtype=np.int64)[idx] if len(idx) else np.zeros(0, np.int64)
    gains = np.asarray(loss, dtype=np.float64)[idx] if len(idx) else np.zeros(0)
    covers = np.asarray(hess, dtype=np.float64)[idx] if len(idx) else np.zeros(0)
    return TreeStats(depth, leaves, float(gains.sum()), features, gains, covers)


def parse_model(model: Mapping[str, Any]) -> tuple[list[TreeStats], list[int]]:
    """Trees of a JSON model document (``json.loads(booster.save_raw("json"))``) and the number of
    trees per boosting round (from ``iteration_indptr``; one round holding every tree when the
    field is missing). Raises ``ValueError`` for a model without trees (``gblinear``)."""
    try:
        gb = model["learner"]["gradient_booster"]
    except (KeyError, TypeError):
        raise ValueError("not an XGBoost JSON model: 'learner.gradient_booster' is missing") from None
    inner = gb.get("model") or gb.get("gbtree", {}).get("model")  # dart nests the gbtree
    if inner is None or "trees" not in inner:
        raise ValueError(f"booster {gb.get('name')!r} has no trees (tree statistics need gbtree or dart)")
    trees = [tree_stats(t) for t in inner["trees"]]
    indptr = inner.get("iteration_indptr")
    if indptr and len(indptr) >= 2:
        per_round = [int(b) - int(a) for a, b in zip(indptr[:-1], indptr[1:])]
    else:
        per_round = [len(trees)]
    return trees, per_round


def trees_from_round(trees: Sequence[TreeStats], per_round: Sequence[int], rounds: int, first: int) -> list[TreeStats]:
    """The trees of ``trees`` (``rounds`` boosting rounds, ``per_round`` trees each, as
    :func:`parse_model` returns them) from round index ``first`` on (0: every tree).

    A continued model's first read holds the loaded model's rounds too (trial 22h: ``trees/depth``
    was the depth of the loaded model's trees, and ``tree_depth`` stopped a training whose own trees
    were all below its limit): those rounds are left out of the tree statistics (not of importance).
    Where ``per_round`` does not give one count per round (a model JSON without ``iteration_indptr``),
    the trees are shared evenly between the rounds; where they cannot be, every tree counts."""
    if first <= 0:
        return list(trees)
    if first >= rounds:
        return []
    if len(per_round) == rounds:
        return list(trees[sum(int(n) for n in per_round[:first]) :])
    if rounds and len(trees) % rounds == 0:
        return list(trees[first * (len(trees) // rounds) :])
    return list(trees)


def rounds_from(trees: Sequence[TreeStats], per_round: Sequence[int], rounds: int,
                first: int) -> tuple[list[TreeStats], list[int]]:
    """``(trees, per_round)`` of the rounds from round index ``first`` on, of a model of ``rounds``
    rounds as :func:`parse_model` returns it: what a slice ``booster[first:rounds]`` would give, where
    the whole model had to be read (XGBoost refuses to slice a booster that updates a loaded model's
    trees). Where ``per_round`` does not give one count per round, the trees are shared evenly
    (:func:`trees_from_round`) and the rounds kept count as one."""
    kept = trees_from_round(trees, per_round, rounds, first)
    if len(per_round) == rounds:
        return kept, [int(k) for k in per_round[max(0, first):]]
    return kept, [len(kept)]


def round_summary(trees: Sequence[TreeStats]) -> RoundTrees:
    """Combine the trees of one round."""
    if not trees:
        return RoundTrees(0, 0, 0.0, 0)
    return RoundTrees(max(t.depth for t in trees), sum(t.leaves for t in trees), float(sum(t.gain for t in trees)), len(trees))


class ImportanceAccumulator:
    """Running feature importance over the trees seen so far (see the module docstring)."""

    def __init__(self, n_features: int) -> None:
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 0:
            raise ValueError(f"n_features: got {n_features!r}; accepted: an integer >= 0")
        self.n_features = n_features
        self.weight = np.zeros(n_features)
        self.total_gain = np.zeros(n_features)
        self.total_cover = np.zeros(n_features)

    def add(self, trees: Sequence[TreeStats]) -> None:
        for t in trees:
            if not len(t.features):
                continue
            top = int(t.features.max()) + 1
            if top > self.n_features:  # a feature index beyond what the booster reported
                self._grow(top)
            n = self.n_features
            self.weight += np.bincount(t.features, minlength=n)
            self.total_gain += np.bincount(t.features, weights=t.gains, minlength=n)
            self.total_cover += np.bincount(t.features, weights=t.covers, minlength=n)

    def _grow(self, n: int) -> None:
        pad = n - self.n_features
        self.weight = np.concatenate([self.weight, np.zeros(pad)])
        self.total_gain = np.concatenate([self.total_gain, np.zeros(pad)])
        self.total_cover = np.concatenate([self.total_cover, np.zeros(pad)])
        self.n_features = n

    def raw(self) -> dict[str, np.ndarray]:
        """Unnormalised importance per type (``get_score`` values; 0 for unused features)."""
        used = self.weight > 0
        safe = np.where(used, self.weight, 1.0)
        return {
            "weight": self.weight.copy(),
            "gain": np.where(used, self.total_gain / safe, 0.0),
            "cover": np.where(used, self.total_cover / safe, 0.0),
            "total_gain": self.total_gain.copy(),
            "total_cover": self.total_cover.copy(),
        }

    def normalised(self) -> dict[str, np.ndarray]:
        """Each type divided by its sum over features (all zeros while nothing was split)."""
        out = {}
        for kind, values in self.raw().items():
            total = float(values.sum())
            out[kind] = values / total if total > 0 else values
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"weight": self.weight.tolist(), "total_gain": self.total_gain.tolist(), "total_cover": self.total_cover.tolist()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight = np.asarray(state["weight"], dtype=np.float64)
        self.total_gain = np.asarray(state["total_gain"], dtype=np.float64)
        self.total_cover = np.asarray(state["total_cover"], dtype=np.float64)
        self.n_features = len(self.weight)
