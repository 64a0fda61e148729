"""Trial 20b (an smdebug user moving to tripwire): keyword save overrides given with ``save=``, and
smdebug's names given to tripwire's config classes and YAML."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import (
    Collection,
    Config,
    ConfigError,
    ModeSaveConfig,
    ReductionConfig,
    SaveConfig,
    load_config,
)
from tripwire._config import ActionSpec, RuleSpec, WriterConfig


def _saved(save: SaveConfig, mode: str = "train", upto: int = 21) -> list[int]:
    return [s for s in range(upto) if save.should_save(mode, s)]


# ----------------------------------------------------------------- finding 2: keywords over save=
@pytest.mark.parametrize("form", ["SaveConfig", "mapping"])
def test_save_keywords_apply_over_save_in_either_form(form: str) -> None:
    # trial 20b: save=SaveConfig(interval=10, modes=...) + save_interval=5, save_steps=[3] saved
    # [0, 10, 20] (both keywords dropped); with a mapping, save_interval was dropped, save_steps kept
    given = SaveConfig(interval=10, modes={"eval": {"interval": 1}}) if form == "SaveConfig" else \
        {"interval": 10, "modes": {"eval": {"interval": 1}}}
    got = load_config({}, save=given, save_interval=5, save_steps=[3]).save
    assert _saved(got) == [0, 3, 5, 10, 15, 20]
    assert got.for_mode("eval").interval == 1  # the modes are kept
    assert got.for_mode("eval").steps == (3,)  # what eval does not state follows the keywords
    assert got == load_config({"save": {"interval": 5, "steps": [3], "modes": {"eval": {"interval": 1}}}}).save
    ranged = load_config({}, save=given, start_step=4, end_step=12).save
    assert _saved(ranged) == [10] and _saved(ranged, "eval") == list(range(4, 12))


def test_save_keywords_apply_over_a_save_config_with_mode_objects() -> None:
    # a ModeSaveConfig states what differs from the top level; the rest follows the keywords
    given = SaveConfig(interval=10, modes={"eval": ModeSaveConfig(interval=1), "predict": ModeSaveConfig(enabled=False)})
    got = load_config(save=given, save_interval=5, start_step=2).save
    assert _saved(got) == [5, 10, 15, 20]
    assert _saved(got, "eval") == list(range(2, 21))
    assert _saved(got, "predict") == []
    # with no keyword, the schedule is the object itself
    assert load_config(save=given).save == given
    assert SaveConfig.from_dict(given._as_written()) == given


def test_save_keywords_apply_over_a_yaml_file_and_a_save_given_with_it(tmp_path: Path) -> None:
    path = tmp_path / "tripwire.yaml"
    path.write_text("save:\n  interval: 20\n  modes:\n    eval: {interval: 1}\n"
                    "collections:\n  weights: {save: {interval: 4}}\n")
    got = load_config(path, save_interval=5, save_steps=[3])
    assert _saved(got.save) == [0, 3, 5, 10, 15, 20] and got.save.for_mode("eval").interval == 1
    weights = got.collections["weights"].save
    assert weights is not None and _saved(weights) == [0, 3, 4, 8, 12, 16, 20]  # its own interval, the steps
    # the file, then save= over it, then the keywords over both
    for given in (SaveConfig(interval=10), {"interval": 10}):
        over = load_config(path, save=given, save_interval=7)
        assert _saved(over.save) == [0, 7, 14], given


def test_a_collection_object_keeps_its_own_save_under_keyword_overrides() -> None:
    # a Collection given as an object, with its own save: a keyword override dropped that save, and
    # the collection then followed the run's schedule
    own = Collection("fc1", include=("^fc1",), reduction=ReductionConfig(("l2",)), save=SaveConfig(interval=3))
    for collections in ({"fc1": own}, [own, "weights"]):
        got = load_config({"collections": collections}, save_interval=5)
        assert got.collections["fc1"] == own, collections
        assert got.save.interval == 5


def test_a_session_saves_the_steps_the_keywords_say_over_save(tmp_path: Path) -> None:
    session = tripwire.Session(save=SaveConfig(interval=10, modes={"eval": {"interval": 1}}), save_interval=5,
                               save_steps=[3], out_dir=tmp_path / "run", collections={"weights": None})
    for i in range(21):
        plan = session.begin_step("train", i)
        plan.add("w", np.ones(2), "weights")
        session.end_step()
    session.close()
    assert tripwire.open_run(tmp_path / "run").tensor("w").steps() == [0, 3, 5, 10, 15, 20]


# -------------------------------------------------------------- finding 4: smdebug's names, by name
@pytest.mark.parametrize("make, match", [
    (lambda: SaveConfig(save_interval=5),
     r"^SaveConfig\(save_interval=5\): unknown argument 'save_interval'; did you mean 'interval'\? \(smdebug's "
     r"save_interval is tripwire's interval\) \(accepted: interval, start_step, end_step, steps, modes\)$"),
    (lambda: SaveConfig(save_steps=[3, 7]), r"^SaveConfig\(save_steps=\[3, 7\]\): unknown argument 'save_steps'; did you mean 'steps'\?"),
    (lambda: SaveConfig(mode_save_configs={}), r"unknown argument 'mode_save_configs'; did you mean 'modes'\?"),
    (lambda: ModeSaveConfig(save_interval=1), r"^ModeSaveConfig\(save_interval=1\): unknown argument 'save_interval'; did you mean 'interval'\?"),
    (lambda: ReductionConfig(abs_reductions=["max"]),
     r"^ReductionConfig\(abs_reductions=\['max'\]\): unknown argument 'abs_reductions'; did you mean "
     r"reductions=\['abs_max'\]\?.*\(accepted: reductions, histogram, histogram_bins, histogram_range, raw\)$"),
    (lambda: ReductionConfig(norms=["l2"]), r"unknown argument 'norms'; did you mean reductions=\['l2'\]\?"),
    (lambda: ReductionConfig(abs_norms="l1"), r"unknown argument 'abs_norms'; did you mean reductions=\['abs_l1'\]\?"),
    (lambda: ReductionConfig(save_raw_tensor=True), r"unknown argument 'save_raw_tensor'; did you mean raw=True\?"),
    (lambda: ReductionConfig(histogram_bin=5), r"unknown argument 'histogram_bin'; did you mean 'histogram_bins'\?"),
    (lambda: Collection("fc1", include_regex=["fc1"]),
     r"^Collection\(include_regex=\['fc1'\]\): unknown argument 'include_regex'; did you mean 'include'\? "
     r"\(smdebug's include_regex is tripwire's include.*\(accepted: name, include, exclude, kinds, reduction, save, every_step\)$"),
    (lambda: Collection("fc1", abs_reductions=["max"]),
     r"unknown argument 'abs_reductions'; did you mean reduction=ReductionConfig\(reductions=\['abs_max'\]\)\?"),
    (lambda: Collection("fc1", save_config=SaveConfig()), r"unknown argument 'save_config'; did you mean 'save'\?"),
    (lambda: Collection("fc1", reductions=["l2"]), r"unknown argument 'reductions'; did you mean reduction=ReductionConfig\(reductions=\['l2'\]\)\?"),
    (lambda: Config(save_interval=5), r"^Config\(save_interval=5\): unknown argument 'save_interval'; did you mean save=SaveConfig\(interval=5\)\?"),
    (lambda: WriterConfig(queue=3), r"^WriterConfig\(queue=3\): unknown argument 'queue'; did you mean 'queue_size'\?"),
    (lambda: RuleSpec("dead_relu", param={}), r"^RuleSpec\(param=\{\}\): unknown argument 'param'; did you mean 'params'\?"),
    (lambda: ActionSpec("log", parms={}), r"^ActionSpec\(parms=\{\}\): unknown argument 'parms'; did you mean 'params'\?"),
])
def test_an_unknown_argument_of_a_config_class_is_named_with_what_is_accepted(make, match: str) -> None:
    # trial 20b: Python's bare "__init__() got an unexpected keyword argument", which names nothing
    # tripwire accepts; still a TypeError (and a ConfigError, a ValueError) for code that catches those
    with pytest.raises(ConfigError, match=match) as info:
        make()
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_the_config_classes_keep_their_signatures_and_round_trips() -> None:
    import inspect

    assert list(inspect.signature(SaveConfig).parameters) == ["interval", "start_step", "end_step", "steps", "modes"]
    cfg = SaveConfig(interval=3, steps=[1], modes={"eval": ModeSaveConfig(interval=1)})
    assert SaveConfig.from_dict(cfg.to_dict()) == cfg
    assert Collection("fc1", include=("^fc1",), reduction=ReductionConfig(("l2",))).name == "fc1"
    # the YAML spelling of raw and histogram, listed in reductions, is the flags
    assert ReductionConfig(reductions=["l2", "raw", "histogram"]) == ReductionConfig(("l2",), histogram=True, raw=True)


@pytest.mark.parametrize("data, match", [
    # a custom collection: the key is named (it was "unknown built-in collection; a custom collection
    # needs an 'include' list")
    ({"collections": {"fc1": {"include_regex": ["fc1"], "reductions": ["l2"]}}},
     r"^collections\.fc1\.include_regex: unknown key 'include_regex'; did you mean 'include'\? \(smdebug's "
     r"include_regex is tripwire's include"),
    ({"collections": {"weights": {"include_regex": ["fc1"]}}}, r"^collections\.weights\.include_regex: unknown key 'include_regex'; did you mean 'include'\?"),
    ({"collections": {"fc1": {"include": ["fc1"], "abs_reductions": ["max", "mean"]}}},
     r"^collections\.fc1\.abs_reductions: unknown key 'abs_reductions'; did you mean reductions: \[abs_max, abs_mean\]\?"),
    ({"collections": {"gradients": {"norms": ["l2"]}}}, r"^collections\.gradients\.norms: unknown key 'norms'; did you mean reductions: \[l2\]\?"),
    ({"collections": {"fc1": {"include": ["fc1"], "save_raw_tensor": True}}},
     r"^collections\.fc1\.save_raw_tensor: unknown key 'save_raw_tensor'; did you mean reductions: \[raw\]\?"),
    ({"collections": {"fc1": {"include": ["fc1"], "reductions": ["l2"], "save_config": {"interval": 2}}}},
     r"^collections\.fc1\.save_config: unknown key 'save_config'; did you mean 'save'\?"),
    ({"save": {"save_interval": 5}}, r"^save\.save_interval: unknown key 'save_interval'; did you mean 'interval'\? \(smdebug's"),
    ({"save": {"save_steps": [3]}}, r"^save\.save_steps: unknown key 'save_steps'; did you mean 'steps'\?"),
    ({"save": {"modes": {"eval": {"save_interval": 1}}}}, r"^save\.modes\.eval\.save_interval: unknown key 'save_interval'; did you mean 'interval'\?"),
    ({"save_interval": 5}, r"^save_interval: unknown key 'save_interval'; did you mean save: \{interval: 5\}\?"),
])
def test_smdebug_names_in_yaml_are_named_with_tripwires(data: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config(data)


# ------------------------------------------------ finding 5: save_steps adds to the interval's steps
def test_saving_only_the_listed_steps_is_said_where_an_smdebug_user_tries_it() -> None:
    # smdebug's SaveConfig(save_steps=[3, 7]) saves only those; here steps add to the interval's, and
    # interval: null / 0 (the first thing tried) was refused without saying what works
    assert _saved(load_config(save_steps=[3, 7]).save, upto=30) == [0, 3, 7, 10, 20]
    for interval in (None, 0):
        with pytest.raises(ConfigError, match=r"^save\.interval: got (None|0); accepted: an integer >= 1 \(steps are "
                                              r"saved in addition .* end_step: 0 with them: \{steps: \[3, 7\], end_step: 0\}\)$"):
            load_config({"save": {"steps": [3, 7], "interval": interval}})
    with pytest.raises(ConfigError, match=r"^save\.modes\.eval\.interval: got None; .*end_step: 0"):
        load_config({"save": {"modes": {"eval": {"interval": None}}}})
    with pytest.raises(ConfigError, match=r"^interval: got None; .*SaveConfig\(steps=\[3, 7\], end_step=0\)\)$"):
        SaveConfig(interval=None, steps=[3, 7])
    # what the message (and docs/config.md, "Coming from smdebug") says works, in every mode
    for only in (load_config({"save": {"steps": [3, 7], "end_step": 0}}).save, load_config(save_steps=[3, 7], end_step=0).save):
        assert _saved(only, upto=30) == [3, 7] and _saved(only, "eval", upto=30) == [3, 7]


def test_a_collection_include_given_as_a_string_is_one_pattern() -> None:
    # a bare string was iterated: include="fc1" became the patterns "f", "c" and "1"
    col = tripwire.Collection("fc1_only", include="^fc1\\.", exclude="bias", kinds="weights",
                              reduction=tripwire.ReductionConfig(reductions=["l2"]))
    assert col.include == ("^fc1\\.",) and col.exclude == ("bias",) and col.kinds == ("weights",)
    assert col.matches("fc1.weight", "weights") and not col.matches("fc2.weight", "weights")
    assert not col.matches("fc1.bias", "weights")
    with pytest.raises(tripwire.ConfigError, match=r"collections\.x\.include: got 5; accepted: a string or a list"):
        tripwire.Collection("x", include=5)
