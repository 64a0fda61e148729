"""Typed configuration: when to save (SaveConfig), what to keep (ReductionConfig), which tensors
(Collection), and the whole run (Config, ``load_config``).

All classes are frozen dataclasses with ``from_dict``/``to_dict`` and pure predicates. Errors are
:class:`~tripwire.ConfigError` (a ``ValueError``) naming the key path, the value and what is accepted.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ._errors import ConfigError
from ._validate import (
    Hint,
    check_arguments,
    check_bool,
    check_float,
    check_int,
    check_keys,
    check_mapping,
    check_str,
    check_str_list,
    checked_keywords,
    did_you_mean,
    import_failure,
    import_user_module,
    join_path,
    keyword_parameters,
)

logger = logging.getLogger("tripwire")

MODES: tuple[str, ...] = ("train", "eval", "test", "predict")
"""Training modes. ``eval`` is validation; steps are counted per mode."""


def mode_guess(mode: Any) -> str:
    """The "did you mean" for a name that is none of :data:`MODES`: ``"; did you mean 'eval'?
    (validation is mode 'eval')"`` for ``validation``, ``val``, ``valid`` in any case (Keras's and
    Lightning's name of it; trial 32a F5: ``save.modes.validation`` listed the modes without it), the
    mode a name in another case or after an enum's prefix is (``TRAIN``, ``ModeKeys.EVAL``), else
    :func:`did_you_mean`'s among the modes (``""`` for none)."""
    lower = str(mode).lower().rpartition(".")[2]
    if lower in MODES:
        return f"; did you mean {lower!r}?"
    if lower.startswith("val"):
        return "; did you mean 'eval'? (validation is mode 'eval')"
    return did_you_mean(str(mode), MODES)


BASIC_REDUCTIONS: tuple[str, ...] = (
    "min",
    "max",
    "mean",
    "std",
    "variance",
    "sum",
    "l1",
    "l2",
    "abs_min",
    "abs_max",
    "abs_mean",
    "abs_std",
    "abs_variance",
    "abs_sum",
    "abs_l1",
    "abs_l2",
    "zero_fraction",
    "positive_fraction",
    "nonfinite_count",
    "numel",
)
"""Reductions that map a tensor to one float."""

PARAMETRIC_REDUCTIONS: tuple[str, ...] = ("fraction_gt", "fraction_lt", "fraction_abs_gt")
"""Reductions written ``NAME:THRESHOLD`` (for example ``fraction_abs_gt:9.5``): the fraction of
elements above/below the threshold."""

_PARAM_RE = re.compile(r"^(fraction_gt|fraction_lt|fraction_abs_gt):([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$")


_ALIASES: dict[str, str] = {"abs_l1": "l1", "abs_l2": "l2"}
"""Reductions that are another one under the name they are asked by (``abs_l1`` is ``l1``): computed
as that one, stored under their own name."""


def parse_reduction(name: str) -> tuple[str, float | None]:
    """Split ``fraction_abs_gt:9.5`` into ``("fraction_abs_gt", 9.5)``; plain names give ``(name, None)``,
    an alias its reduction's (``abs_l2`` gives ``("l2", None)``)."""
    m = _PARAM_RE.match(name)
    if m:
        return m.group(1), float(m.group(2))
    return _ALIASES.get(name, name), None


def is_valid_reduction(name: str) -> bool:
    return name in BASIC_REDUCTIONS or _PARAM_RE.match(name) is not None


def _check_reduction(name: Any, path: str) -> str:
    name = check_str(name, path)
    if not is_valid_reduction(name):
        base, sep, thr = name.partition(":")
        if sep and base.strip() in PARAMETRIC_REDUCTIONS:
            raise ConfigError(f"{path}: reduction {name!r}: {_threshold_problem(base.strip(), thr)}")
        if not sep and name in PARAMETRIC_REDUCTIONS:  # (it said: did you mean 'zero_fraction'?)
            raise ConfigError(f"{path}: reduction {name!r} needs a threshold; accepted: {name}:THRESHOLD with a "
                              f"number, e.g. {name}:0.5")
        accepted = ", ".join(BASIC_REDUCTIONS + ("histogram", "raw")) + ", " + ", ".join(
            f"{p}:THRESHOLD" for p in PARAMETRIC_REDUCTIONS
        )
        meant = _parametric_meant(base)
        smdebug = _SMDEBUG_REDUCTIONS.get(name.strip().lower()) if not sep else None
        if smdebug is not None:  # (trial 31e: isnan was "did you mean 'min'?", abs_prod "'abs_std'?")
            guess = smdebug
        elif meant is not None:  # (trial 27d: abs_fraction_gt:0.1 was "did you mean 'zero_fraction'?")
            guess = f"; did you mean {meant + sep + thr if sep else meant + ':THRESHOLD'!r}?"
        elif sep:
            close = difflib.get_close_matches(base, PARAMETRIC_REDUCTIONS, n=1, cutoff=0.6)
            guess = f"; did you mean {close[0] + ':' + thr!r}?" if close else ""
        else:
            guess = did_you_mean(name, BASIC_REDUCTIONS + ('histogram', 'raw'))
        note = ""
        if _abs_tokens(base) == ("fraction_lt", True):
            note = (" (there is no fraction_abs_lt: the share of elements with |x| <= T is 1 - fraction_abs_gt:T)")
        raise ConfigError(f"{path}: unknown reduction {name!r}{guess}{note}; accepted: {accepted}")
    return name


#: smdebug's reductions (and a median) that are no tripwire reduction, and what their error says
#: instead of a "did you mean" by spelling (trial 31e: isnan and isinf got "did you mean 'min'?",
#: abs_prod "'abs_std'?", median "'mean'?")
_SMDEBUG_REDUCTIONS: dict[str, str] = {
    **{name: (f"; did you mean 'nonfinite_count'? (smdebug's {name}: tripwire counts the NaN and infinite elements "
              f"together, nonfinite_count; it has no count of NaN or of infinities alone)") for name in ("isnan", "isinf")},
    **{name: (f" (smdebug's {name}: tripwire has no product reduction; keep the whole tensor with raw and take "
              f"numpy's prod of run.tensor(name).value(step))") for name in ("prod", "abs_prod")},
    "median": (" (there is no median reduction: min, max, mean and histogram are the nearest; keep the whole tensor "
               "with raw and take numpy's median of run.tensor(name).value(step))"),
}


def _abs_tokens(base: str) -> tuple[str, bool]:
    """``base`` without its ``abs`` word, and whether it had one (``abs_fraction_gt``: ``("fraction_gt",
    True)``)."""
    words = base.strip().lower().replace("-", "_").split("_")
    return "_".join(w for w in words if w != "abs"), "abs" in words


def _parametric_meant(base: str) -> str | None:
    """The parametric reduction a misspelled name of one means, where its words say so
    (``abs_fraction_gt``, ``fraction_gt_abs``: ``fraction_abs_gt``), else None."""
    rest, has_abs = _abs_tokens(base)
    if has_abs and rest == "fraction_gt":
        return "fraction_abs_gt"
    if not has_abs and rest in PARAMETRIC_REDUCTIONS and rest != base:
        return rest
    return None


def _threshold_problem(base: str, thr: str) -> str:
    """What is wrong with the threshold ``thr`` of ``base:thr`` (a name ``_PARAM_RE`` refused), and
    what is accepted (trial 27d: ``fraction_gt:inf`` was "not a number")."""
    accepted = f"accepted: {base}:THRESHOLD with a finite number, e.g. {base}:0.5"
    if thr.strip() != thr and _PARAM_RE.match(f"{base}:{thr.strip()}"):
        return f"threshold {thr!r} has spaces around it; accepted: {base}:{thr.strip()}, without spaces"
    try:
        number = float(thr)
    except ValueError:
        return f"threshold {thr!r} is not a number; {accepted}"
    if not math.isfinite(number):
        return f"threshold {thr!r} is not finite (the fraction would be 0 or 1 whatever the tensor); {accepted}"
    return f"threshold {thr!r} is not written as a plain number; {accepted}"


def _check_one_threshold_once(names: Sequence[str], path: str) -> None:
    """Refuse one parametric reduction written twice with the same threshold (``fraction_gt:0.5`` and
    ``fraction_gt:0.50``): each name is a series of its own, the same values stored twice, and one of the
    two is most likely a typo of another threshold (trial 29d). ``names``: checked valid reductions; a
    name written twice alike is one reduction (kept once)."""
    first: dict[tuple[str, float], int] = {}
    for j, name in enumerate(names):
        base, threshold = parse_reduction(name) if _PARAM_RE.match(name) else (name, None)
        if threshold is None:
            continue
        i = first.setdefault((base, threshold), j)
        if i != j and names[i] != name:
            raise ConfigError(f"{path}[{j}]: {name!r} is {names[i]!r} again (reductions[{i}]), the same threshold "
                              f"written another way; accepted: each reduction once")


def _reduction_names(items: Any, path: str) -> tuple[str, ...]:
    """A ``reductions`` list as strings (one string: a list of one), with a hint for a mapping of
    one key in it: YAML reads ``[l2, fraction_gt: 0.5]``, a space after the colon, as the string
    ``l2`` and the mapping ``{fraction_gt: 0.5}`` (trial 27d: "accepted: a string" did not say so)."""
    if isinstance(items, (list, tuple)):
        for i, item in enumerate(items):
            if isinstance(item, Mapping) and len(item) == 1:
                (key, value), = item.items()
                if isinstance(key, str) and not isinstance(value, (Mapping, list, tuple)):
                    meant = f"{key}:{value}"
                    raise ConfigError(
                        f"{path}[{i}]: got {dict(item)!r} (a mapping; in YAML, '{key}: {value}' in a list, a space "
                        f"after the colon, is one); accepted: a string, here {meant!r}: in YAML without the space "
                        f"({meant}) or quoted ('{meant}')")
    return check_str_list(items, path)


# ------------------------------------------------------------------------------- smdebug's names
def _names(value: Any) -> list[str] | None:
    """``value`` as a list of names (one string: a list of one), or None when it is not one."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _reduction_hint(key: str, value: Any, python: bool, inside: str | None) -> str | None:
    """What smdebug's ReductionConfig argument ``key`` is in tripwire: reductions named in one
    ``reductions`` list (``abs_reductions=["max"]`` is ``reductions=["abs_max"]``, ``norms=["l2"]`` is
    ``reductions=["l2"]``) and ``raw`` for ``save_raw_tensor``. ``inside``: the argument of a
    :class:`Collection` the ReductionConfig goes in (``reduction``), None for the ReductionConfig itself
    or a YAML mapping."""
    def say(reds: list[str] | None, raw: bool = False) -> str:
        if python:
            args = ", ".join(([f"reductions={reds!r}"] if reds else []) + (["raw=True"] if raw else []))
            text = f"ReductionConfig({args})" if inside else args
            return f"{inside}={text}" if inside else text
        return f"reductions: [{', '.join((reds or []) + (['raw'] if raw else []))}]"

    names = _names(value)
    # (trial 31e: abs_reductions=["prod"] was told reductions=["abs_prod"], which is no reduction either)
    missing: list[str] = []
    if key in ("abs_reductions", "abs_norms"):
        got = [f"abs_{n}" for n in names] if names else None
        missing = [n for n in got or () if not is_valid_reduction(n)]
        example = say([n for n in got or () if n not in missing] or ["abs_max"])
        what = "tripwire lists every reduction in one reductions list, the abs_ ones by their abs_ name"
    elif key == "norms":
        missing = [n for n in names or () if not is_valid_reduction(n)]
        example = say([n for n in names or () if n not in missing] or ["l2"])
        what = "tripwire lists l1 and l2 in one reductions list with the others"
    elif key == "save_raw_tensor":
        if value is False:
            return " (smdebug's save_raw_tensor; tripwire keeps no raw tensor unless asked: leave it out)"
        example = say(None, raw=True)
        what = "tripwire's raw keeps the whole tensor" + ("" if python else ", listed with the other reductions")
    else:
        return None
    if missing:
        what += f"; tripwire has no reduction {', '.join(map(repr, missing))}"
    return f"; did you mean {example}? (smdebug's {key}: {what})"


def _smdebug_reductions(value: Any) -> list[str] | None:
    """The reductions an smdebug ReductionConfig (the object, or a mapping of its arguments) names, in
    tripwire's one list: ``reductions``, ``abs_reductions`` and ``abs_norms`` by their ``abs_`` names,
    ``norms``, and ``raw`` for ``save_raw_tensor``; None when it names none (or is something else)."""
    def get(key: str) -> Any:
        return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)

    out: list[str] = []
    for key, prefix in (("reductions", ""), ("abs_reductions", "abs_"), ("norms", ""), ("abs_norms", "abs_")):
        names = _names(get(key))
        out += [f"{prefix}{n}" for n in names or ()]
    if get("save_raw_tensor") is True:
        out.append("raw")
    return list(dict.fromkeys(out)) or None


def _reduction_config_hint(value: Any, python: bool) -> str:
    """What smdebug's ``reduction_config`` (a Hook's keyword, ``python``, or the YAML's top-level key)
    is in tripwire: the reductions it names, for each collection (trial 25e: the hint added an abs_max
    never asked for, and named gradients alone, where smdebug's applies to every collection)."""
    reds = _smdebug_reductions(value)
    if python:
        shown = repr(reds) if reds else "[...]"
        return (f"; did you mean collections={{'weights': {{'reductions': {shown}}}, 'gradients': {{'reductions': "
                f"{shown}}}, ...}}? (smdebug's reduction_config is the reductions of every collection; tripwire's are "
                f"each collection's own: an entry for each collection you save in collections= (a mapping), or "
                f"Collection(name, reduction=ReductionConfig(...)) objects)")
    shown = f"[{', '.join(reds)}]" if reds else "[...]"
    return (f"; did you mean collections: {{weights: {{reductions: {shown}}}, gradients: {{reductions: "
            f"{shown}}}, ...}}? (smdebug's reduction_config is the reductions of every collection; tripwire's "
            f"are each collection's own: a reductions list under each collection you save)")


def _hook_hint(key: str, value: Any = None) -> str | None:
    """What an smdebug ``Hook`` argument other than ``save_config`` is among a Session's or a
    callback's keywords (see docs/config.md, "Coming from smdebug")."""
    if key == "reduction_config":
        return _reduction_config_hint(value, python=True)
    if key == "mode_save_configs":  # (trial 25e: it was "did you mean 'config'?", and nothing from load_config)
        return ("; did you mean save={'modes': {...}}? (smdebug's mode_save_configs is tripwire's save modes: "
                "save={'modes': {'eval': {'interval': 1}}}, or save=SaveConfig(modes={'eval': ModeSaveConfig(interval=1)}))")
    if key in ("include_regex", "tensor_names"):
        return (f"; did you mean collections=[Collection('mine', include=[...], reduction=ReductionConfig(...))]? "
                f"(smdebug's {key} saves the tensors it matches; tripwire's include= of a custom collection: regular "
                f"expressions matched with re.search, given with include_collections= for the built-in ones)")
    if key == "save_all":
        return ("; did you mean include_collections=[...]? (smdebug's save_all saves every tensor; tripwire saves the "
                "collections named: weights, biases, gradients, activations, ...)")
    if key == "include_workers":
        return ("; did you mean writer={'ranks': [0]}? (smdebug's include_workers='one' is tripwire's writer.ranks "
                "[0]; 'all', the default, writes every rank)")
    return None


def _config_smdebug_hint(key: str, python: bool) -> str | None:
    """What an smdebug ``Hook`` argument written at the top level of a config (the YAML, or
    ``Config(...)``) is in tripwire (trial 27d: ``save_all: true`` in the YAML was "did you mean
    'save'?", while the keyword ``save_all=`` got its answer)."""
    if python:
        collections, writer = "collections=[...]", "writer=WriterConfig(ranks=[0])"
        mine = "collections={'mine': Collection('mine', include=[...], reduction=ReductionConfig(...))}"
        save = "save=SaveConfig(modes={'eval': ModeSaveConfig(interval=1)})"
    else:
        collections, writer = "collections: [weights, biases, gradients, ...]", "writer: {ranks: [0]}"
        mine = "collections: {mine: {include: [...], reductions: [...]}}"
        save = "save: {modes: {eval: {interval: 1}}}"
    if key == "save_all":
        return (f"; did you mean {collections}? (smdebug's save_all saves every tensor; tripwire saves the "
                f"collections listed: weights, biases, gradients, activations, ...)")
    if key == "include_workers":
        return (f"; did you mean {writer}? (smdebug's include_workers: one is tripwire's writer.ranks [0]; all, the "
                f"default, writes every rank)")
    if key in ("include_regex", "tensor_names"):
        return (f"; did you mean {mine}? (smdebug's {key} saves the tensors it matches; tripwire's include of a "
                f"custom collection: regular expressions matched with re.search)")
    if key == "mode_save_configs":
        return f"; did you mean {save}? (smdebug's mode_save_configs is tripwire's save modes)"
    if key == "save_config":
        return "; did you mean 'save'? (smdebug's save_config is tripwire's save)"
    if key == "include_collections" and not python:
        return (f"; did you mean {collections}? (include_collections is a keyword argument, which adds to the "
                f"collections; in the file, list them all under collections)")
    return None


def _smdebug_hint(owner: str, python: bool) -> Hint:
    """The "did you mean" for an smdebug name given to a tripwire config class (``python``) or
    written in its YAML section (trial 20b: an smdebug user's ``SaveConfig(save_interval=5)``,
    ``include_regex``, ``abs_reductions=[...]`` got Python's bare TypeError, or a message that did not
    name the key). ``owner``: ``save``, ``mode``, ``reduction``, ``collection``, ``config`` or
    ``hook`` (the keyword arguments of a Session, a callback or ``load_config``, where an smdebug
    ``Hook``'s go: trial 25d, ``save_config=`` was "did you mean 'config'?")."""
    renamed: dict[str, str] = {}
    if owner == "hook":
        renamed = {"save_config": "save"}
    elif owner in ("save", "mode"):
        renamed = {"save_interval": "interval", "save_steps": "steps"}
        if owner == "save":
            renamed["mode_save_configs"] = "modes"
    elif owner == "collection":
        renamed = {"include_regex": "include", "tensor_names": "include", "save_config": "save",
                   "reduction_config": "reduction" if python else "reductions"}

    def hint(key: str, value: Any) -> str | None:
        if owner == "save" and key == "enabled":  # (trial 29d: no word of where it goes)
            if python:
                return (f"; did you mean modes={{'predict': ModeSaveConfig(enabled={value!r})}}? ('enabled' is a key "
                        f"of one mode, to save nothing in that mode)")
            return (f"; 'enabled' is a key of one mode: save: {{modes: {{predict: {{enabled: {_flow(value)}}}}}}} (to "
                    f"save nothing in that mode)")
        if key in renamed:
            new = renamed[key]
            note = ", regular expressions matched with re.search (^name$ for one name)" if new == "include" else ""
            return f"; did you mean {new!r}? (smdebug's {key} is tripwire's {new}{note})"
        if owner == "hook":
            return _hook_hint(key, value)
        if owner == "reduction":
            return _reduction_hint(key, value, python, None)
        if owner == "collection":
            if python and key == "reductions":
                return f"; did you mean reduction=ReductionConfig(reductions={_names(value) or ['l2']!r})?"
            if python and key in ("histogram_bins", "histogram_range"):
                # (trial 35h: the YAML's collection keys; in Python they are ReductionConfig's)
                return (f"; did you mean reduction=ReductionConfig(reductions=['histogram'], {key}={value!r})? (a "
                        f"collection's {key} in YAML is an argument of its ReductionConfig in Python)")
            return _reduction_hint(key, value, python, "reduction" if python else None)
        if owner == "config" and not python and key == "reduction_config":
            # (trial 25h: the keyword form and a collection's YAML named each collection's reductions; the
            # top level of the YAML said only "unknown key")
            return _reduction_config_hint(value, python=False)
        if owner == "config":
            said = _config_smdebug_hint(key, python)
            if said is not None:
                return said
        if owner == "config" and not python and (not key[:1].isalpha() or key[:2].lower() in ("x_", "x.")
                                                 or key.startswith("X-")):
            # (a place for shared fragments, trial 29d: _defaults: &d {...} was refused with no way out)
            stem = key.lstrip("_.").removeprefix("x_").removeprefix("x.").removeprefix("X-") or "common"
            return (f"{did_you_mean(key, _TOP_KEYS)}; top-level keys that start with {EXTENSION_PREFIX!r} are "
                    f"ignored, a place for YAML anchors ({EXTENSION_PREFIX}{stem}: &{stem} {{...}})")
        if owner == "config" and key in ("interval", "steps", "modes"):
            # (trial 29d: a top-level interval: 5 was "did you mean 'writer'?")
            if python:
                return f"; did you mean save=SaveConfig({key}={value!r})? ({key} is a key of the save schedule)"
            return f"; did you mean save: {{{key}: {_flow(value)}}}? ({key} goes under save)"
        if owner == "config" and key in ("save_interval", "save_steps", "start_step", "end_step"):
            target = {"save_interval": "interval", "save_steps": "steps"}.get(key, key)
            if python:
                return (f"; did you mean save=SaveConfig({target}={value!r})? (or the keyword override "
                        f"tripwire.load_config(..., {key}={value!r}))")
            return f"; did you mean save: {{{target}: {value!r}}}? ({key} is a keyword override; in the file it goes under save)"
        return None

    return hint


_C = TypeVar("_C", bound=type)


def _checked_arguments(owner: str) -> Any:
    """Class decorator for a config dataclass built by hand: an unknown keyword argument is an
    :class:`~tripwire._validate.UnknownArgumentError` (a ConfigError and a TypeError) naming the
    class, the argument and the parameters, with a "did you mean" that knows smdebug's names."""
    return checked_keywords(hint=_smdebug_hint(owner, python=True))


def _tracks_given(cls: _C) -> _C:
    """Class decorator (outermost): an instance remembers the names of the arguments it was given
    (``_given``, positional ones too), so that what it was not given can be told from a default."""
    init = cls.__init__
    names = tuple(f.name for f in dataclasses.fields(cls))

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "_given", frozenset(names[:len(args)]) | frozenset(kwargs))
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    return cls


