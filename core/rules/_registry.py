"""Rule registry: YAML names to rule classes, the ``default`` rule set, and ``module:attribute``."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import inspect
import logging
import re
import sys
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from .._config import ActionSpec, RuleSpec
from .._errors import ConfigError
from .._validate import did_you_mean, did_you_mean_attribute, import_failure, import_user_module
from ._base import _RULE_NAME, FunctionRule, Requirement, Rule, check_rule_name

logger = logging.getLogger("tripwire")

# Modules of the built-in rules, one rule per module (imported on first use).
_BUILTIN_MODULES: tuple[str, ...] = (
    "all_zero",
    "class_imbalance",
    "confusion",
    "dead_relu",
    "exploding_gradient",
    "exploding_tensor",
    "feature_importance_overweight",
    "input_not_normalized",
    "loss_diverging",
    "loss_not_decreasing",
    "loss_scale_collapse",
    "oscillating_loss",
    "overfit",
    "overtraining",
    "poor_weight_initialization",
    "saturated_activation",
    "similar_across_runs",
    "stalled_training",
    "tensor_variance",
    "tree_depth",
    "unchanged_tensor",
    "vanishing_gradient",
    "weight_update_ratio",
)

RULE_SETS: dict[str, tuple[str, ...]] = {
    # Safe to switch on for any training: quiet on healthy runs (see docs/rules.md).
    "default": (
        "exploding_tensor",
        "loss_not_decreasing",
        "oscillating_loss",
        "vanishing_gradient",
        "exploding_gradient",
        "loss_scale_collapse",
    ),
}

_REGISTRY: dict[str, type[Rule]] = {}
_loaded = False


def register_rule(cls: type[Rule]) -> type[Rule]:
    """Class decorator: make ``cls`` available under ``cls.name`` in configs."""
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        raise ConfigError(f"register_rule: got {cls!r}; accepted: a Rule subclass with a 'name' (a function is "
                          "named in configs as 'module:function', or wrapped as tripwire.FunctionRule(fn, name=...))")
    if not cls.name:
        raise ConfigError(f"register_rule: {cls.__name__} has no 'name'")
    check_rule_name(cls.name, f"register_rule: {cls.__qualname__}.name")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
        raise ConfigError(f"register_rule: the name {cls.name!r} is already taken by {existing.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    for mod in _BUILTIN_MODULES:
        importlib.import_module(f"tripwire.rules.{mod}")
    _loaded = True


def available_rules() -> dict[str, type[Rule]]:
    """Every registered rule by YAML name, sorted."""
    _load_builtins()
    return dict(sorted(_REGISTRY.items()))


def get_rule(name: str, path: str = "rules") -> type[Rule]:
    """The rule class registered under the YAML ``name`` (a built-in or one registered with
    :func:`register_rule`); an unknown name is a :class:`~tripwire.ConfigError` naming ``path``, a
    likely meant name and every available one (an smdebug rule's name: tripwire's rule for it, or
    what it has instead, :func:`smdebug_rule_hint`)."""
    rules = available_rules()
    if name not in rules:
        guess = smdebug_rule_hint(name) or did_you_mean(name, list(rules) + list(RULE_SETS))
        raise ConfigError(
            f"{path}: unknown rule {name!r}{guess}; "
            f"available: {', '.join(list(rules) + list(RULE_SETS))} (or 'module:attribute'; a rule class "
            f"registered with @tripwire.register_rule is known once its module is imported: list its "
            f"module under the config's imports (imports: [teamrules]), or name it 'module:Class')"
        )
    return rules[name]


# ------------------------------------------------------------------------------- smdebug's rules
#: smdebug's built-in rules whose snake_case name (:func:`_snake`) is no tripwire rule's: tripwire's
#: closest rule (None: it has none) and what to say of it (trial 31e: CheckInputImages got no pointer
#: to input_not_normalized)
_SMDEBUG_RULES: dict[str, tuple[str | None, str]] = {
    "StalledTrainingRule": ("stalled_training", ""),
    "CheckInputImages": ("input_not_normalized", "the closest rule: it judges the mean and std of every inputs "
                         "tensor, max_abs_mean and max_std, not images' channels"),
    "NLPSequenceRatio": (None, "tripwire has no rule for the share of given tokens in input sequences; write one "
                         "(docs/rules.md, 'Writing your own rule')"),
    "CreateXgboostReport": (None, "tripwire writes no report; tripwire inspect RUN summarises a run and tripwire plot "
                            "draws its series"),
    **{profiler: (None, "tripwire has no profiler rules (system and framework metrics: GPU and CPU use, I/O, step "
                  "times)")
       for profiler in ("ProfilerReport", "BatchSize", "CPUBottleneck", "GPUMemoryIncrease", "IOBottleneck",
                        "LoadBalancing", "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage",
                        "StepOutlier")},
}


def _snake(name: str) -> str:
    """``name`` in snake_case (``LossNotDecreasing``: ``loss_not_decreasing``, ``CPUBottleneck``:
    ``cpu_bottleneck``); a snake_case name as it is."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


_SMDEBUG_BY_SNAKE = {_snake(k): (k, v) for k, v in _SMDEBUG_RULES.items()}


