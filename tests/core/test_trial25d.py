"""Trial 25d: an smdebug user analysing saved runs offline (``tripwire watch`` replays, ``check_rule``,
the smdebug keywords' hints, reading reductions by their smdebug names, plots)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire._watch import Watcher


# ------------------------------------------- 1-2. watch judges where the training's session judged
def _grad_big() -> tripwire.FunctionRule:
    """The trial's custom gradient rule: no NO_DATA, so each evaluation counts towards its patience."""

    def grad_big(history: Any, step: int, mode: str) -> str | None:
        got = history.latest("gradients/fc2.weight", "l2", mode)
        return f"fc2.weight grad l2 {got[1]:.4g} at {got[0]}" if got and got[1] > 0.3 else None

    return tripwire.FunctionRule(grad_big, name="grad_big", requirements=[tripwire.Requirement("gradients", ("l2",))],
                                 patience=2)


def _nan_seen() -> tripwire.FunctionRule:
    """Names the step it was judged at once the loss holds a NaN."""

    def nan_seen(history: Any, step: int, mode: str) -> str | None:
        _, values = history.series("loss", "raw", mode)
        return f"a NaN loss, judged at step {step}" if np.isnan(values).any() else None

    return tripwire.FunctionRule(nan_seen, requirements=[tripwire.Requirement("losses", ("raw",))])


def _loss_above(threshold: float) -> tripwire.FunctionRule:
    def loss_above(history: Any, step: int, mode: str) -> str | None:
        got = history.latest("loss", "raw", mode)
        return f"loss {got[1]:.3g} at step {got[0]}, judged at {step}" if got and got[1] > threshold else None

    return tripwire.FunctionRule(loss_above, requirements=[tripwire.Requirement("losses", ("raw",))])


def _in_process_and_watched(out: Path, make_rules: Callable[[], list[Any]], train: Callable[[tripwire.Session], None],
                            **session: Any) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]]:
    """The findings of the training's own session, and those of ``tripwire watch`` replaying the run
    with new instances of the same rules: (rule, step, message) each."""
    s = tripwire.Session(out_dir=str(out), rules=make_rules(), actions=["record"], **session)
    train(s)
    s.close()
    in_process = sorted((f.rule, f.step, f.message) for f in s.findings)
    shutil.rmtree(out / "findings")  # (watch never makes again a finding the run holds)
    watcher = Watcher(out, {"rules": make_rules(), "actions": ["record"]}, echo=lambda f: None)
    watched = sorted((f.rule, f.step, f.message) for f in watcher.watch(once=True))
    return in_process, watched


def test_watch_judges_a_custom_gradient_rule_at_save_steps_only(tmp_path: Path) -> None:
    # finding 1: watch judged it at loss-only step 1 too, counted the step-0 gradient twice towards
    # patience 2 and fired there: "grad_big at step 1: fc2.weight grad l2 0.4 at 0"
    def train(s: tripwire.Session) -> None:
        s.set_planned_steps(20)
        for step in range(20):
            plan = s.begin_step("train", step)
            plan.add("loss", np.array(1.0 + 0.01 * step), "losses")
            if plan.wants("gradients"):
                plan.add("gradients/fc2.weight", np.full((4, 4), 0.1 * (step + 1)), "gradients")
            s.end_step()

    in_process, watched = _in_process_and_watched(tmp_path / "run", lambda: [_grad_big()], train, save_interval=5,
                                                  include_collections=["gradients"])
    assert in_process == [("grad_big", 5, "fc2.weight grad l2 2.4 at 5")]
    assert watched == in_process


def test_watch_counts_the_patience_of_a_loss_rule_in_save_steps(tmp_path: Path) -> None:
    # finding 2: patience 3 counted records 20, 21 and 22 in watch (saves 20, 30 and 40 in-process)
    def train(s: tripwire.Session) -> None:
        s.set_planned_steps(60)
        rng = np.random.default_rng(0)
        for step in range(60):
            plan = s.begin_step("train", step)
            plan.add("loss", np.array(1.0 + 0.05 * rng.standard_normal()), "losses")
            s.end_step()

    rules = lambda: [{"name": "loss_not_decreasing", "num_steps": 20, "patience": 3}]  # noqa: E731
    in_process, watched = _in_process_and_watched(tmp_path / "run", rules, train, save_interval=10)
    assert [(r, step) for r, step, _ in in_process] == [("loss_not_decreasing", 40)]
    assert watched == in_process


def test_watch_judges_a_nan_among_kept_losses_where_the_session_did(tmp_path: Path) -> None:
    # a NaN kept between save steps, then a validation: the session judges the kept losses before the
    # validation's record, at the last of them (step 8); watch judged the NaN's own record (step 7)
    def train(s: tripwire.Session) -> None:
        for step in range(12):
            s.step("train", step, {"loss": (np.array(np.nan if step == 7 else 1.0), "losses")})
            if step == 8:
                s.step("eval", 0, {"val_loss": (np.array(1.0), "losses")}, summary=True)

    in_process, watched = _in_process_and_watched(tmp_path / "run", lambda: [_nan_seen()], train, save_interval=5)
    assert in_process == [("nan_seen", 8, "a NaN loss, judged at step 8")]
    assert watched == in_process


