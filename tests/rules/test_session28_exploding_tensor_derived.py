"""``exploding_tensor`` leaves a booster's tree statistics (``feature_importance``, ``trees``) out of
its default scan, as it does the optimizer's derived values: a NaN there comes from a NaN metric or
gradient, which it judges first, and scanning 25,000 importance tensors at every save step made a
5,000-feature boosting 100x slower (trial 28i; ``History.reductions`` also scanned every stored key
for each tensor, which made it quadratic). Named in ``collections=``, they are judged."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tripwire


def _run(tmp_path: Path, rules: list) -> list[tripwire.Finding]:
    session = tripwire.Session(rules=rules, actions=["record"], out_dir=tmp_path / "run", save_interval=1,
                               collections=["losses", "feature_importance"])
    for step in range(5):
        gain = np.float64(np.nan if step == 3 else 1.0)
        session.step("train", step, {"loss": (np.float64(1.0 / (step + 1)), "losses"),
                                     "feature_importance/f0/gain": (gain, "feature_importance")})
    session.close()
    return [f for f in session.findings if f.rule == "exploding_tensor"]


def test_a_nan_importance_is_not_scanned_by_default(tmp_path: Path) -> None:
    assert _run(tmp_path, ["exploding_tensor"]) == []


def test_a_nan_importance_is_found_where_the_collection_is_named(tmp_path: Path) -> None:
    found = _run(tmp_path, [{"name": "exploding_tensor", "collections": ["losses", "feature_importance"]}])
    assert [(f.step, list(f.tensors)) for f in found] == [(3, ["feature_importance/f0/gain"])]


def test_history_lookups_by_tensor_follow_what_was_written() -> None:
    h = tripwire.History()
    h.add_step("train", 0, 0, 0.0, [("a", ("l2", "mean")), ("b", ("raw",))], np.array([1.0, 2.0, 3.0]))
    h.add_step("train", 1, 0, 1.0, [("a", ("max",))], np.array([4.0]))
    assert h.reductions("a") == ["l2", "max", "mean"] and h.reductions("b") == ["raw"] and h.reductions("c") == []
    assert h.has_tensor("a") and h.has_tensor("b") and not h.has_tensor("c")
    h.add_step("train", 2, 0, 2.0, [], np.zeros(0), arrays=[("c", "raw", np.ones(3))])
    assert h.has_tensor("c") and h.array_kinds("c") == ["raw"] and h.reductions("c") == []
    assert set(h.tensor_names()) >= {"a", "b", "c"}
