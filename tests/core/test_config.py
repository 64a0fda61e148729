from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import tripwire
from tripwire import Collection, Config, ConfigError, ModeSaveConfig, ReductionConfig, SaveConfig, load_config
from tripwire._config import replace


# ----------------------------------------------------------------------------------- SaveConfig
def test_save_config_defaults_and_predicate() -> None:
    cfg = SaveConfig()
    assert cfg.interval == 10 and cfg.start_step == 0 and cfg.end_step is None
    assert cfg.should_save("train", 0) and cfg.should_save("train", 20)
    assert not cfg.should_save("train", 5)


def test_save_config_mode_override_inherits_top_level() -> None:
    cfg = SaveConfig.from_dict({"interval": 100, "start_step": 10, "modes": {"eval": {"interval": 1}}})
    assert cfg.for_mode("eval").interval == 1
    assert cfg.for_mode("eval").start_step == 10  # inherited
    assert cfg.for_mode("train").interval == 100
    assert cfg.should_save("eval", 11) and not cfg.should_save("train", 110 + 1)
    assert not cfg.should_save("eval", 9)


def test_save_config_explicit_steps_and_end() -> None:
    cfg = SaveConfig.from_dict({"interval": 5, "end_step": 20, "steps": [3, 33]})
    assert [s for s in range(40) if cfg.should_save("train", s)] == [0, 3, 5, 10, 15, 33]


def test_save_config_takes_per_mode_overrides_in_the_yaml_shape_and_objects_as_save() -> None:
    # trial 19a: SaveConfig(modes={"eval": {"interval": 1}}) kept the dict, and should_save raised
    # AttributeError; a SaveConfig given as save= was "expected a mapping"
    cfg = SaveConfig(interval=10, start_step=2, modes={"eval": {"interval": 1}})
    assert cfg.for_mode("eval") == ModeSaveConfig(interval=1, start_step=2)  # the rest inherited
    assert cfg.should_save("eval", 3) and not cfg.should_save("train", 3)
    with pytest.raises(ConfigError, match=r"^save\.modes\.eval\.interval: got 0"):
        SaveConfig(modes={"eval": {"interval": 0}})
    with pytest.raises(ConfigError, match=r"^save\.modes\.eval: got 3; accepted: a ModeSaveConfig or a mapping of interval"):
        SaveConfig(modes={"eval": 3})
    with pytest.raises(ConfigError, match=r"^save\.modes\.eval\.intervall: unknown key 'intervall'; did you mean 'interval'"):
        SaveConfig(modes={"eval": {"intervall": 1}})
    for config in (load_config({"save": cfg}), load_config(save=cfg), load_config(save_interval=3).with_overrides(save=cfg)):
        assert config.save == cfg
    session = tripwire.Session(write=False, save=cfg)
    assert session.config.save == cfg
    session.close()


def test_save_config_disabled_mode() -> None:
    cfg = SaveConfig.from_dict({"modes": {"predict": {"enabled": False}}})
    assert not any(cfg.should_save("predict", s) for s in range(100))