def smdebug_rule(name: str) -> tuple[str, str | None, str] | None:
    """Where ``name`` is an smdebug rule's name that no rule is registered under (its class name,
    ``DeadRelu``, or the snake_case one of SageMaker's ``rule_configs``, ``stalled_training_rule``):
    ``(smdebug's name, tripwire's rule or None where it has none, a note)``; None for any other name.
    The same mapping for a session, ``load_config`` and ``tripwire validate`` (trial 31e: load_config
    took ``DeadRelu`` and its smdebug parameters without a word)."""
    if not isinstance(name, str) or not name or ":" in name:
        return None
    rules = available_rules()
    snake = _snake(name)
    if snake in _SMDEBUG_BY_SNAKE:
        smdebug, (rule, note) = _SMDEBUG_BY_SNAKE[snake]
        return smdebug, rule, note
    for candidate in (snake, snake[:-len("_rule")] if snake.endswith("_rule") else None):
        if candidate and candidate != name and candidate in rules and rules[candidate].__module__.startswith("tripwire."):
            return name, candidate, ""
    return None


def smdebug_rule_hint(name: str) -> str | None:
    """The text an unknown rule ``name`` that is smdebug's (:func:`smdebug_rule`) is answered with,
    after the name: ``"; did you mean 'dead_relu'? (smdebug's DeadRelu: ...)"``; None for another name."""
    found = smdebug_rule(name)
    if found is None:
        return None
    smdebug, rule, note = found
    if rule is None:
        return f" (smdebug's {smdebug}: {note})"
    said = f": {note}" if note else f" is tripwire's {rule}; tripwire's rule names are snake_case (tripwire rules lists them)"
    return f"; did you mean {rule!r}? (smdebug's {smdebug}{said})"


#: smdebug's parameters of its rules, by tripwire rule: tripwire's parameter (None: it has none) and a
#: note (trial 31e: diff_percent, max_threshold, ratio_threshold got no hint; threshold_tanh_max "did you
#: mean 'tanh_threshold'?" without the (min, max) pair)
_SMDEBUG_PARAMS: dict[str, dict[str, tuple[str | None, str]]] = {
    "loss_not_decreasing": {
        "diff_percent": ("min_decrease", "a fraction of the starting loss, not a percent: diff_percent: 10 is "
                         "min_decrease: 0.1"),
        "use_losses_collection": (None, "the rule reads the losses collection's tensors whose names match loss "
                                  "(default 'loss')"),
        "increase_threshold_percent": (None, "a loss that climbs back after it fell is the finding of "
                                       "loss_diverging (an opt-in rule: its regain is the share of the fall regained)"),
    },
    "vanishing_gradient": {
        "threshold": ("min_abs_mean", "every layer's mean |gradient| below it; tripwire also fires on the first "
                      "layers' gradient norm far below the last layer's, ratio and min_norm"),
    },
    "tensor_variance": {
        "max_threshold": ("max_variance", ""),
        "min_threshold": ("min_variance", ""),
    },
    "overfit": {
        "ratio_threshold": ("gap", "the validation metric more than gap times the training metric above it; "
                            "tripwire also needs the validation metric to worsen from its best, by tolerance"),
    },
    "overtraining": {
        "patience_train": ("window", "the save intervals over which the training metric is compared"),
        "patience_validation": ("val_patience", ""),
        "delta": ("min_delta", ""),
    },
    "dead_relu": {
        "threshold_layer": ("threshold", "a fraction, not a percent: threshold_layer: 50 is threshold: 0.5, the "
                            "share of a ReLU layer's outputs that are 0"),
        "threshold_inactivity": (None, "an output counts as dead where it is exactly 0"),
    },
    "saturated_activation": {
        **{f"threshold_{f}_{b}": (f"{f}_threshold", f"one bound of |x|, where smdebug's takes a (min, max) pair: "
                                  f"threshold_{f}_min: -9.5 and threshold_{f}_max: 9.5 are {f}_threshold: 9.5")
           for f in ("tanh", "sigmoid") for b in ("min", "max")},
        "threshold_layer": ("max_fraction", "a fraction, not a percent: threshold_layer: 50 is max_fraction: 0.5"),
        "threshold_inactivity": (None, "an input counts as saturated where |x| is above the layer's threshold"),
    },
    "weight_update_ratio": {
        "large_threshold": ("max_ratio", ""),
        "small_threshold": ("min_ratio", ""),
        "epsilon": (None, "a tensor that was all zeros, whose ratio is infinite, is skipped"),
        "num_steps": (None, "the integrations write update_ratio/<param>, the ratio of one optimizer step, at each "
                      "save step"),
    },
    "all_zero": {
        "threshold": (None, "the rule fires where every element is 0 (smdebug's threshold: 100); for a smaller share "
                      "write a rule over zero_fraction (docs/rules.md, 'Writing your own rule')"),
    },
    "exploding_tensor": {
        "tensor_regex": (None, "the rule has no tensor filter: it reads every tensor of the collections in collections"),
    },
    "unchanged_tensor": {
        "equal_nan": (None, "a NaN value counts as changed, as smdebug's default equal_nan: false"),
    },
    "class_imbalance": {
        "threshold_imbalance": ("ratio", ""),
        "threshold_misprediction": ("min_recall", "1 - threshold_misprediction: threshold_misprediction: 0.7 is "
                                    "min_recall: 0.3"),
        "samples": ("min_samples", ""),
        "labels_regex": ("labels", "a regular expression of the labels tensors' names"),
        "predictions_regex": ("predictions", "a regular expression of the predictions tensors' names"),
        "argmax": (None, "predictions holding a score per class are read as the class of the largest score"),
    },
    "confusion": {
        "max_off_diag": ("max_confusion", "the share of a class's samples predicted as one other class"),
        "min_diag": (None, "the rule judges one class's samples going to another (max_confusion), not each class's "
                     "accuracy"),
        "category_no": (None, "the classes are read from the labels"),
        "labels_collection": ("labels", "a regular expression of the labels tensors' names"),
        "predictions_collection": ("predictions", "a regular expression of the predictions tensors' names"),
    },
    "poor_weight_initialization": {
        "threshold": ("max_activation_ratio", "the largest over the smallest variance of the layers' outputs"),
        "activation_inputs_regex": (None, "the rule reads the activations collection (layer outputs) as captured"),
        "distribution_range": (None, "the rule judges the weights' std at their first save: min_std, max_std"),
        "steps": (None, "the rule judges the first save of the weights"),
    },
    "stalled_training": {
        "stop_training_on_fire": ("actions", "actions: [log, stop_training]"),
        "training_job_name_prefix": (None, "in the training the rule stops the training it runs in; tripwire watch "
                                     "RUN stops the run it watches"),
    },
    "tree_depth": {
        "depth": ("max_depth", ""),
    },
    "feature_importance_overweight": {
        "tensor_regex": ("importance_type", "the type in feature_importance/<type>/<feature>: smdebug's "
                         ".*feature_importance/weight is importance_type: weight"),
    },
    "similar_across_runs": {
        "other_trials": ("other", "the other run's directory"),
        "tensor_regex": ("tensors", "a regular expression of the tensor names, matched whole"),
    },
    "input_not_normalized": {
        "threshold_mean": ("max_abs_mean", ""),
        "regex": ("include", "a regular expression of the inputs tensors' names"),
        "threshold_samples": (None, "each saved inputs tensor is judged as it is"),
        "channel": (None, "the mean and std are of the whole tensor, every channel together"),
    },
}

