"""The contract every rule passes, as a check a rule author runs on a rule of their own
(``tripwire.rules.check_rule``): the built-in rules pass it too (tests/rules/test_rule_contract.py)."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._config import BUILTIN_COLLECTIONS
from .._errors import ConfigError, TripwireError
from ._base import FunctionRule, Rule, plain_state, restored_state
from ._registry import build_rules

#: the synthetic training's train steps: enough for ``patience``, windows and ``every`` to run
_TRAIN_STEPS = 60
#: an evaluation (two eval steps) after every this many train steps
_EVAL_EVERY = 5
#: the layers of the synthetic model: (name, weight shape); each has a weight and a bias
_LAYERS: tuple[tuple[str, tuple[int, ...]], ...] = (("conv1", (8, 3, 3, 3)), ("hidden", (16, 32)), ("fc", (4, 16)))
#: a rule's ``check`` may take this long a call on average (seconds); a rule slower than this costs
#: a training more than its steps do (the rules run at each save step, on the training's thread)
MAX_MEAN_CHECK_S = 0.05


class RuleContractError(TripwireError, AssertionError):
    """A rule breaks the contract (:func:`check_rule`): every problem found, one per line."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"rule {name!r} breaks the rule contract ({len(problems)} problem"
                         f"{'s' if len(problems) != 1 else ''}):\n  - " + "\n  - ".join(problems))


def check_rule(rule: Rule | type[Rule] | Callable[..., Any] | str | Mapping[str, Any], **params: Any) -> None:
    """Check a rule as tripwire checks its own: call it in a test of yours
    (``tripwire.rules.check_rule(MyRule, threshold=3)``). ``rule``: a Rule subclass (built with
    ``params``), a Rule object (a copy is checked), a rule function, a registered name or
    ``module:attribute``, or a config mapping. Returns None when the rule passes; raises
    :class:`RuleContractError` (an ``AssertionError`` too) naming every problem:

    - it builds as a config entry does (a ``name``, ``super().__init__(**common)``, a ``check``,
      ``requirements()`` of :class:`~tripwire.Requirement` objects on built-in collections);
    - it judges a synthetic training without raising, and returns a Finding, a list of them or
      None: 60 train steps of a model of three layers (weights, biases, their gradients and update
      ratios, layer outputs, two ReLU layers, inputs, losses and metrics), with an evaluation of two
      eval steps (``val_loss``, ``val_acc``, labels, predictions) after every fifth, saved every step,
      under the names the integrations give them;
    - its ``check`` takes at most 50 ms a call on average (:data:`MAX_MEAN_CHECK_S`; the slowest call
      is named); a rule far slower is stopped as soon as its mean cannot come under that;
    - its ``state_dict()`` is plain data once numpy values are (JSON), and a fresh rule loaded with
      it gives the same ``state_dict()`` back;
    - a resume keeps what it judges: the synthetic training judged again, the rule replaced halfway
      (after train step 29) by a fresh one loaded with the first one's ``state_dict()``, gives the
      same findings as judged straight through, and leaves the rule's attributes as they are after
      the straight judgement (one that ``check()`` changes and ``state_dict()`` does not hold, a
      counter or a best value, is named: a training resumed from a checkpoint would start it
      again); attributes whose name starts with ``_`` are taken for caches the rule rebuilds from
      the history, and not compared;
    - ``named_inputs()`` names parameters of the rule that hold strings.

    (Its module may import what it needs: ``tripwire watch`` imports it to rebuild the rule, in the
    training's environment. The built-in rules also import no framework: a test of tripwire's own.)
    """
    problems: list[str] = []
    first, name = _build(rule, params, problems)
    if first is None:
        raise RuleContractError(name, problems)
    second, _ = _build(rule, params, [])
    judged = _judge(first, problems)
    round_trip = second is not None and _state_round_trip(first, second, problems)
    if judged is not None and round_trip and not problems:
        later, _ = _build(rule, params, [])
        fresh, _ = _build(rule, params, [])
        if later is not None and fresh is not None:
            _resume(first, judged, later, fresh, problems)
    _named_inputs(first, problems)
    if problems:
        raise RuleContractError(first.name, problems)


def _build(rule: Any, params: dict[str, Any], problems: list[str]) -> tuple[Rule | None, str]:
    """The rule built as a config entry (a fresh one per call); None with the problem noted."""
    shown = getattr(rule, "name", None) or getattr(rule, "__name__", None) or repr(rule)
    try:
        if isinstance(rule, type):
            entry: Any = rule(**params)
        elif isinstance(rule, Rule):
            if params:
                raise ConfigError("params: a rule object is checked as it is; pass its class to build it with params")
            try:
                entry = copy.deepcopy(rule)
            except Exception:  # noqa: BLE001 - a rule holding what cannot be copied: checked itself
                entry = rule
        elif isinstance(rule, (str, Mapping)):
            entry = {"name": rule, **params} if isinstance(rule, str) else {**rule, **params}
        elif callable(rule):
            entry = FunctionRule(rule, **params)
        else:
            entry = rule
        built = build_rules([entry])
    except Exception as exc:  # noqa: BLE001 - every way it fails to build is a problem to name
        problems.append(f"it does not build: {type(exc).__name__}: {exc}")
        return None, str(shown)
    return built[0], built[0].name