def test_watch_judges_the_losses_kept_after_the_last_save_step_at_the_runs_end(tmp_path: Path) -> None:
    # saves 0, 5, 10, 15; steps 16-19 are written when the session closes, and judged once, at 19
    def train(s: tripwire.Session) -> None:
        for step in range(20):
            s.step("train", step, {"loss": (np.array(2.0 if step >= 18 else 1.0), "losses")})

    in_process, watched = _in_process_and_watched(tmp_path / "run", lambda: [_loss_above(1.5)], train,
                                                  save_interval=5)
    assert in_process == [("loss_above", 19, "loss 2 at step 19, judged at 19")]
    assert watched == in_process
    # a run still written (no end marker yet): those losses wait, as in the training
    out = tmp_path / "live"
    s = tripwire.Session(out_dir=str(out), rules=[], save_interval=5)
    train(s)
    s.flush()
    assert Watcher(out, {"rules": [_loss_above(1.5)]}, echo=lambda f: None).watch(once=True) == []
    s.close()


def test_loss_not_decreasing_says_its_levels_plainly_with_few_saves() -> None:
    # finding 2: "a fall counts beyond by inf", "median over its first 1 saves", "lowest median over
    # 1 consecutive saves" (one value each, no noise measured)
    for every_step in (True, False):
        s = tripwire.Session(rules=[{"name": "loss_not_decreasing", "num_steps": 20}], actions=["record"], write=False,
                             save_interval=10, collections={"losses": {"every_step": every_step}})
        rng = np.random.default_rng(0)
        for step in range(21):
            s.step("train", step, {"loss": (np.array(1.0 + 0.05 * rng.standard_normal()), "losses")})
        s.close()
        [finding] = s.findings
        assert finding.step == 20
        message = finding.message
        for said in ("by inf", "first 1 ", "over 1 consecutive", "of 1 consecutive"):
            assert said not in message, message
        assert "first value 1.006" in message and "lowest value " in message
        if every_step:  # (the lowest of 21 values fell 12%: within a noise one start value cannot measure)
            assert "fallen 12.18% in 20 steps, within the noise of its values (its start is one value, which gives " \
                   "no measure of its noise, so a fall counts only with a falling trend over all its values" in message


# -------------------------------- 3. check_rule's synthetic training names tensors as integrations do
def test_check_rule_exercises_a_rule_reading_gradients_by_their_documented_name() -> None:
    # finding 3: the gradient was 'fc.weight.grad': series("gradients/fc.weight") broke the contract
    # ("did you mean 'fc.weight'?", the weight) and latest(...) passed having never seen a gradient
    from tripwire.rules import RuleContractError, check_rule

    seen: dict[str, list[Any]] = {"latest": [], "series": []}

    def grad_latest(history: Any, step: int, mode: str) -> None:
        seen["latest"].append(history.latest("gradients/fc.weight", "l2", mode))

    def grad_series(history: Any, step: int, mode: str) -> None:
        seen["series"].append(len(history.series("gradients/fc.weight", "l2", mode)[0]))

    requirements = [tripwire.Requirement("gradients", ("l2",))]
    check_rule(tripwire.FunctionRule(grad_latest, requirements=requirements))
    check_rule(tripwire.FunctionRule(grad_series, requirements=requirements))
    assert [got for got in seen["latest"] if got is not None], "the rule never read a gradient"
    assert max(seen["series"]) >= 8
    # every name of the table "Names the rules read" that the synthetic training holds
    names: set[str] = set()
    check_rule(lambda history, step, mode: names.update(history.tensor_names()))
    assert {"loss", "val_loss", "val_acc", "train_acc", "fc.weight", "fc.bias", "gradients/fc.weight",
            "update_ratio/fc.weight", "fc/output", "relu/output", "relu/input", "labels", "predictions"} <= names
    assert not [n for n in names if n.endswith(".grad")]

    def other_gradient(history: Any, step: int, mode: str) -> None:
        history.series("gradients/fc2.weight", "l2", mode)

    with pytest.raises(RuleContractError, match=r"did you mean 'gradients/fc\.weight'\?"):
        check_rule(tripwire.FunctionRule(other_gradient, requirements=requirements))


