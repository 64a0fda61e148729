"""Trial 22a (issues 2 and 3 taken literally): config classes built in Python refuse what YAML
refuses, the nested action/rule form, load_config's rule checks, ``tripwire rules default``, and
what a narrowed gradients collection tells the user."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import Collection, ConfigError, ReductionConfig, SaveConfig, load_config
from tripwire._cli import main


def test_a_python_collection_without_reductions_is_refused_like_its_yaml_twin() -> None:
    # it was taken, and stored the names of its tensors but no value of them
    with pytest.raises(ConfigError, match=r"collections\.fc_stuff\.reduction: got \[\]: the collection would store "
                                          r"nothing.*ReductionConfig\(reductions="):
        Collection("fc_stuff", include=["fc"])
    with pytest.raises(ConfigError, match=r"collections\.fc_stuff\.reductions: got \[\]: the collection would store"):
        load_config({"collections": {"fc_stuff": {"include": ["fc"]}}})
    ok = Collection("fc_stuff", include=["fc"], reduction=ReductionConfig(reductions=["l2"]))
    assert ok.matches("fc.weight", "weights") and Collection.from_dict("fc_stuff", ok.to_dict()) == ok


def test_should_save_names_a_bad_step() -> None:
    save = SaveConfig(interval=5)
    for bad in ("3", 1.5, -1, True):
        with pytest.raises(ConfigError, match=r"step: got .*; accepted: an integer >= 0"):
            save.should_save("train", bad)
        with pytest.raises(ConfigError, match=r"step: got"):
            save.for_mode("train").should_save(bad)
    assert save.should_save("train", np.int64(10)) and not save.should_save("train", np.int32(3))


def test_an_action_or_rule_may_be_written_nested_under_its_name() -> None:
    config = load_config({"rules": [{"loss_not_decreasing": {"patience": 3, "actions": ["log"]}}, {"dead_relu": None}],
                          "actions": [{"log": {"level": "warning"}}, {"notify": {"topic_arn": "arn:aws:sns:x:1:t"}}]})
    assert [(r.name, dict(r.params)) for r in config.rules] == [("loss_not_decreasing", {"patience": 3}), ("dead_relu", {})]
    assert [a.name for a in config.rules[0].actions] == ["log"]
    assert [(a.name, dict(a.params)) for a in config.actions] == [("log", {"level": "warning"}),
                                                                   ("notify", {"topic_arn": "arn:aws:sns:x:1:t"})]
    # a mis-indented YAML form: the error shows both accepted forms
    with pytest.raises(ConfigError, match=r"actions\[0\]: an action mapping needs a 'name' key.*accepted: "
                                          r"\{name: notify, topic_arn: \.\.\.\} or \{notify: \{topic_arn: \.\.\.\}\}"):
        load_config({"actions": [{"notify": None, "topic_arn": "arn"}]})
    with pytest.raises(ConfigError, match=r"the name once"):
        load_config({"actions": [{"log": {"name": "record"}}]})
    # a nested rule's parameters are checked as the flat form's are
    with pytest.raises(ConfigError, match=r"rules\[0\].*dead_relu.*threshold"):
        load_config({"rules": [{"dead_relu": {"threshold": 5.0}}]})


def test_load_config_refuses_a_rule_listed_twice_and_warns_of_a_typo(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match=r"rules\[1\]: 'dead_relu' is listed already \(rules\[0\]\)"):
        load_config({"rules": ["dead_relu", "dead_relu"]})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        config = load_config({"rules": ["vanishing_gradeint"]})  # (a rule registered later is still taken)
    assert [r.name for r in config.rules] == ["vanishing_gradeint"]
    assert "'vanishing_gradeint' is not a registered rule; did you mean 'vanishing_gradient'?" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        load_config({"rules": ["my_own_rule", "default", "mypkg.rules:Spike"]})  # (nothing close: no word)
    assert caplog.text == ""


def test_tripwire_rules_default_lists_the_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "default"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rule set 'default': exploding_tensor, loss_not_decreasing")
    assert main(["rules"]) == 0
    assert "Rule set 'default' (rules: [default]; `tripwire rules default` shows it): exploding_tensor" in \
        capsys.readouterr().out


def test_a_gradients_collection_narrowed_by_include_is_said_as_such(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    # the warning said no collection took gradients and advised naming 'gradients', which was named;
    # vanishing_gradient said "every layer" of the one layer captured
    session = tripwire.Session(rules=["vanishing_gradient"], actions=["record"], out_dir=tmp_path / "run",
                               collections={"losses": None, "gradients": {"include": ["^0\\."]}})
    session.set_planned_steps(40)
    rng = np.random.default_rng(0)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        for step in range(40):
            session.step("train", step, {"loss": (2.3, "losses"),
                                         "gradients/0.weight": (rng.normal(size=(8, 8)) * 1e-9, "gradients"),
                                         "gradients/4.weight": (rng.normal(size=(8, 8)), "gradients")})
        session.close()
    assert ("'gradients/4.weight', offered as gradients, is not captured: the include/exclude patterns of "
            "collections.gradients leave it out (include ['^0\\\\.'])") in caplog.text
    assert "no collection of this config takes" not in caplog.text
    found = [f for f in session.findings if f.rule == "vanishing_gradient"]
    assert found and found[0].message.startswith("every captured layer's mean |gradient| is below 1e-07 (1 captured;")


def test_a_mapping_of_two_rules_is_told_the_nested_form_too() -> None:
    # trial 22e: "needs a 'name' key" did not say that {rule: {params}} is accepted, one per mapping
    with pytest.raises(ConfigError, match=r"rules\[0\]: a rule mapping needs a 'name' key.*or one key, the rule's "
                                          r"name, over its parameters: \{dead_relu: \{threshold: 0\.9\}\}; one mapping per rule"):
        load_config({"rules": [{"dead_relu": {"threshold": 0.9}, "loss_not_decreasing": {}}]})


def test_collections_and_include_collections_together() -> None:
    # trial 22h: collections=[...] with include_collections=[...] raised a bare "dictionary update
    # sequence element #0 has length 7; 2 is required"
    config = load_config().with_overrides(collections=["metrics", "weights"], include_collections=["labels"])
    assert sorted(config.collections) == ["labels", "metrics", "weights"]
    mine = Collection("mine", include=["fc"], reduction=ReductionConfig(reductions=["l2"]))
    config = load_config().with_overrides(collections=["metrics", mine], include_collections="labels")
    assert sorted(config.collections) == ["labels", "metrics", "mine"] and config.collections["mine"] == mine
    config = load_config().with_overrides(collections="metrics", include_collections=["metrics"])
    assert sorted(config.collections) == ["metrics"]
    with pytest.raises(ConfigError, match=r"^collections: got 5 \(int\); accepted: a list of collection names"):
        load_config().with_overrides(collections=5, include_collections=["labels"])