_STEPS_CACHE: list[tuple[str, int, dict[str, Any]]] = []


def _history_steps() -> list[tuple[str, int, dict[str, Any]]]:
    """A healthy synthetic training: what every integration offers, every step, under the names the
    integrations give it (docs/rules.md, "Names the rules read"; trial 25d: the gradient was
    ``fc.weight.grad``, so a rule reading ``gradients/fc.weight`` failed, or never saw one). Three
    layers (trial 29j F5: with one, a rule comparing layers never reached its comparison), 60 train
    steps (8 did not reach ``patience``, windows or a rule's later steps), an evaluation after every
    fifth. Made once, the same for every rule checked (the values are not to be changed)."""
    if _STEPS_CACHE:
        return _STEPS_CACHE
    rng = np.random.default_rng(0)
    steps: list[tuple[str, int, dict[str, Any]]] = []
    weights = {layer: rng.normal(scale=0.5, size=shape) for layer, shape in _LAYERS}
    biases = {layer: np.full(shape[0], 0.01) for layer, shape in _LAYERS}
    evals = 0
    for i in range(_TRAIN_STEPS):
        values: dict[str, Any] = {
            "loss": (float(2.0 * np.exp(-i / 25) + 0.3 + 0.02 * rng.normal()), "losses"),
            "train_acc": (float(0.4 + 0.5 * (1 - np.exp(-i / 20))), "metrics"), "lr/0": (0.01, "optimizer"),
            "inputs": (rng.normal(size=(8, 3, 6, 6)), "inputs"),
        }
        for layer, shape in _LAYERS:
            grad_w = rng.normal(scale=0.1, size=shape)
            grad_b = rng.normal(scale=0.05, size=shape[0])
            before = weights[layer]
            weights[layer] = before - 0.01 * grad_w
            biases[layer] = biases[layer] - 0.01 * grad_b
            out = rng.normal(size=(8, shape[0]))
            values.update({
                f"{layer}.weight": (weights[layer].copy(), "weights"), f"{layer}.bias": (biases[layer].copy(), "biases"),
                f"gradients/{layer}.weight": (grad_w, "gradients"), f"gradients/{layer}.bias": (grad_b, "gradients"),
                f"update_ratio/{layer}.weight": (float(np.linalg.norm(weights[layer] - before) / np.linalg.norm(before)),
                                                 "optimizer"),
                f"{layer}/output": (out, "activations"),
            })
        for relu, width in (("relu", 8), ("relu2", 16)):
            pre = rng.normal(size=(8, width))
            values[f"{relu}/input"] = (pre, "activation_inputs")
            values[f"{relu}/output"] = (np.maximum(pre, 0), "relu_outputs")
        steps.append(("train", i, values))
        if i % _EVAL_EVERY == _EVAL_EVERY - 1:
            for _ in range(2):
                labels = rng.integers(0, 3, size=32)
                scores = rng.random((32, 3))
                scores[np.arange(32), labels] += 0.3 + i / _TRAIN_STEPS  # (a model that learns)
                steps.append(("eval", evals, {
                    "val_loss": (float(2.2 * np.exp(-i / 25) + 0.35), "losses"),
                    "val_acc": (float(0.4 + 0.45 * (1 - np.exp(-i / 20))), "metrics"),
                    "labels": (labels, "labels"),
                    "predictions": (scores / scores.sum(axis=1, keepdims=True), "predictions"),
                }))
                evals += 1
    _STEPS_CACHE.extend(steps)
    return _STEPS_CACHE


_HALF = _TRAIN_STEPS // 2 - 1  # the train step after which a resumed judgement replaces the rule


def _session_for(rule: Rule, problems: list[str]) -> Any:
    """A session that judges ``rule`` alone, writing nothing and firing none of its actions."""
    from .._session import Session

    try:
        session = Session(write=False, rules=[rule], save_interval=1, collections=list(BUILTIN_COLLECTIONS),
                          strict=True)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"a session cannot run it: {type(exc).__name__}: {exc}")
        return None
    # its actions were built (one that cannot be is a problem above) but never fire: a test must not log
    # the synthetic training's findings, call the user's callable, or notify anyone (trial 23d)
    session._default_actions = []
    session._rule_actions = [[] for _ in session._rule_actions]
    return session


