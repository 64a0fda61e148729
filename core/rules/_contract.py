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
    ``params``), a Rule object (a copy is checked: one that cannot be copied is a problem), a rule
    function, a registered name or ``module:attribute``, or a config mapping. The rule given is left
    as it was: what two rules built alike share (a mutable default argument, a class attribute, a
    function's default arguments) is put back after the check (not a function's closure: a test
    may record the calls there). Returns None when the rule passes; raises
    :class:`RuleContractError` (an ``AssertionError`` too) naming every problem:

    - it builds as a config entry does (a ``name``, ``super().__init__(**common)``, a ``check``,
      ``requirements()`` of :class:`~tripwire.Requirement` objects on built-in collections);
    - it judges a synthetic training without raising, and returns a Finding, a list of them or
      None: 60 train steps of a model of three layers (weights, biases, their gradients and update
      ratios, layer outputs, two ReLU layers, inputs, losses and metrics), with an evaluation of two
      eval steps (``val_loss``, ``val_acc``, labels, predictions) after every fifth, saved every step,
      under the names the integrations give them;
    - the findings it returns are dated at the step judged or earlier, in its mode
      (:meth:`Rule._dated`);
    - it reads nothing that its ``requirements()`` do not ask for: a value, histogram or array of a
      collection, or a collection's list of names, that a training with the default config (losses,
      metrics) and this rule would not capture (the synthetic training captures everything; a
      training captures what the config and the rules ask for: trial 31f F1);
    - judging it leaves another rule built alike as it was (its ``state_dict()`` and attributes):
      two rules do not share state (trial 31f F2);
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
    # what two rules built alike share (a mutable default argument, a class attribute, a function's
    # default arguments): put back as it was when the check ends, so that the synthetic training
    # judged here never reaches a training's rule (trial 31f F2: check_rule's 120 steps were in the
    # first session's rule state)
    shared = _shared_objects(first, second)
    saved = _saved_contents(shared)
    try:
        if second is first:
            problems.append("it builds as one object each time, not a copy (a module's rule object that copy.deepcopy "
                            "cannot copy): every training in the process that names it shares its state, and this "
                            "check would change it; accepted: a rule object deepcopy copies (make what it cannot copy, "
                            "a lock, a file, a client, in check()), or its class or function")
            raise RuleContractError(first.name, problems)
        before = _state_of(second)
        judged = _judge(first, problems)
        if second is not None:
            _state_shared(second, before, problems)
        round_trip = second is not None and _state_round_trip(first, second, problems)
        if judged is not None and round_trip and not problems:
            later, _ = _build(rule, params, [])
            fresh, _ = _build(rule, params, [])
            if later is not None and fresh is not None:
                _resume(first, judged, later, fresh, problems)
        _named_inputs(first, problems)
    finally:
        _put_back(shared, saved)
    if problems:
        raise RuleContractError(first.name, problems)


def _build(rule: Any, params: dict[str, Any], problems: list[str]) -> tuple[Rule | None, str]:
    """The rule built as a config entry (a fresh one per call); None with the problem noted."""
    # (a registered name or 'module:attribute' as it is: RuleContractError quotes it; trial 31f F10:
    # rule "'nosuch_rule'")
    shown = (rule if isinstance(rule, str) else rule["name"] if isinstance(rule, Mapping) and isinstance(rule.get("name"), str)
             else getattr(rule, "name", None) or getattr(rule, "__name__", None) or repr(rule))
    try:
        if isinstance(rule, type):
            entry: Any = rule(**params)
        elif isinstance(rule, Rule):
            if params:
                raise ConfigError("params: a rule object is checked as it is; pass its class to build it with params")
            try:
                entry = copy.deepcopy(rule)
            except Exception as exc:  # noqa: BLE001 - (checked on a copy: the object itself is never changed)
                problems.append(
                    f"it cannot be copied (copy.deepcopy raised {type(exc).__name__}: {exc}): it is checked on a copy, "
                    f"never changed itself, and a session that names it as 'module:attribute' uses the object "
                    f"itself, shared by every training in the process; accepted: a rule object deepcopy copies (make "
                    f"what it cannot copy, a lock, a file, a client, in check()), or its class or function")
                return None, str(shown)
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


