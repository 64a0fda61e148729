"""Trial 23l (every config key checked against what the run holds): keyword ``save=`` and
``writer=`` mappings merged over the file's, and the arguments of ``SaveConfig`` /
``ModeSaveConfig`` named in errors like their YAML keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import Config, ConfigError, ModeSaveConfig, SaveConfig, WriterConfig, load_config


def _saved(save: SaveConfig, mode: str = "train", upto: int = 12) -> list[int]:
    return [s for s in range(upto) if save.should_save(mode, s)]


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tripwire.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------ finding 1: save= mapping over the file's modes
def test_a_save_keyword_mapping_is_merged_over_the_files_modes(tmp_path: Path) -> None:
    # trial 23l: the merge was shallow, a keyword's modes replaced all of the file's: the file's
    # every-step eval capture was lost without a word
    cfg = _yaml(tmp_path, "save:\n  interval: 5\n  modes:\n    eval: {interval: 1}\ncollections: [weights]\n")
    got = load_config(cfg, save={"modes": {"predict": {"enabled": False}}}).save
    assert got.for_mode("eval").interval == 1 and _saved(got, "eval") == list(range(12))
    assert _saved(got, "predict") == [] and _saved(got) == [0, 5, 10]
    assert got == load_config({"save": {"interval": 5, "modes": {"eval": {"interval": 1}, "predict": {"enabled": False}}}}).save

    # a mode the keyword restates keeps the file's keys it does not state
    cfg_a = _yaml(tmp_path, "save:\n  interval: 4\n  steps: [1]\n  modes:\n    eval: {interval: 2}\n")
    ev = load_config(cfg_a, save={"modes": {"eval": {"start_step": 2}}}).save.for_mode("eval")
    assert (ev.interval, ev.start_step, ev.steps) == (2, 2, (1,))
    # a key the keyword states wins; what no mode states still follows the keyword's top level
    both = load_config(cfg_a, save={"interval": 3, "modes": {"eval": {"interval": 1}}}).save
    assert both.for_mode("eval").interval == 1 and both.for_mode("train").interval == 3
    # a mode (or modes) given as None changes nothing
    assert load_config(cfg_a, save={"modes": None}).save == load_config(cfg_a).save
    assert load_config(cfg_a, save={"modes": {"eval": None}}).save == load_config(cfg_a).save
    # a SaveConfig still replaces the whole schedule, its modes included
    whole = load_config(cfg_a, save=SaveConfig(interval=6, modes={"predict": {"enabled": False}})).save
    assert whole.for_mode("eval").interval == 6 and whole.for_mode("eval").steps == ()
    # a bad value of the keyword is named where it is
    with pytest.raises(ConfigError, match=r"^save\.modes\.eval\.start_step: got -1; accepted: an integer >= 0"):
        load_config(cfg_a, save={"modes": {"eval": {"start_step": -1}}})


def test_a_save_keyword_mapping_keeps_the_files_eval_steps_in_the_run(tmp_path: Path) -> None:
    cfg = _yaml(tmp_path, "save:\n  interval: 5\n  modes:\n    eval: {interval: 1}\ncollections: [weights]\n")
    out = tmp_path / "run"
    session = tripwire.Session(str(cfg), out_dir=out, save={"modes": {"predict": {"enabled": False}}})
    for mode, n in (("train", 10), ("eval", 6), ("predict", 3)):
        for step in range(n):
            plan = session.begin_step(mode, step)
            if plan.wants("weights"):
                plan.add("fc.weight", np.ones(3), "weights")
            session.end_step()
    session.close()
    run = tripwire.open_run(out)
    assert run.steps(mode="eval") == [0, 1, 2, 3, 4, 5]
    assert run.steps(mode="train") == [0, 5] and run.steps(mode="predict") == []


def test_keywords_over_a_config_built_in_python_follow_its_modes_as_written() -> None:
    # a Config made in Python (no file): its modes' unstated keys were filled in from its top level,
    # so save_interval= / save={"interval": ...} did not reach a mode that stated only start_step
    config = Config(save=SaveConfig(modes={"eval": {"start_step": 2}}))
    ev = load_config(config, save_interval=5).save.for_mode("eval")
    assert (ev.interval, ev.start_step) == (5, 2)
    ev = load_config(config, save={"interval": 3, "modes": {"eval": {"end_step": 9}}}).save.for_mode("eval")
    assert (ev.interval, ev.start_step, ev.end_step) == (3, 2, 9)
    assert load_config(config, save_interval=5).save == load_config(
        {"save": {"modes": {"eval": {"start_step": 2}}}}, save_interval=5).save
    kept = Config(save=SaveConfig(interval=4, modes={"eval": ModeSaveConfig(interval=1)}))
    got = load_config(kept, save={"modes": {"predict": {"enabled": False}}}).save
    assert got.for_mode("eval").interval == 1 and not got.for_mode("predict").enabled


# --------------------------------------------------------- finding 7: writer= mapping over the file's
def test_a_writer_keyword_mapping_is_merged_over_the_files_writer(tmp_path: Path) -> None:
    # trial 23l: writer={"fsync": True} replaced the file's writer: its ranks: [0] was lost, so every
    # rank would have written a shard
    got = load_config({"writer": {"queue_size": 8, "ranks": [0]}}, writer={"fsync": True}).writer
    assert got == WriterConfig(queue_size=8, ranks=(0,), fsync=True)
    cfg = _yaml(tmp_path, "writer:\n  ranks: [0]\n  fsync: true\n")
    assert load_config(cfg, writer={"queue_size": 16}).writer == WriterConfig(16, (0,), True)
    assert load_config(cfg, writer={"ranks": "all"}).writer == WriterConfig(64, "all", True)
    with pytest.raises(ConfigError, match=r"^writer\.fsync: got 'yes'; accepted: true or false"):
        load_config(cfg, writer={"fsync": "yes"})
    with pytest.raises(ConfigError, match=r"writer\.queue_sise: unknown key 'queue_sise'; did you mean 'queue_size'"):
        load_config(cfg, writer={"queue_sise": 8})


# ------------------------------------------ finding 6: SaveConfig / ModeSaveConfig arguments, named
def test_saveconfig_steps_as_one_int_is_a_list_of_one_as_in_yaml() -> None:
    # trial 23l: SaveConfig(steps=3) raised TypeError: 'int' object is not iterable
    assert SaveConfig(steps=3) == load_config({"save": {"steps": 3}}).save
    assert SaveConfig(steps=3).steps == (3,) and _saved(SaveConfig(steps=3)) == [0, 3, 10]
    assert ModeSaveConfig(steps=3).steps == (3,) and ModeSaveConfig(steps=3).should_save(3)
    assert SaveConfig(modes={"eval": ModeSaveConfig(steps=3)}).for_mode("eval").steps == (3,)
    # numpy's integers are integers, stored as int
    assert SaveConfig(steps=np.int64(3)) == SaveConfig(steps=[3])
    assert SaveConfig(steps=np.array([7, 3])).steps == (3, 7)
    assert SaveConfig(interval=np.int64(5), start_step=np.int32(1), end_step=np.int64(9)) == SaveConfig(5, 1, 9)
    assert type(ModeSaveConfig(interval=np.int64(5)).interval) is int
    assert SaveConfig(steps=range(0, 6, 3)).steps == (0, 3)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"steps": None}, r"^save\.steps: got None; accepted: a list of integers >= 0, or one integer >= 0 \(a list of one\)$"),
    ({"steps": "13"}, r"^save\.steps: got '13'; accepted: a list of integers >= 0, or one integer"),
    ({"steps": 2.5}, r"^save\.steps: got 2\.5; accepted: a list of integers >= 0, or one integer"),
    ({"steps": {"a": 1}}, r"^save\.steps: got \{'a': 1\}; accepted: a list of integers"),
    ({"steps": [1, -2]}, r"^save\.steps\[1\]: got -2; accepted: an integer >= 0$"),
    ({"steps": [1, "2"]}, r"^save\.steps\[1\]: got '2'; accepted: an integer >= 0$"),
    ({"modes": [1]}, r"^save\.modes: got \[1\]; accepted: a mapping of modes \(train, eval, test, predict\) to a "
                     r"ModeSaveConfig or a mapping of interval, start_step, end_step, steps, enabled$"),
    ({"modes": {"eval": {"steps": None}}}, r"^save\.modes\.eval\.steps: got None; accepted: a list of integers >= 0"),
])
def test_bad_saveconfig_arguments_are_config_errors_naming_the_key(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SaveConfig(**kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"steps": None}, r"^steps: got None; accepted: a list of integers >= 0, or one integer >= 0"),
    ({"steps": 1.5}, r"^steps: got 1\.5; accepted: a list of integers >= 0"),
    ({"enabled": "no"}, r"^enabled: got 'no'; accepted: true or false$"),
    ({"enabled": None}, r"^enabled: got None; accepted: true or false$"),
])
def test_bad_modesaveconfig_arguments_are_config_errors_naming_the_key(kwargs: dict, match: str) -> None:
    # steps=None was a bare TypeError; enabled="no" was taken (and, being true, saved)
    with pytest.raises(ConfigError, match=match):
        ModeSaveConfig(**kwargs)


def test_modes_none_is_no_per_mode_override_as_in_yaml() -> None:
    assert SaveConfig(modes=None) == SaveConfig() == load_config({"save": {"modes": None}}).save


# ------------------------------------------------------ the rest of 23l: what was taken silently
@pytest.mark.parametrize(("kwargs", "match"), [
    ({"queue_size": "x"}, r"^writer\.queue_size: got 'x'; accepted: an integer >= 1"),
    ({"fsync": "yes"}, r"^writer\.fsync: got 'yes'"),
    ({"ranks": []}, r"^writer\.ranks: got \[\]: no rank would write"),
    ({"ranks": "some"}, r"^writer\.ranks: got 'some'; accepted: 'all' or a list of ranks"),
])
def test_a_writer_config_built_in_python_is_checked(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        WriterConfig(**kwargs)


def test_a_writer_config_object_replaces_the_writer_as_a_keyword() -> None:
    assert WriterConfig(ranks=0).ranks == (0,)
    config = load_config({"writer": {"queue_size": 8, "ranks": [0]}}, writer=WriterConfig(fsync=True))
    assert config.writer == WriterConfig(fsync=True)  # (whole, as save=SaveConfig(...) is)


@pytest.mark.parametrize("key, value", [("histogram_bins", 50), ("histogram_range", [0.0, 1.0])])
def test_histogram_settings_of_a_collection_without_a_histogram_are_refused(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^collections\.weights\.{key}: got .*, but no histogram is kept; "
                                          rf"accepted: {key} with 'histogram' among the reductions \(e\.g\. "
                                          rf"reductions \['l2', .*, 'histogram'\]\)"):
        load_config({"collections": {"weights": {key: value}}})
    ok = load_config({"collections": {"weights": {"reductions": ["l2", "histogram"], key: value}}})
    assert ok.collections["weights"].reduction.histogram
    again = Config.from_dict(ok.to_dict())  # (to_dict writes every collection's defaults: taken back)
    assert again.collections["weights"] == ok.collections["weights"]


def test_a_collection_named_empty_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^collections: a collection named ''; accepted: a non-empty name"):
        load_config({"collections": {"": {"include": ["fc"], "reductions": ["l2"]}}})


def test_python_config_objects_refuse_what_the_yaml_refuses() -> None:
    # trial 23r: ReductionConfig(histogram_bins=50) without a histogram, and Collection(""), were taken in
    # Python (and the setting dropped) where the YAML refuses them
    from tripwire import Collection, ReductionConfig

    with pytest.raises(ConfigError, match=r"^histogram_bins: got 50, but no histogram is kept; accepted: histogram_bins "
                                          r"with 'histogram' among the reductions"):
        ReductionConfig(reductions=("l2",), histogram_bins=50)
    with pytest.raises(ConfigError, match=r"^histogram_range: got \(0.0, 1.0\), but no histogram is kept"):
        ReductionConfig(reductions=("l2",), histogram_range=(0.0, 1.0))
    assert ReductionConfig(reductions=("l2", "histogram"), histogram_bins=50).histogram_bins == 50
    with pytest.raises(ConfigError, match=r"^collections: a collection named ''; accepted: a non-empty name"):
        Collection("", include=["fc"], reduction=ReductionConfig(reductions=("l2",)))
