"""The rule interface: a rule reads a :class:`~tripwire.History` and returns findings.

No framework object appears in a rule's signature: the same rule runs in-process (fed by a
callback) and out-of-process over a stored run (``tripwire watch``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .._config import BUILTIN_COLLECTIONS, MODES, ReductionConfig, _check_reduction, mode_guess
from .._errors import ConfigError
from .._finding import SEVERITIES, Finding
from .._history import History
from .._validate import check_bool, check_int, check_str, checked_init, checked_keywords, did_you_mean


_MISSING = object()

#: What a rule's name may be (the name its findings, actions, state and ``tripwire watch`` know it
#: by): a letter or underscore, then up to 63 letters, digits, ``_``, ``.`` or ``-``; not a rule
#: set's name (``default``). Trial 29j F12: ``a:b`` (read back as ``module:attribute``), ``default``,
#: names with spaces and 300 characters were accepted.
RULE_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]{0,63}"
_RULE_NAME = re.compile(RULE_NAME_PATTERN)


def check_rule_name(name: Any, path: str) -> str:
    """``name`` when it may name a rule (:data:`RULE_NAME_PATTERN`, and no rule set's name), else a
    :class:`ConfigError` naming ``path``, the value and what is accepted."""
    from ._registry import RULE_SETS  # (the registry imports this module)

    accepted = (f"accepted: a name matching {RULE_NAME_PATTERN} (a letter or _, then up to 63 letters, digits, _, . "
                f"or -), not a rule set's name ({', '.join(RULE_SETS)})")
    if not isinstance(name, str) or not _RULE_NAME.fullmatch(name):
        shown = repr(name) if not isinstance(name, str) or len(name) <= 80 else repr(name[:77]) + "..."
        why = f" ({len(name)} characters)" if isinstance(name, str) and len(name) > 64 else ""
        raise ConfigError(f"{path}: got {shown}{why}; {accepted}")
    if name in RULE_SETS:
        raise ConfigError(f"{path}: got {name!r}, the name of a rule set (rules: [{name}] lists its rules); {accepted}")
    return name


@checked_keywords
@dataclass(frozen=True)
class Requirement:
    """What a rule needs captured.

    ``collection``: a built-in collection name; ``reductions``: scalar reductions it reads
    (``raw`` for one-element tensors such as losses); ``histogram``/``raw_arrays``: arrays it reads;
    ``modes``: modes it reads; ``max_interval``: it needs a save at least every N steps;
    ``optional``: the rule judges without it (it only refines the judgement: ``saturated_activation``
    reads ``relu_outputs`` to tell ReLU layers apart), so a run without it is not named as leaving
    the rule nothing to read.
    """

    collection: str
    reductions: tuple[str, ...] = ()
    histogram: bool = False
    raw_arrays: bool = False
    modes: tuple[str, ...] = ("train",)
    max_interval: int | None = None
    optional: bool = False

    def __post_init__(self) -> None:
        if self.collection not in BUILTIN_COLLECTIONS:
            raise ConfigError(
                f"requirement: unknown collection {self.collection!r}{did_you_mean(self.collection, BUILTIN_COLLECTIONS)}; "
                f"accepted: {', '.join(BUILTIN_COLLECTIONS)}"
            )
        if isinstance(self.modes, str):  # a list of one (trial 24f: "requirement.modes: got 't'")
            object.__setattr__(self, "modes", (self.modes,))
        elif isinstance(self.modes, Iterable) and not isinstance(self.modes, Mapping):
            object.__setattr__(self, "modes", tuple(self.modes))
        else:
            raise ConfigError(f"requirement.modes: got {self.modes!r}; accepted: a mode or a list of modes "
                              f"({', '.join(MODES)})")
        for m in self.modes:
            if m not in MODES:
                raise ConfigError(f"requirement.modes: got {m!r}; accepted: {', '.join(MODES)}")
        # checked here, naming the requirement (trial 21b: a bad reduction was accepted, and refused
        # when the session was built as 'reductions[0]', naming no rule)
        if isinstance(self.reductions, str) or not isinstance(self.reductions, Iterable):
            raise ConfigError(f"requirement.reductions: got {self.reductions!r}; accepted: a list of reduction names "
                              "(reductions=('l2',))")
        for i, r in enumerate(self.reductions):
            if r != "raw":  # (a one-element tensor's value: losses, metrics)
                _check_reduction(r, f"requirement.reductions[{i}]")

    @classmethod
    def from_dict(cls, data: Any, path: str = "requirements[0]") -> Requirement:
        """A requirement from its plain form (``{collection: gradients, reductions: [l2]}``, as in
        YAML); a :class:`Requirement` is returned as it is. Errors name ``path`` and the key."""
        if isinstance(data, Requirement):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: got {data!r}; accepted: a Requirement or a mapping with a 'collection' key "
                              "({collection: gradients, reductions: [l2]})")
        fields = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in fields:
                raise ConfigError(f"{path}.{key}: unknown key{did_you_mean(str(key), fields)}; accepted: {', '.join(fields)}")
        if "collection" not in data:
            raise ConfigError(f"{path}: no 'collection'; accepted: one of {', '.join(BUILTIN_COLLECTIONS)}")
        check_str(data["collection"], f"{path}.collection", choices=BUILTIN_COLLECTIONS)
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("reductions", "modes"):
                value = [value] if isinstance(value, str) else value
                if not isinstance(value, (list, tuple)):
                    raise ConfigError(f"{path}.{key}: got {value!r}; accepted: a list of names")
                for i, v in enumerate(value):
                    if key == "modes":
                        check_str(v, f"{path}.modes[{i}]", choices=MODES)
                    elif v != "raw":
                        _check_reduction(v, f"{path}.reductions[{i}]")
                value = tuple(value)
            elif key in ("histogram", "raw_arrays", "optional"):
                check_bool(value, f"{path}.{key}")
            elif key == "max_interval" and value is not None:
                check_int(value, f"{path}.max_interval", minimum=1)
            values[key] = value
        return cls(**values)

    def reduction_config(self) -> ReductionConfig:
        reds = tuple(r for r in self.reductions if r != "raw")
        return ReductionConfig(reds, histogram=self.histogram, raw=self.raw_arrays or "raw" in self.reductions)


#: The key of :meth:`Rule.state_dict` that holds the base class's own state.
BASE_STATE_KEY = "tripwire"


class Rule:
    """Base class of every rule.

    Subclasses set ``name`` (the YAML name), implement :meth:`requirements` and :meth:`check`, and
    validate their own parameters in ``__init__`` (calling ``super().__init__(**common)``).

    Common parameters (all rules):
      - ``start_step`` (default 0): no evaluation before this step (warm-up), and no finding dated
        before it (:meth:`_dated`).
      - ``patience`` (default 1): the condition must hold on this many consecutive evaluations.
      - ``every`` (default 1): evaluate at most once every ``every`` steps (the first save step at
        least ``every`` steps after the last evaluation). A rule that looks back over every step
        since its last evaluation (:attr:`looks_back`) is evaluated once more at each mode's last
        step when a training ends (a session's ``close`` or ``new_training``, a worker's end in
        ``tripwire watch``) where ``every`` left steps after its last evaluation, so that those
        steps are judged too (trial 32e F2).
      - ``modes`` (default: the rule's own): modes whose new records trigger an evaluation.
      - ``severity`` (default: the rule's own).
      - ``actions`` (default: the config's ``actions``): what to do when the rule fires.
      - ``repeat`` (default False): False: the rule fires once. At the first evaluation at which
        it finds something, its findings are written to the run and acted on, and the rule is not
        evaluated again in that training: :meth:`check` is not called, so a rule's own state stays
        as it was then and a later fault is not written (``tripwire watch`` does the same). A new
        training through the session (:meth:`tripwire.Session.new_training`: a second ``fit``)
        arms it again. True: the rule is evaluated at every due step after a finding too, and
        every finding is written and acted on (a condition that holds on is a finding at each
        evaluation).
    """

    name: ClassVar[str] = ""
    default_modes: ClassVar[tuple[str, ...]] = ("train",)
    default_severity: ClassVar[str] = "warning"
    #: the collections whose tensors :meth:`named_inputs` names
    input_collections: ClassVar[tuple[str, ...]] = ("losses", "metrics")
    #: how those names match: ``"fullmatch"`` (a name or a full-match regex) or ``"search"`` (a regex
    #: found anywhere in the name)
    input_match: ClassVar[str] = "fullmatch"
    #: True: the rule judges whichever of its :meth:`requirements`' collections the run holds (each
    #: on its own, as ``all_zero`` reads weights and gradients), so it had nothing to read only when
    #: the run holds none of them; False: it needs every one of them (labels and predictions)
    reads_any: ClassVar[bool] = False
    #: True: each evaluation judges every step since the rule's last one (``exploding_tensor``,
    #: ``similar_across_runs`` set it), so where ``every`` is above 1 a training's end evaluates the
    #: rule once more at each mode's last step, and the steps after its last evaluation are judged,
    #: their findings dated at their own steps (a session's ``close``/``new_training`` and ``tripwire
    #: watch``: ``tripwire._session.look_back_tails``); False (the default): a rule judging the step
    #: it is evaluated at (and what it keeps), which such an extra evaluation would not help. A rule
    #: class of your own that looks back so sets it True.
    looks_back: ClassVar[bool] = False
    summary: ClassVar[str] = ""
    rule_set: str | None = None
    """The rule set this rule came from (``default``), set when a config's set is expanded."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        checked_keywords(cls)  # (a misspelled parameter named with a "did you mean": trial 24f)

    def __init__(
        self,
        *,
        start_step: int = 0,
        patience: int = 1,
        every: int = 1,
        modes: Sequence[str] | None = None,
        severity: str | None = None,
        actions: Sequence[Any] | None = None,
        repeat: bool = False,
    ) -> None:
        self._set_common(start_step=start_step, patience=patience, every=every, modes=modes, severity=severity,
                         actions=actions, repeat=repeat)
        # per mode: train and eval steps count apart, and their numbers meet (overfit_batches: train
        # step 10 right after eval step 10), so one mode's evaluation must not hold back the other's
        self._streak: dict[str, int] = {}
        self._last_eval: dict[str, int] = {}

    def _set_common(self, *, start_step: int = 0, patience: int = 1, every: int = 1,
                    modes: Sequence[str] | None = None, severity: str | None = None,
                    actions: Sequence[Any] | None = None, repeat: bool = False) -> None:
        """Check and set the common parameters (:meth:`__init__`'s): a :class:`ConfigError` naming the
        rule, the parameter, the value and what is accepted. A rule object named in a config with
        common parameters (``{name: 'mod:rule_object', patience: 2}``) gets them through this, on the
        session's copy of the object (trial 31f F6)."""
        prefix = self.name or type(self).__name__
        self.start_step = check_int(start_step, f"{prefix}.start_step", minimum=0)
        self.patience = check_int(patience, f"{prefix}.patience", minimum=1)
        self.every = check_int(every, f"{prefix}.every", minimum=1)
        if modes is not None and not isinstance(modes, str):
            given = modes
            modes = tuple(modes) if isinstance(modes, Iterable) and not isinstance(modes, Mapping) else ()
            if not modes:  # (trial 23m: modes: [] was accepted, and the rule judged nothing, silently)
                raise ConfigError(f"{prefix}.modes: got {given!r}; accepted: a mode or a non-empty list of modes "
                                  f"({', '.join(MODES)}), or null for the rule's own ({', '.join(self.default_modes)})")
        modes = tuple(self.default_modes if modes is None else ([modes] if isinstance(modes, str) else modes))
        for m in modes:
            if m not in MODES:  # (trial 32i F13: validation had no "did you mean 'eval'")
                raise ConfigError(f"{prefix}.modes: got {m!r}{mode_guess(m)}; accepted: {', '.join(MODES)}")
        self.modes = modes
        sev = self.default_severity if severity is None else severity
        self.severity = check_str(sev, f"{prefix}.severity", choices=SEVERITIES)
        self.actions = None if actions is None else _checked_actions(actions, f"{prefix}.actions")
        self.repeat = check_bool(repeat, f"{prefix}.repeat")

    # ------------------------------------------------------------------------------ to override
    def requirements(self) -> list[Requirement]:
        """What must be captured for this rule (default: nothing)."""
        return []

    def reads_every_collection_but(self) -> frozenset[str] | None:
        """Where the rule reads every collection the run captured, its own included (``exploding_tensor``
        with ``collections=None`` reads a custom collection ``mine`` too), the collections it leaves
        out; None (the default) where it reads its :meth:`requirements`' collections only. Such a rule
        is fed by any captured collection it does not leave out, whatever its requirements ask to
        capture (trial 32a F2: ``exploding_tensor`` that judged a run of ``mine`` alone was said to
        have had nothing to read, having no ``losses``)."""
        return None

    def named_inputs(self) -> dict[str, str]:
        """Parameters that name tensors of :attr:`input_collections` (losses or metrics unless the
        rule says otherwise), ``{parameter: name or full-match regex}`` (default: none). A session
        and ``tripwire watch`` say at the end which of them matched no captured tensor of those
        collections: such a rule could not fire."""
        return {}

    def check(self, history: History, step: int, mode: str) -> Finding | Iterable[Finding] | None:
        """Evaluate the condition at ``step``; return a finding (or several) when it holds."""
        raise NotImplementedError(f"rule {self.name!r} ({type(self).__qualname__}) does not implement "
                                  "check(history, step, mode)")

    # --------------------------------------------------------------------------------- machinery
    def due(self, step: int, mode: str) -> bool:
        """Should the rule evaluate now? (mode, warm-up and ``every``)."""
        if mode not in self.modes or step < self.start_step:
            return False
        last = self._last_eval.get(mode)
        return last is None or step - last >= self.every or step < last

    def evaluate(self, history: History, step: int, mode: str) -> list[Finding]:
        """Run :meth:`check` with warm-up, ``every`` and ``patience`` applied, and its findings'
        dates checked (:meth:`_dated`): one dated before ``start_step`` is dropped, one dated after
        ``step`` or in another mode than ``mode`` is a :class:`RuleReturnError` (the others are kept)."""
        if not self.due(step, mode):
            return []
        self._last_eval[mode] = step
        try:
            found = self.as_findings(self.check(history, step, mode))
        except RuleReturnError as exc:  # the findings it did return are kept (after patience)
            exc.findings = self._patient(self._dated(exc.findings, step, mode)[0], mode)
            raise
        found, wrong = self._dated(found, step, mode)
        found = self._patient(found, mode)
        if wrong is not None:
            raise MisdatedFindingError(wrong, found)
        return found

    def _dated(self, found: list[Finding], step: int, mode: str) -> tuple[list[Finding], str | None]:
        """The findings of an evaluation at ``step`` of ``mode`` that may be recorded, and what is
        wrong with the others (None: nothing). A finding dated before :attr:`start_step` is left out
        (the warm-up: "no finding dated before it", for every rule; trial 31f F3: a rule of the
        user's that looked back reported step 2 with ``start_step: 5``). A finding dated after the
        step judged, or in another mode, is refused: the rule saw nothing there (trial 31f F4: a
        finding at eval step 99, returned at train step 2, stopped the training "at step 99 (eval)").
        Built-in rules date theirs so already; the session checks every rule's findings with this,
        ``Rule.evaluate`` those of every rule that does not override it (``tripwire watch`` too)."""
        if not found:
            return found, None
        wrong = [f for f in found if f.mode != mode or f.step > step]
        kept = [f for f in found if f.step >= self.start_step and f.mode == mode and f.step <= step]
        if not wrong:
            return kept, None
        first = wrong[0]
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        return kept, (f"rule {self.name!r}: evaluated at {mode} step {step}, check() returned a finding dated at "
                      f"{first.mode} step {first.step}{more}; accepted: findings of mode {mode!r} dated at step {step} "
                      f"or before it (self.finding(step, mode, message), or an earlier step of that mode at which the "
                      f"rule saw the fault)")

    #: what :meth:`check` may return, for :meth:`as_findings`'s error
    _returns: ClassVar[str] = "a Finding, a list of Findings or None"

    def as_findings(self, result: Any) -> list[Finding]:
        """:meth:`check`'s result as a list; anything else is a ``TypeError`` that names the rule, what
        it returned and what is accepted (a session records it as the rule's error and goes on)."""
        if result is None:
            return []
        if isinstance(result, Finding):
            return [result]
        if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
            raise RuleReturnError(f"rule {self.name!r}: check() returned {_shown(result)}; accepted: {self._returns}", [])
        found = list(result)
        for i, f in enumerate(found):
            if f is not None and not isinstance(f, Finding):
                raise RuleReturnError(
                    f"rule {self.name!r}: check() returned a {type(result).__name__} whose item {i} is {_shown(f)}; "
                    f"accepted: {self._returns} (build one with self.finding(step, mode, message))",
                    [g for g in found if isinstance(g, Finding)])
        return [f for f in found if f is not None]

    def _patient(self, found: list[Finding], mode: str) -> list[Finding]:
        """``found`` once the rule has found something at ``patience`` evaluations in a row (of
        ``mode``); ``[]`` before, and a miss starts the count again."""
        if not found:
            self._streak[mode] = 0
            return []
        streak = self._streak[mode] = self._streak.get(mode, 0) + 1
        return found if streak >= self.patience else []

    def finding(self, step: int, mode: str, message: str, tensors: Iterable[str] = (), **details: Any) -> Finding:
        return Finding(rule=self.name, step=step, mode=mode, message=message, tensors=tuple(tensors),
                       severity=self.severity, details=details)

    def params(self) -> dict[str, Any]:
        """The rule's parameters as given to ``__init__`` (for listings and configs)."""
        out = {}
        for cls in type(self).__mro__:
            init = cls.__dict__.get("__init__")
            if init is None:
                continue
            for pname in inspect.signature(init).parameters:
                if pname in ("self", "common", "kwargs", "actions") or pname in out:
                    continue
                value = getattr(self, pname, _MISSING)
                # (not a method of this rule named like a parameter: FunctionRule's requirements made
                # repr() recurse through the bound method's own repr, trial 22k)
                if value is not _MISSING and not (inspect.ismethod(value) and value.__self__ is self):
                    out[pname] = value
        return out

    def unjudged(self) -> str | None:
        """Why this rule could not judge what the training gave it, where it could not (a reason, said
        at the end by the session in a WARNING and by ``tripwire watch``, which counts the rule as
        not judged: exit 3); None where it judged, or had nothing to say. ``class_imbalance``: a
        minority class with fewer samples than ``min_class_samples`` in every round (trial 41g)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """The base class's state (the patience streak and the steps judged last, per mode), under the
        one key ``tripwire``: a subclass extends it (``{**super().state_dict(), "mine": ...}``) with keys
        of its own, any but that one (trial 43c: under ``streak`` it was replaced by a custom rule's own
        ``streak``, and a resumed rule lost its patience count)."""
        return {BASE_STATE_KEY: {"streak": dict(self._streak), "last_eval": dict(self._last_eval)}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, Mapping):  # (trial 43k: a list or None raised AttributeError)
            raise ConfigError(f"{self.name}: load_state_dict: got {type(state).__name__} {str(state)[:80]}; accepted: "
                              f"a mapping, what the rule's state_dict() returned")
        base = state.get(BASE_STATE_KEY)
        if base is None:
            # a state saved before the key (``streak`` and ``last_eval`` at the top, both), else one that
            # holds no base state (a subclass that did not extend it: trial 43f, its own ``streak`` was read)
            base = state if "streak" in state and "last_eval" in state else {}
        elif not (isinstance(base, dict) and set(base) <= {"streak", "last_eval"}):
            raise ConfigError(f"{self.name}: load_state_dict: the state's key {BASE_STATE_KEY!r} holds "
                              f"{type(base).__name__} {str(base)[:80]}, not the base class's state (the patience "
                              f"streak); a rule keeps its own state under other keys: {{**super().state_dict(), "
                              f"'mine': ...}} (trial 43f)")
        try:
            self._streak = self._per_mode(base.get("streak"))
            self._last_eval = self._per_mode(base.get("last_eval"))
        except (TypeError, ValueError, AttributeError) as exc:  # (trial 43k: "invalid literal for int()")
            raise ConfigError(f"{self.name}: load_state_dict: the base state {str(base)[:120]} cannot be read "
                              f"({type(exc).__name__}: {exc}); accepted: what state_dict() returned") from None

    def _per_mode(self, value: Any) -> dict[str, int]:
        """A saved per-mode count (a state saved before counts were per mode: one number, for
        every mode of the rule)."""
        if value is None:
            return {}
        if isinstance(value, dict):
            return {str(m): int(v) for m, v in value.items()}
        return {m: int(value) for m in self.modes}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({params})"


Rule.__init__ = checked_init(Rule.__init__)  # type: ignore[method-assign]


def _checked_actions(actions: Any, path: str) -> list[Any]:
    """A rule's ``actions`` checked when the rule is made, as a config's are when it is read: one
    action (a name, a mapping, a callable) is a list of one; a built-in action's name and parameters
    are checked (``module:attribute`` names and callables when the session resolves them). Trial 24f:
    ``actions="log"`` was stored as ``['l', 'o', 'g']``, ``actions=5`` was "'int' object is not
    iterable" and ``actions=["trian"]`` was named only when a session was made."""
    from .._actions import check_action  # (the actions module is imported by the session, after the rules)
    from .._config import ActionSpec, _check_actions_once

    if isinstance(actions, (str, Mapping, ActionSpec)) or callable(actions):
        actions = [actions]
    if not isinstance(actions, (list, tuple)):
        raise ConfigError(f"{path}: got {actions!r}; accepted: an action or a list of actions (a name such as "
                          "'stop_training' or 'log', a mapping with 'name', a callable(finding)), or None for the "
                          "config's actions")
    specs = [ActionSpec.parse(action, f"{path}[{i}]") for i, action in enumerate(actions)]
    for i, spec in enumerate(specs):
        check_action(spec, f"{path}[{i}]")
    _check_actions_once(specs, path)  # (trial 38c: refused in a config, taken on a rule object, and acted twice)
    return list(actions)


class FunctionRule(Rule):
    """Wrap a plain function ``fn(history, step, mode) -> Finding | str | None`` as a rule.

    A returned string becomes the finding's message."""

    _returns = "a Finding, a str (the finding's message), a list of Findings or None"

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 requirements: Sequence[Requirement] = (), **common: Any) -> None:
        if not callable(fn):
            raise ConfigError(f"rule function: got {fn!r}; accepted: a callable (history, step, mode)")
        _check_rule_signature(fn)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            # (trial 24f: name=5 was kept, and name="" became the function's name without a word)
            raise ConfigError(f"FunctionRule.name: got {name!r}; accepted: a non-empty string (the findings' rule "
                              f"name), or None for the function's name ({getattr(fn, '__name__', 'custom_rule')!r})")
        if name is not None:
            check_rule_name(name, "FunctionRule.name")
        self.name = name or getattr(fn, "__name__", "custom_rule")  # type: ignore[misc]
        super().__init__(**common)
        self.fn = fn
        if isinstance(requirements, (str, Mapping, Requirement)) or not isinstance(requirements, Iterable):
            raise ConfigError(f"{self.name}.requirements: got {requirements!r}; accepted: a list of Requirements or "
                              "mappings ([{collection: gradients, reductions: [l2]}])")
        self._requirements = [Requirement.from_dict(r, f"{self.name}.requirements[{i}]") for i, r in enumerate(requirements)]

    def requirements(self) -> list[Requirement]:
        return list(self._requirements)

    def params(self) -> dict[str, Any]:
        """Its function, name and requirements, then the common parameters, as a Rule subclass's
        (trial 31f F9: ``patience``, ``severity`` ... were left out of its repr)."""
        out: dict[str, Any] = {"fn": self.fn, "name": self.name, "requirements": list(self._requirements)}
        for pname in ("start_step", "patience", "every", "modes", "severity", "repeat"):
            out[pname] = getattr(self, pname)
        return out

    def check(self, history: History, step: int, mode: str) -> Finding | Iterable[Finding] | None:
        out = self.fn(history, step, mode)
        if isinstance(out, str):
            # "" is nothing to report (trial 21b: `return msg if bad else ""` recorded an empty warning)
            return self.finding(step, mode, out) if out.strip() else None
        return out


def _check_rule_signature(fn: Callable[..., Any]) -> None:
    """A rule function that cannot be called as rules are, ``fn(history, step, mode)`` (three
    positional arguments), is a :class:`ConfigError` naming it and what it takes, when it is made,
    as an action that cannot take the finding is (trial 33f L3: ``rules=[lambda: None]`` and
    ``{name: 'os:getcwd'}`` were taken, and failed at their first evaluation). A callable whose
    signature Python cannot read (some built-ins) is taken as it is."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, None, None)
    except TypeError as exc:
        shown = f"{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', None) or type(fn).__name__}{sig}"
        raise ConfigError(f"rule function {getattr(fn, '__name__', fn)!r} cannot be called as a rule is, "
                          f"fn(history, step, mode): {shown} ({exc}); accepted: a callable taking three positional "
                          f"arguments, the history, the step and the mode (def my_rule(history, step, mode): ...)"
                          ) from None


def reads_any_of(rule: Rule, collections: Iterable[str]) -> bool:
    """Whether ``rule`` is judged at a record that holds only tensors of ``collections``: the training
    losses kept at every step between two save steps (``every_step`` collections), which a session
    writes and judges by themselves at the end of a training, before another mode's record, or at a
    flush (trial 29j: a gradient rule judged there read its last gradient save a second time, and its
    ``patience: 2`` fired on one bad save, dated at a step that saved no gradient). True when one of
    the rule's :meth:`Rule.requirements` names one of ``collections``, or when it states no
    requirement (what it reads is not known: judged wherever a record is written); False else."""
    try:
        needs = {req.collection for req in rule.requirements()}
    except Exception:  # noqa: BLE001 - (one whose requirements() raises is refused when it is built)
        return True
    return not needs or not needs.isdisjoint(collections)


@dataclass
class RuleSet:
    """A named set of rules (``default``) that expands in configs."""

    name: str
    rules: list[str | dict[str, Any]] = field(default_factory=list)


def _shown(value: Any) -> str:
    """``value`` for an error message: its type and a repr cut at 80 characters (``an int (5)``)."""
    text = repr(value)
    kind = type(value).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} ({text if len(text) <= 80 else text[:77] + '...'})"


class RuleReturnError(TypeError):
    """A rule's ``check`` returned a list holding something that is not a Finding: the error the
    session records for it, with the Findings of that list, which are recorded too (trial 21b: the
    real finding beside a bad item was lost)."""

    def __init__(self, message: str, findings: list[Finding]) -> None:
        super().__init__(message)
        self.findings = findings


class MisdatedFindingError(RuleReturnError):
    """A rule's ``check`` returned a finding dated after the step it judged, or in another mode
    (:meth:`Rule._dated`): recorded as the rule's error, as another bad return is, with the findings
    it returned that are dated right (trial 31f F4)."""


def rule_failure(exc: BaseException) -> str:
    """What a rule's evaluation that failed did, for its ``error`` finding: it raised, or its check
    returned something that is not a finding (not "the rule raised TypeError", trial 21b), or a
    finding dated where it did not judge."""
    if isinstance(exc, MisdatedFindingError):
        return f"the rule returned a finding dated where it did not judge: {exc}"
    if isinstance(exc, RuleReturnError):
        return f"the rule returned what is not a finding: {exc}"
    return f"the rule raised {type(exc).__name__}: {exc}"


_NDARRAY = "__tripwire_ndarray__"
_NPSCALAR = "__tripwire_numpy_scalar__"


def plain_state(value: Any) -> Any:
    """A rule's state with numpy values made plain data (scalars as tagged Python numbers, arrays as
    tagged lists), so a checkpoint holding it loads with ``torch.load(weights_only=True)``, as Lightning
    loads ``ckpt_path`` (trial 18d: a custom rule keeping ``np.median(...)`` wrote its checkpoint and
    could not be resumed). :func:`restored_state` gives the scalars and arrays back, dtypes kept."""
    if isinstance(value, np.ndarray):
        return {_NDARRAY: value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.generic):  # (tagged: given back as the numpy scalar it was; trial 21b)
        return {_NPSCALAR: value.item(), "dtype": str(value.dtype)}
    if isinstance(value, dict):
        return {(k.item() if isinstance(k, np.generic) else k): plain_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain_state(v) for v in value) if type(value) in (list, tuple) else [plain_state(v) for v in value]
    return value


def restored_state(value: Any) -> Any:
    """The inverse of :func:`plain_state`."""
    if isinstance(value, dict):
        if _NDARRAY in value:
            return np.asarray(value[_NDARRAY], dtype=value.get("dtype")).reshape(value.get("shape", -1))
        if _NPSCALAR in value and set(value) <= {_NPSCALAR, "dtype"}:
            return np.asarray(value[_NPSCALAR], dtype=value.get("dtype"))[()]
        return {k: restored_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(restored_state(v) for v in value)
    return value


def unjudged_reason(rule: Rule) -> str | None:
    """``rule.unjudged()`` (:meth:`Rule.unjudged`), asked alike by the session's end and ``tripwire
    watch``: where it raises, or returns neither a string nor None, that is the reason (trial 41j: a
    raising ``unjudged`` passed as judged, and ``True`` was printed as the reason)."""
    try:
        why = rule.unjudged()
    except Exception as exc:  # noqa: BLE001 - (a custom rule's own method: said as the reason)
        return f"its unjudged() raised {type(exc).__name__}: {exc}, so whether it judged is not known"
    if why is None or isinstance(why, str):
        return why or None
    return f"its unjudged() returned {why!r}; accepted: a str (why it could not judge) or None"
