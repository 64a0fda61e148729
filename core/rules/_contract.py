"""The contract every rule passes, as a check a rule author runs on a rule of their own
(``tripwire.rules.check_rule``): the built-in rules pass it too (tests/rules/test_rule_contract.py)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._config import BUILTIN_COLLECTIONS
from .._errors import ConfigError, TripwireError
from ._base import FunctionRule, Rule, plain_state, restored_state
from ._registry import build_rules

_STEPS = 8


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
    - it judges a short synthetic training (losses, metrics, weights, gradients, activations,
      labels and predictions, in train and eval mode, saved every step) without raising, and returns
      a Finding, a list of them or None;
    - its ``state_dict()`` is plain data once numpy values are (JSON), and a fresh rule loaded with
      it gives the same ``state_dict()`` back (a resumed training keeps the rule's state);
    - ``named_inputs()`` names parameters of the rule that hold strings.

    (Its module may import what it needs: ``tripwire watch`` imports it to rebuild the rule, in the
    training's environment. The built-in rules also import no framework: a test of tripwire's own.)
    """
    problems: list[str] = []
    first, name = _build(rule, params, problems)
    if first is None:
        raise RuleContractError(name, problems)
    second, _ = _build(rule, params, [])
    _judge(first, problems)
    if second is not None:
        _state_round_trip(first, second, problems)
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


def _history_steps() -> list[tuple[str, int, dict[str, Any]]]:
    """A short, healthy synthetic training: what every integration offers, every step, under the
    names the integrations give it (docs/rules.md, "Names the rules read"; trial 25d: the gradient
    was ``fc.weight.grad``, so a rule reading ``gradients/fc.weight`` failed, or never saw one)."""
    rng = np.random.default_rng(0)
    steps: list[tuple[str, int, dict[str, Any]]] = []
    w = rng.normal(size=(4, 3))
    for i in range(_STEPS):
        before, w = w, w - 0.01 * rng.normal(size=w.shape)
        pre = rng.normal(size=(8, 4))
        steps.append(("train", i, {
            "loss": (1.0 / (i + 1), "losses"), "train_acc": (0.5 + 0.05 * i, "metrics"),
            "fc.weight": (w.copy(), "weights"), "fc.bias": (np.full(4, 0.1 * i), "biases"),
            "gradients/fc.weight": (rng.normal(size=w.shape), "gradients"),
            "update_ratio/fc.weight": (float(np.linalg.norm(w - before) / np.linalg.norm(before)), "optimizer"),
            "lr/0": (0.01, "optimizer"), "fc/output": (pre, "activations"),
            "relu/input": (pre, "activation_inputs"), "relu/output": (np.maximum(pre, 0), "relu_outputs"),
            "inputs": (rng.normal(size=(8, 3)), "inputs"),
        }))
        if i % 2 == 1:
            labels = rng.integers(0, 3, size=16)
            steps.append(("eval", i // 2 + 1, {
                "val_loss": (1.2 / (i + 1), "losses"), "val_acc": (0.5 + 0.04 * i, "metrics"),
                "labels": (labels, "labels"), "predictions": (rng.random((16, 3)), "predictions"),
            }))
    return steps


def _judge(rule: Rule, problems: list[str]) -> None:
    from .._session import Session

    try:
        session = Session(write=False, rules=[rule], save_interval=1, collections=list(BUILTIN_COLLECTIONS),
                          strict=True)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"a session cannot run it: {type(exc).__name__}: {exc}")
        return
    # its actions were built (one that cannot be is a problem above) but never fire: a test must not log
    # the synthetic training's findings, call the user's callable, or notify anyone (trial 23d)
    session._default_actions = []
    session._rule_actions = [[] for _ in session._rule_actions]
    for mode, step, values in _history_steps():
        try:
            session.step(mode, step, values)
        except Exception as exc:  # noqa: BLE001 - strict: the rule's own error, or what it returned
            cause = exc.__cause__ or exc
            problems.append(f"judging a short synthetic training, at {mode} step {step}: "
                            f"{type(cause).__name__}: {cause}")
            return


def _state_round_trip(judged: Rule, fresh: Rule, problems: list[str]) -> None:
    try:
        state = judged.state_dict()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"state_dict() raised {type(exc).__name__}: {exc}")
        return
    if not isinstance(state, dict):
        problems.append(f"state_dict() returned {type(state).__name__}; accepted: a dict (extend Rule.state_dict()'s)")
        return
    try:
        text = json.dumps(plain_state(state))
    except (TypeError, ValueError) as exc:
        problems.append(f"state_dict() is not plain data (dicts, lists, strings, numbers, numpy values): {exc}")
        return
    try:
        fresh.load_state_dict(restored_state(json.loads(text)))
        again = fresh.state_dict()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"load_state_dict(state_dict()) raised {type(exc).__name__}: {exc}")
        return
    if json.dumps(plain_state(again), sort_keys=True) != json.dumps(plain_state(state), sort_keys=True):
        problems.append("a fresh rule loaded with state_dict() gives another state_dict() back: a resumed training "
                        f"would not continue its state (saved {_cut(state)}, loaded {_cut(again)})")


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