#: what smdebug's ``tensor_regex`` and ``collection_names`` are, by the parameter a rule has for it
_TENSOR_REGEX = (("include", "a regular expression, re.search"), ("loss", "a regular expression of the loss names"),
                 ("train", "train and validation, the names of the two metrics"),
                 ("tensors", "a regular expression of the tensor names, matched whole"))
_COLLECTION_NAMES = (("collections", "a list of collection names"), ("collection", "one collection name"))


def _nested_params_hint(rule: str, key: str, value: Any) -> str | None:
    """The hint for a rule's parameters nested under a key of their own (``parameters:``, ``params:``,
    ``args:``...: trial 36o), where they go in the rule's mapping itself; None for another key."""
    if key not in ("parameters", "params", "args", "arguments", "kwargs", "options", "config") or not isinstance(value, Mapping):
        return None
    first = next(iter(value), "num_steps")
    return (f" (a rule's parameters go in its mapping itself, beside its name: {{name: {rule}, {first}: ...}}, "
            f"or {{{rule}: {{{first}: ...}}}}; not under a key of their own)")


def smdebug_param_hint(rule: str, key: str, accepted: Iterable[str]) -> str | None:
    """The text after ``unknown parameter of rule 'loss_not_decreasing'`` for a parameter ``key`` that
    is smdebug's name for one of rule ``rule``'s (``accepted``: the rule's parameters):
    ``"; did you mean 'min_decrease'? (smdebug's diff_percent: a fraction ...)"``, or where tripwire
    has none, what there is instead; None for another key (trial 31e)."""
    accepted = set(accepted)
    entry = _SMDEBUG_PARAMS.get(rule, {}).get(key)
    if entry is None and key == "tensor_regex":
        found = [(p, note) for p, note in _TENSOR_REGEX if p in accepted]
        entry = found[0] if found else (None, "the rule reads the tensors of its own collection, by their names")
    elif entry is None and key == "collection_names":
        found = [(p, note) for p, note in _COLLECTION_NAMES if p in accepted]
        entry = found[0] if found else (None, "the rule reads its own collections")
    elif entry is None and key == "mode" and "modes" in accepted:
        entry = ("modes", "a list of tripwire's modes: modes: [train] (smdebug's TRAIN, EVAL, PREDICT are train, "
                 "eval, predict; there is no GLOBAL)")
    if entry is None:
        return None
    new, note = entry
    if new is None:
        return f" (smdebug's {key}: no such parameter in tripwire; {note})"
    return f"; did you mean {new!r}? (smdebug's {key} is tripwire's {new}{': ' + note if note else ''})"


