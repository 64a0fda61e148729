"""Trial 38c: ``tripwire watch`` over a run of two workers judged a rule of the user's own, which reads
with ``worker=None`` as the README's ``grad_too_small`` does, on rank 0's values for both workers:
rank 1 got rank 0's norm in its finding, at rank 0's step, or no finding at all. Each worker's
training judges its own values (its session's history holds its rank alone); the watch now shows each
worker's rules that worker's values the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire._watch import Watcher
from tripwire.rules import Requirement, Rule


class NormAbove(Rule):
    """``l2(gradients/fc.weight) > limit`` at the step judged (reads with ``worker=None``)."""

    name = "norm_above"
    default_modes = ("train",)

    def __init__(self, limit: float = 5.0, **common: Any) -> None:
        super().__init__(**common)
        self.limit = limit

    def requirements(self) -> list[Requirement]:
        return [Requirement("gradients", reductions=("l2",), modes=("train",))]

    def check(self, history: Any, step: int, mode: str) -> Any:
        value = history.value("gradients/fc.weight", "l2", step, mode)
        workers = history.workers
        if value is not None and value > self.limit:
            return self.finding(step, mode, f"l2 {value:g} > {self.limit:g} (workers seen: {workers})")
        return None


def _write(out: Path, rank: int) -> None:
    session = tripwire.Session(out_dir=out, rank=rank, world_size=2, rules=[], include_collections=["gradients"],
                               save_interval=5)
    for step in range(30):
        plan = session.begin_step("train", step)
        plan.add("loss", 1.0 / (step + 1), "losses")
        if plan.wants("gradients"):
            # rank r's 4 elements are (r + 1) * step / 5: l2 = 2 * (r + 1) * step / 5
            plan.add("gradients/fc.weight", np.full(4, (rank + 1) * step / 5), "gradients")
        session.end_step()
    session.close()


def test_watch_judges_each_workers_own_values_with_a_users_rule(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _write(out, 0)
    _write(out, 1)
    in_training = {}
    for rank in (0, 1):  # what each worker's own session finds (its history holds its rank alone)
        session = tripwire.Session(write=False, rank=rank, world_size=2, rules=[NormAbove()], save_interval=5,
                                   include_collections=["gradients"])
        for step in range(30):
            plan = session.begin_step("train", step)
            if plan.wants("gradients"):
                plan.add("gradients/fc.weight", np.full(4, (rank + 1) * step / 5), "gradients")
            session.end_step()
        in_training[rank] = [(f.step, f.message) for f in session.findings]
        session.close()
    watcher = Watcher(out, {"rules": [NormAbove()], "actions": ["record"]}, echo=lambda f: None)
    found = watcher.watch(once=True)
    by_worker = {w: [(f.step, f.message) for f in found if f.worker == w and f.rule == "norm_above"] for w in (0, 1)}
    assert by_worker[0] == [(15, "l2 6 > 5 (workers seen: [0])")]
    assert by_worker[1] == [(10, "l2 8 > 5 (workers seen: [1])")]
    assert in_training[0] == by_worker[0] and in_training[1] == by_worker[1]


def _series_length(history: Any, step: int, mode: str) -> Any:
    steps, _ = history.series("loss", "raw", mode)
    return f"{len(steps)} values, the last {steps[-3:].tolist()}" if step % 10 == 0 else None


_CRASHING = """
import os, pickle, sys
import tripwire
sys.path.insert(0, {here!r})
from test_trial38c_watch_workers import series_rule
session = tripwire.Session(out_dir={out!r}, rules=[series_rule()], save_interval=10)
for step in range({kill}):
    if step == {checkpoint}:
        with open({state!r}, "wb") as fh:
            pickle.dump(session.state_dict(), fh)  # (the checkpoint, before that step)
    session.step("train", step, {{"loss": (float(step), "losses")}})
    if step % 10 == 0:
        session.flush()  # (a save step's record written; the losses kept after the last one are lost at the kill)
os._exit(1)  # (killed: the resume runs the steps from the checkpoint again)
"""

_RESUMED = """
import pickle, sys
import tripwire
sys.path.insert(0, {here!r})
from test_trial38c_watch_workers import series_rule
session = tripwire.Session(out_dir={out!r}, rules=[series_rule()], save_interval=10)
with open({state!r}, "rb") as fh:
    session.load_state_dict(pickle.load(fh))
for step in range({checkpoint}, 50):
    session.step("train", step, {{"loss": (float(step) + 0.5, "losses")}})
session.close()
"""


def series_rule(name: str = "series_length") -> Any:
    from tripwire.rules import FunctionRule

    return FunctionRule(_series_length, name=name, repeat=True)


@pytest.mark.parametrize(("checkpoint", "kill"), [(30, 35), (20, 38)])
def test_a_resumed_run_is_replayed_as_the_training_judged_it(tmp_path: Path, checkpoint: int, kill: int) -> None:
    """Trial 38i: (30, 35): a checkpoint before save step 30, a kill at step 35: the resumed training wrote
    step 30 again, right after the dead attempt's step 30; the replay's rules read both (32 values at
    step 30, 42 at step 40), where the resumed training's read its own alone. (20, 38): the repeating
    rule's findings at the steps the resume ran again were made, recorded and acted on twice."""
    import subprocess
    import sys

    here = str(Path(__file__).parent)
    out, state = str(tmp_path / "run"), str(tmp_path / "state.pkl")
    for script in (_CRASHING, _RESUMED):
        subprocess.run([sys.executable, "-c", script.format(here=here, out=out, state=state, checkpoint=checkpoint,
                                                            kill=kill)], check=False, timeout=120, capture_output=True)
    run = tripwire.open_run(out)
    held = sorted((f.step, f.message) for f in run.findings if f.rule == "series_length")
    assert held == [(0, "1 values, the last [0]"), (10, "11 values, the last [8, 9, 10]"),
                    (20, "21 values, the last [18, 19, 20]"), (30, "31 values, the last [28, 29, 30]"),
                    (40, "41 values, the last [38, 39, 40]")]
    # (the same rule under another name: the run holds the training's findings of its own name)
    watched = Watcher(out, {"rules": [series_rule("replayed")], "actions": ["record"]}, echo=lambda f: None)
    assert sorted((f.step, f.message) for f in watched.watch(once=True)) == held


def test_the_watchs_lines_name_rank_0_too_in_a_run_of_two_workers(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 38i: ``loss_over at step 30 (train): ...`` for rank 0, ``(train, rank 1)`` for rank 1, where the
    training's lines name every rank."""
    from tripwire._cli import main

    out = tmp_path / "run"
    _write(out, 0)
    _write(out, 1)
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [{name: exploding_gradient, max_norm: 5.0, patience: 1}]\n")
    assert main(["watch", str(out), "--config", str(cfg), "--once", "--no-record"]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert lines and all(", rank 0)" in line or ", rank 1)" in line for line in lines), lines
    assert any(", rank 0)" in line for line in lines), lines