# --------------------------------------------------------------------------------------------- save
@_tracks_given
@_checked_arguments('mode')
@dataclass(frozen=True)
class ModeSaveConfig:
    """When to save in one mode.

    A step ``s`` is saved when ``s in steps`` or
    ``start_step <= s < end_step and s % interval == 0`` (``end_step=None``: no end).
    ``end_step=0`` ends the interval's range before any step, whatever ``start_step`` is: the
    listed ``steps`` only (smdebug's ``save_steps``; trial 31e: an ``end_step: 0`` under an inherited
    ``start_step: 5`` was refused). Another ``end_step`` below ``start_step`` is an error.
    ``enabled=False`` saves nothing in this mode.

    As a per-mode override in ``SaveConfig(modes=...)`` it states the arguments it was given, as the
    mapping of them does: the others follow the top level (``ModeSaveConfig(start_step=2)`` under
    ``SaveConfig(interval=4)`` saves every 4 steps from step 2, as ``{"start_step": 2}`` does).
    """

    interval: int = 10
    start_step: int = 0
    end_step: int | None = None
    steps: tuple[int, ...] = ()
    enabled: bool = True

    def __post_init__(self) -> None:
        interval = _plain_int(self.interval)
        if interval is None or interval == 0:  # (trial 20b: smdebug's "only save_steps")
            raise ConfigError(f"interval: got {self.interval!r}; accepted: an integer >= 1 (steps are saved in addition "
                              f"to the interval's; to save only the listed steps, give end_step=0 with them: "
                              f"SaveConfig(steps=[3, 7], end_step=0))")
        # numpy's integers are integers; the values are stored as int (trial 23l: np.int64(5) was
        # "got np.int64(5); accepted: an integer", enabled='no' was taken)
        object.__setattr__(self, "interval", check_int(interval, "interval", minimum=1))
        start = check_int(_plain_int(self.start_step), "start_step", minimum=0)
        object.__setattr__(self, "start_step", start)
        end = check_int(_plain_int(self.end_step), "end_step", minimum=0, allow_none=True)
        if end is not None and end != 0 and end < start:  # type: ignore[operator]
            raise ConfigError(f"end_step: got {end!r}; {_end_step_accepted(start)}")
        object.__setattr__(self, "end_step", end)
        object.__setattr__(self, "steps", _steps_arg(self.steps, "steps"))
        object.__setattr__(self, "enabled", check_bool(self.enabled, "enabled"))
        object.__setattr__(self, "_stepset", frozenset(self.steps))

    def in_range(self, step: int) -> bool:
        """Pure: is ``step`` inside the saved range (``start_step <= step < end_step`` or listed in
        ``steps``), whatever the interval? (Where ``every_step`` collections keep every value.)"""
        if not self.enabled:
            return False
        if step in self._stepset:  # type: ignore[attr-defined]
            return True
        return self.start_step <= step and (self.end_step is None or step < self.end_step)

    def should_save(self, step: int) -> bool:
        """Pure predicate: is ``step`` a save step? ``step``: an integer >= 0."""
        if type(step) is not int or step < 0:
            step = _step_arg(step)
        if not self.enabled:
            return False
        if step in self._stepset:  # type: ignore[attr-defined]
            return True
        if step < self.start_step or (self.end_step is not None and step >= self.end_step):
            return False
        return step % self.interval == 0

    def next_save(self, step: int) -> int | None:
        """Pure: the first save step ``s >= step`` (:meth:`should_save`), or None when none comes."""
        if type(step) is not int or step < 0:
            step = _step_arg(step)
        if not self.enabled:
            return None
        found = [s for s in self.steps if s >= step]
        lo = max(step, self.start_step)
        first = -(-lo // self.interval) * self.interval  # (the interval's first multiple >= lo)
        if self.end_step is None or first < self.end_step:
            found.append(first)
        return min(found, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "steps": list(self.steps),
            "enabled": self.enabled,
        }


_MODE_KEYS = ("interval", "start_step", "end_step", "steps", "enabled")


def _end_step_accepted(start: int) -> str:
    """What an ``end_step`` below ``start_step`` (``start``) is answered: what is accepted."""
    return (f"accepted: null or an integer >= start_step ({start}), or 0 (no interval step: the listed steps "
            f"only, whatever start_step)")


_STEPS_ACCEPTED = "a list of integers >= 0, or one integer >= 0 (a list of one)"


def _is_int(value: Any) -> bool:
    """An integer, numpy's too, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _plain_int(value: Any) -> Any:
    """``value`` as a Python int when it is an integer of another type (numpy's), else unchanged
    (for check_int, which names it when it is no integer)."""
    return int(value) if _is_int(value) and type(value) is not int else value


def _steps_arg(steps: Any, path: str) -> tuple[int, ...]:
    """The ``steps`` of a SaveConfig or ModeSaveConfig, sorted and without duplicates: a list (any
    iterable of integers: a tuple, set, range or numpy array) or one integer, a list of one, as in
    YAML (trial 23l: ``SaveConfig(steps=3)`` raised a bare TypeError, 'int' object is not iterable,
    and ``steps="13"`` was read digit by digit). ``path``: where errors say it is."""
    if _is_int(steps):
        steps = [steps]
    items: list[Any] | None = None
    if not isinstance(steps, (str, bytes, Mapping)):
        try:
            items = list(steps)
        except TypeError:
            items = None
    if items is None:
        raise ConfigError(f"{path}: got {steps!r}; accepted: {_STEPS_ACCEPTED}")
    return tuple(sorted({check_int(_plain_int(s), f"{path}[{i}]", minimum=0) for i, s in enumerate(items)}))  # type: ignore[type-var]


#: The largest step a run holds (its records keep steps as 64-bit signed integers).
MAX_STEP = 2**63 - 1


def _step_arg(step: Any) -> int:
    """``should_save``'s step: an integer >= 0 (numpy's too), else an error naming it (trial 22a:
    '3' raised a bare TypeError from a comparison, 1.5 and -1 were silently not save steps)."""
    if isinstance(step, numbers.Integral) and not isinstance(step, bool) and step >= 0:
        return int(step)
    raise ConfigError(f"step: got {step!r}; accepted: an integer >= 0 (the step, counted in its mode from 0)")


def _mode_from_dict(data: Mapping[str, Any], path: str, base: ModeSaveConfig, origin: str | None = None) -> ModeSaveConfig:
    """The schedule of the mapping ``data`` (a ``save`` section or one of its modes, at ``path``),
    what it does not state taken from ``base``. ``origin``: where ``base``'s ``start_step`` was
    written (``save``, ``save.modes.eval``), named where an ``end_step`` that ``data`` states falls
    before that inherited start (trial 31e: the error did not say the start was inherited, nor
    what to write); None where ``base`` is the defaults."""
    check_mapping(data, path)
    check_keys(data, _MODE_KEYS, path, _smdebug_hint("mode", python=False))
    kwargs: dict[str, Any] = base.to_dict()
    if "interval" in data:
        if data["interval"] is None or data["interval"] == 0:  # smdebug's "no interval, only save_steps" (trial 20b)
            raise ConfigError(f"{join_path(path, 'interval')}: got {data['interval']!r}; accepted: an integer >= 1 "
                              f"(steps are saved in addition to the interval's; to save only the listed steps, "
                              f"write end_step: 0 with them: {{steps: [3, 7], end_step: 0}})")
        kwargs["interval"] = check_int(data["interval"], join_path(path, "interval"), minimum=1)
    if "start_step" in data:
        kwargs["start_step"] = check_int(data["start_step"], join_path(path, "start_step"), minimum=0)
    if "end_step" in data:
        kwargs["end_step"] = check_int(data["end_step"], join_path(path, "end_step"), minimum=0, allow_none=True)
    if "steps" in data:
        # a list, one int, or (a keyword override: save_steps=) any iterable of integers, a numpy array
        # too, as SaveConfig(steps=...) takes (trial 24f: Session(save_steps=np.array([1, 2])) was refused)
        kwargs["steps"] = _steps_arg(data["steps"], join_path(path, "steps"))
    if "enabled" in data:
        kwargs["enabled"] = check_bool(data["enabled"], join_path(path, "enabled"))
    end, start = kwargs["end_step"], kwargs["start_step"]
    if ("end_step" in data and "start_step" not in data and origin is not None and end is not None
            and end != 0 and end < start):
        raise ConfigError(
            f"{join_path(path, 'end_step')}: got {end!r}; {_end_step_accepted(start)}; the start_step {start} is "
            f"inherited from {origin}: state start_step in {path} to start this range elsewhere "
            f"({path}: {{start_step: 0, end_step: {end}}})")
    try:
        out = ModeSaveConfig(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{path}.{exc}") from None
    object.__setattr__(out, "_given", None)  # (resolved: every key holds its value, given or inherited)
    return out


_SAVE_TOP = ("interval", "start_step", "end_step", "steps")


@_tracks_given
@_checked_arguments('save')
@dataclass(frozen=True)
class SaveConfig:
    """When to capture, with optional per-mode overrides.

    ``should_save(mode, step)`` is true when the mode's :class:`ModeSaveConfig` says so; a mode without
    an override uses the top-level ``interval``, ``start_step``, ``end_step`` and ``steps``.
    Defaults: ``interval=10``, ``start_step=0``, ``end_step=None``, ``steps=()``.

    A SaveConfig *states* the top-level keys it was given (``SaveConfig(interval=5)`` states
    ``interval``; :meth:`from_dict`: the keys of the mapping) and, of each per-mode override, the keys
    of its mapping (a :class:`ModeSaveConfig`: the arguments it was given). What it
    does not state follows the level above where that matters, as in YAML: a collection's
    ``save=SaveConfig(interval=5)`` takes the rest from the run's top-level ``save``, its ``modes``
    too, and keyword overrides (``save_interval=``, ``end_step=``) apply to a mode that does not
    state the key. :meth:`to_dict` writes what it states.
    """

    interval: int = 10
    start_step: int = 0
    end_step: int | None = None
    steps: tuple[int, ...] = ()
    modes: Mapping[str, ModeSaveConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # steps checked here, named as save.steps (trial 23l: steps=3 was a bare TypeError)
        default = ModeSaveConfig(self.interval, self.start_step, self.end_step, _steps_arg(self.steps, "save.steps"))
        for key in ("interval", "start_step", "end_step", "steps"):  # (as ModeSaveConfig stores them: ints)
            object.__setattr__(self, key, getattr(default, key))
        if self.modes is None:  # (YAML's modes: null, no per-mode overrides)
            object.__setattr__(self, "modes", {})
        if not isinstance(self.modes, Mapping):
            raise ConfigError(f"save.modes: got {self.modes!r}; accepted: a mapping of modes ({', '.join(MODES)}) to a "
                              f"ModeSaveConfig or a mapping of {', '.join(_MODE_KEYS)}")
        check_mapping(self.modes, "save.modes")
        modes: dict[str, ModeSaveConfig] = {}
        stated: dict[str, tuple[str, ...]] = {}
        for mode, spec in self.modes.items():
            if mode not in MODES:
                raise ConfigError(f"save.modes: unknown mode {mode!r}{mode_guess(mode)}; accepted: {', '.join(MODES)}")
            if spec is None:  # (the mode as the top level, as YAML's modes: {eval: null}; trial 32i F14)
                spec = {}
            if isinstance(spec, Mapping):  # the YAML shape (trial 19a: kept as a dict, should_save then raised
                spec_keys = tuple(str(k) for k in spec)
                spec = _mode_from_dict(spec, f"save.modes.{mode}", default, "save")  # AttributeError)
            elif isinstance(spec, ModeSaveConfig) and getattr(spec, "_given", None) is not None:
                # one made by hand states the arguments it was given, as the mapping of them does (trial
                # 35a: ModeSaveConfig(start_step=2) replaced the top level's interval and steps by its own
                # defaults, where {"start_step": 2} kept them); the others follow the top level, also when
                # a keyword override changes it (see _as_written)
                spec_keys = tuple(k for k in _MODE_KEYS if k in spec._given)  # type: ignore[attr-defined]
                spec = _mode_from_dict({k: getattr(spec, k) for k in spec_keys}, f"save.modes.{mode}", default, "save")
            elif isinstance(spec, ModeSaveConfig):
                # one resolved by from_dict (or a SaveConfig before): it states the keys where it differs
                # from the top level
                spec_keys = tuple(k for k in _MODE_KEYS if getattr(spec, k) != getattr(default, k))
            else:
                raise ConfigError(f"save.modes.{mode}: got {spec!r}; accepted: a ModeSaveConfig or a mapping of "
                                  f"{', '.join(_MODE_KEYS)} (None: the mode as the top level)")
            modes[mode] = spec
            stated[mode] = spec_keys
        resolved = {m: modes.get(m, default) for m in MODES}
        object.__setattr__(self, "modes", modes)
        object.__setattr__(self, "_resolved", resolved)
        object.__setattr__(self, "_stated", stated)
        if not hasattr(self, "_given"):  # (made without __init__: every key stated)
            object.__setattr__(self, "_given", frozenset(_SAVE_TOP))

    def for_mode(self, mode: str) -> ModeSaveConfig:
        try:
            return self._resolved[mode]  # type: ignore[attr-defined]
        except KeyError:
            raise ConfigError(f"mode: got {mode!r}{mode_guess(mode)}; accepted: {', '.join(MODES)}") from None

    def should_save(self, mode: str, step: int) -> bool:
        """Pure predicate: is ``step`` (counted in ``mode``, an integer >= 0) a save step?"""
        return self.for_mode(mode).should_save(step)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, path: str = "save", base: SaveConfig | None = None) -> SaveConfig:
        """Build from a mapping; what it does not state is inherited from ``base`` (defaults when
        None): its top-level keys, and its per-mode overrides with the keys stated here on top
        (a collection's ``save: {interval: 3}`` under a top-level ``modes: {predict: {enabled:
        false}}`` saves every 3 steps and nothing in predict); ``data["modes"]`` come last."""
        given = base is not None
        base = base or cls()
        if data is None:
            return base
        if isinstance(data, SaveConfig):  # (trial 19a: save=SaveConfig(...) was "expected a mapping")
            data = data._as_written()
        check_mapping(data, path)
        check_keys(data, _MODE_KEYS[:-1] + ("modes",), path, _smdebug_hint("save", python=False))
        base_top = ModeSaveConfig(base.interval, base.start_step, base.end_step, base.steps)
        stated = {k: v for k, v in data.items() if k != "modes"}
        # where an inherited start_step was written, for an end_step stated here before it (trial
        # 31e): the run's save (``base``, at ``save``), or the mode of it that states its own
        base_stated: Mapping[str, tuple[str, ...]] = getattr(base, "_stated", {})
        origins = {m: f"save.modes.{m}" if "start_step" in base_stated.get(m, _MODE_KEYS) else "save"
                   for m in base.modes} if given else {}
        top = _mode_from_dict(stated, path, base_top, "save" if given else None)
        modes = {mode: _mode_from_dict(stated, path, inherited, origins.get(mode))
                 for mode, inherited in base.modes.items()}
        raw_modes = data.get("modes")
        raw_modes = {} if raw_modes is None else raw_modes  # (null: no per-mode overrides)
        mpath = join_path(path, "modes")
        if not isinstance(raw_modes, Mapping):  # (trial 32i F14: modes: [] was taken, silently, as no modes)
            raise ConfigError(f"{mpath}: got {raw_modes!r:.80} ({type(raw_modes).__name__}); accepted: a mapping of "
                              f"modes ({', '.join(MODES)}) to a mapping of {', '.join(_MODE_KEYS)}, e.g. "
                              f"{{eval: {{interval: 1}}}}, or null for none")
        check_keys(raw_modes, MODES, mpath, lambda key, _value: mode_guess(key) or None)
        for mode, mdata in raw_modes.items():
            origin = path if "start_step" in stated else origins.get(mode, "save" if given else None)
            modes[mode] = _mode_from_dict(mdata or {}, join_path(mpath, mode), modes.get(mode, top), origin)
        out = cls(top.interval, top.start_step, top.end_step, top.steps, modes)
        # it states what ``data`` states: its top-level keys, and its modes' keys (a mode it inherits
        # from ``base`` states nothing of its own)
        object.__setattr__(out, "_given", frozenset(k for k in stated if k in _SAVE_TOP))
        object.__setattr__(out, "_stated", {m: tuple(str(k) for k in (raw_modes.get(m) or {})) if m in raw_modes else ()
                                            for m in modes})
        return out

    def to_dict(self) -> dict[str, Any]:
        """The schedule as the mapping :meth:`from_dict` (and a YAML ``save`` section) reads, with the
        keys it states (see the class): the top-level keys it was given, and of each per-mode override
        the keys it states (trial 27d: every key was written, so that ``save=c.to_dict()`` with
        ``start_step=5`` left a mode at the start step 0 written out where ``save=c`` followed the
        keyword). ``SaveConfig.from_dict(c.to_dict())`` is ``c``, in every use: at the top level, as a
        collection's ``save``, under keyword overrides. ``SaveConfig()`` is ``{}``."""
        given = getattr(self, "_given", _SAVE_TOP)
        out = {k: v for k, v in self._top_dict().items() if k in given}
        if self.modes:
            stated: Mapping[str, tuple[str, ...]] = getattr(self, "_stated", {})
            modes = {m: {k: v for k, v in c.to_dict().items() if k in stated.get(m, _MODE_KEYS)}
                     for m, c in self.modes.items()}
            modes = {m: spec for m, spec in modes.items() if spec}  # (one stating nothing is the top level)
            if modes:
                out["modes"] = modes
        return out

    def _top_dict(self) -> dict[str, Any]:
        """The four top-level keys, stated or not."""
        return {"interval": self.interval, "start_step": self.start_step, "end_step": self.end_step,
                "steps": list(self.steps)}

    def _full_dict(self) -> dict[str, Any]:
        """Every key, stated or not, of the top level and of each per-mode override: the schedule as
        resolved, which states all of it (a collection's in :meth:`Collection.to_dict`)."""
        out = self._top_dict()
        if self.modes:
            out["modes"] = {m: c.to_dict() for m, c in self.modes.items()}
        return out

    def _as_written(self) -> dict[str, Any]:
        """The schedule as it states it (:meth:`to_dict`): what keyword overrides apply over, and what
        a collection's ``save`` inherits the rest of from the run's, so that ``save=SaveConfig(interval=10,
        modes={"eval": {"interval": 1}})`` with ``save_steps=[3]`` saves step 3 in eval too, as the
        same schedule written in YAML does (trial 20b). ``SaveConfig.from_dict(c._as_written()) == c``."""
        return self.to_dict()