# ----------------------------------------- 4. smdebug's Hook arguments given to a Session or callback
@pytest.mark.parametrize(("key", "said"), [
    ("save_config", r"did you mean 'save'\? \(smdebug's save_config is tripwire's save\)"),
    ("reduction_config", r"did you mean collections=\{'weights': \{'reductions': \['l2'\]\}, 'gradients': "
                         r"\{'reductions': \['l2'\]\}, \.\.\.\}\? "
                         r"\(smdebug's reduction_config is the reductions of every collection"),
    ("include_regex", r"did you mean collections=\[Collection\('mine', include=\[\.\.\.\]"),
    ("include_workers", r"did you mean writer=\{'ranks': \[0\]\}\?"),
])
def test_an_smdebug_hook_argument_gets_tripwires_name(key: str, said: str) -> None:
    # finding 4: Session(save_config=...) and the callbacks' were "did you mean 'config'?"; following
    # it, config=SaveConfig(...) was refused in turn
    value = {"save_config": tripwire.SaveConfig(interval=2), "reduction_config": tripwire.ReductionConfig(["l2"]),
             "include_regex": ["fc"], "include_workers": "one"}[key]
    with pytest.raises(tripwire.ConfigError, match=rf"^Session\({key}=.*unknown argument '{key}'; {said}"):
        tripwire.Session(write=False, **{key: value})
    with pytest.raises(tripwire.ConfigError, match=rf"^load_config\({key}=.*; {said}"):
        tripwire.load_config(None, **{key: value})


def test_a_callback_names_save_for_smdebugs_save_config() -> None:
    lightning = pytest.importorskip("tripwire.integrations.lightning")
    with pytest.raises(tripwire.ConfigError, match=r"^TripwireCallback\(save_config=.*did you mean 'save'\?"):
        lightning.TripwireCallback(save_config=tripwire.SaveConfig(interval=2))
    with pytest.raises(tripwire.ConfigError, match=r"accepted: a YAML path, a mapping, a Config or None; a SaveConfig "
                                                   r"is the save schedule: give it as save="):
        tripwire.Session(tripwire.SaveConfig(interval=2), write=False)


# ---------------------------------------------- 5. abs_l2 and l2 are one value under two names
def test_abs_l2_reads_a_stored_l2_and_l1_a_stored_abs_l1(tmp_path: Path) -> None:
    # finding 5: value("abs_l2", step) (smdebug's reduction_value(step, "l2", abs=True)) of a tensor
    # that stored l2 was "has no reduction 'abs_l2'; did you mean 'abs_max'?"
    s = tripwire.Session(out_dir=str(tmp_path), save_interval=2,
                         collections={"gradients": {"reductions": ["l2", "abs_l1", "abs_max"]}})
    for step in range(3):
        s.step("train", step, {"gradients/w": (np.array([3.0, -4.0]), "gradients")})
    s.close()
    run = tripwire.open_run(tmp_path)
    t = run.tensor("gradients/w")
    assert t.reductions() == ["abs_l1", "abs_max", "l2"]
    assert t.value("abs_l2", 0) == t.value("l2", 0) == 5.0 and t.value("l1", 2) == t.value("abs_l1", 2) == 7.0
    assert t.series("abs_l2")[0].tolist() == [0, 2] and t.series("l1")[1].tolist() == [7.0, 7.0]
    assert run.value("gradients/w", "abs_l2", 2) == 5.0 and run.latest("gradients/w", "l1") == (2, 7.0)
    with pytest.raises(tripwire.TensorNotFoundError, match=r"has no 'abs_l2' at step 1 in mode 'train' \(worker 0\); "
                                                          r"steps with one: \[0, 2\]"):
        t.value("abs_l2", 1)
    with pytest.raises(tripwire.TensorNotFoundError, match=r"has no reduction 'mean'"):
        t.value("mean", 0)


# --------------------------------------------------- 6. labels of findings at one step stay readable
def test_labels_of_findings_at_one_step_do_not_overlap(tmp_path: Path) -> None:
    # finding 6: grad_big and loss_above at step 5 were drawn on top of each other
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with tripwire.Session(out_dir=str(tmp_path), save_interval=1) as s:
        for step in range(40):
            s.step("train", step, {"loss": (1.0 + 0.01 * step, "losses")})
        for rule in ("grad_big", "loss_above", "loss_not_decreasing", "exploding_tensor"):
            s.record_finding(tripwire.Finding(rule, 20, "train", "at 20"))
        s.record_finding(tripwire.Finding("alone", 5, "train", "at 5"))
    figure = Figure()
    canvas = FigureCanvasAgg(figure)
    ax = tripwire.plot(tripwire.open_run(tmp_path), "loss", ax=figure.subplots())
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = {t.get_text().strip(): t.get_window_extent(renderer) for t in ax.texts}
    assert sorted(boxes) == ["alone", "exploding_tensor", "grad_big", "loss_above", "loss_not_decreasing"]
    names = sorted(boxes)
    overlapping = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if boxes[a].overlaps(boxes[b])]
    assert overlapping == []
    # each one next to its line: within a few label widths of the step's x
    x20 = ax.transData.transform((20, 0))[0]
    assert all(abs((boxes[n].x0 + boxes[n].x1) / 2 - x20) < 4 * boxes[n].width for n in names if n != "alone")
    assert sorted((t.get_text().strip(), t.get_position()[0]) for t in ax.texts)[0] == ("alone", 5)
