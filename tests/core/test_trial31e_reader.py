"""Trial 31e: smdebug's reader calls (F5: ``tensor_names(mode=, step=)``, ``value(step, name)``,
``has_passed_step``) and the reductions a collection that a rule added keeps (F6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, TensorNotFoundError


def _run(out: Path, **config: object) -> tripwire.Run:
    with tripwire.Session(out_dir=str(out), **config) as s:  # type: ignore[arg-type]
        for step in range(3):
            plan = s.begin_step("train", step)
            plan.add("loss", 1.0 / (step + 1), "losses")
            if plan.wants("gradients"):
                plan.add("gradients/w", np.ones(4), "gradients")
            s.end_step()
        plan = s.begin_step("eval", 0)
        plan.add("val_loss", 0.5, "losses")
        s.end_step()
    return tripwire.open_run(out)


@pytest.fixture
def run(tmp_path: Path) -> tripwire.Run:
    return _run(tmp_path / "run", rules=[], save={"interval": 2},
                collections={"gradients": {"reductions": ["l2"]}, "losses": None})


# ------------------------------------------------------------------------------------------ F5
def test_tensor_names_filters_by_mode_and_step(run: tripwire.Run) -> None:
    assert run.tensor_names() == ["gradients/w", "loss", "val_loss"]
    assert run.tensor_names(mode="train") == ["gradients/w", "loss"]
    assert run.tensor_names(mode="eval") == ["val_loss"]
    assert run.tensor_names(step=1, mode="train") == ["loss"]  # (gradients every 2 steps, the loss every step)
    assert run.tensor_names(step=2, mode="train") == ["gradients/w", "loss"]
    assert run.tensor_names(step=9, mode="train") == []
    assert run.tensor_names(collection="gradients", step=1, mode="train") == []
    assert run.tensor_names(regex="loss", mode="train", worker=0) == ["loss"]


def test_tensor_names_says_what_it_takes(run: tripwire.Run) -> None:
    with pytest.raises(ConfigError, match=r"^mode: got None with step=1; accepted: one of train, eval, test, predict: "
                       r"each mode numbers its own steps .*tensor_names\(step=1, mode='train'\)"):
        run.tensor_names(step=1)
    with pytest.raises(ConfigError, match=r"^collection: got 3 \(int\); accepted: a collection name or None; smdebug's "
                       r"trial\.tensor_names\(step\) is tensor_names\(step=3, mode='train'\) here"):
        run.tensor_names(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^mode: got 'TRAIN'; accepted: train, eval, test, predict; did you mean 'train'\?"):
        run.tensor_names(mode="TRAIN")
    with pytest.raises(ConfigError, match=r"^step: got 1\.5 \(float\)"):
        run.tensor_names(step=1.5, mode="train")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^worker: got 4; accepted: one of the run's workers \(0\)"):
        run.tensor_names(mode="train", worker=4)


def test_value_in_smdebugs_order_says_the_order(run: tripwire.Run) -> None:
    tv = run.tensor("gradients/w")
    assert tv.value("l2", 0) == pytest.approx(2.0)
    with pytest.raises(ConfigError, match=r"^value\(0, 'l2'\): the order is \(reduction, step\): "
                       r"tensor\.value\('l2', 0\) \(smdebug's reduction_value\(step, name\)"):
        tv.value(0, "l2")  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match=r"^value\('gradients/w', 0, 'l2'\): the order is \(tensor, reduction, step\): "
                       r"run\.value\('gradients/w', 'l2', 0\)"):
        run.value("gradients/w", 0, "l2")  # type: ignore[arg-type]
    # a mode in the mode's place is still a mode
    with pytest.raises(ConfigError, match=r"mode: got 'trian'"):
        tv.value(0, "trian")


def test_has_passed_step_points_a_reader_at_steps_not_at_a_writing_method(run: tripwire.Run) -> None:
    with pytest.raises(AttributeError, match=r"has no attribute 'has_passed_step' \(smdebug's name\); in tripwire: step in "
                       r"run\.steps\(mode\)") as err:
        run.has_passed_step(2)  # type: ignore[attr-defined]
    assert "add_step" not in str(err.value)
    with pytest.raises(AttributeError) as err:
        run.add_stepz  # type: ignore[attr-defined]  # noqa: B018
    text = str(err.value)
    assert "did you mean 'add_step" not in text and " add_step," not in text and " add_steps," not in text, text


# ------------------------------------------------------------------------------------------ F6
def test_a_collection_a_rule_added_says_how_to_keep_more(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", rules=["all_zero"])
    tv = run.tensor("gradients/w")
    assert tv.reductions() == ["zero_fraction"]  # (the capture is unchanged: the rule's reductions only)
    said = (r"the run's config does not list collection 'gradients': its rules \(all_zero\) added it, keeping only "
            r"the reductions they read; to keep 'l2' too, list the collection with its reductions in the config "
            r"\(collections: \{gradients: \{reductions: \[l2, \.\.\.\]\}\}")
    with pytest.raises(TensorNotFoundError, match=rf"^tensor 'gradients/w' has no reduction 'l2'; available: "
                       rf"zero_fraction; {said}"):
        tv.value("l2", 0)
    with pytest.raises(TensorNotFoundError, match=rf"stored: zero_fraction; {said}"):
        run.series("gradients/w", "l2")


def test_the_hints_way_keeps_the_reductions(tmp_path: Path) -> None:
    listed = _run(tmp_path / "a", rules=["all_zero"], collections={"gradients": {"reductions": ["l2"]}, "losses": None})
    assert listed.tensor("gradients/w").reductions() == ["l2", "zero_fraction"]
    assert listed.tensor("gradients/w").value("l2", 0) == pytest.approx(2.0)
    with pytest.raises(TensorNotFoundError, match=r"the run's config keeps l2 of collection 'gradients': add 'mean' to "
                       r"collections\.gradients\.reductions to keep it"):
        listed.tensor("gradients/w").value("mean", 0)
    defaults = _run(tmp_path / "b", rules=["all_zero"], include_collections=["gradients"])
    assert set(defaults.tensor("gradients/w").reductions()) == set(tripwire.BUILTIN_COLLECTIONS["gradients"])
