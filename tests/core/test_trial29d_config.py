"""Trial 29d (a platform engineer writing the team's shared YAML config): the findings of
``core/_config.py``.

1. a config file that is not UTF-8 (UTF-16 with a BOM, as PowerShell writes it; Latin-1) crashed
   ``load_config``, ``validate`` and every callback with a bare UnicodeDecodeError;
2. ``tripwire.Collection("weights", ...)`` in Python was not the built-in collection: refused without
   reductions, and with reductions it took tensors of every kind;
3. ``out_dir: ~/runs`` and ``$HOME/runs`` were taken literally; ``name: ../x`` and ``name: a/b`` left
   ``tripwire-runs``;
4. a keyword override against the file's save (``start_step=10`` over ``end_step: 5``) blamed the
   file's key alone;
5. ``actions: null`` and ``strict: null`` were errors, Python's ``save=None`` too;
7. a built-in collection given another kind was taken, with the wrong data;
8. ``interval: 010`` was 8 (YAML 1.1 octal);
10. ``collections: {}`` with no rules recorded nothing, silently; duplicate actions fired twice;
11. top-level ``x-`` keys (YAML anchors' home) were refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import Collection, Config, ConfigError, ReductionConfig, load_config
from tripwire._cli import main


# --------------------------------------------------------------------------------- 1: encodings
def _utf16(tmp_path: Path, text: str = "save: {interval: 5}\nname: exp1\n") -> Path:
    path = tmp_path / "utf16.yaml"
    path.write_bytes(text.encode("utf-16"))  # (with its BOM, as PowerShell 5's > and Out-File write)
    return path


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-8-sig"])
def test_a_config_with_a_byte_order_mark_is_read(tmp_path: Path, codec: str) -> None:
    path = tmp_path / "bom.yaml"
    text = "save: {interval: 5}\nname: café\n"
    path.write_bytes(text.encode(codec) if codec != "utf-16-be" else b"\xfe\xff" + text.encode("utf-16-be"))
    config = load_config(path)
    assert (config.save.interval, config.name) == (5, "café")


def test_a_config_that_is_not_utf8_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"config: {str(path)!r} is not UTF-8 text \(byte 0xe9 at offset 9, "
                                          r"line 1, cannot be decoded\); accepted: a UTF-8 file \(a UTF-8, UTF-16 or "
                                          r"UTF-32 byte-order mark is read too\).*save it as UTF-8"):
        load_config(path)
    # a callback's way in: the Session
    with pytest.raises(ConfigError, match=r"is not UTF-8 text"):
        tripwire.Session(str(path), write=False)


def test_validate_json_prints_its_object_for_a_file_that_is_not_utf8(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: café\n".encode("latin-1"))
    assert main(["validate", "--json", str(path)]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and len(out["errors"]) == 1 and "is not UTF-8 text" in out["errors"][0]
    # and a UTF-16 file (with its BOM) is valid
    assert main(["validate", "--json", str(_utf16(tmp_path))]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True


# ------------------------------------------------------------------ 2: built-in names in Python
def test_a_python_collection_with_a_built_in_name_is_the_built_in_collection() -> None:
    python = Collection("weights", include=["fc"], reduction=ReductionConfig(reductions=["l2"]))
    yaml = load_config({"collections": {"weights": {"include": ["fc"], "reductions": ["l2"]}}}).collections["weights"]
    assert python.kinds == ("weights",) and python == yaml
    # without reductions: the built-in's defaults, as the YAML's {weights: {include: [fc]}}
    defaults = Collection("weights", include=["fc"])
    assert defaults == load_config({"collections": {"weights": {"include": ["fc"]}}}).collections["weights"]
    assert defaults.reduction == Collection.builtin("weights").reduction
    # the losses collection keeps every step, as in YAML
    assert Collection("losses", include=["loss"]).every_step is True
    assert Collection("losses") == Collection.builtin("losses")
    # what is given is kept; an empty ReductionConfig given is still refused (it would store nothing)
    assert Collection("losses", every_step=False).every_step is False
    with pytest.raises(ConfigError, match=r"collections\.weights\.reduction: got \[\]: the collection would store "
                                          r"nothing"):
        Collection("weights", reduction=ReductionConfig())
    # a custom name still needs its reductions
    with pytest.raises(ConfigError, match=r"collections\.mine\.reduction: got \[\]"):
        Collection("mine", include=["fc"])


def test_a_python_built_in_collection_stores_only_its_own_kind(tmp_path: Path) -> None:
    weights = Collection("weights", include=["fc1"], reduction=ReductionConfig(reductions=["l2"]))
    session = tripwire.Session(out_dir=tmp_path / "run", rules=[], save_interval=1, collections=[weights])
    for step in range(2):
        session.step("train", step, {"fc1.weight": (np.ones((2, 2)), "weights"),
                                     "gradients/fc1.weight": (np.ones((2, 2)), "gradients"),
                                     "fc1/output": (np.ones(3), "activations"),
                                     "update_ratio/fc1.weight": (np.ones(1), "optimizer")})
    session.close()
    assert tripwire.open_run(tmp_path / "run").tensor_names(collection="weights") == ["fc1.weight"]


# ------------------------------------------------------------------------ 3: out_dir and name
def test_out_dir_expands_the_home_directory_and_environment_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TW_RUNS", str(tmp_path / "runs"))
    assert load_config({"out_dir": "~/runs/exp"}).out_dir == str(tmp_path / "home" / "runs" / "exp")
    assert load_config({"out_dir": "$HOME/runs"}).out_dir == str(tmp_path / "home" / "runs")
    assert load_config({"out_dir": "${TW_RUNS}/exp"}, out_dir="${TW_RUNS}/a").out_dir == \
        str(tmp_path / "runs" / "a")  # (the keyword too)
    assert load_config(None, out_dir=Path("~") / "r").out_dir == str(tmp_path / "home" / "r")
    assert Config(out_dir="~/x").out_dir == str(tmp_path / "home" / "x")
    # a $ that starts no variable name is kept
    assert load_config({"out_dir": "runs/a$/b$"}).out_dir == "runs/a$/b$"
    # a session writes there, and nothing named '~' appears here
    monkeypatch.chdir(tmp_path)
    session = tripwire.Session({"out_dir": "~/tw"}, rules=[])
    session.step("train", 0, {"loss": (1.0, "losses")})
    session.close()
    assert (tmp_path / "home" / "tw" / "run.json").is_file() and not (tmp_path / "~").exists()


def test_an_unset_variable_in_out_dir_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TW_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match=r"out_dir: got '\$\{TW_NOT_SET\}/runs': the environment variable "
                                          r"'TW_NOT_SET' is not set; accepted: a local directory path, with ~ and "
                                          r"\$VAR or \$\{VAR\} of variables that are set"):
        load_config({"out_dir": "${TW_NOT_SET}/runs"})
    with pytest.raises(ConfigError, match=r"out_dir: got '\$TW_NOT_SET': the environment variable 'TW_NOT_SET'"):
        load_config(None, out_dir="$TW_NOT_SET")
    with pytest.raises(ConfigError, match=r"out_dir: got '~no_such_user_29d/x': there is no user "
                                          r"'no_such_user_29d'"):
        load_config({"out_dir": "~no_such_user_29d/x"})


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "a\\b", "/abs"])
def test_a_name_that_is_a_path_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=r"name: got .*; accepted: a run name without '/', '\\' and not '\.' or "
                                          r"'\.\.' \(it names the directory tripwire-runs/<name>; give a path as "
                                          r"out_dir\)"):
        load_config({"name": name})
    with pytest.raises(ConfigError, match=r"name: got "):
        load_config(None, name=name)


def test_a_name_with_dots_or_spaces_is_still_a_name() -> None:
    assert load_config({"name": "exp1.v2 final"}).resolved_out_dir() == Path("tripwire-runs") / "exp1.v2 final"


# ------------------------------------------------------------------ 4: a keyword against the file
def test_a_keyword_start_step_against_the_files_end_step_names_both() -> None:
    with pytest.raises(ConfigError, match=r"start_step: got 10 \(the keyword start_step=\), after the config's "
                                          r"save\.end_step 5; accepted: start_step=.*<= 5, or an end_step= keyword"):
        load_config({"save": {"end_step": 5}}, start_step=10)
    with pytest.raises(ConfigError, match=r"end_step: got 5 \(the keyword end_step=\), before the config's "
                                          r"save\.start_step 10; accepted: end_step=None or an integer >= 10"):
        load_config({"save": {"start_step": 10}}, end_step=5)
    with pytest.raises(ConfigError, match=r"end_step: got 5 \(the keyword end_step=\), before the keyword "
                                          r"start_step=10; accepted: end_step=None or an integer >= 10"):
        load_config(None, start_step=10, end_step=5)
    # a mode's own end_step
    with pytest.raises(ConfigError, match=r"start_step: got 10 \(the keyword start_step=\), after the config's "
                                          r"save\.modes\.eval\.end_step 5"):
        load_config({"save": {"modes": {"eval": {"end_step": 5}}}}, start_step=10)
    # the file alone is still named as the file's
    with pytest.raises(ConfigError, match=r"^save\.end_step: got 5; accepted: null or an integer >= start_step \(10\)"):
        load_config({"save": {"start_step": 10, "end_step": 5}})
    assert load_config({"save": {"end_step": 50}}, start_step=10).save.start_step == 10


# ---------------------------------------------------------------------------------- 5: null
def test_null_at_the_top_level_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "nulls.yaml"
    path.write_text("save: null\nstrict: null\nactions: null\nwriter: null\nrules: null\ncollections: null\n")
    assert load_config(path) == Config()
    assert load_config(None, save=None) == Config()
    assert load_config({"save": {"interval": 3}}, save=None).save.interval == 10  # (the default, not the file's)
    assert load_config({"strict": True}, strict=None).strict is False
    assert load_config({"actions": ["raise"]}, actions=None).actions == Config().actions
    assert Config(save=None, actions=None, strict=None, writer=None, rules=None, collections=None) == Config()
    with pytest.raises(ConfigError, match=r"^strict: got 'yes'; accepted: true or false"):
        load_config({"strict": "yes"})


# -------------------------------------------------------------- 7: a built-in name, another kind
@pytest.mark.parametrize("name, kinds", [("losses", ["weights"]), ("weights", ["gradients"]),
                                         ("weights", ["weights", "gradients"])])
def test_a_built_in_collection_given_another_kind_is_refused(name: str, kinds: list[str]) -> None:
    other = next(k for k in kinds if k != name)
    message = (f"collections.{name}.kinds: got {kinds!r}; a built-in collection takes its own kind only ({name}); "
               f"accepted: [{name}] or null (leave kinds out); for tensors of another kind, name a collection of your "
               f"own: collections: {{my_{other}: {{kinds: [{other}], include: [.*], reductions: [...]}}}}")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config({"collections": {name: {"kinds": kinds}}})
    with pytest.raises(ConfigError, match=re.escape(message)):
        Collection(name, kinds=kinds, reduction=ReductionConfig(reductions=["l2"]))


def test_a_built_in_collection_keeps_its_kind_when_it_states_it_or_null() -> None:
    for kinds in (["weights"], "weights", None):
        assert load_config({"collections": {"weights": {"kinds": kinds}}}).collections["weights"].kinds == ("weights",)
    assert Collection("weights", kinds=None).kinds == ("weights",)
    # a custom collection's kinds: null is still any kind
    assert load_config({"collections": {"mine": {"include": [".*"], "kinds": None, "reductions": ["l2"]}}}
                       ).collections["mine"].kinds is None


# ------------------------------------------------------------------------------ 8: 010 is 10
def test_zero_padded_integers_are_decimal(tmp_path: Path) -> None:
    path = tmp_path / "octal.yaml"
    path.write_text("save: {interval: 010, steps: [010, 020, 09, 0_10]}\n")
    save = load_config(path).save
    assert save.interval == 10 and save.steps == (9, 10, 20)
    # YAML 1.2's octal, hexadecimal and binary forms keep their meaning; 0 is 0
    assert tripwire._config.load_yaml("[0o10, 0x10, 0b10, 0, -0, 00, -007, +010, 1e3, '010']") == \
        [8, 16, 2, 0, 0, 0, -7, 10, 1000.0, "010"]
    with pytest.raises(ConfigError, match=r"save\.steps\[0\]: got -7; accepted: an integer >= 0"):
        load_config({"save": {"steps": tripwire._config.load_yaml("[-007]")}})


# ----------------------------------------------------------------------- 10: nothing recorded
@pytest.mark.parametrize("collections", [{}, []], ids=["mapping", "list"])
def test_a_config_that_captures_nothing_at_all_is_refused(collections: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"collections: got \{\}|collections: got \[\]"):
        load_config({"collections": collections})
    with pytest.raises(ConfigError, match=r": the run would record nothing at all \(no collection, and no rule to "
                                          r"add the ones it reads\); accepted: at least one collection \(the "
                                          r"default, null: losses, metrics\) or a rule"):
        tripwire.Session({"collections": collections}, out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    # with a rule, the rule's collections are recorded; a keyword override is applied first
    assert load_config({"collections": collections, "rules": ["exploding_tensor"]}).collections == {}
    assert load_config({"collections": collections}, rules=["exploding_tensor"]).rules


def test_the_same_action_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"actions\[1\]: got 'log', listed already \(actions\[0\]\); an action "
                                          r"runs once per finding: keep one"):
        load_config({"actions": ["log", "log"]})
    with pytest.raises(ConfigError, match=r"rules\[0\]\.actions\[2\]: got \{'name': 'log', 'level': 'error'\}, "
                                          r"listed already \(rules\[0\]\.actions\[0\]\)"):
        load_config({"rules": [{"name": "exploding_tensor",
                                "actions": [{"log": {"level": "error"}}, "record", {"name": "log", "level": "error"}]}]})
    # two of one name with other parameters are two actions
    topic = "arn:aws:sns:us-east-1:123456789012:"
    assert len(load_config({"actions": [{"notify": {"topic_arn": topic + "a"}}, {"notify": {"topic_arn": topic + "b"}},
                                        "log", {"log": {"level": "error"}}]}).actions) == 4


def test_duplicate_steps_reductions_and_ranks_are_one_each() -> None:
    config = load_config({"save": {"steps": [3, 3, 1]}, "writer": {"ranks": [0, 0, 1]},
                          "collections": {"weights": {"reductions": ["l2", "l2", "mean"]}}})
    assert config.save.steps == (1, 3)
    assert config.writer.ranks == (0, 1)
    assert config.collections["weights"].reduction.reductions == ("l2", "mean")


def test_one_threshold_written_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"collections\.weights\.reductions\[1\]: 'fraction_gt:0\.50' is "
                                          r"'fraction_gt:0\.5' again \(reductions\[0\]\), the same threshold written "
                                          r"another way; accepted: each reduction once"):
        load_config({"collections": {"weights": {"reductions": ["fraction_gt:0.5", "fraction_gt:0.50"]}}})
    with pytest.raises(ConfigError, match=r"reductions\[2\]: 'fraction_lt:1e-1' is 'fraction_lt:0\.1' again"):
        ReductionConfig(reductions=["l2", "fraction_lt:0.1", "fraction_lt:1e-1"])


# -------------------------------------------------------------------------- 11: x- keys
def test_top_level_x_keys_hold_anchors_and_are_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_text("x-common: &common {reductions: [l2, mean]}\n"
                    "x-notes: shared by the team\n"
                    "collections:\n  weights: *common\n  gradients: {<<: *common, include: [fc]}\n")
    config = load_config(path)
    assert config.collections["weights"].reduction.reductions == ("l2", "mean")
    assert config.collections["gradients"].include == ("fc",)
    assert "x-common" not in config.to_dict()
    # other unknown keys are still errors
    with pytest.raises(ConfigError, match=r"^_defaults: unknown key '_defaults'.*top-level keys that start with "
                                          r"'x-' are ignored"):
        load_config({"_defaults": {}})


def test_a_utf32_config_with_its_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Trial 41a: the not-UTF-8 error's "accepted" left UTF-32 out, which config.md says is read."""
    path = tmp_path / "u32.yaml"
    path.write_bytes("save: {interval: 3}\nname: café\n".encode("utf-32"))  # (with its byte-order mark)
    config = load_config(path)
    assert (config.save.interval, config.name) == (3, "café")