def _import_object(ref: str, path: str) -> Any:
    module, _, attr = ref.partition(":")
    if "<locals>" in attr.split("."):
        raise ConfigError(f"{path}: {ref!r} was defined inside a function, so it cannot be imported by name; "
                          f"define it at the top level of a module")
    try:
        obj: Any = import_user_module(module)
    except ImportError as exc:
        raise ConfigError(f"{path}: cannot import module {module!r} for {ref!r}: {import_failure(module, exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - (the module's own code raised: named with it, as imports[i]'s; trial 38l)
        raise ConfigError(f"{path}: importing module {module!r} for {ref!r} raised {type(exc).__name__}: {exc} (fix "
                          f"the module's code that runs at import)") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if module == "__main__":
                # (a lambda has no name to import it by: trial 40d F3, "'myrules:<lambda>'")
                moved = (f"define it with def in a module (for example myrules.py, then 'myrules:my_rule')"
                         if "<lambda>" in attr else f"move it into a module (for example myrules.py, then 'myrules:{attr}')")
                raise ConfigError(
                    f"{path}: {ref!r} was defined in the training script (__main__), which this process cannot "
                    f"import; {moved}, or give these rules in a config file (tripwire watch RUN --config "
                    f"rules.yaml)") from None
            if inspect.ismodule(obj):  # (what it holds that a rule reference may name: no module it imported)
                names = _rules_of(obj)
                close = did_you_mean(part, names) + (
                    f"; rules it defines: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}" if names else
                    "; it defines no rule (a Rule subclass, a rule function or object)")
            else:
                close = did_you_mean_attribute(obj, part)
            raise ConfigError(f"{path}: module {module!r} has no attribute {attr!r}{close}") from None
    return obj


def _rules_of(module: Any) -> list[str]:
    """The public names of ``module`` a ``module:attribute`` rule may name: Rule subclasses (but
    ``Rule`` and ``FunctionRule`` themselves), rule objects, and the other classes and functions
    defined in that module. Not what it imported, a module (``np``) or a helper (trial 26c:
    ``brokenrules:nope`` was "did you mean 'np'?")."""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if isinstance(value, type) and issubclass(value, Rule):
            if value not in (Rule, FunctionRule):
                names.append(name)
        elif isinstance(value, Rule) or (callable(value) and getattr(value, "__module__", None) == module.__name__
                                         and _may_be_rule_function(value)):
            names.append(name)
    return names


def _may_be_rule_function(fn: Any) -> bool:
    """Whether ``fn`` may be a rule function, ``fn(history, step, mode)``: a class that is not a Rule,
    a function that cannot take three positional arguments, or one whose first parameter is
    ``finding`` (an action, ``page(finding)``, kept in the same module: trial 30h F3) is not."""
    if isinstance(fn, type):
        return False
    try:
        sig = inspect.signature(fn)
        sig.bind(None, None, None)
    except (TypeError, ValueError):
        return False
    first = next(iter(sig.parameters.values()), None)
    return first is None or first.name != "finding"


def _ref(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


def object_spec(obj: Any) -> dict[str, Any]:
    """How a rule given in code (a function, a :class:`FunctionRule`, a rule instance) is written to
    the run's config, so that ``tripwire watch`` can rebuild it: a built-in rule by its name and the
    parameters that differ from their defaults; anything else by ``module:qualname`` (importable
    when it is defined at the top level of a module)."""
    if isinstance(obj, FunctionRule):  # its function, with the common parameters and actions it was given
        out = {"name": _ref(obj.fn)}
        if obj.name != getattr(obj.fn, "__name__", None):
            out["rule_name"] = obj.name  # FunctionRule(fn, name=...): the findings' rule name
        if obj._requirements:
            out["requirements"] = [dataclasses.asdict(r) for r in obj._requirements]
        for pname, default in (("start_step", 0), ("patience", 1), ("every", 1), ("repeat", False),
                               ("severity", obj.default_severity), ("modes", tuple(obj.default_modes))):
            value = getattr(obj, pname)
            if value != default:
                out[pname] = list(value) if isinstance(value, tuple) else value
        if obj.actions is not None:
            out["actions"] = _action_dicts(obj.actions)
        return out
    if not isinstance(obj, Rule):
        return {"name": _ref(obj)}  # a plain function
    cls = type(obj)
    # a built-in rule by its name; any other class by module:qualname (a class registered in the
    # training's process is not registered in the process that reads the run)
    builtin = available_rules().get(getattr(obj, "name", "")) is cls and cls.__module__.startswith("tripwire.")
    out: dict[str, Any] = {"name": obj.name if builtin else _ref(cls)}
    dropped = []
    for pname, param in _init_parameters(cls).items():
        if pname in ("actions",) or not hasattr(obj, pname):
            continue
        value = getattr(obj, pname)
        effective = {"modes": tuple(obj.default_modes), "severity": obj.default_severity}.get(pname, param.default)
        try:
            unchanged = param.default is not inspect.Parameter.empty and bool(value in (param.default, effective))
        except (TypeError, ValueError):  # (an array: no plain truth value)
            unchanged = False
        if unchanged:
            continue
        if isinstance(value, tuple):
            value = list(value)
        if _plain(value):
            out[pname] = value
        else:
            dropped.append(pname)
    if obj.actions is not None:  # (a rule given in code with its own actions: watch acts as the training did)
        out["actions"] = _action_dicts(obj.actions)
    if dropped and _say_once(obj):  # (the config is written more than once in a fit: said once; trial 21b)
        logger.warning("tripwire: rule %r: the run's config cannot record %s (not plain data): tripwire watch RUN "
                       "rebuilds the rule with %s; give the watch these rules with --config",
                       obj.name, ", ".join(dropped), "their defaults" if len(dropped) > 1 else "its default")
    return out


_SAID: weakref.WeakSet[Any] = weakref.WeakSet()


def _say_once(obj: Any) -> bool:
    """True the first time for this rule object (False after; True for one that takes no weak reference)."""
    try:
        if obj in _SAID:
            return False
        _SAID.add(obj)
    except TypeError:
        return True
    return True


def _action_dicts(actions: Iterable[Any]) -> list[Any]:
    """A rule's actions as the run's config writes them."""
    return [ActionSpec.parse(a, "actions").to_dict() for a in actions]


def user_rule_ref(name: str) -> str | None:
    """``module:qualname`` of a rule class registered under ``name`` that is not one of tripwire's;
    None for any other name."""
    cls = _REGISTRY.get(name)
    if cls is None or cls.__module__.startswith("tripwire."):
        return None
    return _ref(cls)


def _plain(value: Any) -> bool:
    """JSON data: what a run's config can hold."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


#: the parameters every rule takes (``Rule.__init__``'s), which a rule object named in a config takes
#: too (its ``actions`` are a config entry's own key)
COMMON_PARAMETERS: tuple[str, ...] = ("start_step", "patience", "every", "modes", "severity", "repeat")


def _with_common(rule: Rule, params: Mapping[str, Any], name: str, path: str) -> Rule:
    """``rule`` (a session's copy of a rule object named ``module:attribute`` in a config) with the
    common parameters of its config entry (:data:`COMMON_PARAMETERS`) set over its own; any other
    parameter is a :class:`ConfigError` naming the key, what the object takes, and that its class or
    function takes its own (trial 31f F6: ``{name: 'teamrules:loss_over_rule', patience: 2}`` was
    refused, though ``patience`` is common to every rule)."""
    for key in params:
        if key not in COMMON_PARAMETERS:
            made = (f"its function ({_ref(rule.fn)}, with rule_name and requirements)" if isinstance(rule, FunctionRule)
                    else f"its class ({_ref(type(rule))})")
            raise ConfigError(
                f"{path}.{key}: unknown parameter for the rule object {name!r}{did_you_mean(str(key), COMMON_PARAMETERS)}; "
                f"accepted: {', '.join(COMMON_PARAMETERS)} (the common parameters, set on this session's copy of the "
                f"object) and actions; for other parameters name {made} in the config instead")
    given = {p: getattr(rule, p) for p in COMMON_PARAMETERS}
    given.update(params)
    try:
        rule._set_common(**given, actions=rule.actions)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return rule


def _construct(cls: type[Rule], params: Mapping[str, Any], name: str, path: str) -> Rule:
    """``cls(**params)``, what its ``__init__`` raises said as a ConfigError at ``path``: its own
    ConfigError as it is, a plain ValueError or TypeError as bad parameters, anything else as what
    building it raised (trial 41k: a registered rule whose ``__init__`` raised a RuntimeError was a
    traceback, exit 1, from ``tripwire rules MODULE`` and ``tripwire validate``)."""
    try:
        return cls(**params)
    except ConfigError as exc:  # (the rule's own check, as built-in rules check theirs)
        raise ConfigError(f"{path}: {exc}") from None
    except (TypeError, ValueError) as exc:  # (a user's rule checking its parameters with a plain ValueError)
        raise ConfigError(f"{path}: bad parameters for rule {name!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - said with what raised, kept as the cause
        raise ConfigError(f"{path}: building rule {name!r} ({cls.__module__}.{cls.__qualname__}) raised "
                          f"{type(exc).__name__}: {exc}") from exc


def _instantiate(obj: Any, params: Mapping[str, Any], name: str, path: str) -> Rule:
    if isinstance(obj, Rule):
        if params:  # (a rule object given in code is used itself: nothing to set its parameters on)
            raise ConfigError(f"{path}: parameters {sorted(params)} given for a rule instance; pass a class or a function")
        return obj
    if isinstance(obj, type) and issubclass(obj, Rule):
        accepted = _init_params(obj) - {"common", "kwargs"}
        for key in params:
            if key not in accepted:
                hint = _nested_params_hint(name, key, params[key]) or did_you_mean(key, accepted)
                raise ConfigError(f"{path}.{key}: unknown parameter of rule {name!r}{hint}; "
                                  f"accepted: {', '.join(sorted(accepted))}")
        return _construct(obj, params, name, path)
    if isinstance(obj, type):  # (callable, but calling it makes an object: it is no rule function)
        raise ConfigError(f"{path}: {name!r} is the class {obj.__module__}.{obj.__qualname__}, which is not a Rule "
                          f"subclass; accepted: a Rule subclass, a Rule instance or a function (history, step, mode)")
    if callable(obj):
        given = dict(params)
        rule_name = given.pop("rule_name", None)
        if rule_name is not None:  # (trial 31f F7: named "FunctionRule.name", without the entry's key path)
            check_rule_name(rule_name, f"{path}.rule_name")
        requirements = given.pop("requirements", ())
        if not isinstance(requirements, (list, tuple)):
            raise ConfigError(f"{path}.requirements: got {requirements!r}; accepted: a list of requirements "
                              "({collection: gradients, reductions: [l2]} ...)")
        reqs = [Requirement.from_dict(r, f"{path}.requirements[{i}]") for i, r in enumerate(requirements)]
        # a function rule takes the common parameters only (trial 21b: "Rule.__init__() got an
        # unexpected keyword argument 'threshold'" said nothing of what it takes)
        accepted = (set(_init_params(Rule)) | {"rule_name", "requirements"}) - {"self"}
        for key in given:
            if key not in accepted:
                raise ConfigError(
                    f"{path}.{key}: unknown parameter of rule function {name!r}"
                    f"{_nested_params_hint(name, key, given[key]) or did_you_mean(key, accepted)}; "
                    f"accepted: {', '.join(sorted(accepted))} (a function takes no parameters of its own: read them "
                    f"from a closure, or write a Rule subclass whose __init__ takes them)")
        try:
            return FunctionRule(obj, name=rule_name, requirements=reqs, **given)
        except ConfigError as exc:  # (a common parameter's own check: named by the entry, as a class's)
            raise ConfigError(f"{path}: {exc}") from None
        except TypeError as exc:
            raise ConfigError(f"{path}: bad parameters for rule function {name!r}: {exc}") from None
    shown = repr(obj) if len(repr(obj)) <= 120 else repr(obj)[:117] + "..."
    got = f"{name!r} is {shown}" if ":" in name else f"got {shown}"  # (trial 23d: 'got []' for myrules:CALLS)
    raise ConfigError(f"{path}: {got}, which is neither a Rule subclass, a Rule instance nor a function; "
                      f"accepted: a rule name ('overfit'), a mapping ({{'name': 'overfit', 'patience': 3}}), "
                      f"'module:attribute', a Rule instance or a function (history, step, mode)")


def _init_parameters(cls: type[Rule], upto: type | None = None) -> dict[str, inspect.Parameter]:
    """The named ``__init__`` parameters of ``cls`` and its bases (the subclass's first), those of
    ``upto`` and of the classes after it in the MRO left out."""
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    out: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if klass is upto:
            break
        init = klass.__dict__.get("__init__")
        if init is not None and klass is not object:  # (object's *args, **kwargs are no parameters)
            for n, p in inspect.signature(init).parameters.items():
                if n != "self" and p.kind in named:
                    out.setdefault(n, p)
    return out


def _init_params(cls: type[Rule]) -> set[str]:
    return set(_init_parameters(cls))


def build_rule(spec: RuleSpec | str | Mapping[str, Any] | Rule, path: str = "rules") -> Rule:
    """Instantiate one rule from its spec (built-in name, ``module:attribute`` or an object).

    The spec is given as a config's ``rules`` entry is (a name, a mapping with ``name`` and
    parameters, a rule object; trial 37j: a mapping was a bare AttributeError) or as a
    :class:`RuleSpec`."""
    if not isinstance(spec, RuleSpec):
        spec = RuleSpec.parse(spec, path)
        if spec.name in RULE_SETS:
            raise ConfigError(f"{path}: {spec.name!r} is a rule set (its rules: {', '.join(RULE_SETS[spec.name])}); "
                              f"accepted: one rule (build_rules builds a set's rules)")
    params = dict(spec.params)
    if spec.name == "<object>":
        rule = _instantiate(params.pop("object"), {}, "<object>", path)
    elif ":" in spec.name:
        obj = _import_object(spec.name, path)
        if isinstance(obj, Rule):
            # a rule object named in a config is built afresh for each session, as a class is (trial
            # 23l: the module's one object carried its state, disabled flag and streaks, from one
            # session into the next in the same process: every other one skipped a save step)
            try:
                obj = copy.deepcopy(obj)
            except Exception as exc:  # noqa: BLE001 - (one that cannot be copied is used itself)
                if params:  # (the common parameters are set on the copy: never on the module's object)
                    raise ConfigError(
                        f"{path}: parameters {sorted(params)} given for the rule object {spec.name!r}, which cannot "
                        f"be copied ({type(exc).__name__}: {exc}), so they would change the module's object for "
                        f"every session; accepted: the object without parameters, or its class or function with "
                        f"them") from None
            else:
                if params:  # (the common parameters, on this copy; a broken object is named first)
                    _check_built(obj, path)
                    obj = _with_common(obj, params, spec.name, path)
                params = {}
        rule = _instantiate(obj, params, spec.name, path)
    else:
        cls = get_rule(spec.name, path)
        accepted = _init_params(cls) - {"common", "kwargs"}
        for key in params:
            if key not in accepted:
                hint = (smdebug_param_hint(spec.name, key, accepted) or _nested_params_hint(spec.name, key, params[key])
                        or did_you_mean(key, accepted))
                raise ConfigError(
                    f"{path}.{key}: unknown parameter of rule {spec.name!r}{hint}; "
                    f"accepted: {', '.join(sorted(accepted))}"
                )
        rule = _construct(cls, params, spec.name, path)
    _check_built(rule, path)
    if spec.actions is not None:
        rule.actions = list(spec.actions)
    rule.rule_set = spec.rule_set
    return rule


def _check_built(rule: Rule, path: str) -> None:
    """A user's rule object that cannot work is named when it is built, not at its first evaluation
    (trial 18d: no name gave findings of rule ''; no ``super().__init__()`` an AttributeError on
    ``actions``; no ``check`` an empty NotImplementedError; ``requirements()`` returning names or
    raising an AttributeError from the session)."""
    what = f"{path}: rule {rule.name!r} ({type(rule).__qualname__})" if rule.name else f"{path}: {type(rule).__qualname__}"
    if not isinstance(rule.name, str) or not rule.name:
        raise ConfigError(f"{what} has no name; accepted: a class attribute name = 'my_rule' (its findings carry it)")
    if not isinstance(rule, FunctionRule) or rule.name != getattr(rule.fn, "__name__", None):
        # (a function's own name is a Python name, or '<lambda>': a name given or a class's is checked)
        check_rule_name(rule.name, f"{path}: {type(rule).__qualname__}.name")
    _check_not_builtin_name(rule, path)
    if not hasattr(rule, "_streak"):
        raise ConfigError(f"{what}: its __init__ does not call super().__init__(**common); accepted: a Rule subclass "
                          "whose __init__ passes the common parameters (start_step, patience, every, ...) on")
    if type(rule).check is Rule.check:
        raise ConfigError(f"{what} does not implement check(history, step, mode); accepted: a Rule subclass with a "
                          "check that returns a Finding, a list of Findings or None")
    try:
        reqs = rule.requirements()
    except Exception as exc:
        raise ConfigError(f"{what}: requirements() raised {type(exc).__name__}: {exc}") from exc
    if isinstance(reqs, (str, Mapping)) or not isinstance(reqs, Iterable):
        raise ConfigError(f"{what}: requirements() returned {reqs!r}; accepted: a list of tripwire.Requirement")
    for i, r in enumerate(reqs):
        if not isinstance(r, Requirement):
            raise ConfigError(f"{what}: requirements() item {i} is {r!r}; accepted: tripwire.Requirement objects "
                              "(Requirement('gradients', reductions=('l2',)); Requirement.from_dict turns a mapping "
                              "into one)")


def _check_not_builtin_name(rule: Rule, path: str) -> None:
    """A rule that is not the rule registered under its name (a function, or a class of the user's
    own, named ``exploding_tensor``) is refused: it would replace that rule, in a rule set such as
    ``default`` too, without a word (trial 29j F3: a team function named ``exploding_tensor`` switched
    off the NaN detector), where :func:`register_rule` refuses a taken name. A subclass of the
    registered class may keep its name: it is that rule, tuned."""
    registered = available_rules().get(rule.name)
    if registered is None or isinstance(rule, registered) or type(rule).__qualname__ == registered.__qualname__:
        return
    builtin = registered.__module__.startswith("tripwire.")
    what = "function" if isinstance(rule, FunctionRule) else type(rule).__qualname__
    members = [n for n, items in RULE_SETS.items()
               if rule.name in (RuleSpec.parse(item, f"rule set {n}").name for item in items)]
    replaced = (f"; it would replace that rule, in the rule set{'s' if len(members) > 1 else ''} "
                f"{', '.join(repr(m) for m in members)} too" if members else "; it would replace that rule")
    renamed = f"team_{rule.name}"
    how = (f"FunctionRule(fn, name={renamed!r}), or rule_name: {renamed} in YAML" if isinstance(rule, FunctionRule)
           else f"a class attribute name = {renamed!r}")
    raise ConfigError(f"{path}: the {what} rule {rule.name!r} is named like the {'built-in' if builtin else 'registered'} "
                      f"rule {rule.name!r} ({registered.__module__}.{registered.__qualname__}){replaced}; accepted: "
                      f"a name of its own ({how}); to change the {'built-in' if builtin else 'registered'} rule's "
                      f"parameters, list it by its name with them ({{name: {rule.name}, patience: 3}})")


def expand_specs(specs: Iterable[RuleSpec]) -> list[RuleSpec]:
    """Expand rule sets (``default``) into their rules; later entries override earlier ones."""
    out: dict[str, RuleSpec] = {}
    extra: list[RuleSpec] = []
    explicit: dict[str, int] = {}  # a rule named by an entry of its own: where
    sets: dict[str, int] = {}  # a rule set listed: where
    for i, spec in enumerate(specs):
        if spec.name in RULE_SETS:
            if spec.name in sets:
                # (trial 38a: [default, default] passed, the second entry's actions ignored without a word)
                raise ConfigError(
                    f"rules[{i}]: rule set {spec.name!r} is listed already (rules[{sets[spec.name]}]); its rules run "
                    f"once per config: keep one entry (with the actions its rules should take: "
                    f"{{name: {spec.name}, actions: [...]}})")
            sets[spec.name] = i
            if spec.params:
                first = sorted(spec.params)[0]
                raise ConfigError(
                    f"rules[{spec.name}].{first}: a rule set takes 'actions' only, got {dict(spec.params)!r}; give "
                    f"a parameter to one of its rules after it (rules: [{spec.name}, {{name: "
                    f"{RULE_SETS[spec.name][0]}, {first}: ...}}]); its rules: {', '.join(RULE_SETS[spec.name])}")
            for item in RULE_SETS[spec.name]:
                sub = RuleSpec.parse(item, f"rules.{spec.name}")
                sub = RuleSpec(sub.name, sub.params, spec.actions if spec.actions is not None else sub.actions, spec.name)
                out.setdefault(sub.name, sub)
        elif spec.name == "<object>":
            extra.append(spec)
        else:
            # a module:attribute function given a rule_name of its own runs under that name: one function
            # under two rule_names is two rules, as FunctionRule(fn, name=...) twice is (trial 29j F10);
            # two entries that run under one name are refused where they are built (_one_per_name)
            key = spec.name if ":" not in spec.name or spec.params.get("rule_name") is None else \
                f"{spec.name} as {spec.params['rule_name']}"
            if key in explicit:
                # (trial 18a: the first of two entries was dropped without a word, and validate said "valid")
                raise ConfigError(
                    f"rules[{i}]: {spec.name!r} is listed already (rules[{explicit[key]}]); a rule runs once per "
                    f"config (an entry replaces the same rule of a rule set such as default, not another entry). "
                    f"{_once_advice(*_named(spec))}")
            explicit[key] = i
            out[key] = spec
    return list(out.values()) + extra


def _named(spec: RuleSpec) -> tuple[str, Any]:
    """The name a config entry's rule runs under and what it names (a registered class, a rule
    class, object or function of a ``module:attribute``; None where it does not import), for
    :func:`_once_advice`."""
    if ":" not in spec.name:
        cls = _REGISTRY.get(spec.name)
        return spec.name, cls
    try:
        obj = _import_object(spec.name, "rules")
    except ConfigError:
        return spec.name.rsplit(":", 1)[-1], None
    if isinstance(obj, Rule) or (isinstance(obj, type) and issubclass(obj, Rule)):
        return str(getattr(obj, "name", "") or spec.name.rsplit(":", 1)[-1]), obj
    return str(spec.params.get("rule_name") or getattr(obj, "__name__", spec.name.rsplit(":", 1)[-1])), obj


def build_rules(specs: Iterable[RuleSpec | str | Mapping[str, Any] | Rule]) -> list[Rule]:
    """Rule objects for a config's ``rules`` list, in order: names (``"default"`` and the other rule
    sets expand to their rules), mappings with parameters (``{"name": "overfit", "patience": 2}``),
    ``"module:attribute"`` references, :class:`RuleSpec` objects and rule objects. A rule listed
    twice is a :class:`~tripwire.ConfigError` naming both places (rules[i])."""
    parsed = [s if isinstance(s, RuleSpec) else RuleSpec.parse(s, f"rules[{i}]") for i, s in enumerate(specs)]
    # the modules of 'module:attribute' entries first: one may register a name an earlier entry uses
    # (trial 18d: validate accepted or refused the same rules by their order); a module that fails
    # to import is named where its entry is built
    for spec in parsed:
        if ":" in spec.name:
            with contextlib.suppress(ConfigError):
                _import_object(spec.name, "rules")
    # each spec named by its place in the list, and a rule set's rules by the set
    where = {id(s): f"rules[{i}]" for i, s in enumerate(parsed)}
    built = []
    for s in expand_specs(parsed):
        path = where.get(id(s), f"rules[{s.rule_set or s.name}]")
        rule = build_rule(s, path)
        with contextlib.suppress(AttributeError):  # (a rule object with __slots__)
            rule._config_path = path  # its actions' errors name it so (trial 23d: rules[loss_above].actions[0])
        built.append((where.get(id(s)), rule))
    return _one_per_name(built)


def config_path(rule: Rule) -> str:
    """Where a built rule came from in its config's list (``rules[2]``; a rule set's rule: the
    set's name), or ``rules[<name>]`` for a rule not built by :func:`build_rules`."""
    return getattr(rule, "_config_path", None) or f"rules[{rule.name}]"


def _one_per_name(built: list[tuple[str | None, Rule]]) -> list[Rule]:
    """The rules by the name they run under (findings, actions and state are keyed by it), once each:
    an entry of its own replaces a rule set's rule of that name, and two entries of one name are an
    error (trial 21b: a rule object, or 'module:attribute' beside the name it registers, ran twice,
    a second LossSpike's actions replaced the first's, and its stop_training was lost)."""
    kept: dict[str, tuple[str | None, Rule]] = {}
    for path, rule in built:
        first = kept.get(rule.name)
        if first is None:
            kept[rule.name] = (path, rule)
            continue
        if first[0] is not None and path is not None:  # two entries of their own
            # (rule objects are built after the named entries: the later entry by its place in the list,
            # trial 23d: "rules[0] ... is listed already (rules[1] ...)")
            (early, a), (late, b) = sorted([first, (path, rule)], key=lambda e: _place(e[0]))
            raise ConfigError(
                f"{late}: rule {rule.name!r} ({type(b).__qualname__}) is listed already ({early}: "
                f"{type(a).__qualname__}); a rule runs once per config, by its name (its findings, actions "
                f"and state are the name's). {_once_advice(rule.name, b)}")
        if path is not None:  # (an entry of its own replaces a rule set's rule, where that rule was)
            kept[rule.name] = (path, rule)
    return [rule for _, rule in kept.values()]


def _place(path: str | None) -> int:
    """The position in the rules list of an entry's path (``rules[3]``: 3; anything else: last)."""
    found = re.fullmatch(r"rules\[(\d+)\]", path or "")
    return int(found.group(1)) if found else sys.maxsize


def _once_advice(name: str, what: Any) -> str:
    """How to run a rule twice (for 'listed already'): ``name``, the name it runs under; ``what``, the
    rule (an object, a class, a function; None where not known). A function, or a FunctionRule, runs
    twice under two names; a rule class through a subclass of another name (trial 29j F10: a function
    was told to be subclassed, and a class's advice took its attribute's name for the rule's)."""
    if isinstance(what, FunctionRule) or (callable(what) and not isinstance(what, type) and not isinstance(what, Rule)):
        if not _RULE_NAME.fullmatch(name):  # (trial 40d F3: two lambdas were told "rule_name: <lambda>_2")
            return ("To run two function rules of no usable name (lambdas: '<lambda>'), give each a name of its own: "
                    "FunctionRule(fn, name='my_rule'), or a function defined with def")
        return (f"To run a function rule twice, give each entry a name of its own (YAML: rule_name: {name}_2; "
                f"Python: FunctionRule(fn, name={name + '_2'!r}))")
    cls = what if isinstance(what, type) else type(what) if isinstance(what, Rule) else None
    if cls is None or cls in (Rule, FunctionRule):
        return (f"To run a rule twice, run the second under another name (a subclass with name = "
                f"{'aux_' + name!r}, registered)")
    base = cls.__qualname__.rsplit(".", 1)[-1]
    regex = ("To judge several losses or metrics with one rule, give a regex (loss: 'loss|aux_loss'); for two settings, "
             if "loss" in _init_params(cls) else "For two settings, ")
    return (f"{regex}subclass the rule under another name (class Aux{base}({base}): name = {'aux_' + name!r}) and "
            f"register it")


__all__ = ["ActionSpec", "RULE_SETS", "available_rules", "build_rule", "build_rules", "get_rule", "register_rule"]