_CONTAINERS = (list, dict, set, bytearray, deque, np.ndarray)


def _shared_objects(first: Rule, second: Rule | None) -> list[Any]:
    """The mutable containers (lists, dicts, sets, arrays ...) that ``first`` and ``second``, two
    rules built alike, both hold, by identity: their attributes, their classes' (a class attribute
    changed in place), and a function rule's function's default arguments (not its closure: what a
    caller's own function keeps there, a test's record of the calls, is the caller's to see)."""
    if second is None:
        return []
    found: dict[int, Any] = {}
    mine = dict(vars(first)) if hasattr(first, "__dict__") else {}
    for klass in type(first).__mro__:
        if klass is not object:
            for key, value in vars(klass).items():
                if not key.startswith("__"):
                    mine.setdefault(f"{klass.__qualname__}.{key}", value)
    for key, value in mine.items():
        if isinstance(value, _CONTAINERS) and ("." in key or getattr(second, key, None) is value):
            found[id(value)] = value
    fn = getattr(first, "fn", None)
    if isinstance(first, FunctionRule) and fn is not None:  # (its closure is the caller's: a test's record of calls)
        held = list(getattr(fn, "__defaults__", None) or ()) + list((getattr(fn, "__kwdefaults__", None) or {}).values())
        found.update({id(v): v for v in held if isinstance(v, _CONTAINERS)})
    return list(found.values())


def _saved_contents(objects: list[Any]) -> list[Any]:
    """A copy of each object's contents (None where it cannot be copied: it is not put back)."""
    out = []
    for obj in objects:
        try:
            out.append(copy.deepcopy(obj))
        except Exception:  # noqa: BLE001
            out.append(None)
    return out


def _put_back(objects: list[Any], saved: list[Any]) -> None:
    """Give each object its saved contents back, in place (the same object: whoever holds it sees it)."""
    for obj, before in zip(objects, saved):
        if before is None:
            continue
        with contextlib.suppress(Exception):  # noqa: BLE001 - (one that refuses: left as the check left it)
            if isinstance(obj, np.ndarray):
                if obj.shape == before.shape:
                    obj[...] = before
            elif isinstance(obj, (dict, set)):
                obj.clear()
                obj.update(before)
            else:  # list, bytearray, deque
                obj.clear()
                obj.extend(before)