# ---------------------------------------------------------------------------------------- reduction
@_checked_arguments('reduction')
@dataclass(frozen=True)
class ReductionConfig:
    """What to keep of a tensor.

    ``reductions``: names from :data:`BASIC_REDUCTIONS` or ``fraction_gt:T``-style parametric ones;
    ``histogram``: keep a histogram with ``histogram_bins`` fixed bins over ``histogram_range``
    (``None``: the tensor's finite min..max at that step, edges stored with the counts);
    ``raw``: keep the whole tensor. Defaults: nothing kept, 30 bins, range ``None``.
    ``histogram`` and ``raw`` may also be listed in ``reductions``, as in YAML
    (``ReductionConfig(reductions=["l2", "raw"])`` is ``ReductionConfig(reductions=["l2"], raw=True)``).
    """

    reductions: tuple[str, ...] = ()
    histogram: bool = False
    histogram_bins: int = 30
    histogram_range: tuple[float, float] | None = None
    raw: bool = False

    def __post_init__(self) -> None:
        # checked as the YAML is (trial 24f: reductions=None was a bare TypeError, "l2" was read letter
        # by letter, raw="yes" and histogram=None were stored as given): one string is a list of one
        for key in ("histogram", "raw"):
            check_bool(getattr(self, key), key)
        seen: list[str] = []
        names = _reduction_names(self.reductions, "reductions")
        for i, r in enumerate(names):
            if r in ("histogram", "raw"):  # the YAML spelling (trial 20b: "unknown reduction 'raw'; did you mean 'raw'?")
                object.__setattr__(self, r, True)
                continue
            name = _check_reduction(r, f"reductions[{i}]")
            if name not in seen:  # (one written twice is kept once: the same reduction, stored once)
                seen.append(name)
        _check_one_threshold_once(names, "reductions")
        object.__setattr__(self, "reductions", tuple(seen))
        given_bins = self.histogram_bins
        # (stored as an int: numpy's integers are integers, trial 24f)
        object.__setattr__(self, "histogram_bins", check_int(self.histogram_bins, "histogram_bins", minimum=1,
                                                             maximum=100_000))
        given_range = self.histogram_range  # (as written, for the messages: trial 25g, [-1, 1] was shown as (-1.0, 1.0))
        if self.histogram_range is not None:
            rng = self.histogram_range
            if not isinstance(rng, (list, tuple)) or len(rng) != 2:
                form = " (a mapping)" if isinstance(rng, Mapping) else ""
                raise ConfigError(f"histogram_range: got {rng!r}{form}; accepted: null or a list [low, high] of two "
                                  f"numbers with low < high")
            lo = check_float(rng[0], "histogram_range[0]")
            hi = check_float(rng[1], "histogram_range[1]")
            if not (math.isfinite(lo) and math.isfinite(hi)):  # type: ignore[arg-type]
                # (numpy.histogram refuses them: the bin edges would be NaN and inf)
                raise ConfigError(f"histogram_range: got {list(rng)!r}; accepted: null or [low, high] of finite "
                                  f"numbers with low < high")
            if not lo < hi:  # type: ignore[operator]
                raise ConfigError(f"histogram_range: got {list(rng)!r}; accepted: null or [low, high] with low < high")
            object.__setattr__(self, "histogram_range", (lo, hi))
        if not self.histogram:  # (trial 23r: taken in Python, and dropped, where the YAML refuses it)
            for key, default, given in (("histogram_bins", 30, given_bins),
                                        ("histogram_range", None, given_range)):
                if getattr(self, key) != default:
                    # (one check for Python and YAML: from_list puts the YAML path in front)
                    raise ConfigError(f"{key}: got {given!r}, but no histogram is kept; accepted: {key} "
                                      f"with 'histogram' among the reductions (e.g. reductions "
                                      f"{[*self.to_list(), 'histogram']})")

    @property
    def empty(self) -> bool:
        return not (self.reductions or self.histogram or self.raw)

    def merged(self, other: ReductionConfig) -> ReductionConfig:
        """Union of two configs (used when rules need more than the user asked for). A threshold a
        rule needs that the user's list holds written another way (``fraction_abs_gt:5`` for the rule's
        ``fraction_abs_gt:5.0``) is stored once, under the user's spelling: a reader finds a threshold
        by its value (trial 36k: the same series was stored twice)."""
        out = ReductionConfig(
            self.reductions,
            self.histogram or other.histogram,
            self.histogram_bins if self.histogram else other.histogram_bins,
            self.histogram_range if self.histogram else other.histogram_range,
            self.raw or other.raw,
        )
        have = {parse_reduction(r) for r in self.reductions if _PARAM_RE.match(r)}
        extra = tuple(r for r in other.reductions if not (_PARAM_RE.match(r) and parse_reduction(r) in have))
        object.__setattr__(out, "reductions", tuple(dict.fromkeys(self.reductions + extra)))
        return out

    @classmethod
    def from_list(cls, items: Sequence[str] | str, path: str = "reductions", **extra: Any) -> ReductionConfig:
        names = _reduction_names(items, path)
        reds = tuple(n for n in names if n not in ("histogram", "raw"))
        for i, n in enumerate(names):
            if n not in ("histogram", "raw"):
                _check_reduction(n, f"{path}[{i}]")
        _check_one_threshold_once(names, path)
        try:
            return cls(reds, "histogram" in names, raw="raw" in names, **extra)
        except ConfigError as exc:
            raise ConfigError(f"{path.rsplit('.', 1)[0]}.{exc}" if "." in path else str(exc)) from None

    def to_list(self) -> list[str]:
        out = list(self.reductions)
        if self.histogram:
            out.append("histogram")
        if self.raw:
            out.append("raw")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "reductions": self.to_list(),
            "histogram_bins": self.histogram_bins,
            "histogram_range": list(self.histogram_range) if self.histogram_range else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "reduction") -> ReductionConfig:
        check_mapping(data, path)
        check_keys(data, ("reductions", "histogram_bins", "histogram_range"), path, _smdebug_hint("reduction", python=False))
        extra: dict[str, Any] = {}
        if "histogram_bins" in data:
            extra["histogram_bins"] = check_int(data["histogram_bins"], join_path(path, "histogram_bins"), minimum=1, maximum=100_000)
        if data.get("histogram_range") is not None:
            extra["histogram_range"] = data["histogram_range"]
        return cls.from_list(data.get("reductions", []), join_path(path, "reductions"), **extra)


# --------------------------------------------------------------------------------------- collection
SCALAR_KINDS = ("losses", "metrics", "optimizer", "hyperparameters")

BUILTIN_COLLECTIONS: dict[str, tuple[str, ...]] = {
    # name: default reductions (tensors of the collection's own kind; scalars keep their raw value)
    "weights": ("l2", "mean", "std", "min", "max", "nonfinite_count"),
    "biases": ("l2", "mean", "std", "min", "max", "nonfinite_count"),
    "gradients": ("l2", "mean", "std", "abs_mean", "abs_max", "zero_fraction", "nonfinite_count"),
    "losses": ("raw",),
    "metrics": ("raw",),
    "activations": ("mean", "std", "abs_max", "zero_fraction", "nonfinite_count"),
    "activation_inputs": ("mean", "std", "min", "max", "nonfinite_count"),
    "relu_outputs": ("zero_fraction", "mean", "nonfinite_count"),
    "inputs": ("mean", "std", "min", "max", "nonfinite_count"),
    "labels": ("raw",),
    "predictions": ("raw",),
    "optimizer": ("raw",),
    "hyperparameters": ("raw",),
    "feature_importance": ("raw",),
    "trees": ("raw",),
}
"""Built-in collections and their default reductions. Adapters offer each tensor under one of these
kinds; a built-in collection takes the tensors of its own kind, a custom collection any kind."""

