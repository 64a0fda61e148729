"""Trial 27d findings 6 and 7: ``kinds: []`` was taken and the collection captured nothing, silently;
messages that sent the user the wrong way: YAML ``save_all`` "did you mean 'save'?",
``abs_fraction_gt:0.1`` "did you mean 'zero_fraction'?", ``fraction_gt:inf`` "is not a number", a YAML
flow list's ``fraction_gt: 0.5`` (a mapping) "accepted: a string" with no word of why, and keyword
arguments' errors naming the key they set (``save.interval``) instead of the keyword given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import Collection, ConfigError, ReductionConfig, load_config


# ------------------------------------------------------------------------------ finding 6: kinds: []
def test_an_empty_kinds_list_is_refused_naming_the_key_the_value_and_what_is_accepted() -> None:
    with pytest.raises(ConfigError, match=r"^collections\.mine\.kinds: got \[\]: the collection would take no tensor; "
                                          r"accepted: null \(None in Python: any kind\) or a non-empty list of kinds, "
                                          r"the built-in collection names \(weights, biases, gradients, "):
        load_config({"collections": {"mine": {"include": ["."], "kinds": [], "reductions": ["l2"]}}})
    with pytest.raises(ConfigError, match=r"^collections\.mine\.kinds: got \[\]"):
        Collection("mine", include=["."], kinds=[], reduction=ReductionConfig(reductions=["l2"]))
    with pytest.raises(ConfigError, match=r"^collections\.weights\.kinds: got \[\]"):
        tripwire.Session(write=False, collections={"weights": {"kinds": []}})


def test_validate_names_an_empty_kinds_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tripwire._cli import main

    path = tmp_path / "c.yaml"
    path.write_text("collections:\n  mine: {include: [a], kinds: [], reductions: [l2]}\n")
    assert main(["validate", str(path)]) != 0
    assert "collections.mine.kinds: got []: the collection would take no tensor" in capsys.readouterr().err


# ---------------------------------------------------------------------------- finding 7: messages
@pytest.mark.parametrize("key, value, said", [
    ("save_all", True, r"^save_all: unknown key 'save_all'; did you mean collections: \[weights, biases, gradients, "
                       r"\.\.\.\]\? \(smdebug's save_all saves every tensor"),
    ("include_workers", "one", r"did you mean writer: \{ranks: \[0\]\}\?"),
    ("include_regex", ["fc"], r"did you mean collections: \{mine: \{include: \[\.\.\.\], reductions: \[\.\.\.\]\}\}\?"),
    ("mode_save_configs", {}, r"did you mean save: \{modes: \{eval: \{interval: 1\}\}\}\?"),
    ("include_collections", ["weights"], r"did you mean collections: \[weights, biases, gradients, \.\.\.\]\? "
                                         r"\(include_collections is a keyword argument"),
])
def test_smdebug_hook_names_at_the_top_of_the_yaml_get_tripwires(key: str, value: Any, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config({key: value})


def test_smdebug_save_all_given_to_a_config_in_python_gets_collections() -> None:
    with pytest.raises(ConfigError, match=r"unknown argument 'save_all'; did you mean collections=\[\.\.\.\]\?"):
        tripwire.Config(save_all=True)  # type: ignore[call-arg]


@pytest.mark.parametrize("name, said", [
    ("abs_fraction_gt:0.1", r"unknown reduction 'abs_fraction_gt:0\.1'; did you mean 'fraction_abs_gt:0\.1'\?"),
    ("fraction_gt_abs:2", r"did you mean 'fraction_abs_gt:2'\?"),
    ("abs_fraction_gt", r"did you mean 'fraction_abs_gt:THRESHOLD'\?"),
    ("abs_fraction_lt:1", r"there is no fraction_abs_lt: the share of elements with \|x\| <= T is 1 - fraction_abs_gt:T"),
    ("fraction_gt:inf", r"reduction 'fraction_gt:inf': threshold 'inf' is not finite .*; accepted: fraction_gt:THRESHOLD "
                        r"with a finite number, e\.g\. fraction_gt:0\.5$"),
    ("fraction_lt:nan", r"threshold 'nan' is not finite"),
    ("fraction_gt: 0.5", r"threshold ' 0\.5' has spaces around it; accepted: fraction_gt:0\.5, without spaces$"),
    ("fraction_gt:abc", r"threshold 'abc' is not a number"),
])
def test_a_misspelled_or_unusable_parametric_reduction_gets_the_right_answer(name: str, said: str) -> None:
    with pytest.raises(ConfigError, match=r"^collections\.weights\.reductions\[0\]: .*" + said):
        load_config({"collections": {"weights": {"reductions": [name]}}})
    assert "zero_fraction'?" not in _message(name)


def _message(name: str) -> str:
    try:
        ReductionConfig(reductions=[name])
    except ConfigError as exc:
        return str(exc)
    raise AssertionError(f"{name!r} was taken")


def test_a_yaml_flow_list_item_read_as_a_mapping_says_how_to_write_it(tmp_path: Path) -> None:
    text = "collections:\n  weights:\n    reductions: [l2, fraction_gt: 0.5]\n"
    path = tmp_path / "flow.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"^collections\.weights\.reductions\[1\]: got \{'fraction_gt': 0\.5\} \(a "
                                          r"mapping; in YAML, 'fraction_gt: 0\.5' in a list, a space after the colon, "
                                          r"is one\); accepted: a string, here 'fraction_gt:0\.5': in YAML without "
                                          r"the space \(fraction_gt:0\.5\) or quoted \('fraction_gt:0\.5'\)$"):
        load_config(path)
    assert load_config({"collections": {"weights": {"reductions": ["l2", "fraction_gt:0.5"]}}})


@pytest.mark.parametrize("kwargs, said", [
    ({"save_interval": 0}, r"^save_interval: got 0; accepted: an integer >= 1 .*save_steps=\[3, 7\], end_step=0\)$"),
    ({"save_interval": 2.5}, r"^save_interval: got 2\.5; accepted: an integer >= 1$"),
    ({"save_steps": [1, -2]}, r"^save_steps\[1\]: got -2; accepted: an integer >= 0$"),
    ({"save_steps": "7"}, r"^save_steps: got '7'; accepted: a list of integers >= 0"),
    ({"start_step": -1}, r"^start_step: got -1; accepted: an integer >= 0$"),
    ({"end_step": "soon"}, r"^end_step: got 'soon'; accepted: an integer >= 0 or null$"),
    ({"include_collections": ["gradient"]}, r"^include_collections\[0\]: got 'gradient', no built-in collection; did "
                                            r"you mean 'gradients'\?; accepted: built-in collection names \(weights, "),
])
def test_a_keyword_arguments_error_names_the_keyword_given(kwargs: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        tripwire.Session(write=False, **kwargs)
    with pytest.raises(ConfigError, match=said):
        load_config(None, **kwargs)


def test_keywords_still_take_what_they_took() -> None:
    import numpy as np

    config = load_config(None, save_interval=np.int64(5), save_steps=np.array([3, 1]), start_step=2.0, end_step=None)
    assert (config.save.interval, config.save.steps, config.save.start_step, config.save.end_step) == (5, (1, 3), 2, None)
    mine = Collection("mine", include=["^x$"], reduction=ReductionConfig(reductions=["l2"]))
    config = load_config(None, collections={"mine": mine}, include_collections=["mine", "weights"])
    assert list(config.collections) == ["mine", "weights"]
