"""Trial 25h.

Finding 5: ``Session.new_training()`` on an open session (no ``close()``/``reopen()`` between the
trainings) never judged the every-step values kept since the earlier training's last save step: a
NaN loss in its last steps was written but no finding, where ``tripwire watch`` finds it. It now
judges them first, as ``close()`` does.

Finding 7: ``tripwire validate``'s hint for a collection written as ``{name: weights, ...}`` inside
the ``collections`` list told the user to write a collection called ``name``.

Finding 8: a top-level YAML ``reduction_config:`` got no smdebug hint (the keyword form and a
collection's YAML named each collection's ``reductions``)."""

from __future__ import annotations

import shutil
from pathlib import Path
import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, TrainingStopped
from tripwire._cli import main
from tripwire._watch import Watcher

RULES = ["exploding_tensor", "loss_not_decreasing"]


def _two_trainings(out: Path, continued: bool, close_first: bool) -> tripwire.Session:
    """100 steps with a NaN loss at step 99 (the last save step is 98: it is kept, not saved), then
    ``new_training`` and 50 healthy steps."""
    s = tripwire.Session({"rules": RULES, "actions": ["record"], "collections": {"losses": {"every_step": True}}},
                         out_dir=str(out), save_interval=7)
    s.set_planned_steps(100)
    for step in range(100):
        s.step("train", step, {"loss": (np.float32(np.nan if step == 99 else 1.0 / (1 + step)), "losses")})
    if close_first:
        s.close()
        s.reopen()
    s.new_training(continued=continued)
    s.set_planned_steps(50)
    for step in range(100, 150):
        s.step("train", step, {"loss": (np.float32(0.01), "losses")})
    s.close()
    return s


def _watched(out: Path) -> list[tuple[str, int]]:
    shutil.rmtree(out / "findings", ignore_errors=True)
    watcher = Watcher(out, {"rules": RULES, "actions": ["record"]}, echo=lambda f: None)
    return sorted((f.rule, f.step) for f in watcher.watch(once=True))


@pytest.mark.parametrize("continued", [True, False])
@pytest.mark.parametrize("close_first", [False, True])
def test_new_training_on_an_open_session_judges_the_values_kept_since_the_last_save_step(
        tmp_path: Path, continued: bool, close_first: bool) -> None:
    out = tmp_path / "run"
    s = _two_trainings(out, continued, close_first)
    mine = sorted((f.rule, f.step) for f in s.findings)
    assert mine == [("exploding_tensor", 99)]
    assert sorted((f.rule, f.step) for f in tripwire.open_run(str(out)).findings) == mine
    assert _watched(out) == mine  # the session and tripwire watch agree
    # the earlier training's finding is not the new training's: it ends complete
    assert tripwire.open_run(str(out)).status == "complete"


def test_new_training_on_an_open_session_acts_on_the_earlier_trainings_last_findings(tmp_path: Path) -> None:
    # a raise action raises there, as close() would have: the NaN is not carried into the new training
    s = tripwire.Session({"rules": RULES, "actions": ["raise"], "collections": {"losses": {"every_step": True}}},
                         out_dir=str(tmp_path / "run"), save_interval=7)
    for step in range(100):
        s.step("train", step, {"loss": (np.float32(np.nan if step == 99 else 1.0 / (1 + step)), "losses")})
    with pytest.raises(TrainingStopped, match="exploding_tensor"):
        s.new_training(continued=True)
    s.close()
    assert [(f.rule, f.step) for f in s.findings] == [("exploding_tensor", 99)]
    assert tripwire.open_run(str(tmp_path / "run")).status == "stopped"


def test_new_training_with_nothing_kept_judges_nothing_again(tmp_path: Path) -> None:
    s = tripwire.Session({"rules": RULES, "actions": ["record"]}, out_dir=str(tmp_path / "run"), save_interval=5)
    for step in range(20):
        s.step("train", step, {"loss": (1.0 / (1 + step), "losses")})
    s.new_training(continued=True)
    s.new_training()  # (an integration's own path calling it again: the same training)
    assert len(s._trainings) == 2 and s.findings == []
    s.close()


# ----------------------------------------------------------------------- 7. {name: ...} in the list
def test_a_collection_mapping_with_a_name_key_in_the_list_gets_the_mapping_form_by_its_name(tmp_path: Path,
                                                                                            capsys) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("collections:\n  - losses\n  - {name: weights, reductions: [l2]}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "collections: {weights: {reductions: [l2]}}" in err, err
    assert "{name: {" not in err, err
    with pytest.raises(ConfigError, match=r"collections\[0\]: .*collections: \{gradients: \{every_step: true, "
                                          r"reductions: \[abs_max, l2\]\}\}"):
        tripwire.load_config(collections=[{"name": "gradients", "every_step": True, "reductions": ["abs_max", "l2"]}])
    # a mapping with no name key: its first key is the name, as before
    with pytest.raises(ConfigError, match=r"collections: \{weights: \{\.\.\.\}\}"):
        tripwire.load_config(collections=[{"weights": {"reductions": ["l2"]}}])


# ----------------------------------------------------------------- 8. top-level reduction_config
def test_a_top_level_yaml_reduction_config_gets_each_collections_reductions(tmp_path: Path, capsys) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("reduction_config: {reductions: [l2], abs_reductions: [max]}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "reduction_config: unknown key 'reduction_config'; did you mean collections: {weights: {reductions: " \
           "[l2, abs_max]}, gradients: {reductions: [l2, abs_max]}, ...}? (smdebug's reduction_config" in err, err
    with pytest.raises(ConfigError, match=r"reduction_config.*did you mean collections: \{weights: \{reductions: "
                                          r"\[\.\.\.\]\}"):
        tripwire.Config.from_dict({"reduction_config": 3})