EVERY_STEP_KINDS: tuple[str, ...] = ("losses",)
"""Kinds a collection with ``every_step: true`` may hold: integrations keep the training loss of
every step (a one-element tensor) between save steps, nothing else."""

DEFAULT_COLLECTIONS: tuple[str, ...] = ("losses", "metrics")
"""Collections captured when the config names none (rules add what they need)."""

_COLLECTION_KEYS = ("include", "exclude", "kinds", "reductions", "histogram_bins", "histogram_range", "save", "every_step")


@_tracks_given
@_checked_arguments('collection')
@dataclass(frozen=True)
class Collection:
    """A named group of tensors chosen by regular expressions (``re.search``, a match anywhere).

    A tensor offered under kind ``k`` with name ``n`` belongs to the collection when
    ``k in kinds`` (``kinds=None``: any kind) and some ``include`` pattern matches ``n`` and no
    ``exclude`` pattern does. For a collection of given kinds (every built-in one), a name that
    starts with its kind (``gradients/fc1.weight``) is also matched without that prefix
    (``fc1.weight``), so ``include: ["^fc1\\."]`` under ``gradients`` means fc1's gradients.
    ``save=None`` uses the run's SaveConfig.

    ``every_step`` (YAML ``every_step``; only for collections of kind ``losses``): keep the
    training loss of every train step in the save range (``start_step <= s < end_step``), not only
    at save steps. Between save steps an integration hands the session the loss as the framework's
    tensor (no host copy); the values go to the host with the next save step's values, one record
    per step (see docs/config.md). Default: true for the built-in ``losses`` collection, false
    otherwise.

    A built-in name (``Collection("weights", include=["fc"])``) is the built-in collection, as its
    YAML section is: what is not given is the built-in's (its kind, its default reductions, ``every_step``
    for ``losses``), and its ``kinds`` are its own kind (``None`` too); another kind is a
    :class:`ConfigError` (trial 29d: ``Collection("weights", reduction=...)`` took gradients,
    activations and update ratios, all filed as weights). A custom name takes any kind unless
    ``kinds`` says, and needs a ``reduction``.
    """

    name: str
    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()
    kinds: tuple[str, ...] | None = None
    reduction: ReductionConfig = field(default_factory=ReductionConfig)
    save: SaveConfig | None = None
    every_step: bool = False

    def __post_init__(self) -> None:
        check_str(self.name, "collections")
        if not self.name.strip():  # (trial 23r: Collection("") was taken in Python)
            raise ConfigError(f"collections: a collection named {self.name!r}; accepted: a non-empty name")
        if self.name in BUILTIN_COLLECTIONS:
            _builtin_defaults(self)
        # a string is one pattern, as in YAML (trial 20b: include="fc1" was read as the patterns f, c and 1)
        for key in ("include", "exclude"):
            object.__setattr__(self, key, check_str_list(getattr(self, key), f"collections.{self.name}.{key}"))
        if not self.include:  # (trial 24f: Collection("mine", include=[]) matched nothing, without a word)
            raise ConfigError(f"collections.{self.name}.include: got []: the collection would match no tensor; accepted: "
                              f"a non-empty list of regular expressions (one string: a list of one; '.*' for every name)")
        if self.kinds is not None:
            object.__setattr__(self, "kinds", check_str_list(self.kinds, f"collections.{self.name}.kinds"))
            if not self.kinds:  # (trial 27d: kinds: [] was taken, and the collection captured nothing, silently)
                raise ConfigError(f"collections.{self.name}.kinds: got []: the collection would take no tensor; "
                                  f"accepted: null (None in Python: any kind) or a non-empty list of kinds, the "
                                  f"built-in collection names ({', '.join(BUILTIN_COLLECTIONS)})")
        compiled = []
        for key in ("include", "exclude"):
            for i, pat in enumerate(getattr(self, key)):
                try:
                    compiled.append(re.compile(pat))
                except re.error as exc:
                    raise ConfigError(f"collections.{self.name}.{key}[{i}]: invalid regular expression {pat!r} "
                                      f"({exc}); accepted: a Python regular expression, matched with re.search "
                                      f"against each tensor name") from None
        if self.kinds is not None:
            for i, kind in enumerate(self.kinds):
                check_str(kind, f"collections.{self.name}.kinds[{i}]", choices=BUILTIN_COLLECTIONS)
            if self.name in BUILTIN_COLLECTIONS and any(k != self.name for k in self.kinds):
                _refuse_other_kind(self.name, self.kinds)
        check_bool(self.every_step, f"collections.{self.name}.every_step")
        if self.every_step and (self.kinds is None or any(k not in EVERY_STEP_KINDS for k in self.kinds)):
            raise ConfigError(
                f"collections.{self.name}.every_step: got True for a collection of kinds "
                f"{list(self.kinds) if self.kinds is not None else 'any'}; accepted: true only for a collection "
                f"whose kinds are {list(EVERY_STEP_KINDS)} (the training loss), false otherwise"
            )
        if not isinstance(self.reduction, ReductionConfig):
            raise ConfigError(f"collections.{self.name}.reduction: got {type(self.reduction).__name__} "
                              f"{self.reduction!r:.60}; accepted: a tripwire.ReductionConfig")
        _collection_save(self)
        if self.reduction.empty:
            # trial 22a: a Collection made in Python without reductions was taken and stored nothing,
            # where its YAML twin is refused (from_dict's message, with the YAML key, comes first there)
            raise ConfigError(_no_reductions(f"collections.{self.name}.reduction", self.name) + (
                "; in Python: tripwire.Collection(..., reduction=tripwire.ReductionConfig(reductions=['l2', 'mean']))"))
        n_inc = len(self.include)
        object.__setattr__(self, "_inc", tuple(compiled[:n_inc]))
        object.__setattr__(self, "_exc", tuple(compiled[n_inc:]))
        object.__setattr__(self, "_cache", {})

    @classmethod
    def builtin(cls, name: str) -> Collection:
        if name not in BUILTIN_COLLECTIONS:
            raise ConfigError(
                f"collections: unknown built-in collection {name!r}{did_you_mean(name, BUILTIN_COLLECTIONS)}; "
                f"built-in: {', '.join(BUILTIN_COLLECTIONS)}"
            )
        return cls(name, kinds=(name,), reduction=ReductionConfig.from_list(BUILTIN_COLLECTIONS[name]),
                   every_step=name in EVERY_STEP_KINDS)

    @property
    def is_builtin(self) -> bool:
        return self.name in BUILTIN_COLLECTIONS

    def matches(self, tensor: str, kind: str) -> bool:
        """Pure predicate: does a tensor named ``tensor`` offered as ``kind`` belong here?"""
        key = (tensor, kind)
        hit = self._cache.get(key)  # type: ignore[attr-defined]
        if hit is None:
            names = (tensor,)
            if self.kinds is not None and tensor.startswith(kind) and tensor[len(kind):len(kind) + 1] == "/":
                names = (tensor, tensor[len(kind) + 1:])  # "gradients/fc1.weight" is also "fc1.weight"
            hit = (self.kinds is None or kind in self.kinds) and any(
                p.search(n) for p in self._inc for n in names) and not any(  # type: ignore[attr-defined]
                p.search(n) for p in self._exc for n in names  # type: ignore[attr-defined]
            )
            if len(self._cache) < 100_000:  # type: ignore[attr-defined]
                self._cache[key] = hit  # type: ignore[attr-defined]
        return hit

    def accepts_kind(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def should_save(self, mode: str, step: int, default: SaveConfig) -> bool:
        return (self.save or default).should_save(mode, step)

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any] | None, path: str | None = None,
                  default_save: SaveConfig | None = None) -> Collection:
        """The collection ``name`` from the mapping of its YAML section (``to_dict``'s output, which
        holds no name: ``Collection.from_dict(c.name, c.to_dict()) == c``). Keys left out keep a
        built-in collection's defaults; ``None`` is the built-in (or an empty custom one).
        ``path``: where errors say the mapping is (default ``collections.<name>``);
        ``default_save``: the save config a ``save`` section's unstated keys come from (default
        :class:`SaveConfig`'s defaults; a :class:`Config` passes its own top-level ``save``)."""
        path = f"collections.{name}" if path is None else path
        default_save = SaveConfig() if default_save is None else default_save
        if data is None and name not in BUILTIN_COLLECTIONS:
            raise ConfigError(_no_reductions(join_path(path, "reductions"), name))
        base = cls.builtin(name) if name in BUILTIN_COLLECTIONS else _CUSTOM_BASE
        if data is None:
            return base
        check_mapping(data, path)
        check_keys(data, _COLLECTION_KEYS, path, _smdebug_hint("collection", python=False))
        include = check_str_list(data["include"], join_path(path, "include")) if "include" in data else base.include
        exclude = check_str_list(data["exclude"], join_path(path, "exclude")) if "exclude" in data else base.exclude
        kinds = base.kinds
        if "kinds" in data and data["kinds"] is not None:
            kinds = check_str_list(data["kinds"], join_path(path, "kinds"), choices=BUILTIN_COLLECTIONS)
        elif "kinds" in data and name not in BUILTIN_COLLECTIONS:  # (null: any kind; a built-in's own, its default)
            kinds = None
        red_data = {k: data[k] for k in ("reductions", "histogram_bins", "histogram_range") if k in data}
        reduction = base.reduction
        if red_data:
            red_data.setdefault("reductions", base.reduction.to_list())
            reduction = ReductionConfig.from_dict(red_data, path)
        save = SaveConfig.from_dict(data["save"], join_path(path, "save"), default_save) if data.get("save") is not None else None
        every_step = base.every_step and (kinds is not None and all(k in EVERY_STEP_KINDS for k in kinds))
        if "every_step" in data:
            every_step = check_bool(data["every_step"], join_path(path, "every_step"))
        try:  # (the other keys' errors first: a stand-in for no reductions, refused below with the YAML key)
            collection = cls(name, include, exclude, kinds, _STAND_IN if reduction.empty else reduction, save, every_step)
        except ConfigError as exc:
            raise ConfigError(str(exc)) from None
        if reduction.empty:  # (a custom collection has no default reductions: it captured nothing, silently)
            raise ConfigError(_no_reductions(join_path(path, "reductions"), name))
        return collection

    def to_dict(self) -> dict[str, Any]:
        """The collection as the mapping of its YAML section (``collections.<name>``), without its name.
        Its ``save`` holds only the keys the collection's save states, as :meth:`Config.to_dict`
        writes it: what it does not state follows the run's top-level ``save`` once read back, so
        that a round trip saves the same steps (trial 32i F3: every key was written, and in a
        config whose save had ``start_step: 5, steps: [1]`` the read-back collection saved from step
        0 and lost step 1). ``Collection.from_dict(c.name, c.to_dict(), default_save=s) == c`` for a
        collection ``c`` of a config whose save is ``s`` (``SaveConfig()`` for one made alone)."""
        out: dict[str, Any] = {
            "include": list(self.include),
            "exclude": list(self.exclude),
            "kinds": list(self.kinds) if self.kinds is not None else None,
        }
        out.update(self.reduction.to_dict())
        if self.save is not None:
            written = getattr(self, "_save_written", None)
            out["save"] = self.save._full_dict() if written is None else _stated_save(written, self.save, top=False)
        out["every_step"] = self.every_step
        return out


def _builtin_defaults(c: Collection) -> None:
    """A collection of a built-in name made in Python takes the built-in's defaults for what it was
    not given, as its YAML section does (``collections: {weights: {include: [fc]}}``): its own kind
    (``kinds=None`` too: null means the default), its default reductions and, for ``losses``,
    ``every_step`` (trial 29d)."""
    given: frozenset[str] = getattr(c, "_given", frozenset(f.name for f in dataclasses.fields(c)))
    if c.kinds is None:
        object.__setattr__(c, "kinds", (c.name,))
    if "reduction" not in given:
        object.__setattr__(c, "reduction", ReductionConfig.from_list(BUILTIN_COLLECTIONS[c.name]))
    if "every_step" not in given:
        object.__setattr__(c, "every_step", c.name in EVERY_STEP_KINDS)


def _refuse_other_kind(name: str, kinds: Sequence[str]) -> None:
    """A built-in collection given kinds other than its own (trial 29d: ``losses: {kinds: [weights]}``
    stored whole weight tensors as losses and lost the every-step loss, silently)."""
    other = next(k for k in kinds if k != name)
    raise ConfigError(f"collections.{name}.kinds: got {list(kinds)!r}; a built-in collection takes its own kind only "
                      f"({name}); accepted: [{name}] or null (leave kinds out); for tensors of another kind, name a "
                      f"collection of your own: collections: {{my_{other}: {{kinds: [{other}], include: [.*], "
                      f"reductions: [...]}}}}")


def _collection_save(c: Collection) -> None:
    """A Collection's ``save`` as a :class:`SaveConfig` (trial 24f: ``Collection(..., save={"interval":
    0})`` and ``save=5`` were taken, then a Session failed with an AttributeError, naming no key). A
    mapping is the YAML section ``collections.<name>.save``, checked as it is, with its key paths; what
    it does not state comes from :class:`SaveConfig`'s defaults here, and from the run's top-level
    ``save`` once the collection is in a config (:func:`_run_save`), as in YAML. A SaveConfig does the
    same with what it states (trial 27d: it replaced the run's save, whose ``predict: {enabled: false}``,
    ``steps`` and ``end_step`` it then lost)."""
    path = f"collections.{c.name}.save"
    save: Any = c.save
    if save is None:
        return
    if isinstance(save, SaveConfig):
        object.__setattr__(c, "_save_written", save._as_written())
        return
    if isinstance(save, Mapping):
        written = dict(check_mapping(save, path))
        object.__setattr__(c, "save", SaveConfig.from_dict(written, path))
        object.__setattr__(c, "_save_written", written)
        return
    raise ConfigError(f"{path}: got {save!r:.60} ({type(save).__name__}); accepted: None (the run's save), a "
                      f"tripwire.SaveConfig or a mapping of its keys ({', '.join(_MODE_KEYS[:-1] + ('modes',))}), "
                      f"e.g. save={{'interval': 5}}")


#: :meth:`Config.__repr__`: the longest value shown whole (characters), the most entries of a list shown
_REPR_MOST = 80
_REPR_ITEMS = 12
#: the settings a custom collection (a name that is not built in) is compared with in :meth:`Config.__repr__`
_REPR_CUSTOM_COLLECTION = {"include": [".*"], "exclude": [], "histogram_bins": 30, "histogram_range": None,
                           "every_step": False}


def _repr_cut(text: str) -> str:
    return text if len(text) <= _REPR_MOST else text[:_REPR_MOST - 4].rstrip() + " ..."


def _repr_value(value: Any) -> str:
    """A value of :meth:`Config.to_dict` in a few words: a rule or action mapping as
    ``name(key=value, ...)``, a list as ``[a, b]``, a string unquoted, a mapping as ``{key: value}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return _repr_list([_repr_value(v) for v in value], _REPR_MOST - 30)  # (room for the count: not cut after)
    if isinstance(value, Mapping):
        if isinstance(value.get("name"), str):
            rest = ", ".join(f"{k}={_repr_value(v)}" for k, v in value.items() if k != "name")
            return _repr_cut(f"{value['name']}({rest})" if rest else value["name"])
        return _repr_cut("{" + ", ".join(f"{k}: {_repr_value(v)}" for k, v in value.items()) + "}")
    return repr(value)


def _repr_list(items: list[str], budget: int | None = None) -> str:
    """``[a, b, ...]``: whole entries only, at most :data:`_REPR_ITEMS` of them and, for a setting's
    list (``budget``), no more than ``budget`` characters (the first always), then ``... (k more, n
    in all)`` (trial 30g F6: a 40-pattern include list was cut in the middle of a name, and the
    settings after it lost)."""
    shown: list[str] = []
    size = 0
    for item in items[:_REPR_ITEMS]:
        if shown and budget is not None and size + len(item) + 2 > budget:
            break
        shown.append(item)
        size += len(item) + 2
    more = f", ... ({len(items) - len(shown)} more, {len(items)} in all)" if len(items) > len(shown) else ""
    return "[" + ", ".join(shown) + more + "]"


def _repr_changed(mine: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    """The keys of ``mine`` whose values differ from ``base``'s, as ``{key: value}``."""
    return _repr_cut("{" + ", ".join(f"{k}: {_repr_value(v)}" for k, v in mine.items()
                                     if k not in base or base[k] != v) + "}")