def _findings_of(session: Any) -> list[tuple[str, int, str]]:
    return [(f.mode, f.step, f.message) for f in session.findings if f.kind == "finding"]


def _judge(rule: Rule, problems: list[str]) -> list[tuple[str, int, str]] | None:
    """Judge the synthetic training with ``rule``, timing its ``check``; the findings (mode, step,
    message), or None where it raised or was too slow (the problem noted)."""
    session = _session_for(rule, problems)
    if session is None:
        return None
    steps = _history_steps()
    times: list[tuple[float, str, int]] = []
    timed = _time_checks(rule, times)
    try:
        for mode, step, values in steps:
            try:
                session.step(mode, step, values)
            except Exception as exc:  # noqa: BLE001 - strict: the rule's own error, or what it returned
                cause = exc.__cause__ or exc
                problems.append(f"judging a short synthetic training, at {mode} step {step}: "
                                f"{type(cause).__name__}: {cause}")
                return None
            if sum(t for t, _, _ in times) > MAX_MEAN_CHECK_S * len(steps):  # (its mean cannot come under the limit)
                problems.append(_too_slow(times, stopped=True))
                return None
    finally:
        if timed:
            with contextlib.suppress(AttributeError):
                del rule.check  # type: ignore[method-assign]
    if times and sum(t for t, _, _ in times) / len(times) > MAX_MEAN_CHECK_S:
        problems.append(_too_slow(times, stopped=False))
        return None
    return _findings_of(session)


def _time_checks(rule: Rule, times: list[tuple[float, str, int]]) -> bool:
    """Time each call of ``rule.check`` into ``times`` (seconds, mode, step), through an attribute of
    the object (taken off after); False where the object takes none (``__slots__``)."""
    check = rule.check

    def timed(history: Any, step: int, mode: str) -> Any:
        start = time.perf_counter()
        try:
            return check(history, step, mode)
        finally:
            times.append((time.perf_counter() - start, mode, step))

    try:
        rule.check = timed  # type: ignore[method-assign]
    except AttributeError:
        return False
    return True


def _too_slow(times: list[tuple[float, str, int]], stopped: bool) -> str:
    mean = sum(t for t, _, _ in times) / len(times)
    slowest, mode, step = max(times)
    how = (f"judging was stopped after {len(times)} calls, when its mean could no longer come under the limit"
           if stopped else f"over {len(times)} calls")
    return (f"check() takes {mean * 1000:.0f} ms a call on average ({how}; the slowest, {slowest * 1000:.0f} ms, at "
            f"{mode} step {step}); accepted: at most {MAX_MEAN_CHECK_S * 1000:.0f} ms a call on average (a training "
            f"judges its rules at every save step, on its own thread: read the series once, keep what was computed "
            f"in the rule's state)")


def _resume(straight: Rule, found: list[tuple[str, int, str]], later: Rule, fresh: Rule, problems: list[str]) -> None:
    """Judge the synthetic training again with ``later``, replaced after train step :data:`_HALF` by
    ``fresh`` loaded with ``later``'s ``state_dict()`` (as a training resumed from a checkpoint
    there: the same history, the rule a new object); the findings must be ``found`` (those of
    ``straight``, judged straight through), and ``fresh``'s attributes at the end ``straight``'s
    (trial 29j F4: a plateau counter without ``state_dict`` passed, and fired 50 steps late after a
    resume)."""
    session = _session_for(later, [])
    if session is None:
        return
    swapped = False
    at_swap: list[tuple[str, Any, Any]] = []
    for mode, step, values in _history_steps():
        if not swapped and mode == "train" and step > _HALF:
            try:
                fresh.load_state_dict(restored_state(json.loads(json.dumps(plain_state(later.state_dict())))))
            except Exception as exc:  # noqa: BLE001 - (said by the round trip above, where it fails there)
                problems.append(f"load_state_dict(state_dict()) at train step {_HALF} raised "
                                f"{type(exc).__name__}: {exc}")
                return
            session.rules[0] = fresh
            swapped = True
            at_swap = _unsaved_attributes(later, fresh)
        try:
            session.step(mode, step, values)
        except Exception as exc:  # noqa: BLE001
            cause = exc.__cause__ or exc
            problems.append(f"judging the synthetic training again, resumed after train step {_HALF} (a fresh rule "
                            f"loaded with state_dict()), at {mode} step {step}: {type(cause).__name__}: {cause}")
            return
    resumed = _findings_of(session)
    if at_swap:  # (what a checkpoint after train step _HALF loses, said as it is lost)
        kept = at_swap
        when = (f"after train step {_HALF} the rule holds {_values(kept, 1)}, a fresh rule loaded with its "
                f"state_dict() {_values(kept, 2)}")
    else:  # (lost at the checkpoint and grown apart since)
        kept = _unsaved_attributes(straight, fresh)
        when = (f"judged straight through, the rule ends with {_values(kept, 1)}, but a fresh rule loaded with "
                f"state_dict() after train step {_HALF} and judging the same steps after ends with {_values(kept, 2)}")
    if kept:
        them = "them" if len(kept) > 1 else "it"
        problems.append(
            f"check() keeps {', '.join(repr(k) for k, _, _ in kept)} that state_dict() does not hold: {when} (a "
            f"training resumed from a checkpoint would start {them} again: add {them} to state_dict() and "
            f"load_state_dict(), extending Rule's; a cache the rule rebuilds from the history may be named with a "
            f"leading _)")
    if resumed != found:
        only_straight = [f for f in found if f not in resumed]
        only_resumed = [f for f in resumed if f not in found]
        problems.append(
            f"a resume changes its findings: judged straight through it finds {_steps_text(only_straight)}, resumed "
            f"after train step {_HALF} (a fresh rule loaded with state_dict()) {_steps_text(only_resumed)} instead"
            + (f" ({_cut(only_straight[0][2])} / {_cut(only_resumed[0][2])})" if only_straight and only_resumed else ""))


