"""Trial 33 (fixer alpha) F6: a rule whose named tensor the config's collections keep out, refused
when the config is checked (Session, check_config, tripwire validate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Session, load_config
from tripwire._session import check_config

# ------------------------------------------------------------------ F6: a rule's named tensor kept out


def test_loss_rule_whose_loss_the_collection_excludes_is_refused(tmp_path: Path) -> None:
    cols = {"losses": {"exclude": ["^loss$"]}}
    msg = (r"rules\[0\]: rule 'loss_not_decreasing' reads loss='loss' from the losses or metrics collections, but this "
           r"config can never capture a tensor named 'loss': collections\.losses\.exclude\[0\] '\^loss\$' keeps it out "
           r"\(no collection of kind metrics is configured\).*remove '\^loss\$' from collections\.losses\.exclude.*"
           r"point loss= at a tensor the collection keeps, or remove the rule")
    with pytest.raises(ConfigError, match=msg):
        Session(out_dir=str(tmp_path / "r"), rules=["loss_not_decreasing"], collections=cols)
    with pytest.raises(ConfigError, match=msg):
        check_config(load_config({"rules": ["loss_not_decreasing"], "collections": cols}))
    # (the same loss under the name the rule is pointed at: taken)
    s = Session(write=False, rules=[{"name": "loss_not_decreasing", "loss": "train_loss"}], collections=cols)
    s.close()


def test_include_that_matches_no_such_name_is_named() -> None:
    with pytest.raises(ConfigError, match=r"rule 'overfit' reads validation='val_loss' .*collections\.losses\.include "
                                          r"\['\^loss\$'\] matches no such name; collections\.metrics\.include "
                                          r"\['\^acc'\] matches no such name.*add a pattern that matches it to "
                                          r"collections\.losses\.include \(\^val_loss\$\)"):
        check_config(load_config({"rules": ["overfit"], "collections": {"losses": {"include": ["^loss$"]},
                                                                          "metrics": {"include": ["^acc"]}}}))


def test_rule_set_member_refused_too_and_default_config_taken() -> None:
    with pytest.raises(ConfigError, match=r"rules\[default\]: rule '(loss_not_decreasing|oscillating_loss|"
                                          r"exploding_gradient)' reads loss='loss'"):
        check_config(load_config({"rules": ["default"], "collections": {"losses": {"exclude": ["loss"]}}}))
    check_config(load_config({"rules": ["default"]}))
    check_config(load_config({"rules": ["default", "overfit", "tree_depth"]}))


def test_only_where_certain() -> None:
    # another collection that takes the kind and keeps the name: it may come there
    check_config(load_config({"rules": ["loss_not_decreasing"], "collections": {
        "losses": {"exclude": ["^loss$"]}, "metrics": None}}))
    check_config(load_config({"rules": ["loss_not_decreasing"], "collections": {
        "losses": {"exclude": ["^loss$"]}, "everything": {"include": [".*"], "reductions": ["raw"]}}}))
    # a regex: no config tells which names it meets
    check_config(load_config({"rules": [{"name": "loss_not_decreasing", "loss": "lo.s"}],
                              "collections": {"losses": {"exclude": ["^loss$"]}}}))
    # the labels rules find their name in longer ones (labels/0): not checked
    check_config(load_config({"rules": ["class_imbalance"], "collections": {
        "labels": {"exclude": ["^labels$"]}, "predictions": None}}))
    # an alternation of names, one of them kept: taken; none kept: refused
    check_config(load_config({"rules": [{"name": "loss_not_decreasing", "loss": "loss|aux_loss"}],
                              "collections": {"losses": {"exclude": ["^loss$"]}}}))
    with pytest.raises(ConfigError, match=r"can never capture any of 'loss', 'aux_loss'"):
        check_config(load_config({"rules": [{"name": "loss_not_decreasing", "loss": "^loss$|aux_loss"}],
                                  "collections": {"losses": {"exclude": ["loss"]}}}))


def test_tree_depth_tensor_with_its_kind_prefix() -> None:
    with pytest.raises(ConfigError, match=r"rule 'tree_depth' reads tensor='trees/depth' from the trees collection.*"
                                          r"collections\.trees\.exclude\[0\] '\^depth\$' keeps it out"):
        check_config(load_config({"rules": ["tree_depth"], "collections": {"trees": {"exclude": ["^depth$"]}}}))
    check_config(load_config({"rules": ["tree_depth"], "collections": {"trees": {"exclude": ["^leaves$"]}}}))


def test_callback_style_check_and_validate_cli_refuse_it(tmp_path: Path) -> None:
    cfg = tmp_path / "unfeed.yaml"
    cfg.write_text('rules: [loss_not_decreasing]\ncollections:\n  losses: {exclude: ["^loss$"]}\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "tripwire", "validate", str(cfg)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0, done.stdout
    assert "rule 'loss_not_decreasing' reads loss='loss'" in done.stderr
    assert "collections.losses.exclude[0] '^loss$' keeps it out" in done.stderr


def test_flat_loss_fires_once_the_config_keeps_it(tmp_path: Path) -> None:
    # (the fix the message gives: the same run with the pattern gone judges the flat loss)
    rng = np.random.default_rng(0)
    s = Session(out_dir=str(tmp_path / "r"), rules=["loss_not_decreasing"], save_interval=5,
                collections={"losses": {"exclude": ["^aux$"]}})
    s.set_planned_steps(120)
    fired = False
    for step in range(120):
        p = s.begin_step("train", step)
        p.add("loss", float(2.3 + 0.02 * rng.normal()), "losses")
        fired = bool(s.end_step().findings) or fired
    s.close()
    assert fired
    assert "loss_not_decreasing" in {f.rule for f in tripwire.open_run(str(tmp_path / "r")).findings}


def test_a_rule_of_the_users_whose_named_inputs_fails_is_named() -> None:
    class Broken(tripwire.Rule):
        name = "broken_inputs"

        def named_inputs(self) -> dict[str, str]:
            raise KeyError("loss")

        def check(self, history, step, mode):  # noqa: ANN001, ANN201
            return None

    class Mine(tripwire.Rule):
        name = "mine_inputs"
        input_collections = ("losses",)

        def named_inputs(self) -> dict[str, str]:
            return {"target": "my_loss"}

        def requirements(self) -> list[tripwire.Requirement]:
            return [tripwire.Requirement("losses", reductions=("raw",))]

        def check(self, history, step, mode):  # noqa: ANN001, ANN201
            return None

    with pytest.raises(ConfigError, match=r"rules\[0\]: rule 'broken_inputs': named_inputs\(\) raised KeyError"):
        Session(write=False, rules=[Broken()])
    with pytest.raises(ConfigError, match=r"rule 'mine_inputs' reads target='my_loss' from the losses collection, but "
                                          r"this config can never capture a tensor named 'my_loss': collections\.losses"
                                          r"\.include \['\^loss\$'\] matches no such name"):
        Session(write=False, rules=[Mine()], collections={"losses": {"include": ["^loss$"]}})
    Session(write=False, rules=[Mine()], collections={"losses": {"include": ["loss$"]}}).close()