def _repr_collection(name: str, written: Mapping[str, Any]) -> str:
    """A collection of :meth:`Config.to_dict` as its name, with what differs from its built-in
    defaults (a custom one: from a collection of every tensor, its kinds and reductions always)."""
    base = Collection.builtin(name).to_dict() if name in BUILTIN_COLLECTIONS else _REPR_CUSTOM_COLLECTION
    # (each setting bounded on its own, not the whole: every setting that differs is named, trial 30g F6)
    changed = ", ".join(f"{k}={_repr_cut(_repr_value(v))}" for k, v in written.items() if k not in base or base[k] != v)
    return f"{name}({changed})" if changed else name


def _run_save(c: Collection, save: SaveConfig) -> Collection:
    """Collection ``c`` in a config whose top-level save is ``save``: a ``save`` given to it (a mapping
    or a SaveConfig) inherits what it does not state from ``save``, as the same mapping under
    ``collections.<name>.save`` in YAML does; a collection without one is ``c`` itself."""
    written = getattr(c, "_save_written", None)
    if written is None:
        return c
    out = dataclasses.replace(c, save=SaveConfig.from_dict(written, f"collections.{c.name}.save", save))
    object.__setattr__(out, "_save_written", written)
    return out


def _no_reductions(key: str, name: str) -> str:
    """The error for a collection without reductions (YAML or Python): it would store nothing."""
    custom = "" if name in BUILTIN_COLLECTIONS else (
        f" (a custom collection has no default reductions{did_you_mean(name, BUILTIN_COLLECTIONS)})")
    return (f"{key}: got []: the collection would store nothing; accepted: a non-empty list of reductions (e.g. "
            f"[l2, mean, std]; raw keeps the tensor itself, histogram a histogram){custom}")