def _state_of(rule: Rule | None) -> tuple[str | None, dict[str, Any] | None]:
    """``rule``'s ``state_dict()`` as JSON and a copy of its attributes (None where either fails)."""
    if rule is None:
        return None, None
    try:
        state: str | None = json.dumps(plain_state(rule.state_dict()), sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001 - (said by the round trip)
        state = None
    held: dict[str, Any] = {}
    for klass in reversed(type(rule).__mro__):  # (a class attribute of the user's changed in place: shared)
        if not klass.__module__.startswith(("tripwire.", "builtins")):
            held.update({k: v for k, v in vars(klass).items() if not k.startswith("_") and isinstance(v, _CONTAINERS)})
    held.update({k: v for k, v in getattr(rule, "__dict__", {}).items() if not callable(v)})
    try:
        attributes: dict[str, Any] | None = copy.deepcopy(held)
    except Exception:  # noqa: BLE001
        attributes = None
    return state, attributes


def _state_shared(second: Rule, before: tuple[str | None, dict[str, Any] | None], problems: list[str]) -> None:
    """Judging the first rule must leave ``second``, a rule built alike and never judged, as it was
    (its ``state_dict()`` and attributes): else the two share state, as every training's rule
    would (trial 31f F2: ``def __init__(self, seen=[])``: one session went on with the list of the
    session before it, and the resume check compared the list with itself)."""
    state, attributes = before
    after_state, after_attributes = _state_of(second)
    changed: list[tuple[str, Any, Any]] = []
    if attributes is not None and after_attributes is not None:
        for key in sorted(set(attributes) | set(after_attributes)):
            a, b = attributes.get(key, _ABSENT), after_attributes.get(key, _ABSENT)
            if not _same(a, b):
                changed.append((key, a, b))
    if not changed and state is not None and after_state is not None and state != after_state:
        changed.append(("state_dict()", json.loads(state), json.loads(after_state)))
    if not changed:
        return
    names = ", ".join(repr(k) for k, _, _ in changed[:3])
    key, a, b = changed[0]
    problems.append(
        f"two rules built alike share state: judging one changed the other's {names} ({key}: {_cut(a)} before, "
        f"{_cut(b)} after), so every training in the process would continue the state of the one before it; "
        f"accepted: state of each rule's own, made in __init__ (a mutable default argument, def __init__(self, "
        f"{key}=[]), is one list for every rule: take {key}=None, then self.{key} = [] if {key} is None else "
        f"list({key}); a class attribute changed in place is shared too)")


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
    _undeclared_reads(rule, session, problems)
    return _findings_of(session)


def _stores(col: Any, what: str) -> bool:
    """Whether a session's collection ``col`` (None: not captured) stores what a read of ``what`` (a
    reduction, ``histogram``, ``array <kind>``: :class:`~tripwire._session.RuleReads`) reads."""
    if col is None:
        return False
    red = col.reduction
    if what in ("raw", "array raw"):
        return bool(red.raw)
    if what in ("histogram", "array hist_counts", "array hist_edges", "array histogram"):
        return bool(red.histogram)
    alias = {"abs_l1": "l1", "l1": "abs_l1", "abs_l2": "l2", "l2": "abs_l2"}.get(what)
    return what in red.reductions or (alias is not None and alias in red.reductions)


def _undeclared_reads(rule: Rule, session: Any, problems: list[str]) -> None:
    """What ``rule`` read in the synthetic training (which saves every collection, every reduction)
    that a training with the default config and this rule would not capture: a collection that
    neither the config (losses, metrics) nor its ``requirements()`` name, or a reduction, histogram
    or array of it that they do not ask for (trial 31f F1: a rule reading ``gradients/fc.weight``
    without a requirement passed, and in a training never fired)."""
    from .._config import load_config
    from .._session import _effective_collections, requirement_text

    reads = session._rule_reads.get(0)
    if reads is None or not (reads.reads or reads.listed):
        return
    try:
        captured = _effective_collections(load_config(None), [rule])
    except Exception:  # noqa: BLE001 - (a requirement no config can meet: the session said so above)
        return
    history = session.history
    missing: dict[str, dict[str, set[str]]] = {}  # collection -> {what read: tensors}
    for tensor, what, _mode in sorted(reads.reads):
        if not history.has_tensor(tensor):
            continue  # (a name the synthetic run lacks: read as None, or raised above)
        cols = history.tensor_collections(tensor)
        if not cols or any(_stores(captured.get(c), what) for c in cols):
            continue
        for c in cols:
            missing.setdefault(c, {}).setdefault(what, set()).add(tensor)
    listed = sorted(c for c in reads.listed if c in BUILTIN_COLLECTIONS and c not in captured and c not in missing)
    asked = ", ".join(sorted({r.collection for r in rule.requirements()})) or "nothing"
    for col, whats in sorted(missing.items()):
        tensors = sorted({t for ts in whats.values() for t in ts})
        held = captured.get(col)
        why = (f"the {col} collection is captured only where the config lists it or a rule's requirements() ask for it"
               if held is None else
               f"a training captures {col} with {', '.join(held.reduction.to_list()) or 'no reduction'} for this rule")
        problems.append(
            f"check() reads {', '.join(sorted(whats))} of {_name_list(tensors)} ({col}), which its requirements() do "
            f"not ask for (it asks for {asked}): {why}, so in a training it reads nothing there and never judges it "
            f"(this synthetic training saves every collection); accepted: declare {requirement_text(col, whats)} in "
            f"requirements() (FunctionRule(fn, requirements=[...]))")
    if listed:
        many = len(listed) > 1
        problems.append(
            f"check() lists the collection{'s' if many else ''} {', '.join(map(repr, listed))} (tensor_names), which its "
            f"requirements() do not ask for (it asks for {asked}): a training captures a collection only where the "
            f"config lists it or a rule's requirements() ask for it, so there the list is empty; accepted: declare "
            f"{', '.join(f'Requirement({c!r})' for c in listed)} in requirements(), with the reductions it reads")


def _name_list(names: list[str]) -> str:
    shown = ", ".join(map(repr, names[:3]))
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


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
