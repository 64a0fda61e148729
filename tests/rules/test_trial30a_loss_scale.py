"""Trial 30a: fp16 mixed precision's loss scale.

- F2: ``loss_scale_collapse`` (default set): the loss scale (``loss_scale``, kind optimizer) below
  ``min_scale``, every step since the save before skipped (session 30, trial 30g F1: a scale that
  settled low is no collapse); a run without a scaler records none and is not
  named as leaving the rule nothing to read (its requirement is optional).
- F7: ``exploding_gradient``'s gradients-before-``unscale_`` hint divides by the run's recorded loss
  scale where it has one (not always 65536), and leaves the usual fixes out where it applies.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.rules import RULE_SETS, ExplodingGradient, LossScaleCollapse, check_rule


def _scales(values: list[float], start: int = 0) -> list[Any]:
    return [("train", start + i, {"loss_scale": (float(v), "optimizer"), "loss": (np.float64(1.0), "losses")})
            for i, v in enumerate(values)]


def test_the_rule_is_in_the_default_set_and_passes_the_contract() -> None:
    assert "loss_scale_collapse" in RULE_SETS["default"]
    check_rule(LossScaleCollapse)
    check_rule(LossScaleCollapse, min_scale=8.0, patience=2)
    [req] = LossScaleCollapse().requirements()
    assert req.collection == "optimizer" and req.optional


def test_a_halving_scale_fires_below_min_scale_and_counts_the_skipped_steps(feed) -> None:
    found = feed(LossScaleCollapse(), _scales([65536.0 / 2 ** k for k in range(30)]))
    assert [f.step for f in found] == [26]  # (2^16 / 2^26 = 2^-10 < 0.001; session 30: min_scale 0.001)
    [f] = found
    assert f.severity == "critical" and f.tensors == ("loss_scale",)
    assert f.details["scale"] == 2.0 ** -10 and f.details["skipped_since"] == 0 and f.details["scale_then"] == 65536.0
    assert "the loss scale of fp16 mixed precision is 0.000977 (2^-10) (loss_scale; limit min_scale=0.001)" in f.message
    assert ("it was 65536 (2^16) at step 0, and the scaler, which halves it at each step it skips, skipped every one "
            "of the 26 optimizer steps since then: the weights have not moved since") in f.message, f.message
    assert "the branch a where(...) does not take" in f.message and "learning rate far too high" in f.message


def test_the_streak_starts_where_the_skipping_began(feed) -> None:
    # trial 30g F5: a NaN gradient from step 150 (scale 256 until then, saves every 10): named at 170, every
    # one of the 20 steps since 150 skipped (it said "at least 10 of the 160 steps since step 0")
    saves = [("train", s, {"loss_scale": (256.0, "optimizer")}) for s in range(0, 160, 10)]
    saves += [("train", 160, {"loss_scale": (256.0 / 2 ** 10, "optimizer")}),
              ("train", 170, {"loss_scale": (256.0 / 2 ** 20, "optimizer")})]
    [found] = feed(LossScaleCollapse(), saves)
    assert found.step == 170 and found.details["skipped_since"] == 150, found
    assert "it was 256 (2^8) at step 150" in found.message and "every one of the 20 optimizer steps" in found.message


def test_a_scale_that_settled_low_does_not_fire(feed) -> None:
    # trial 30g F1: gradients beyond fp16's range: the scaler skips until its scale suits them, then trains
    # with it below 1 (2^-7 here); no step skipped since the save before: quiet, whatever the scale
    descent = [65536.0 / 2 ** k for k in range(24)]  # (2^16 .. 2^-7)
    assert feed(LossScaleCollapse(), _scales(descent + [2.0 ** -7] * 20)) == []
    assert feed(LossScaleCollapse(min_scale=1.0), _scales(descent + [2.0 ** -7] * 20))[0].step == 17
    # a scale below the limit that fell by less than half a step since the save before (a step applied)
    saves = [("train", 0, {"loss_scale": (2.0 ** -12, "optimizer")}), ("train", 10, {"loss_scale": (2.0 ** -13, "optimizer")})]
    assert [f.step for f in feed(LossScaleCollapse(), saves)] == [0]  # (no save before step 0: the scale alone)


def test_healthy_scales_do_not_fire_and_min_scale_sets_the_limit(feed) -> None:
    healthy = [65536.0, 32768.0, 16384.0, 16384.0, 32768.0, 1.0]
    assert feed(LossScaleCollapse(), _scales(healthy)) == []
    assert [f.step for f in feed(LossScaleCollapse(min_scale=20000.0), _scales(healthy))] == [2]
    assert [f.step for f in feed(LossScaleCollapse(), _scales([1024.0, float("nan")]))] == [1]  # (NaN counts)


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), "1", True])
def test_min_scale_is_checked(value: Any) -> None:
    with pytest.raises(tripwire.ConfigError, match=r"loss_scale_collapse\.min_scale: got .*accepted: a .*number > 0"):
        LossScaleCollapse(min_scale=value)


def test_a_run_without_a_scaler_is_not_named_as_reading_nothing(tmp_path: Any,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(3):
            session.step("train", step, {"loss": (1.0 / (step + 1), "losses"),
                                         "gradients/fc1.weight": (np.full(4, 0.1), "gradients"),
                                         "gradients/fc2.weight": (np.full(4, 0.1), "gradients")})
        session.close()
    assert not [r for r in caplog.records if "loss_scale_collapse" in r.getMessage()], caplog.text


def test_a_hand_loop_that_offers_the_scale_is_judged(tmp_path: Any) -> None:
    # the recipe of docs/rules.md: offer scaler.get_scale() as loss_scale, kind optimizer
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=5)
    scale = 65536.0
    for step in range(35):
        plan = session.begin_step("train", step)
        plan.add("loss", 2.3, "losses")
        if plan.wants("optimizer"):
            plan.add("loss_scale", scale, "optimizer")
        session.end_step()
        scale /= 2  # (every step skipped)
    session.close()
    [found] = [f for f in session.findings if f.rule == "loss_scale_collapse"]
    assert found.step == 30 and "skipped every one of the 30 optimizer steps since then" in found.message


# ------------------------------------------------------------------ F7: exploding_gradient's hint
def _grads(norms: list[float], scales: list[float] | None = None, loss: float = 2.3) -> list[Any]:
    out = []
    for step, g in enumerate(norms):
        grad = np.full((4, 4), g / 4)  # (norm g)
        values: dict[str, Any] = {"gradients/fc1.weight": (grad, "gradients"),
                                  "gradients/out.weight": (grad, "gradients"), "loss": (np.float64(loss), "losses")}
        if scales is not None:
            values["loss_scale"] = (scales[step], "optimizer")
        out.append(("train", step, values))
    return out


def test_the_hint_divides_by_the_recorded_loss_scale(feed) -> None:
    # init_scale 2^13 (not GradScaler's default): 2046 / 8192 = 0.25, an ordinary norm
    found = feed(ExplodingGradient(), _grads([2046.0] * 5, [8192.0] * 5), collections=["gradients", "losses"])
    message = found[0].message
    assert ("this norm divided by the run's loss scale at this step (loss_scale, 8192 (2^13)) is 0.2498, an "
            "ordinary one") in message, message
    assert "Usual fixes" not in message and "clipping or a lower learning rate does not fix this" in message, message
    # a scale above the default (grown): 2^24, and a norm of 1e6 (over 65536: 16, no ordinary norm)
    found = feed(ExplodingGradient(), _grads([1.05e6] * 5, [2.0 ** 24] * 5), collections=["gradients", "losses"])
    assert "(loss_scale, 16777216 (2^24)) is 0.06258" in found[0].message, found[0].message


def test_the_default_scale_hint_drops_the_usual_fixes_too(feed) -> None:
    found = feed(ExplodingGradient(), _grads([4.262e4] * 5), collections=["gradients", "losses"])
    message = found[0].message
    assert "divided by its default loss scale 65536 is 0.6503" in message and "Usual fixes" not in message, message


def test_without_the_hint_the_usual_fixes_stay(feed) -> None:
    found = feed(ExplodingGradient(), _grads([1.0, 5.0, 50.0, 2e3, 3e3, 4e3], [65536.0] * 6),
                 collections=["gradients", "losses"])
    assert "before scaler.unscale_" not in found[0].message and "Usual fixes: gradient clipping" in found[0].message