class _CustomBase:
    """What a custom collection's YAML mapping starts from (keys left out): any name, any kind, no
    reductions (so its ``reductions`` are required)."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()
    kinds: tuple[str, ...] | None = None
    reduction = ReductionConfig()
    every_step = False


_CUSTOM_BASE: Any = _CustomBase()
_STAND_IN = ReductionConfig(reductions=("l2",))


# ------------------------------------------------------------------------------------ rules/actions
def plain_value(value: Any) -> Any:
    """``value`` with numpy's scalars as Python's (``np.int64(3)`` as ``3``, ``np.float32(0.5)`` as
    ``0.5``, ``np.bool_(True)`` as ``True``) and numpy arrays as lists, also inside lists, tuples and
    mappings (rebuilt as ``list``, ``tuple`` and ``dict``); anything else as it is. A rule's or an
    action's parameters are read through it, so what run.json stores is JSON (trial 32i F1:
    ``patience=np.int64(3)`` was taken, then Session creation raised "Object of type int64 is not
    JSON serializable")."""
    if type(value).__module__ == "numpy":
        if hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:  # (an array)
            return [plain_value(v) for v in value.tolist()]
        if hasattr(value, "item"):  # (a scalar)
            return value.item()
        return value
    if isinstance(value, Mapping):
        return {k: plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain_value(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _nested_form(value: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    """``{notify: {topic_arn: ...}}`` (one key, the name, over the parameters: YAML's natural nesting)
    as ``{name: notify, topic_arn: ...}`` (trial 22a: refused, with no word of the accepted form)."""
    if "name" in value or len(value) != 1:
        return value
    (name, params), = value.items()
    if not isinstance(name, str) or not (params is None or isinstance(params, Mapping)):
        return value
    if params is not None and "name" in params:
        raise ConfigError(f"{join_path(path, name)}.name: got {params['name']!r} under {name!r}; accepted: the name once, "
                          f"either as the key ({{{name}: {{...}}}}) or as 'name' ({{name: {name}, ...}})")
    return {"name": name, **(params or {})}


@_checked_arguments('other')
@dataclass(frozen=True)
class ActionSpec:
    """An action by name (``stop_training``, ``log``, ``raise``, ``record``, ``notify`` or a
    ``module:attribute`` callable) with its parameters."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # numpy's numbers as Python's, so run.json can hold them (trial 32i F1; see plain_value)
        object.__setattr__(self, "params", plain_value(self.params))

    @classmethod
    def parse(cls, value: Any, path: str) -> ActionSpec:
        if isinstance(value, ActionSpec):
            return value
        if callable(value):
            return cls("<callable>", {"callable": value})
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            check_mapping(value, path)
            value = _nested_form(value, path)
            if "name" not in value:
                raise ConfigError(f"{path}: an action mapping needs a 'name' key, got {dict(value)!r}; accepted: "
                                  f"{{name: notify, topic_arn: ...}} or {{notify: {{topic_arn: ...}}}}")
            if callable(value["name"]) and not isinstance(value["name"], str):
                # (trial 37c: "accepted: a string" said nothing of how a callable takes its keywords)
                fn = value["name"]
                given = ", ".join(f"{k}={v!r}" for k, v in value.items() if k != "name")
                shown = getattr(fn, "__name__", "fn")
                raise ConfigError(
                    f"{join_path(path, 'name')}: got the callable {fn!r}; a mapping names an action by a string "
                    f"(an action name or 'module:attribute'); accepted: the callable itself, its keywords bound "
                    f"(functools.partial({shown}, {given}) or lambda finding: {shown}(finding, {given})), or "
                    f"{{name: 'module:{shown}', ...}}")
            name = check_str(value["name"], join_path(path, "name"))
            return cls(name, {k: v for k, v in value.items() if k != "name"})
        raise ConfigError(f"{path}: got {value!r}; accepted: an action name, a mapping with 'name', or a callable")

    def to_dict(self) -> Any:
        if "callable" in self.params:
            fn = self.params["callable"]
            return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
        return {"name": self.name, **self.params} if self.params else self.name


@_checked_arguments('other')
@dataclass(frozen=True)
class RuleSpec:
    """A rule by YAML name (or ``module:attribute``) with its parameters and optional actions."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    actions: tuple[ActionSpec, ...] | None = None
    rule_set: str | None = field(default=None, compare=False)
    """The rule set (``default``) this spec was expanded from, if any."""

    def __post_init__(self) -> None:
        # numpy's numbers as Python's, so run.json can hold them (trial 32i F1: patience=np.int64(3)
        # was taken, then Session creation and a Lightning fit raised a bare TypeError; see plain_value)
        object.__setattr__(self, "params", plain_value(self.params))

    @classmethod
    def parse(cls, value: Any, path: str) -> RuleSpec:
        if isinstance(value, RuleSpec):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            check_mapping(value, path)
            value = _nested_form(value, path)
            if "name" not in value:
                typo = next((k for k in value if did_you_mean(str(k), ["name"])), None)
                hint = f"; {str(typo)!r} is unknown{did_you_mean(str(typo), ['name'])}" if typo is not None else ""
                raise ConfigError(f"{path}: a rule mapping needs a 'name' key, got {dict(value)!r}{hint} (keys: name, "
                                  f"actions, and the rule's parameters; or one key, the rule's name, over its parameters: "
                                  f"{{dead_relu: {{threshold: 0.9}}}}; one mapping per rule)")
            name = check_str(value["name"], join_path(path, "name"))
            actions = None
            if "actions" in value and value["actions"] is not None:
                acts = value["actions"]
                if isinstance(acts, (str, Mapping)) or callable(acts):
                    acts = [acts]
                if not isinstance(acts, (list, tuple)):
                    raise ConfigError(f"{join_path(path, 'actions')}: got {acts!r}; accepted: a list of actions")
                actions = tuple(ActionSpec.parse(a, f"{join_path(path, 'actions')}[{i}]") for i, a in enumerate(acts))
            params = {k: v for k, v in value.items() if k not in ("name", "actions")}
            return cls(name, params, actions)
        # a Rule instance, a Rule class or a plain function given in code
        from .rules._base import Rule  # (the rules package imports this module)

        if not (callable(value) or isinstance(value, Rule)):
            # (trial 32i F4: None, 5 and a nested list were taken, then written as {'name': '?:?'}, which
            # read back failed with "No module named '?'")
            shown = repr(value) if len(repr(value)) <= 120 else repr(value)[:117] + "..."
            raise ConfigError(f"{path}: got {shown} ({type(value).__name__}); accepted: a rule name ('overfit'), a "
                              f"mapping with name: ({{name: overfit, patience: 3}}), a Rule object or class, or a "
                              f"function (history, step, mode); one entry per rule")
        return cls("<object>", {"object": value})

    @property
    def shown_name(self) -> str:
        """The rule's name as a callback's repr shows it: a rule given in code (a Rule object or class,
        a function) by the name its findings carry, not ``'<object>'`` (trial 37h)."""
        if self.name != "<object>":
            return self.name
        obj = self.params.get("object")
        named = getattr(obj, "name", None)
        if isinstance(named, str) and named:
            return named
        return str(getattr(obj, "__name__", None) or type(obj).__name__)

    def to_dict(self) -> Any:
        if "object" in self.params:
            from .rules._registry import object_spec  # (the rules package imports this module)

            return object_spec(self.params["object"])
        from .rules._registry import user_rule_ref  # (the rules package imports this module)

        # a class of the user's registered by name in this process: by module:qualname, which a
        # process that reads the run (tripwire watch) can import
        out: dict[str, Any] = {"name": user_rule_ref(self.name) or self.name, **self.params}
        if self.actions is not None:
            out["actions"] = [a.to_dict() for a in self.actions]
        return out


# ------------------------------------------------------------------------------------------- writer
@_checked_arguments('other')
@dataclass(frozen=True)
class WriterConfig:
    """The run store's writer. ``ranks``: ``"all"`` (every rank writes its shard) or a list of
    ranks that write (``[0]``: rank 0 only; a tuple, a numpy integer array or one integer too). ``queue_size``: bound of the background queue (a full
    queue blocks the training thread rather than dropping data). ``fsync``: fsync after each step."""

    queue_size: int = 64
    ranks: str | tuple[int, ...] = "all"
    fsync: bool = False

    def __post_init__(self) -> None:
        # checked however it is made (trial 23l: WriterConfig(queue_size='x') built in Python was taken)
        object.__setattr__(self, "queue_size", check_int(self.queue_size, "writer.queue_size", minimum=1))
        object.__setattr__(self, "fsync", check_bool(self.fsync, "writer.fsync"))
        # a numpy array of ranks is a list, a numpy integer an int, as save steps are (trial 32i F5:
        # np.array([1, 0]) raised numpy's "truth value of an array is ambiguous", np.array([0]) was refused)
        ranks: Any = plain_value(self.ranks)
        if isinstance(ranks, int) and not isinstance(ranks, bool):
            ranks = (ranks,)
        if ranks != "all":
            if not isinstance(ranks, (list, tuple)):
                raise ConfigError(f"writer.ranks: got {ranks!r}; accepted: 'all' or a list of ranks (integers >= 0)")
            # (a rank written twice is one rank: writes() asks whether a rank is among them)
            ranks = tuple(dict.fromkeys(check_int(r, f"writer.ranks[{i}]", minimum=0) for i, r in enumerate(ranks)))
            if not ranks:
                raise ConfigError("writer.ranks: got []: no rank would write, and the run would be lost; accepted: "
                                  "'all' or a non-empty list of ranks (integers >= 0), e.g. [0]")
        object.__setattr__(self, "ranks", ranks)

    def writes(self, rank: int) -> bool:
        return self.ranks == "all" or rank in self.ranks  # type: ignore[operator]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, path: str = "writer") -> WriterConfig:
        if data is None:
            return cls()
        check_mapping(data, path)
        check_keys(data, ("queue_size", "ranks", "fsync"), path)
        # (the values are checked by __post_init__, as for a WriterConfig built in Python)
        return cls(data.get("queue_size", 64), data.get("ranks", "all"), data.get("fsync", False))

    def to_dict(self) -> dict[str, Any]:
        return {"queue_size": self.queue_size, "ranks": self.ranks if self.ranks == "all" else list(self.ranks), "fsync": self.fsync}



# ------------------------------------------------------------------------------------------ out_dir
_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
_COLLAPSED_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)")


def url_scheme(path: str | os.PathLike[str]) -> str | None:
    """The scheme of ``path`` when it is a URL (``s3://bucket/x``, ``file:///tmp/x``), else None.

    A Windows drive (``C:\\x``, ``C:/x``) is a path: a scheme has two characters or more. A URL
    that has lost one slash (``s3:/b/x``: what ``pathlib.Path`` and ``os.path.normpath`` make of
    ``s3://b/x``) is recognised in that form too, a string as a ``Path`` (trial 28f: the string
    ``"s3:/runs/x"`` was taken as a local path and wrote ``./s3:/runs/x``, its ``Path`` refused)."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    m = _URL_RE.match(text) or _COLLAPSED_URL_RE.match(text) if isinstance(text, str) else None
    return m.group(1) if m else None


def url_refusal(path: str | os.PathLike[str], then: str = "write locally and copy the run directory") -> str | None:
    """Why a URL cannot stand where a local path is meant (None: ``path`` is not a URL): there is no
    remote store (a run written to ``s3://b/x`` would otherwise land in a local folder ``./s3:/b/x``).
    ``then``: what to do instead, after "remote stores such as s3:// are not supported; " (default
    for a run directory); a ``file:`` URL is answered with the path it names."""
    scheme = url_scheme(path)
    if scheme is None:
        return None
    if scheme.lower() == "file":
        return f"not a URL: write the path itself, {re.sub(r'^[A-Za-z]+:/+', '/', os.fspath(path))!r}"
    return f"remote stores such as {scheme}:// are not supported; {then}"


_VAR_RE = re.compile(r"\$(?:\{([^{}]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand_path(path: str, key: str = "out_dir") -> str:
    """``path`` with ``~`` (``~user``) and environment variables (``$VAR``, ``${VAR}``) expanded, as a
    shell would (trial 29d: ``out_dir: ~/runs`` made a directory named ``~`` in the working directory).
    A variable that is not set, ``${}`` or a user that does not exist is a :class:`ConfigError` naming
    ``key``; a ``$`` that starts no name is kept (``a$/b``). A URL is left as it is (refused later)."""
    if url_scheme(path) is not None:
        return path

    def value(m: re.Match[str]) -> str:
        name = m.group(1) if m.group(1) is not None else m.group(2)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(f"{key}: got {path!r}: {m.group(0)!r} is no environment variable name; accepted: a local "
                              f"directory path, with ~ and $VAR or ${{VAR}} of variables that are set")
        if name not in os.environ:
            raise ConfigError(f"{key}: got {path!r}: the environment variable {name!r} is not set; accepted: a local "
                              f"directory path, with ~ and $VAR or ${{VAR}} of variables that are set")
        return os.environ[name]

    out = _VAR_RE.sub(value, path)
    if out.startswith("~"):
        expanded = os.path.expanduser(out)
        if expanded.startswith("~"):
            user = re.split(r"[/\\]", out, maxsplit=1)[0][1:]
            raise ConfigError(f"{key}: got {path!r}: there is no user {user!r} (~{user} is that user's home "
                              f"directory); accepted: a local directory path, with ~ for your home directory")
        out = expanded
    return out


def check_local_dir(path: str | os.PathLike[str], key: str = "out_dir") -> None:
    """Refuse a URL where a run directory is meant (:func:`url_refusal`), naming ``key``."""
    why = url_refusal(path)
    if why is not None:
        raise ConfigError(f"{key}: got {str(path)!r}; accepted: a local directory path ({why})")
    # a file where the directory (or one above it) would be: refused now, not as a NotADirectoryError
    # from deep inside the first training step (trial 17a)
    here = Path(os.fspath(path))
    for above in (here, *here.parents):
        try:
            if not above.exists():
                continue
        except OSError:
            return
        if not above.is_dir():
            where = "is a file" if above == here else f"is inside {str(above)!r}, which is a file"
            raise ConfigError(f"{key}: got {str(path)!r}, which {where}; accepted: a directory path (an existing "
                              f"directory, or one that can be made)")
        return

# ------------------------------------------------------------------------------------------- config
DEFAULT_ACTIONS: tuple[str, ...] = ("log", "record")

_TOP_KEYS = ("out_dir", "save", "collections", "rules", "actions", "writer", "strict", "name", "imports")

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def check_imports(value: Any, path: str = "imports") -> tuple[str, ...]:
    """A config's ``imports``: module names (one, or a list), each checked and imported, in order.
    Their import registers rules (``@tripwire.register_rule``) and anything else a module sets up,
    before the config's rules are built, so that ``rules: [loss_jump]`` names a team's registered rule
    in ``tripwire validate``, ``watch`` and a session alike (trial 31f F8). A bad name, a module that
    does not import or one whose import raises is a :class:`ConfigError` naming ``imports[i]``, the
    module and the error. None (YAML's null) is none."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{path}: got {value!r}; accepted: a module name or a list of them (imports: [teamrules]), "
                          f"modules whose import registers rules or actions")
    import importlib

    for i, name in enumerate(items):
        where = f"{path}[{i}]"
        if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
            hint = (f" ({name.split(':')[0]!r} is its module: a rule or action is named module:attribute where it is "
                    f"used)" if isinstance(name, str) and ":" in name else "")
            raise ConfigError(f"{where}: got {name!r}{hint}; accepted: a module name, dotted (teamrules, "
                              f"teamrules.vision), importable from the current directory or PYTHONPATH")
        try:
            import_user_module(name)
        except ImportError as exc:
            raise ConfigError(f"{where}: cannot import module {name!r}: {import_failure(name, exc)}; accepted: an "
                              f"importable module name") from exc
        except Exception as exc:  # noqa: BLE001 - (the module's own code raised: named with it)
            raise ConfigError(f"{where}: importing module {name!r} raised {type(exc).__name__}: {exc}") from exc
    return tuple(items)


EXTENSION_PREFIX = "x-"
"""Top-level keys of a config that start with it (``x-common: &common {...}``) are ignored: a place for
YAML anchors the file's sections use (``weights: *common``), as in docker-compose files."""


@_checked_arguments('config')
@dataclass(frozen=True)
class Config:
    """Everything a run needs. Build with :func:`load_config`.

    ``out_dir=None`` writes under ``./tripwire-runs/<name or timestamp>``; ``out_dir`` is stored with
    ``~`` and environment variables (``$VAR``, ``${VAR}``) expanded (:func:`expand_path`); ``name`` is a
    run name, without ``/`` or ``\\``, not ``.`` or ``..``; ``collections`` holds the
    enabled collections (default: losses and metrics); ``rules``: rule specs; ``actions``: actions for
    rules that name none (default ``[log, record]``); ``strict``: re-raise errors of rules. None for
    ``save``, ``collections``, ``rules``, ``actions``, ``writer`` or ``strict`` is its default, as YAML's
    null is. ``Config(...)`` takes each of these in any form a config file (:meth:`from_dict`) takes
    (``save={"interval": 3}``, ``collections=["losses", "weights"]``, ``rules=["overfit"]``,
    ``writer={"ranks": [0]}``) and reads and checks it as :meth:`from_dict` does: a value it does not
    accept is a :class:`ConfigError` naming the key, the value and what is accepted.
    """

    out_dir: str | None = None
    name: str | None = None
    save: SaveConfig = field(default_factory=SaveConfig)
    collections: Mapping[str, Collection] = field(
        default_factory=lambda: {n: Collection.builtin(n) for n in DEFAULT_COLLECTIONS}
    )
    rules: tuple[RuleSpec, ...] = ()
    actions: tuple[ActionSpec, ...] = tuple(ActionSpec(a) for a in DEFAULT_ACTIONS)
    writer: WriterConfig = field(default_factory=WriterConfig)
    strict: bool = False
    imports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self._canonical():
            # given in another form (a mapping, a list, None) or not at all a config's: read and checked
            # as from_dict reads a file (trial 32i F2: Config(save={"interval": 3}) was taken, then
            # repr() raised an AttributeError; Config(strict="yes") was taken until a Session was made)
            read = Config.from_dict({
                "out_dir": self.out_dir, "name": self.name, "save": self.save, "collections": self.collections,
                "rules": self.rules, "actions": self.actions, "imports": self.imports, "strict": self.strict,
                "writer": self.writer.to_dict() if isinstance(self.writer, WriterConfig) else self.writer,
            })
            for f in dataclasses.fields(self):
                object.__setattr__(self, f.name, getattr(read, f.name))
            object.__setattr__(self, "_written", getattr(read, "_written"))
            return
        # (first: a module they name may register a rule the config names; trial 31f F8)
        object.__setattr__(self, "imports", check_imports(self.imports))
        # an empty out_dir or name (trial 24f: out_dir="" fell back to a new timestamped directory, and
        # name="" was taken) is refused: None is how to leave either out
        if isinstance(self.out_dir, str) and not self.out_dir.strip():
            raise ConfigError(f"out_dir: got {self.out_dir!r}; accepted: a local directory path, or None (null) for "
                              f"{DEFAULT_RUNS_DIR}/<name> with a name, else a new {DEFAULT_RUNS_DIR}/run-<date>-<time>")
        if isinstance(self.name, str) and not self.name.strip():
            raise ConfigError(f"name: got {self.name!r}; accepted: a non-empty name (the run directory "
                              f"{DEFAULT_RUNS_DIR}/<name> when out_dir is not given), or None (null)")
        if isinstance(self.name, str) and ("/" in self.name or "\\" in self.name or self.name.strip() in (".", "..")):
            # (trial 29d: name: ../escape wrote outside tripwire-runs, a/b nested directories)
            raise ConfigError(f"name: got {self.name!r}; accepted: a run name without '/', '\\' and not '.' or '..' "
                              f"(it names the directory {DEFAULT_RUNS_DIR}/<name>; give a path as out_dir)")
        if self.out_dir is not None:  # every way of making a Config (from_dict, replace, overrides)
            if isinstance(self.out_dir, str):  # (a PathLike is checked as it is: a Path made from a URL)
                object.__setattr__(self, "out_dir", expand_path(self.out_dir))
            check_local_dir(self.out_dir)
        # a collection's own save inherits what it does not state from this save, however the Config
        # is made (Config(...) in Python, replace(config, save=...)), as from_dict's do
        object.__setattr__(self, "collections", {n: _run_save(c, self.save) for n, c in self.collections.items()})

    def _canonical(self) -> bool:
        """Whether ``save``, ``collections``, ``rules``, ``actions``, ``writer`` and ``strict`` have the
        form :meth:`from_dict` gives them (a SaveConfig, a mapping of names to Collections, tuples of
        RuleSpecs and ActionSpecs, a WriterConfig, a bool)."""
        return (isinstance(self.save, SaveConfig) and isinstance(self.writer, WriterConfig)
                and isinstance(self.strict, bool)
                and isinstance(self.collections, Mapping)
                and all(isinstance(n, str) and isinstance(c, Collection) for n, c in self.collections.items())
                and isinstance(self.rules, tuple) and all(isinstance(r, RuleSpec) for r in self.rules)
                and isinstance(self.actions, tuple) and all(isinstance(a, ActionSpec) for a in self.actions))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Config:
        data = {} if data is None else data
        check_mapping(data, "")
        # x- keys hold YAML anchors for the file's own use (docker-compose's convention): ignored
        data = {k: v for k, v in data.items() if not k.startswith(EXTENSION_PREFIX)}
        check_keys(data, _TOP_KEYS, "", _smdebug_hint("config", python=False))
        imports = check_imports(data.get("imports"))  # (before the rules: they may name what these register)
        out_dir = data.get("out_dir")
        if out_dir is not None:
            if isinstance(out_dir, os.PathLike):
                check_local_dir(out_dir)  # (a Path made from a URL has lost a slash: see url_scheme)
                out_dir = os.fspath(out_dir)
            out_dir = check_str(out_dir, "out_dir")  # (a URL: refused by __post_init__)
        name = data.get("name")
        if name is not None:
            name = check_str(name, "name")
        written_save = data.get("save")
        if isinstance(written_save, SaveConfig):  # (trial 19a: save=SaveConfig(...) was "expected a mapping")
            written_save = written_save._as_written()
        save = SaveConfig.from_dict(written_save, "save")
        collections = _collections_from(data.get("collections"), save)
        rules_raw = data.get("rules") or []
        if isinstance(rules_raw, (str, Mapping)):
            rules_raw = [rules_raw]
        if not isinstance(rules_raw, (list, tuple)):
            raise ConfigError(f"rules: got {rules_raw!r}; accepted: a list of rule names or mappings with 'name'")
        rules = tuple(RuleSpec.parse(r, f"rules[{i}]") for i, r in enumerate(rules_raw))
        _check_builtin_rule_params(rules)
        actions_raw = data.get("actions")
        if actions_raw is None:  # (null: the default, as for every top-level key; trial 29d)
            actions_raw = list(DEFAULT_ACTIONS)
        if isinstance(actions_raw, (str, Mapping)) or callable(actions_raw):
            actions_raw = [actions_raw]
        if not isinstance(actions_raw, (list, tuple)):
            raise ConfigError(f"actions: got {actions_raw!r}; accepted: a list of actions")
        actions = tuple(ActionSpec.parse(a, f"actions[{i}]") for i, a in enumerate(actions_raw))
        _check_builtin_actions(actions, rules)
        writer = WriterConfig.from_dict(data.get("writer"))
        strict = False if data.get("strict") is None else check_bool(data["strict"], "strict")
        config = cls(out_dir, name, save, collections, rules, actions, writer, strict, imports)
        # the save schedule as written: what a per-mode or per-collection ``save`` does not state
        # follows the top level, also when a keyword override changes it later (with_overrides)
        object.__setattr__(config, "_written", (written_save, data.get("collections")))
        return config

    def to_dict(self) -> dict[str, Any]:
        """The config as the mapping :meth:`from_dict` reads (the one a run stores in run.json). The
        save schedules are as written: the top level's keys, and of a per-mode or per-collection
        ``save`` only the keys it states, so that what it does not state follows the top level again
        once read back, keyword overrides included (trial 25g: every inherited key was written out,
        and ``from_dict(c.to_dict()).with_overrides(save_interval=6)`` kept the old interval where
        ``c.with_overrides(save_interval=6)`` followed it). ``from_dict(c.to_dict()).to_dict() ==
        c.to_dict()``."""
        written = getattr(self, "_written", None)
        collections: dict[str, Any] = {}
        for n, c in self.collections.items():
            out = c.to_dict()
            stated = _written_collection_save(written[1], n) if written is not None else getattr(c, "_save_written", None)
            if stated is not None and c.save is not None:
                out["save"] = _stated_save(stated, c.save, top=False)
            collections[n] = out
        return {
            "out_dir": self.out_dir,
            "name": self.name,
            "save": _stated_save(written[0] if written is not None else self.save, self.save, top=True),
            "collections": collections,
            "rules": [r.to_dict() for r in self.rules],
            "actions": [a.to_dict() for a in self.actions],
            "writer": self.writer.to_dict(),
            "strict": self.strict,
            **({"imports": list(self.imports)} if self.imports else {}),
        }

    def __repr__(self) -> str:
        """What differs from the defaults (``Config()``), as :meth:`to_dict` writes it, in a few
        words: ``Config(out_dir='runs/x', save={interval: 5}, collections=[losses, gradients,
        weights(reductions=[l2])], rules=[default, loss_not_decreasing(patience=5)])``; a collection
        is named with what differs from its built-in defaults, a rule or action with its parameters,
        a value longer than :data:`_REPR_MOST` characters is cut (`` ...``; a collection's settings
        each on its own, so every one that differs is named) and a list shows whole entries only,
        at most :data:`_REPR_ITEMS` and :data:`_REPR_MOST` characters of them, then how many more
        and how many in all (``[layer0, ..., ... (33 more, 40 in all)]``; trial 30g F6) (trial 30f F6: every field in full made a
        notebook cell's ``load_config({...})`` one line of about 900 characters). ``Config()`` for the
        defaults; the whole config: :meth:`to_dict`."""
        mine, base = self.to_dict(), Config().to_dict()
        parts = [f"{key}={mine[key]!r}" for key in ("out_dir", "name") if mine[key] != base[key]]
        if mine["save"] != base["save"]:
            parts.append(f"save={_repr_changed(mine['save'], base['save'])}")
        if mine["collections"] != base["collections"]:
            parts.append("collections=" + _repr_list([_repr_collection(n, c) for n, c in mine["collections"].items()]))
        for key in ("rules", "actions"):
            if mine[key] != base[key]:
                parts.append(f"{key}=" + _repr_list([_repr_value(v) for v in mine[key]]))
        if mine["writer"] != base["writer"]:
            parts.append(f"writer={_repr_changed(mine['writer'], base['writer'])}")
        if mine["strict"] != base["strict"]:
            parts.append(f"strict={mine['strict']!r}")
        if self.imports:
            parts.append(f"imports={list(self.imports)!r}")
        return f"Config({', '.join(parts)})"

    def with_overrides(self, **overrides: Any) -> Config:
        """Apply keyword overrides given to a callback.

        Accepted: ``out_dir``, ``name``, ``save`` (mapping, or a :class:`SaveConfig`: the whole
        schedule), ``save_interval``, ``save_steps``,
        ``start_step``, ``end_step`` (these four apply over ``save``, in either form: a mode or a
        collection that does not state the key follows them), ``collections`` (list of names or mapping, replaces),
        ``include_collections`` (list of names, added), ``rules`` (list, replaces), ``actions``,
        ``writer`` (mapping, merged over the config's), ``strict``. A ``save`` mapping is merged
        over the config's schedule, its ``modes`` mode by mode and key by key. ``None`` for any of
        them is its default, not the config's value (``save_interval=None``: 10, ``save_steps=None``:
        none, ``start_step=None``: 0, ``include_collections=None``: none added).
        """
        check_overrides("Config.with_overrides", overrides)
        data = self.to_dict()
        # keep live objects (callables, rule instances) that to_dict cannot round-trip
        data["rules"] = list(self.rules)
        data["actions"] = list(self.actions)
        written = getattr(self, "_written", None)
        if written is not None:
            # the file's save schedules as written, not resolved: a mode's or a collection's own
            # save inherits what it does not state from the top level, overrides included (as if
            # the override were written there); to_dict() has every inherited key filled in
            data["save"] = written[0] or {}
            # a Collection given as an object stays that object, its own save included, as where it
            # was first given (trial 20b: a keyword override dropped that save without a word)
            objects: dict[str, Collection] = {}
            if isinstance(written[1], Mapping):
                objects = {n: c for n, c in written[1].items() if isinstance(c, Collection)}
            elif isinstance(written[1], (list, tuple)):
                objects = {c.name: c for c in written[1] if isinstance(c, Collection)}
            for name, col in list(data["collections"].items()):
                if name in objects:
                    data["collections"][name] = objects[name]
                    continue
                own = written[1].get(name) if isinstance(written[1], Mapping) else None
                own = own.get("save") if isinstance(own, Mapping) else None
                if own is None:
                    col.pop("save", None)
                else:
                    col["save"] = own
        else:  # a Config built in Python: its schedule as stated (what its modes do not state follows the
            # top level and the keywords, as in a file), not to_dict()'s, which fills in every mode's keys
            data["save"] = self.save._as_written()
        save = dict(data["save"])
        if "save" in overrides:
            given = overrides["save"]
            if isinstance(given, SaveConfig):  # a whole schedule (trial 19a: "expected a mapping")
                save = given._as_written()
            elif given is None:  # the default schedule, as YAML's save: null (and writer=None) (trial 29d)
                save = {}
            else:  # merged over the file's, each mode key by key (trial 23l: a keyword mapping's modes
                # replaced all of the file's: save={"modes": {"predict": {...}}} lost its eval interval)
                save = _merged_save(save, check_mapping(given, "save"))
        # the keywords after save=, over it, whichever form it has: they are the more specific (trial
        # 20b: with save=SaveConfig(...) they were dropped, with a mapping save_interval was, silently)
        for key, target in (("save_interval", "interval"), ("save_steps", "steps"), ("start_step", "start_step"), ("end_step", "end_step")):
            if key in overrides:
                save[target] = _save_keyword(key, overrides[key])
        data["save"] = save
        for key in ("out_dir", "name", "rules", "actions", "writer", "strict"):
            if key in overrides:
                value = overrides[key]
                if key == "writer" and isinstance(value, WriterConfig):  # (a whole writer, as save= takes a SaveConfig)
                    value = value.to_dict()
                elif key == "writer" and isinstance(value, Mapping):
                    # merged over the file's, as save= is (trial 23l: writer={"fsync": True} dropped the
                    # file's ranks: [0], so every rank wrote a shard)
                    value = {**data["writer"], **check_mapping(value, "writer")}
                if key == "out_dir" and isinstance(value, os.PathLike):
                    check_local_dir(value)  # (a Path made from a URL has lost a slash: see url_scheme)
                data[key] = os.fspath(value) if key == "out_dir" and isinstance(value, os.PathLike) else value
        if "collections" in overrides:
            data["collections"] = overrides["collections"]
        if overrides.get("include_collections") is not None:  # (None: the default, none added; trial 32i F7)
            extra = check_str_list(overrides["include_collections"], "include_collections")
            cols = data["collections"]
            if cols is None:  # (the default collections, to add to: trial 38f, collections=None dropped them all)
                cols = list(DEFAULT_COLLECTIONS)
            if isinstance(cols, str):
                cols = [cols]
            if isinstance(cols, (list, tuple)):  # (collections= as a list beside it: trial 22h, a bare ValueError)
                cols = {c.name if isinstance(c, Collection) else c: c if isinstance(c, Collection) else None
                        for c in cols}
            if isinstance(cols, Mapping):  # (anything else: from_dict names what collections accepts)
                cols = dict(cols)
                for i, n in enumerate(extra):
                    if n not in BUILTIN_COLLECTIONS and n not in cols:  # (trial 27d: named "collections.gradient")
                        raise ConfigError(
                            f"include_collections[{i}]: got {n!r}, no built-in collection"
                            f"{did_you_mean(n, BUILTIN_COLLECTIONS)}; accepted: built-in collection names "
                            f"({', '.join(BUILTIN_COLLECTIONS)}), or one of the config's collections (a custom "
                            f"collection is given in collections=, with its include list)")
                    cols.setdefault(n, None)
            data["collections"] = cols
        ranged = [k for k in ("start_step", "end_step") if k in overrides]
        if ranged:
            _check_keyword_range(save, ranged, "save" in overrides)
        try:
            return Config.from_dict(data)
        except ConfigError as exc:
            # (a collection's own save against the keyword: trial 29d, the keyword was not named)
            if ranged and re.search(r"end_step: got \d+; accepted: null or an integer >= start_step", str(exc)):
                given = ", ".join(f"{k}={overrides[k]!r}" for k in ranged)
                raise ConfigError(f"{exc} ({given}: the keyword argument given, applied where the config states no "
                                  f"{' or '.join(ranged)})") from None
            raise

    def resolved_out_dir(self) -> Path:
        """``out_dir``; else ``tripwire-runs/<name>``; else a new directory
        ``tripwire-runs/run-<date>-<time>``, claimed now by creating it (``-2``, ``-3`` ... after the
        name when another training, in this process or another, started in the same second): each
        call without ``out_dir`` and ``name`` is a run of its own."""
        if self.out_dir:
            return Path(self.out_dir)  # (a local path: __post_init__ refused a URL)
        root = Path(DEFAULT_RUNS_DIR)
        if self.name:
            return root / self.name
        import itertools
        import time

        stamp = time.strftime("run-%Y%m%d-%H%M%S")
        root.mkdir(parents=True, exist_ok=True)
        for n in itertools.count(1):
            path = root / (stamp if n == 1 else f"{stamp}-{n}")
            try:
                path.mkdir()  # atomic: two processes never both claim one name
            except FileExistsError:
                continue
            return path
        raise AssertionError("unreachable")  # pragma: no cover


def _check_keyword_range(save: Mapping[str, Any], keywords: Sequence[str], save_given: bool) -> None:
    """The keywords ``start_step=``/``end_step=`` (``keywords``: those given, already in ``save``, the
    schedule as written) against the end or start the config states, at the top level and in each
    mode that does not state the keyword's key: an end before the start is a :class:`ConfigError`
    naming both, the keyword as given and the config's key (trial 29d: ``start_step=10`` over
    ``end_step: 5`` was "save.end_step: got 5", which does not name the keyword). A mode that states
    both is the config's own error, left to :meth:`SaveConfig.from_dict`."""
    whose = "the save's" if save_given else "the config's"
    top_start, top_end = save.get("start_step", 0), save.get("end_step")
    levels: list[tuple[str, Mapping[str, Any]]] = [("save", {})]
    modes = save.get("modes")
    if isinstance(modes, Mapping):
        levels += [(f"save.modes.{m}", spec) for m, spec in modes.items() if isinstance(spec, Mapping)]
    for where, stated in levels:
        start, end = stated.get("start_step", top_start), stated.get("end_step", top_end)
        if not (_is_int(start) and _is_int(end)) or end >= start or end == 0:  # (0: the listed steps only)
            continue
        from_start = "start_step" in keywords and "start_step" not in stated
        from_end = "end_step" in keywords and "end_step" not in stated
        if from_start and from_end:
            raise ConfigError(f"end_step: got {end!r} (the keyword end_step=), before the keyword start_step={start!r}; "
                              f"accepted: end_step=None or an integer >= {start}")
        if from_start:
            raise ConfigError(f"start_step: got {start!r} (the keyword start_step=), after {whose} {where}.end_step "
                              f"{end!r}; accepted: start_step=N with N <= {end}, or an end_step= keyword that ends "
                              f"the range later")
        if from_end:
            raise ConfigError(f"end_step: got {end!r} (the keyword end_step=), before {whose} {where}.start_step "
                              f"{start!r}; accepted: end_step=None or an integer >= {start}")


def _save_keyword(key: str, value: Any) -> Any:
    """The keyword override ``key`` (``save_interval``, ``save_steps``, ``start_step`` or ``end_step``)
    checked under the name it was given by (trial 27d: ``Session(save_interval=0)`` was "save.interval:
    got 0"); its value as the ``save`` key it sets takes it. (That ``end_step`` is not below
    ``start_step`` is checked with the schedule it joins.) ``None`` is the key's default, not the
    config's value, as for every keyword (trial 32i F7: it was refused for ``save_interval``,
    ``save_steps`` and ``start_step``, though the docs said a keyword given None sets the default)."""
    if value is None:
        return {"save_interval": SaveConfig().interval, "save_steps": [], "start_step": 0, "end_step": None}[key]
    if key == "save_interval":
        if isinstance(value, numbers.Number) and not isinstance(value, bool) and value == 0:
            raise ConfigError(f"save_interval: got {value!r}; accepted: an integer >= 1 (steps are saved in addition "
                              f"to the interval's; to save only the listed steps, give end_step=0 with them: "
                              f"save_steps=[3, 7], end_step=0)")
        return check_int(_plain_int(value), "save_interval", minimum=1)
    if key == "save_steps":
        return list(_steps_arg(value, "save_steps"))
    return check_int(_plain_int(value), key, minimum=0, allow_none=key == "end_step")


def _stated_save(written: Any, resolved: SaveConfig, top: bool) -> dict[str, Any]:
    """The save schedule ``written`` (a ``save`` mapping as given, None, or a SaveConfig: its
    :meth:`~SaveConfig._as_written`), checked and resolved as ``resolved``, with the values as
    ``resolved`` holds them (ints, sorted steps) but only the keys ``written`` states: every top-level
    key when ``top`` (the run's own save: its unstated keys are the defaults), a collection's stated
    ones (the others come from the run's save), and each mode's stated ones (the others come from the
    level above). See :meth:`Config.to_dict` (trial 25g)."""
    if isinstance(written, SaveConfig):
        written = written._as_written()
    written = written if isinstance(written, Mapping) else {}
    full = resolved._top_dict()
    out: dict[str, Any] = {k: full[k] for k in _MODE_KEYS[:-1] if top or k in written}
    modes = written.get("modes") or {}
    if isinstance(modes, Mapping) and modes:
        out["modes"] = {m: {k: v for k, v in resolved.for_mode(m).to_dict().items()
                            if isinstance(spec, Mapping) and k in spec}
                        for m, spec in modes.items()}
    return out


def _written_collection_save(written: Any, name: str) -> Any:
    """The ``save`` of collection ``name`` as the config's ``collections`` were written (``written``:
    a mapping or a list, its entries mappings, None or Collection objects): a mapping (or SaveConfig)
    whose unstated keys come from the run's save (a Collection object's: what its ``save`` states), or
    None where the collection states no save of its own."""
    entry: Any = None
    if isinstance(written, Mapping):
        entry = written.get(name)
    elif isinstance(written, (list, tuple)):
        entry = next((c for c in written if isinstance(c, Collection) and c.name == name), None)
    if isinstance(entry, Collection):
        return getattr(entry, "_save_written", None)
    return entry.get("save") if isinstance(entry, Mapping) else None


def _merged_save(written: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """A ``save=`` keyword mapping over the schedule as written (the file's): its keys replace the
    file's, but its ``modes`` are merged mode by mode, and a mode's keys over that mode's in the file
    (``save={"modes": {"eval": {"start_step": 2}}}`` over ``modes: {eval: {interval: 2}}`` keeps the
    interval). A mode (or ``modes``) given as None changes nothing, as an empty mapping. Values that
    are not mappings replace (and are checked by :meth:`SaveConfig.from_dict`)."""
    out = dict(written)
    for key, value in given.items():
        old = out.get(key)
        if key != "modes" or old is None:
            out[key] = value
        elif value is None:
            continue
        elif isinstance(value, Mapping) and isinstance(old, Mapping):
            modes = dict(old)
            for mode, spec in value.items():
                before = modes.get(mode)
                if spec is None and before is not None:
                    continue
                if isinstance(spec, Mapping) and isinstance(before, Mapping):
                    spec = {**before, **spec}
                modes[mode] = spec
            out[key] = modes
        else:
            out[key] = value
    return out


def _check_builtin_rule_params(rules: Sequence[RuleSpec]) -> None:
    """The parameters of each built-in rule (and of a rule set), checked as the config is loaded
    (``rules[1]: dead_relu.threshold: got 5.0; ...``), not only where a session builds the rules.
    Other names wait for the session: a rule class may be registered after the config is read."""
    from .rules._registry import RULE_SETS, available_rules, build_rule, expand_specs, smdebug_rule_hint

    builtin = {n: c for n, c in available_rules().items() if c.__module__.startswith("tripwire.rules.")}
    known = available_rules()
    for i, spec in enumerate(rules):
        smdebug = smdebug_rule_hint(spec.name) if spec.name not in known and spec.name not in RULE_SETS else None
        if spec.name in RULE_SETS:
            _check_rule_set_params(spec, f"rules[{i}]")
            expand_specs([spec])  # (a rule set takes actions only)
        elif spec.name in builtin and known[spec.name] is builtin[spec.name]:
            build_rule(spec, f"rules[{i}]")
        elif smdebug is not None:
            # an smdebug rule's name (DeadRelu, StalledTrainingRule): refused as a session refuses it, with
            # the same "did you mean" (trial 31e: only VanishingGradient and Overtraining were close enough
            # for the WARNING below; ExplodingTensor and DeadRelu, with smdebug's parameters, passed silently)
            raise ConfigError(
                f"rules[{i}]: unknown rule {spec.name!r}{smdebug}; accepted: a built-in rule's name (tripwire rules "
                f"lists them), a rule set ({', '.join(RULE_SETS)}), 'module:attribute', or a rule registered with "
                f"@tripwire.register_rule (import its module before the config is loaded)")
        elif spec.name not in known and ":" not in spec.name and spec.name != "<object>":
            # trial 22a: load_config took 'vanishing_gradeint' without a word (only a session said so);
            # a name registered later is still taken, so a typo of a built-in is a WARNING here
            close = difflib.get_close_matches(spec.name, list(builtin) + list(RULE_SETS), n=1, cutoff=0.85)
            if close:
                logger.warning("tripwire: rules[%d]: %r is not a registered rule; did you mean %r? (a rule registered "
                               "under that name before the session is built is taken; else the session refuses it)",
                               i, spec.name, close[0], extra={"tripwire_unregistered_rule": True})
    expand_specs(rules)  # (two entries of one name: trial 22a, load_config took ['dead_relu', 'dead_relu'])


def _check_rule_set_params(spec: RuleSpec, path: str) -> None:
    """A rule set (``default``) takes ``actions`` only: a parameter given to it is an error at ``path``
    (its place, ``rules[1]``) that shows the parameter given to a rule of the set that takes it, a
    misspelled one by its right name (trial 29d: ``{name: default, patiense: 3}`` was answered under
    ``rules[default]`` with a fix that copied the typo, for a rule that did not take it)."""
    from .rules._registry import RULE_SETS, available_rules

    if not spec.params:
        return
    members = RULE_SETS[spec.name]
    classes = available_rules()
    takes = {m: set(keyword_parameters(classes[m])) - {"actions"} for m in members if m in classes}
    first = sorted(spec.params)[0]
    value = spec.params[first]
    head = f"{path}.{first}: a rule set takes 'actions' only, got {dict(spec.params)!r}; "
    known = sorted(set().union(*takes.values()))
    meant = first if first in known else (difflib.get_close_matches(first, known, n=1, cutoff=0.6) or [None])[0]
    if meant is None:
        raise ConfigError(f"{head}{first!r} is no parameter of its rules either. Give a parameter to the rule that "
                          f"takes it, after the set: rules: [{spec.name}, {{name: {members[0]}, ...: ...}}] (the rules "
                          f"of {spec.name}: {', '.join(members)})")
    takers = [m for m in members if meant in takes.get(m, ())]
    who = (f"each of its rules: {', '.join(takers)}" if len(takers) == len(members) else ", ".join(takers))
    fix = (f"after the set: rules: [{spec.name}, {{name: {takers[0]}, {meant}: {_flow(value)}}}] ({meant} is a "
           f"parameter of {who})")
    if meant == first:
        raise ConfigError(f"{head}give it to the rule that takes it, {fix}")
    raise ConfigError(f"{head}{first!r} is no parameter of its rules either; did you mean {meant!r}? Give a parameter "
                      f"to the rule that takes it, {fix}")


def _check_builtin_actions(actions: Sequence[ActionSpec], rules: Sequence[RuleSpec]) -> None:
    """The built-in actions' names and parameters, checked as the config is loaded (``actions:
    [stop]`` and ``{name: log, level: loud}`` passed until a session was built); ``module:attribute``
    actions wait for the session, as custom rules do."""
    from ._actions import check_action

    for i, action in enumerate(actions):
        check_action(action, f"actions[{i}]")
    _check_actions_once(actions, "actions")
    for i, spec in enumerate(rules):
        for j, action in enumerate(spec.actions or ()):
            check_action(action, f"rules[{i}].actions[{j}]")
        _check_actions_once(spec.actions or (), f"rules[{i}].actions")


def _check_actions_once(actions: Sequence[ActionSpec], path: str) -> None:
    """Refuse an action listed twice with the same parameters (trial 29d: ``actions: [log, log]`` logged
    each finding twice; a second ``notify`` sends it twice). Two of one name with other parameters
    (two topics) are two actions."""
    for j, action in enumerate(actions):
        i = next(k for k, other in enumerate(actions) if other == action)
        if i != j:
            raise ConfigError(f"{path}[{j}]: got {action.to_dict()!r}, listed already ({path}[{i}]); an action runs "
                              f"once per finding: keep one")


DEFAULT_RUNS_DIR = "tripwire-runs"
"""Where a run without ``out_dir`` goes (relative to the working directory)."""


def _collections_from(raw: Any, save: SaveConfig) -> dict[str, Collection]:
    if raw is None:
        return {n: Collection.builtin(n) for n in DEFAULT_COLLECTIONS}
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, (list, tuple)):
        out = {}
        for i, item in enumerate(raw):
            if isinstance(item, Collection):
                if item.name in out:  # (trial 43j: the first one's settings were dropped without a word)
                    first = next(j for j, c in enumerate(raw) if (c.name if isinstance(c, Collection) else c) == item.name)
                    raise ConfigError(f"collections[{i}]: a collection named {item.name!r}, listed already "
                                      f"(collections[{first}]); accepted: one collection of a name (its settings "
                                      f"in one Collection)")
                out[item.name] = _run_save(item, save)
                continue
            if isinstance(item, Mapping):
                # trial 25g: "accepted: a string" left out the mapping form, which is what was meant
                # (and tripwire validate crashed on it)
                raise ConfigError(
                    f"collections[{i}]: got {dict(item)!r:.80} (a mapping inside a list); accepted: a list of "
                    f"collection names ([losses, weights]), or a mapping of names to their settings, without "
                    f"the list: collections: {_listed_collection(item)} (in YAML, no '-' and no [ ] around the entries)")
            name = check_str(item, f"collections[{i}]")
            if name not in BUILTIN_COLLECTIONS:
                raise ConfigError(
                    f"collections[{i}]: {name!r} is no built-in collection{did_you_mean(name, BUILTIN_COLLECTIONS)}; "
                    f"a custom collection is a mapping entry with an 'include' list "
                    f"(built-in: {', '.join(BUILTIN_COLLECTIONS)})"
                )
            out[name] = Collection.from_dict(name, None, f"collections.{name}", save)
        return out
    if not isinstance(raw, Mapping):
        raise ConfigError(f"collections: got {raw!r:.80} ({type(raw).__name__}); accepted: a list of collection names "
                          f"(built-in: {', '.join(BUILTIN_COLLECTIONS)}), or a mapping of names to their settings")
    out = {}
    for name, cdata in raw.items():
        if not isinstance(name, str) or not name.strip():  # (trial 23l: a collection named "" was taken)
            raise ConfigError(f"collections: a collection named {name!r}; accepted: a non-empty name (a built-in one: "
                              f"{', '.join(BUILTIN_COLLECTIONS)}, or your own)")
        if isinstance(cdata, Collection):
            if cdata.name != name:
                # (trial 43j: {"gradients": Collection("weights")} stored its tensors as weights and a config,
                # under gradients, that could not be loaded back)
                raise ConfigError(f"collections.{name}: got Collection({cdata.name!r}, ...), a collection of another "
                                  f"name; accepted: a Collection named {name!r} (its key), or a list of "
                                  f"Collection objects, each under its own name")
            out[name] = _run_save(cdata, save)
            continue
        if name not in BUILTIN_COLLECTIONS and isinstance(cdata, Mapping) and "include" not in cdata:
            # an unknown key first (trial 20b: smdebug's include_regex was "needs an 'include' list",
            # which did not name it)
            check_keys(check_mapping(cdata, f"collections.{name}"), _COLLECTION_KEYS, f"collections.{name}",
                       _smdebug_hint("collection", python=False))
        if name not in BUILTIN_COLLECTIONS and not (isinstance(cdata, Mapping) and "include" in cdata):
            raise ConfigError(
                f"collections.{name}: unknown built-in collection{did_you_mean(name, BUILTIN_COLLECTIONS)}; "
                f"a custom collection needs an 'include' list (built-in: {', '.join(BUILTIN_COLLECTIONS)})"
            )
        out[name] = Collection.from_dict(name, cdata, f"collections.{name}", save)
        if name not in BUILTIN_COLLECTIONS and isinstance(cdata, Mapping) and "kinds" not in cdata:
            _warn_near_builtin(name)
    return out


def _listed_collection(item: Mapping[Any, Any]) -> str:
    """A collection written as a mapping inside the ``collections`` list, as the mapping form would
    hold it: ``{name: weights, reductions: [l2]}`` (written the way rules are) is
    ``{weights: {reductions: [l2]}}``, its name the key and its other keys its settings (trial 25h:
    the hint took the key ``name`` for the collection's name); ``{weights: {...}}`` (its name already a
    key) is ``{weights: {...}}``."""
    name = item.get("name")
    if isinstance(name, str) and name.strip():
        settings = {k: v for k, v in item.items() if k != "name"}
        shown = _flow(settings) if settings else "{}"
        return f"{{{name}: {shown if len(shown) <= 80 else '{...}'}}}"
    return f"{{{next(iter(item), 'weights')}: {{...}}}}"


def _flow(value: Any) -> str:
    """``value`` in YAML's flow style (``{reductions: [l2]}``), for a hint; ``...`` for what YAML does
    not write."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value if re.fullmatch(r"[A-Za-z_][\w.\-]*", value) else repr(value)
    return "..."


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by one insertion, deletion, substitution or swap of two
    neighbouring characters (``gradeints`` -> ``gradients``)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long_[k]), len(short))
    return short[i:] == long_[i + 1:]


def _warn_near_builtin(name: str) -> None:
    """A custom collection (an ``include`` list, no ``kinds``) named one edit away from a built-in
    one is most likely a typo of it: it takes tensors of *any* kind whose names match (weights and
    activations too, not only the built-in's kind) with only the reductions it names. Logged, not refused (the name is a valid custom one); stating ``kinds``
    (``kinds: null`` for any kind) says it is meant and silences it."""
    near = next((b for b in BUILTIN_COLLECTIONS if _one_edit_apart(name.lower(), b)), None)
    if near is not None:
        logger.warning(
            "tripwire: collection %r is not built-in (did you mean %r?); it is a custom collection of any kind "
            "(weights, gradients, activations ...) whose names match its include list. Rename it to %r "
            "for the built-in one, or state its kinds (kinds: null for any kind) to keep it as it is",
            name, near, near)


OVERRIDE_KEYS: tuple[str, ...] = (
    "out_dir", "name", "save", "save_interval", "save_steps", "start_step", "end_step",
    "collections", "include_collections", "rules", "actions", "writer", "strict",
)
"""The keyword overrides of a config (:meth:`Config.with_overrides`), which Session, load_config and
every callback take."""


def check_overrides(owner: str, overrides: Mapping[str, Any], own: Sequence[str] = ()) -> None:
    """Refuse a keyword argument of ``owner`` that is none of its own parameters ``own`` and no config
    override: an :class:`~tripwire._validate.UnknownArgumentError` (a ConfigError and a TypeError)
    naming ``owner``, with a "did you mean" over both and every accepted keyword (trial 24h: a
    callback's ``trail=`` was "did you mean 'strict'?", its own ``trial`` not among the accepted)."""
    unknown = {k: v for k, v in overrides.items() if k not in OVERRIDE_KEYS}
    if unknown:  # (smdebug's Hook arguments get tripwire's names: trial 25d)
        check_arguments(owner, unknown, (*own, *OVERRIDE_KEYS), _smdebug_hint("hook", python=True))


def config_mapping(text: str, name: str) -> Mapping[str, Any]:
    """The top-level mapping of a config file's YAML ``text`` (``{}`` for an empty file); ``name``
    (its path) names it in the :class:`ConfigError` raised for text that is no YAML or no mapping."""
    import yaml

    try:
        data = load_yaml(text, name)
    except yaml.YAMLError as exc:
        # (trial 43j: no word of what to do)
        said = str(exc)
        fix = ("indent with spaces: YAML takes no tab for indentation" if "'\\t'" in said
               else "every [ and { closed by its ] and } (a list [a, b], a mapping {k: v})"
               if "expected ',' or ']'" in said or "expected ',' or '}'" in said or "flow" in said
               else "a mapping of keys to values, each nested key indented with spaces under its parent (key: value)")
        raise ConfigError(f"config: {name!r} is not valid YAML: {exc}; accepted: {fix}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        from ._validate import odd_space_after_colon

        odd = odd_space_after_colon(data, "string") if isinstance(data, str) else None
        raise ConfigError(f"config: {name!r} must hold a mapping at the top level, got {type(data).__name__}"
                          + (f" ({data!r:.60}): {odd}" if odd else ""))
    return data


_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"),
)


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The text of the config file at ``path`` (a pipe too: read once): UTF-8, or, after a byte-order
    mark, UTF-8, UTF-16 or UTF-32 (Windows PowerShell 5's ``>`` and ``Out-File`` write UTF-16 with one).
    Bytes that do not decode are a :class:`ConfigError` naming the file, the byte, its place and what
    is accepted (trial 29d: a Latin-1 or UTF-16 file was a bare UnicodeDecodeError, exit 1, from
    ``validate``, ``watch --config`` and every callback). An unreadable file is a ConfigError too."""
    shown = os.fspath(path)
    try:
        data = Path(shown).read_bytes()
    except OSError as exc:
        raise ConfigError(f"config: {shown!r} cannot be read ({exc.strerror or exc}); accepted: the path of a "
                          f"readable YAML file") from None
    codec, skip = "utf-8", 0
    for bom, name in _BOMS:
        if data.startswith(bom):
            codec, skip = name, len(bom)
            break
    try:
        return data[skip:].decode(codec)
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        lines = data.count(b"\n", 0, at) + 1
        line = f", line {lines}" if codec == "utf-8" else ""
        plain = codec.upper().replace("-LE", "").replace("-BE", "")
        raise ConfigError(f"config: {shown!r} is not {plain} text (byte 0x{data[at]:02x} at offset {at}{line}, cannot "
                          f"be decoded); accepted: a UTF-8 file (a UTF-8, UTF-16 or UTF-32 byte-order mark is read too): save "
                          f"it as UTF-8 (from Latin-1: iconv -f latin1 -t utf-8; PowerShell: Out-File -Encoding "
                          f"utf8)") from None


def _without_overridden(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> Mapping[str, Any]:
    """A config mapping without the ``out_dir`` an ``out_dir=`` keyword replaces: the file's is never
    read, so a variable it names that is not set here is no error (trial 36k: ``out_dir:
    ${RUNS}/exp`` in the file, ``out_dir=`` given, failed on ``RUNS``)."""
    if overrides.get("out_dir") is not None and isinstance(data, Mapping) and "out_dir" in data:
        return {k: v for k, v in data.items() if k != "out_dir"}
    return data


def load_config(source: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None, **overrides: Any) -> Config:
    """Load a :class:`Config` from a YAML file path, a mapping, a Config or None (defaults), then
    apply keyword ``overrides`` (see :meth:`Config.with_overrides`). A URL given as the path
    (``s3://b/cfg.yaml``, also with one slash lost, ``s3:/b/cfg.yaml``) is a :class:`ConfigError`
    naming it as given: a config is read from a local file only, UTF-8 (or as its byte-order mark
    says: :func:`read_config_text`). A config with no collection and no rule, once the overrides
    are applied, is a ConfigError: the run would record nothing at all."""
    check_overrides("load_config", overrides, ("source",))
    if source is None:
        config = Config()
    elif isinstance(source, Config):
        config = source
    elif isinstance(source, Mapping):
        config = Config.from_dict(_without_overridden(source, overrides))
    elif isinstance(source, (str, os.PathLike)):
        # a URL is refused as typed (trial 28f: "no such file 's3:/runs/cfg.yaml'", the path Path() made of it)
        why = url_refusal(source, "download the file and give its local path")
        if why is not None:
            raise ConfigError(f"config: got {os.fspath(source)!r}; accepted: the path of a local YAML file, a "
                              f"mapping, a Config or None ({why})")
        if os.fspath(source) == "":  # (trial 33f L2: Path("") is ".", "config: '.' is a directory")
            raise ConfigError("config: got '' (an empty path, not read as the current directory); accepted: the path "
                              "of a YAML file, a mapping, a Config or None (the defaults)")
        path = Path(source)
        if path.is_dir():
            raise ConfigError(f"config: {str(path)!r} is a directory; accepted: the path of a YAML file")
        if not path.exists():  # (a pipe is read too: --config <(...), trial 25i; not only a regular file)
            raise ConfigError(f"config: no such file {str(path)!r}; accepted: the path of a YAML file, a mapping, a "
                              f"Config or None (the defaults)")  # (trial 35g: it said no more)
        config = Config.from_dict(_without_overridden(config_mapping(read_config_text(path), str(path)), overrides))
    else:
        # (trial 25d: a SaveConfig given as config=, as smdebug's Hook(save_config=) went there)
        hint = "; a SaveConfig is the save schedule: give it as save=" if isinstance(source, SaveConfig) else ""
        raise ConfigError(f"config: got {source!r}; accepted: a YAML path, a mapping, a Config or None{hint}")
    if overrides:
        config = config.with_overrides(**overrides)
    if not config.collections and not config.rules:
        # (trial 29d: collections: {} with no rules ran a whole fit and stored a run of no record, without a
        # word; checked once the keywords are applied: rules= may add what the file's collections leave out)
        written = getattr(config, "_written", (None, None))[1]
        shown = "[]" if isinstance(written, (list, tuple)) else "{}"
        raise ConfigError(f"collections: got {shown}: the run would record nothing at all (no collection, and no rule to "
                          f"add the ones it reads); accepted: at least one collection (the default, null: "
                          f"{', '.join(DEFAULT_COLLECTIONS)}) or a rule")
    return config


_YAML_FLOAT = re.compile(r"""^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$""")
_LOADER: Any = None


def load_yaml(text: str, name: str | None = None) -> Any:
    """``yaml.safe_load`` that also reads ``1e-4`` as a number. PyYAML follows YAML 1.1, which
    wants ``1.0e-4`` and reads ``1e-4`` (how everybody writes a learning rate) as the string
    ``'1e-4'``; YAML 1.2 and JSON read it as a float, and so does this loader. Zero-padded integers
    are decimal, as in YAML 1.2 (``010`` is 10, ``09`` is 9; YAML 1.1 reads ``010`` as the octal 8),
    and ``0o10`` is YAML 1.2's octal 8. A key written twice is an error. Everything else is
    as ``safe_load``. ``name``: the file's name, for the positions in a syntax error (else
    ``<unicode string>``)."""
    global _LOADER
    import io

    import yaml

    if name is not None:
        stream = io.StringIO(text)
        stream.name = name  # type: ignore[misc]  # (PyYAML's marks read it)
        text = stream  # type: ignore[assignment]

    if _LOADER is None:
        class Loader(yaml.SafeLoader):
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                # a key given twice: PyYAML keeps the last one without a word (save: written twice)
                # (the keys written here: one a merge (<<: *anchor) brings in may be overridden)
                seen: dict[Any, Any] = {}
                if isinstance(node, yaml.MappingNode):
                    for key_node, _ in node.value:
                        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                            continue
                        key = self.construct_object(key_node, deep=True)
                        try:
                            first = seen.setdefault(key, key_node.start_mark)
                        except TypeError:  # (an unhashable key: PyYAML's own error follows)
                            continue
                        if first is not key_node.start_mark:
                            raise yaml.constructor.ConstructorError(
                                None, None, f"key {key!r} is given twice (first on line {first.line + 1}); keep one",
                                key_node.start_mark)
                return super().construct_mapping(node, deep=deep)

            def construct_yaml_int(self, node: Any) -> Any:
                # zero-padded decimals are decimal (010 is 10, as in YAML 1.2; YAML 1.1 read it as the octal
                # 8, trial 29d); 0o10 (YAML 1.2's octal), 0x and 0b keep their meaning
                text = str(self.construct_scalar(node)).replace("_", "")
                digits = text.lstrip("+-")
                if len(digits) > 1 and digits[0] == "0" and digits.isdigit():
                    return int(text, 10)
                return super().construct_yaml_int(node)

        Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+0123456789."))
        # 09 (a string in YAML 1.1, whose octal has no 9) and YAML 1.2's 0o10 are integers too
        Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?0[0-9_]+|[-+]?0o[0-7_]+)$"),
                                     list("-+0"))
        Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
        _LOADER = Loader
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader subclass


def replace(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` re-exported for configs."""
    return dataclasses.replace(obj, **changes)