def test_a_yaml_syntax_error_names_the_file_at_each_position(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("save:\n  interval: [1\nrules: x\n")
    with pytest.raises(ConfigError, match=r"(?s)is not valid YAML.*in \".*bad\.yaml\", line 2") as err:
        load_config(path)
    assert "<unicode string>" not in str(err.value)


def test_yaml_reads_exponent_floats_as_numbers(tmp_path) -> None:
    # PyYAML (YAML 1.1) reads 1e-4 as the string '1e-4'; YAML 1.2, JSON and users read a number
    path = tmp_path / "cfg.yaml"
    path.write_text("rules:\n  - name: dead_relu\n    threshold: 1e-1\n  - name: vanishing_gradient\n"
                    "    min_norm: 5E-7\nsave: {interval: 5}\nname: '1e-4'\n")
    cfg = load_config(path)
    assert cfg.rules[0].params == {"threshold": 0.1} and cfg.rules[1].params == {"min_norm": 5e-7}
    assert cfg.save.interval == 5 and cfg.name == "1e-4"  # quoted: a string, as written
    assert tripwire.Session(cfg, write=False).rules[0].threshold == 0.1


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"interval": 0}, r"save\.interval: got 0; accepted: an integer >= 1"),
        ({"interval": "10"}, r"save\.interval: got '10'"),
        ({"interval": True}, r"save\.interval: got True"),
        ({"start_step": -1}, r"save\.start_step: got -1; accepted: an integer >= 0"),
        ({"start_step": 10, "end_step": 5}, r"end_step: got 5; accepted: null or an integer >= start_step \(10\)"),
        ({"intervall": 5}, r"save\.intervall: unknown key 'intervall'; did you mean 'interval'\?"),
        ({"modes": {"validation": {}}}, r"save\.modes\.validation: unknown key 'validation'"),
        ({"modes": {"eval": {"interval": -3}}}, r"save\.modes\.eval\.interval: got -3"),
        ({"steps": "7"}, r"save\.steps: got '7'; accepted: a list of integers >= 0"),
        ({"steps": [1, -2]}, r"save\.steps\[1\]: got -2"),
    ],
)
def test_save_config_errors_name_key_value_and_accepted(data: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SaveConfig.from_dict(data)


def test_config_error_is_a_value_error_and_tripwire_error() -> None:
    with pytest.raises(ValueError):
        SaveConfig.from_dict({"interval": 0})
    with pytest.raises(tripwire.TripwireError):
        SaveConfig.from_dict({"interval": 0})


@settings(max_examples=200, deadline=None)
@given(
    interval=st.integers(1, 50),
    start=st.integers(0, 100),
    length=st.one_of(st.none(), st.integers(0, 200)),
    steps=st.lists(st.integers(0, 400), max_size=6),
    step=st.integers(0, 400),
)
def test_save_config_should_save_matches_definition(interval, start, length, steps, step) -> None:
    end = None if length is None else start + length
    cfg = SaveConfig(interval, start, end, tuple(steps))
    expected = step in steps or (start <= step and (end is None or step < end) and step % interval == 0)
    assert cfg.should_save("train", step) == expected
    assert cfg.should_save("eval", step) == expected  # no override: same everywhere
    # round trip through a plain dict (what YAML holds)
    again = SaveConfig.from_dict(cfg.to_dict())
    assert again.should_save("train", step) == expected
    assert again == cfg


@settings(max_examples=300, deadline=None)
@given(
    interval=st.integers(1, 20),
    start=st.integers(0, 60),
    length=st.one_of(st.none(), st.integers(0, 80)),
    steps=st.lists(st.integers(0, 200), max_size=5),
    enabled=st.booleans(),
    end_zero=st.booleans(),
    step=st.integers(0, 220),
)
def test_next_save_is_the_first_save_step_at_or_after(interval, start, length, steps, enabled, end_zero, step) -> None:
    end = 0 if end_zero else None if length is None else start + length
    cfg = ModeSaveConfig(interval=interval, start_step=start, end_step=end, steps=tuple(steps), enabled=enabled)
    expected = next((s for s in range(step, step + 400) if cfg.should_save(s)), None)
    assert cfg.next_save(step) == expected


def test_next_save_names_a_bad_step() -> None:
    with pytest.raises(ValueError, match=r"step.*-1"):
        ModeSaveConfig().next_save(-1)


# ------------------------------------------------------------------------------ ReductionConfig
def test_reduction_config_from_list() -> None:
    red = ReductionConfig.from_list(["l2", "abs_mean", "histogram", "raw", "fraction_abs_gt:9.5"])
    assert red.reductions == ("l2", "abs_mean", "fraction_abs_gt:9.5")
    assert red.histogram and red.raw
    assert ReductionConfig.from_list(red.to_list()) == red


@pytest.mark.parametrize(
    ("items", "match"),
    [
        (["l3"], r"reductions\[0\]: unknown reduction 'l3'; did you mean 'l2'\?"),
        (["mean", "abs_l3"], r"reductions\[1\]: unknown reduction 'abs_l3'"),
        (["fraction_gt:abc"], r"reduction 'fraction_gt:abc': threshold 'abc' is not a number"),
        (["fraction_abs_gt"], r"reductions\[0\]: reduction 'fraction_abs_gt' needs a threshold; accepted: fraction_abs_gt:THRESHOLD "
                              r"with a number, e.g. fraction_abs_gt:0\.5$"),
        ([3], r"reductions\[0\]: got 3 \(int\); accepted: a string"),
    ],
)
def test_reduction_config_errors(items: list, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ReductionConfig.from_list(items)


def test_histogram_range_validated() -> None:
    with pytest.raises(ConfigError, match=r"histogram_range: got \[1\.0, 1\.0\]; accepted: null or \[low, high\] with low < high"):
        ReductionConfig(histogram=True, histogram_range=(1.0, 1.0))


@pytest.mark.parametrize("rng", [[0, float("inf")], [float("-inf"), 1], [float("-inf"), float("inf")]])
def test_histogram_range_must_be_finite(rng: list[float]) -> None:
    # [0, inf] was accepted and stored histograms with edges [nan, inf, inf, ...]
    with pytest.raises(ConfigError, match=r"collections\.gradients\.histogram_range: got \[.*inf.*\]; accepted: null "
                                          r"or \[low, high\] of finite numbers with low < high"):
        tripwire.load_config({"collections": {"gradients": {"histogram_bins": 4, "histogram_range": rng}}})


# ----------------------------------------------------------------------------------- Collection
def test_builtin_collection_matches_own_kind_and_regex() -> None:
    c = Collection.from_dict("gradients", {"include": ["fc"], "exclude": ["bias"]}, "collections.gradients", SaveConfig())
    assert c.matches("gradients/fc1.weight", "gradients")
    assert not c.matches("gradients/fc1.bias", "gradients")
    assert not c.matches("fc1.weight", "weights")  # other kind
    assert c.reduction.reductions[0] == "l2"  # built-in defaults kept


def test_builtin_collection_patterns_also_match_the_name_without_its_kind() -> None:
    """A fresh user's ``gradients: {include: ["^fc1\\."]}`` captured nothing: the names carry the
    kind (``gradients/fc1.weight``). A collection of given kinds matches both spellings."""
    c = Collection.from_dict("gradients", {"include": [r"^fc1\."]}, "collections.gradients", SaveConfig())
    assert c.matches("gradients/fc1.weight", "gradients") and not c.matches("gradients/fc2.weight", "gradients")
    c = Collection.from_dict("gradients", {"exclude": [r"^fc1\."]}, "collections.gradients", SaveConfig())
    assert not c.matches("gradients/fc1.weight", "gradients") and c.matches("gradients/fc2.weight", "gradients")
    c = Collection.from_dict("activations", {"include": ["^fc1/"]}, "collections.activations", SaveConfig())
    assert c.matches("fc1/output", "activations")  # no kind prefix: as it is
    c = Collection.from_dict("fc1_any", {"include": [r"^fc1\."], "reductions": ["raw"]}, "collections.fc1_any", SaveConfig())
    assert c.matches("fc1.weight", "weights") and not c.matches("gradients/fc1.weight", "gradients")  # any kind: as written


def test_a_collection_save_config_inherits_the_top_level_modes() -> None:
    """``predict: {enabled: false}`` at the top level held for collections with their own save
    config only if they restated it (a fresh user's predictions were saved in predict)."""
    top = SaveConfig.from_dict({"interval": 2, "modes": {"predict": {"enabled": False}, "eval": {"interval": 1}}})
    own = SaveConfig.from_dict({"start_step": 4}, "collections.x.save", base=top)
    assert not any(own.should_save("predict", s) for s in range(50))
    assert own.for_mode("eval").interval == 1 and own.for_mode("eval").start_step == 4
    assert own.for_mode("train").interval == 2 and own.for_mode("train").start_step == 4
    own = SaveConfig.from_dict({"interval": 3, "modes": {"predict": {"enabled": True}}}, "collections.x.save", base=top)
    assert own.should_save("predict", 3) and own.for_mode("eval").interval == 3  # what it states wins
    cfg = tripwire.load_config({"save": {"interval": 2, "modes": {"predict": {"enabled": False}}},
                                "collections": {"predictions": {"save": {"interval": 3}}}})
    assert not cfg.collections["predictions"].should_save("predict", 3, cfg.save)
    assert cfg.collections["predictions"].should_save("eval", 3, cfg.save)


def test_custom_collection_takes_any_kind() -> None:
    c = Collection.from_dict("fc1_all", {"include": [r"^(gradients/)?fc1\."], "reductions": ["raw"]}, "collections.fc1_all", SaveConfig())
    assert c.matches("fc1.weight", "weights") and c.matches("gradients/fc1.weight", "gradients")
    assert not c.matches("fc2.weight", "weights")


def test_collection_round_trips_through_to_dict_with_the_name_alone() -> None:
    for c in (Collection.builtin("gradients"), Collection.from_dict("fc", {"include": ["^fc"], "kinds": ["weights"],
                                                                        "reductions": ["l2", "raw"], "save": {"interval": 5}})):
        assert Collection.from_dict(c.name, c.to_dict()) == c
    with pytest.raises(ConfigError, match=r"collections\.fc\.reductions\[0\]: unknown reduction 'l3'"):
        Collection.from_dict("fc", {"reductions": ["l3"]})


def test_collection_errors() -> None:
    with pytest.raises(ConfigError, match=r"collections\.gradiens: unknown built-in collection; did you mean 'gradients'\?"):
        Config.from_dict({"collections": {"gradiens": {"reductions": ["l2"]}}})
    # the list form names built-in collections only (a typo is not a silent empty custom one)
    with pytest.raises(ConfigError, match=r"collections\[1\]: 'gradient' is no built-in collection; did you mean 'gradients'\?"):
        Config.from_dict({"collections": ["losses", "gradient"]})
    with pytest.raises(ConfigError, match=r"collections\[0\]: 'gradeints' is no built-in"):
        Config().with_overrides(collections=["gradeints"])
    with pytest.raises(ConfigError, match=r"collections\.mine\.include\[0\]: invalid regular expression '\('"):
        Config.from_dict({"collections": {"mine": {"include": ["("]}}})
    with pytest.raises(ConfigError, match=r"collections\.weights\.reductions\[0\]: unknown reduction 'mena'; did you mean 'mean'\?"):
        Config.from_dict({"collections": {"weights": {"reductions": ["mena"]}}})
    with pytest.raises(ConfigError, match=r"collections\.weights\.save\.interval: got 0"):
        Config.from_dict({"collections": {"weights": {"save": {"interval": 0}}}})


# ------------------------------------------------------------------------------------- Config
FULL_YAML = """
out_dir: runs/demo
save:
  interval: 50
  modes:
    eval: {interval: 1}
collections:
  gradients:
    reductions: [l2, mean, histogram]
    histogram_bins: 20
    save: {interval: 10}
  weights: null
  fc_layers:
    include: ["^fc"]
    reductions: [raw]
rules:
  - exploding_tensor_placeholder
  - name: some_rule
    threshold: 3
    actions: [stop_training, log]
actions: [log]
writer: {queue_size: 8, ranks: [0]}
"""


def test_load_config_checks_built_in_rule_parameters_and_leaves_other_names_to_the_session() -> None:
    # load_config took a dead_relu threshold of 5 and a rule set with parameters: the error came
    # only when a session was built
    with pytest.raises(ConfigError, match=r"rules\[1\]: dead_relu\.threshold: got 5; accepted: a number in"):
        load_config({"rules": ["default", {"name": "dead_relu", "threshold": 5}]})
    with pytest.raises(ConfigError, match=r"rules\[2\]\.thresold: unknown parameter of rule 'dead_relu'; did you mean"):
        load_config({"rules": ["default", "overfit", {"name": "dead_relu", "thresold": 0.5}]})
    with pytest.raises(ConfigError, match=r"a rule set takes 'actions' only"):
        load_config({"rules": [{"name": "default", "patience": 3}]})
    # a name that is no built-in may be a rule registered after the config is read
    assert [r.name for r in load_config({"rules": ["registered_later", "default"]}).rules] == ["registered_later", "default"]


def test_load_config_from_yaml_file(tmp_path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(FULL_YAML)
    cfg = load_config(path)
    assert cfg.out_dir == "runs/demo"
    assert cfg.save.should_save("eval", 3) and not cfg.save.should_save("train", 3)
    grads = cfg.collections["gradients"]
    assert grads.reduction.histogram and grads.reduction.histogram_bins == 20
    assert grads.save is not None and grads.save.interval == 10
    assert cfg.collections["weights"].reduction.reductions  # built-in defaults
    assert cfg.collections["fc_layers"].reduction.raw
    assert [r.name for r in cfg.rules] == ["exploding_tensor_placeholder", "some_rule"]
    assert cfg.rules[1].params == {"threshold": 3}
    assert [a.name for a in cfg.rules[1].actions] == ["stop_training", "log"]
    assert cfg.writer.ranks == (0,) and not cfg.writer.writes(1)
    # round trip through YAML text
    again = load_config(yaml.safe_load(yaml.safe_dump(cfg.to_dict())))
    assert again.to_dict() == cfg.to_dict()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"outdir": "x"}, r"outdir: unknown key 'outdir'; did you mean 'out_dir'\?"),
        ({"rules": [{"threshold": 1}]}, r"rules\[0\]: a rule mapping needs a 'name' key"),
        ({"rules": 5}, r"rules: got 5; accepted: a list"),
        ({"actions": [{"topic_arn": "x"}]}, r"actions\[0\]: an action mapping needs a 'name' key"),
        ({"writer": {"ranks": "some"}}, r"writer\.ranks: got 'some'; accepted: 'all' or a list of ranks"),
        ({"writer": {"queue_size": 0}}, r"writer\.queue_size: got 0; accepted: an integer >= 1"),
        ({"strict": "yes"}, r"strict: got 'yes'; accepted: true or false"),
        ({"save": [1]}, r"save: expected a mapping, got \[1\]"),
    ],
)
def test_config_errors(data: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Config.from_dict(data)


def test_load_config_file_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"no such file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("save: [unclosed")
    with pytest.raises(ConfigError, match=r"is not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=r"must hold a mapping at the top level, got list"):
        load_config(listy)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty) == Config()


def test_overrides_apply_over_file(tmp_path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("out_dir: a\nsave: {interval: 50}\n")
    cfg = load_config(path, out_dir=tmp_path / "b", save_interval=7, include_collections=["weights"])
    assert cfg.out_dir == str(tmp_path / "b")
    assert cfg.save.interval == 7
    assert "weights" in cfg.collections and "losses" in cfg.collections
    with pytest.raises(ConfigError, match=r"unknown argument 'save_intervall'; did you mean 'save_interval'\?"):
        load_config(None, save_intervall=3)


def test_default_config() -> None:
    cfg = Config()
    assert set(cfg.collections) == {"losses", "metrics"}
    assert [a.name for a in cfg.actions] == ["log", "record"]


# Property: whatever YAML a user writes, the loader either returns a Config or raises ConfigError.
_yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 200), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_keys = st.sampled_from(["out_dir", "save", "collections", "rules", "actions", "writer", "strict", "interval", "modes", "eval",
                         "train", "weights", "gradients", "include", "reductions", "name", "steps", "start_step", "end_step", "bogus"])
_yaml_values = st.recursive(_yaml_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _yaml_values, max_size=5))
def test_loader_never_raises_anything_but_config_error(data) -> None:
    try:
        cfg = load_config(data)
    except ConfigError as exc:
        assert str(exc)  # a message, naming something
        return
    # a config that loads round-trips through YAML
    text = yaml.safe_dump(cfg.to_dict())
    assert load_config(yaml.safe_load(text)).to_dict() == cfg.to_dict()


def test_mode_save_config_direct() -> None:
    m = ModeSaveConfig(interval=3, start_step=2, end_step=9, steps=(1,))
    assert [s for s in range(12) if m.should_save(s)] == [1, 3, 6]
    assert not math.isnan(m.interval)


def test_check_trial_names_the_argument_and_what_is_accepted() -> None:
    from types import SimpleNamespace

    from tripwire._validate import check_trial

    trial = SimpleNamespace(report=lambda step, value: False)
    check_trial(None, None, example="x")
    check_trial(trial, "val_loss", example="x")
    check_trial(trial, None, example="x", metric_required=False)
    with pytest.raises(ConfigError, match=r"trial: got 3; accepted: None or an object with report\(step, value\)"):
        check_trial(3, "val_loss", example="x")
    with pytest.raises(ConfigError, match="trial_metric: got None with a trial; accepted: an epoch log"):
        check_trial(trial, None, example="an epoch log")
    with pytest.raises(ConfigError, match="trial_metric: got 'auc' without a trial"):
        check_trial(None, "auc", example="x")
    with pytest.raises(ConfigError, match="trial_metric"):
        check_trial(trial, 7, example="x")


def test_a_run_without_out_dir_or_name_claims_a_directory_of_its_own(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # three trainings started in the same second (folds of a cross-validation, tuning trials) used
    # to share tripwire-runs/run-<second>: each now creates and takes the next free name
    import subprocess
    import sys
    import time

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "run-20261130-120000")
    dirs = [load_config(None).resolved_out_dir() for _ in range(3)]
    assert [str(d) for d in dirs] == ["tripwire-runs/run-20261130-120000", "tripwire-runs/run-20261130-120000-2",
                                      "tripwire-runs/run-20261130-120000-3"]
    assert all(d.is_dir() for d in dirs)
    assert load_config(None, name="exp").resolved_out_dir() == load_config(None, name="exp").resolved_out_dir()
    assert load_config(None, out_dir="a/b").resolved_out_dir() == Path("a/b")
    # another process claims names the same way (mkdir is the claim): no clash with ours
    code = ("import time; time.strftime = lambda fmt, *a: 'run-20261130-120000'; "
            "from tripwire._config import load_config; print(load_config(None).resolved_out_dir())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "tripwire-runs/run-20261130-120000-4"


@pytest.mark.parametrize("url", ["s3://team-runs/xgb/run1", "file:///tmp/x", "hdfs://nn/runs", "gs://b/x"])
def test_a_url_out_dir_is_refused_wherever_it_comes_from(url: str) -> None:
    match = rf"out_dir: got '{url}'; accepted: a local directory path \("
    with pytest.raises(ConfigError, match=match):
        Config.from_dict({"out_dir": url})
    with pytest.raises(ConfigError, match=match):
        load_config(None, out_dir=url)
    with pytest.raises(ConfigError, match=match):
        Config(out_dir=url)
    with pytest.raises(ConfigError, match=match):
        replace(Config(), out_dir=url)
    with pytest.raises(ConfigError, match="out_dir: got 's3:/b/x'"):
        load_config(None, out_dir=Path("s3://b/x"))  # a Path made from a URL: one slash lost


def test_url_out_dir_messages() -> None:
    with pytest.raises(ConfigError, match=r"remote stores such as s3:// are not supported; write locally and copy the run directory\)$"):
        Config.from_dict({"out_dir": "s3://team-runs/xgb/run1"})
    with pytest.raises(ConfigError, match=r"not a URL: write the path itself, '/tmp/x'\)$"):
        Config.from_dict({"out_dir": "file:///tmp/x"})


@pytest.mark.parametrize("path", ["C:\\runs\\x", "C:/runs/x", "runs/exp1", "/tmp/a://b", "./s3/x", "my-runs:v2"])
def test_local_paths_are_not_urls(path: str) -> None:
    assert Config.from_dict({"out_dir": path}).resolved_out_dir() == Path(path)


def test_a_custom_collection_one_edit_from_a_built_in_is_named(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        cfg = load_config({"collections": {"gradeints": {"include": ["fc"], "reductions": ["l2"]}}})
    assert cfg.collections["gradeints"].kinds is None  # still the custom collection written
    messages = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    assert len(messages) == 1
    assert messages[0].startswith("tripwire: collection 'gradeints' is not built-in (did you mean 'gradients'?); it is a custom "
                                  "collection of any kind")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        load_config({"collections": {"weight": {"include": ["fc"], "reductions": ["l2"]}}})  # one deletion
        load_config({"collections": {"first_layer": {"include": ["^fc1"], "reductions": ["l2"]},
                                     "grads": {"include": ["fc"], "reductions": ["l2"]}}})
        load_config({"collections": {"gradeints": {"include": ["fc"], "kinds": None, "reductions": ["l2"]}}})  # meant
        cfg = load_config({"collections": {"gradeints": {"include": ["fc"], "reductions": ["l2"]}}},
                          save_interval=5)  # overrides: once
    messages = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    assert len(messages) == 2 and "'weight'" in messages[0] and "'weights'" in messages[0] and "'gradeints'" in messages[1]


@pytest.mark.parametrize("data", [{"first_layer": {"include": ["^fc1\\."]}}, {"weights": {"reductions": []}},
                                  {"gradeints": {"include": ["fc"]}}])
def test_a_collection_that_would_store_nothing_is_refused(data: dict) -> None:
    # a custom collection has no default reductions: without any it captured nothing, silently
    name = next(iter(data))
    hint = {"first_layer": r" \(a custom collection has no default reductions\)$", "weights": r"histogram\)$",
            "gradeints": r" \(a custom collection has no default reductions; did you mean 'gradients'\?\)$"}[name]
    with pytest.raises(ConfigError, match=rf"^collections\.{name}\.reductions: got \[\]: the collection would store "
                                          rf"nothing; accepted: a non-empty list of reductions .*{hint}"):
        load_config({"collections": data})


def test_single_values_where_lists_are_accepted_mean_a_list_of_one() -> None:
    cfg = load_config({"save": {"steps": 7, "modes": {"eval": {"steps": 3}}},
                       "collections": {"gradients": {"include": "fc", "exclude": "bias"}, "losses": None},
                       "rules": "default", "actions": "log"})
    assert cfg.save.steps == (7,) and cfg.save.should_save("train", 7) and not cfg.save.should_save("train", 8)
    assert cfg.save.for_mode("eval").steps == (3,)
    grads = cfg.collections["gradients"]
    assert grads.include == ("fc",) and grads.exclude == ("bias",)
    assert grads.matches("gradients/fc1.weight", "gradients") and not grads.matches("gradients/fc1.bias", "gradients")
    assert [r.name for r in cfg.rules] == ["default"] and [a.name for a in cfg.actions] == ["log"]
    assert load_config(None, save_steps=7).save.steps == (7,)
    with pytest.raises(ConfigError, match=r"save\.steps: got '7'; accepted: a list of integers >= 0"):
        load_config({"save": {"steps": "7"}})


def test_did_you_mean_prefers_a_name_that_continues_the_one_given() -> None:
    from tripwire._validate import did_you_mean

    # Lightning's several validation dataloaders: val_loss/dataloader_idx_0, not train_loss
    assert did_you_mean("val_loss", ["train_loss", "val_loss/dataloader_idx_0"]) == "; did you mean 'val_loss/dataloader_idx_0'?"
    assert did_you_mean("val_loss", ["train_loss", "val_losses"]) == "; did you mean 'val_losses'?"
    assert did_you_mean("gradient", ["gradients", "weights"]) == "; did you mean 'gradients'?"


def test_keyword_overrides_reach_what_modes_and_collections_inherit() -> None:
    # start_step=4, end_step=8 given as keywords mean what they mean written in the file's top-level
    # save: a per-mode override and a collection's own save that do not state them inherit them
    # (they kept the file's resolved 0..None, and saved outside the range)
    file = {"save": {"interval": 2, "modes": {"eval": {"interval": 1}}},
            "collections": {"weights": {"save": {"interval": 3}}, "biases": None}}
    written = {"save": {"interval": 2, "start_step": 4, "end_step": 8, "modes": {"eval": {"interval": 1}}},
               "collections": file["collections"]}
    got = load_config(file, start_step=4, end_step=8)
    assert got == load_config(written)
    weights = got.collections["weights"].save
    assert weights is not None
    assert [s for s in range(20) if weights.should_save("eval", s)] == [6]
    assert [s for s in range(20) if got.save.should_save("eval", s)] == [4, 5, 6, 7]
    # an override applied to an overridden config, and save_interval under a mode that states end_step
    file2 = {"save": {"modes": {"eval": {"end_step": 30}}}}
    chained = load_config(file2, save_interval=5).with_overrides(start_step=10)
    assert chained == load_config({"save": {"interval": 5, "start_step": 10, "modes": {"eval": {"end_step": 30}}}})
    assert [s for s in range(40) if chained.save.should_save("eval", s)] == [10, 15, 20, 25]


def test_a_rule_set_with_parameters_is_refused(tmp_path: Path) -> None:
    # {name: default, patience: 3} (or a typo such as patiense) was accepted and did nothing
    # (trial 29d: named by its place, rules[0], with the parameter's right name, not rules[default])
    with pytest.raises(ConfigError, match=r"rules\[0\]\.patiense: a rule set takes 'actions' only, got "
                                          r"\{'patiense': 5\}; 'patiense' is no parameter of its rules either; did "
                                          r"you mean 'patience'\? Give a parameter to the rule that takes it"):
        tripwire.Session(rules=[{"name": "default", "patiense": 5}], out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    session = tripwire.Session(rules=[{"name": "default", "actions": ["log"]}, {"name": "loss_not_decreasing",
                                                                                "patience": 3}],
                               out_dir=tmp_path / "ok")
    assert {r.name: r.patience for r in session.rules}["loss_not_decreasing"] == 3
    session.close()


def test_a_key_given_twice_in_yaml_is_an_error(tmp_path: Path) -> None:
    # PyYAML kept the last one without a word: "save:" written twice gave the second's interval
    path = tmp_path / "dup.yaml"
    path.write_text("save:\n  interval: 5\nrules: [default]\nsave:\n  interval: 7\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML: key 'save' is given twice \(first on line 1\); keep one"):
        load_config(path)
    # a merge key's keys may be overridden: that is what it is for
    assert tripwire._config.load_yaml("a: &x {b: 1, c: 3}\nd:\n  <<: *x\n  b: 2\n") == {
        "a": {"b": 1, "c": 3}, "d": {"b": 2, "c": 3}}


@pytest.mark.parametrize("data, match", [
    ({"actions": ["stop"]}, r"^actions\[0\]: unknown action 'stop'; did you mean 'stop_training'\?; accepted: log, "),
    ({"actions": [{"name": "log", "level": "loud"}]}, r"^actions\[0\]\.level: got 'loud'; accepted: debug, info, "),
    ({"actions": [{"name": "log", "levle": "error"}]}, r"^actions\[0\]\.levle: unknown key 'levle'; did you mean 'level'\?"),
    ({"actions": [{"name": "notify", "topic_arn": "arn:aws:sns:us-east-1:1:t", "timeout": 0}]},
     r"^actions\[0\]\.timeout: got 0; accepted: a number in \(0\.0, 3600\.0\]"),
    ({"rules": ["dead_relu", {"name": "loss_not_decreasing", "actions": ["halt"]}]},
     r"^rules\[1\]\.actions\[0\]: unknown action 'halt'; accepted: "),
])
def test_load_config_checks_built_in_actions(data: dict, match: str) -> None:
    # load_config returned these configs; only a session (or tripwire validate) refused them
    with pytest.raises(ConfigError, match=match):
        load_config(data)
    assert load_config({"actions": ["mymodule:on_finding"]}).actions[0].name == "mymodule:on_finding"  # at the session


def test_an_out_dir_that_is_a_file_is_refused_when_the_config_is_made(tmp_path: Path) -> None:
    # trial 17a: accepted, then a NotADirectoryError from inside the first training step that did
    # not name out_dir
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    with pytest.raises(ConfigError, match=rf"out_dir: got '{re.escape(str(afile))}', which is a file; accepted: a "
                                          r"directory path \(an existing directory, or one that can be made\)"):
        Config(out_dir=str(afile))
    with pytest.raises(ConfigError, match=rf"out_dir: got '{re.escape(str(afile / 'sub'))}', which is inside "
                                          rf"'{re.escape(str(afile))}', which is a file"):
        load_config({"out_dir": str(afile / "sub")})
    with pytest.raises(ConfigError, match="which is a file"):
        Config().with_overrides(out_dir=afile)
    assert Config(out_dir=str(tmp_path / "new" / "run")).out_dir  # (not there yet: made at the first step)
    assert Config(out_dir=str(tmp_path)).out_dir


def test_a_rule_mapping_with_a_misspelled_name_key_says_so() -> None:
    # trial 17a: "needs a 'name' key" without naming 'nmae' as the unknown key it is
    with pytest.raises(ConfigError, match=r"rules\[0\]: a rule mapping needs a 'name' key, got \{'nmae': 'dead_relu', "
                                          r"'patience': 2\}; 'nmae' is unknown; did you mean 'name'\?"):
        load_config({"rules": [{"nmae": "dead_relu", "patience": 2}]})
    with pytest.raises(ConfigError, match=r"needs a 'name' key, got \{'patience': 2\} \(keys: name, actions, and"):
        load_config({"rules": [{"patience": 2}]})