def _values(attributes: list[tuple[str, Any, Any]], which: int) -> str:
    """``best=0.95; since=3``: each attribute with its value in the first (1) or second (2) rule."""
    return "; ".join(f"{item[0]}={_cut(item[which])}" for item in attributes)


def _steps_text(found: list[tuple[str, int, str]]) -> str:
    if not found:
        return "nothing"
    shown = [f"{mode} step {step}" for mode, step, _ in found[:5]]
    return "at " + ", ".join(shown) + (f" and {len(found) - 5} more" if len(found) > 5 else "")


def _unsaved_attributes(straight: Rule, fresh: Rule) -> list[tuple[str, Any, Any]]:
    """The public attributes (no leading ``_``) whose values differ between ``straight`` and
    ``fresh`` (its name, the value in each)."""
    names = sorted(k for k in set(vars(straight)) | set(vars(fresh)) if not k.startswith("_"))
    pairs = [(k, getattr(straight, k, _ABSENT), getattr(fresh, k, _ABSENT)) for k in names]
    return [(k, a, b) for k, a, b in pairs if not _same(a, b)]


_ABSENT = object()


def _same(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether two attribute values are alike: numbers (NaN alike), arrays, containers (item by item),
    objects by their ``state_dict()`` or attributes."""
    if a is b:
        return True
    if depth > 8:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind in "fc"))
        except (TypeError, ValueError):
            return False
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)):
        return bool(a == b or (np.isnan(a) and np.isnan(b)))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, (list, tuple, deque)) and isinstance(b, (list, tuple, deque)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (str, bytes, int, bool, np.integer, np.bool_, type(None))):
        return bool(a == b)
    if hasattr(a, "state_dict") and callable(a.state_dict):
        with contextlib.suppress(Exception):
            return _same(a.state_dict(), b.state_dict(), depth + 1)
    if hasattr(a, "__dict__") and not callable(a):
        return _same(vars(a), vars(b), depth + 1)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - (no truth value)
        return repr(a) == repr(b)


def _state_round_trip(judged: Rule, fresh: Rule, problems: list[str]) -> bool:
    """Whether ``judged``'s state is plain data that a fresh rule loads and gives back (else the problem noted)."""
    try:
        state = judged.state_dict()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"state_dict() raised {type(exc).__name__}: {exc}")
        return False
    if not isinstance(state, dict):
        problems.append(f"state_dict() returned {type(state).__name__}; accepted: a dict (extend Rule.state_dict()'s)")
        return False
    try:
        text = json.dumps(plain_state(state))
    except (TypeError, ValueError) as exc:
        problems.append(f"state_dict() is not plain data (dicts, lists, strings, numbers, numpy values): {exc}")
        return False
    try:
        fresh.load_state_dict(restored_state(json.loads(text)))
        again = fresh.state_dict()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"load_state_dict(state_dict()) raised {type(exc).__name__}: {exc}")
        return False
    if json.dumps(plain_state(again), sort_keys=True) != json.dumps(plain_state(state), sort_keys=True):
        problems.append("a fresh rule loaded with state_dict() gives another state_dict() back: a resumed training "
                        f"would not continue its state (saved {_cut(state)}, loaded {_cut(again)})")
        return False
    return True


def _named_inputs(rule: Rule, problems: list[str]) -> None:
    try:
        named, params = rule.named_inputs(), rule.params()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"named_inputs() or params() raised {type(exc).__name__}: {exc}")
        return
    for param, pattern in named.items():
        if param not in params or not isinstance(pattern, str):
            problems.append(f"named_inputs() names {param!r}={pattern!r}, which is not a parameter holding a string "
                            f"(its parameters: {', '.join(sorted(params))})")


def _cut(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


__all__ = ["RuleContractError", "check_rule"]
