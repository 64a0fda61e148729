"""``tripwire rules``: list the built-in rules, their conditions, parameters and defaults.

Everything comes from the registry and the rules' own docstrings and signatures, so the listing
cannot drift from the code.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import sys
from typing import Any

from ._errors import TripwireError
from .rules._base import FunctionRule, Requirement, Rule
from .rules._registry import RULE_SETS, _init_parameters, available_rules
from ._config import RuleSpec

_COMMON = ("start_step", "patience", "every", "modes", "severity", "actions", "repeat")


def _common_defaults() -> dict[str, Any]:
    """The common parameters every rule takes (``Rule.__init__``'s) and their defaults, read from its
    signature: ``actions``, ``start_step``, ``patience``, ``every``, ``repeat``."""
    return {n: p.default for n, p in inspect.signature(Rule.__init__).parameters.items()
            if n in ("actions", "start_step", "patience", "every", "repeat")}


def _paragraphs(obj: Any) -> list[str]:
    """The paragraphs of ``obj``'s docstring, each on one line."""
    return [" ".join(p.split()) for p in (inspect.getdoc(obj) or "").split("\n\n") if p.strip()]


def rule_paragraphs(cls: type[Rule]) -> list[str]:
    """The paragraphs of a rule's docstring, each on one line: a built-in rule's module docstring
    (one rule per module), a custom rule's class docstring (its module may hold several)."""
    own_module = cls.__module__.startswith("tripwire.rules.")
    if own_module:
        return _paragraphs(sys.modules[cls.__module__]) or _paragraphs(cls)
    doc = cls.__dict__.get("__doc__")  # its own: not the base class's ("Base class of every rule.")
    return [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n") if p.strip()] if doc else []


def _doc_fields(paragraphs: list[str], title: str) -> dict[str, str]:
    """Title (the first paragraph, else ``title``), condition and defaults text of a docstring."""
    return {"title": paragraphs[0] if paragraphs else title,
            "condition": next((p for p in paragraphs if p.startswith("Condition")), ""),
            "defaults": next((p for p in paragraphs if p.startswith("Defaults")), "")}


def rule_doc(cls: type[Rule]) -> dict[str, str]:
    """Title, condition and defaults text of a rule (from its module docstring)."""
    return _doc_fields(rule_paragraphs(cls), cls.summary or f"(no description: {cls.__qualname__} has no docstring)")


def rule_params(cls: type[Rule]) -> dict[str, Any]:
    """The rule's own parameters and their defaults (``<required>`` when it has none), plus the
    common parameters whose defaults the rule changes."""
    out: dict[str, Any] = {name: "<required>" if p.default is p.empty else p.default
                           for name, p in _init_parameters(cls, upto=Rule).items() if name != "common"}
    out.setdefault("modes", list(cls.default_modes))
    out.setdefault("severity", cls.default_severity)
    return out


def describe(name: str, cls: type[Rule]) -> dict[str, Any]:
    """A rule's listing: ``name``, its docstring's ``title``, ``condition`` and ``defaults``, its
    ``parameters`` and ``class`` (``module.qualname`` of the class it runs as; a custom rule named
    ``module:attribute`` also has ``ref``, that reference: trial 29j F12, ``class`` held it, and
    ``finding_rule``, see :func:`_describe_ref`)."""
    return {"name": name, **rule_doc(cls), "parameters": _plain(rule_params(cls)), "class": f"{cls.__module__}.{cls.__qualname__}"}


def _plain(value: Any) -> Any:
    """``value`` as plain data for the listing: a function or class by its qualified name
    (``teamrules.grad_too_small``), a :class:`Requirement` as the mapping a config gives
    (``{'collection': 'gradients', 'reductions': ['l2']}``, its other fields where not at their
    defaults), anything else not plain by its repr (trial 26c F8: a FunctionRule's parameters were
    ``fn='<function grad_too_small at 0x7fd0...>'`` and a raw ``Requirement(...)`` repr)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Requirement):
        out: dict[str, Any] = {"collection": value.collection, "reductions": list(value.reductions)}
        for f in dataclasses.fields(value):
            if f.name not in out and getattr(value, f.name) != f.default:
                out[f.name] = _plain(getattr(value, f.name))
        return out
    if inspect.isroutine(value) or isinstance(value, type):
        return _qualified(value)
    return repr(value)


def _qualified(obj: Any) -> str:
    """``module.qualname`` of a function or class (``teamrules.grad_too_small``)."""
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{module}.{name}" if module else str(name)


def _function_doc(fn: Any) -> dict[str, str]:
    """Title, condition and defaults of a function rule: from the function's docstring, the
    condition said as what the function returns where the docstring has none."""
    name = _qualified(fn)
    out = _doc_fields(_paragraphs(fn), f"a function rule ({name}; it has no docstring)")
    if not out["condition"]:
        out["condition"] = (f"Condition: {name}(history, step, mode) returns a Finding, a str (the finding's message) "
                            f"or a list of Findings (None or \"\": no finding)")
    return out


def listing(rule_set: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
    if name is not None and ":" in name:
        return [_describe_ref(name)]
    rules = available_rules()
    if name is not None:
        from ._errors import ConfigError
        from .rules._registry import get_rule

        try:
            return [describe(name, get_rule(name))]
        except ConfigError:
            found = _module_listing(name)
            if found is None:
                raise
            return found
    if rule_set is None:
        return [describe(n, c) for n, c in rules.items()]
    if rule_set not in RULE_SETS:
        from ._errors import ConfigError
        from ._validate import did_you_mean

        raise ConfigError(f"--set: got {rule_set!r}{did_you_mean(rule_set, RULE_SETS)}; accepted: {', '.join(RULE_SETS)}")
    out = []
    for item in RULE_SETS[rule_set]:
        spec = RuleSpec.parse(item, f"rule set {rule_set}")
        d = describe(spec.name, rules[spec.name])
        d["parameters"].update(_plain(dict(spec.params)))
        out.append(d)
    return out


def _module_listing(name: str) -> list[dict[str, Any]] | None:
    """``tripwire rules MODULE`` (a team's package of rules; trial 31f F8): the rules the module
    registers (``@register_rule``: under their registered names, which a config names them by) and the
    others it defines (Rule subclasses, rule objects, rule functions: as ``module:attribute``),
    imported as a config's ``imports:`` imports it, the working directory first on the path. None where
    ``name`` is no module name or no module of that name is found (then ``name`` is an unknown rule);
    a ConfigError where the module is found but its import raises, or it defines no rule."""
    import importlib
    import importlib.util

    from ._config import _MODULE_NAME
    from ._errors import ConfigError
    from .rules._registry import _rules_of

    if not _MODULE_NAME.fullmatch(name):
        return None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):  # (a parent package that is missing: no such module)
        return None
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - (the module's own code raised: named with it)
        raise ConfigError(f"rules: importing module {name!r} raised {type(exc).__name__}: {exc}") from exc
    registered = {n: c for n, c in available_rules().items() if getattr(c, "__module__", None) == module.__name__}
    out = []
    broken = []
    for n, c in registered.items():
        try:  # (trial 41i F4: a registered rule whose requirements() raise was listed, exit 0)
            _check_builds(n, c)
        except ConfigError as exc:
            broken.append(f"{n} ({module.__name__}.{c.__qualname__}): "
                          f"{str(exc).removeprefix('rules[0]: ').removeprefix('rules: ')}")
            continue
        out.append(describe(n, c))
    held = set(registered.values())
    attrs = _rules_of(module)
    # functions that read a history but cannot be called as fn(history, step, mode): broken rules, said
    # (trial 41i F5: bad_sig(history) was left out of both lists without a word)
    attrs += [a for a, v in vars(module).items() if not a.startswith("_") and a not in attrs and inspect.isfunction(v)
              and v.__module__ == module.__name__ and _reads_a_history(v)]
    for attr in attrs:
        value = getattr(module, attr)
        if value not in held and (isinstance(value, (type, Rule)) or _reads_a_history(value)):
            try:
                out.append(_describe_ref(f"{name}:{attr}"))
            except ConfigError as exc:  # (trial 40d F1: the first broken rule was the whole answer, "rules[0]: ...")
                broken.append(f"{name}:{attr}: {str(exc).removeprefix('rules[0]: ').removeprefix('rules: ')}")
    if broken:
        good = ", ".join(item["name"] for item in out) or "none"
        raise ConfigError(f"rules: module {name!r} defines {len(broken)} rule(s) that a config could not build: "
                          f"{'; '.join(broken)} (its other rules build: {good}; tripwire rules {name}:ATTRIBUTE "
                          f"describes one)")
    if not out:
        raise ConfigError(f"rules: module {name!r} registers and defines no rule (a Rule subclass, a rule object or "
                          f"a function (history, step, mode)); accepted: a rule name, a rule set, module:attribute, "
                          f"or a module that defines rules")
    return out


def _reads_a_history(fn: Any) -> bool:
    """Whether a function of a module looks like a rule function to list: its first parameter is
    named ``history`` (``hist``, ``h``) or annotated as a History (trial 37c: ``tripwire rules MODULE``
    listed every public function that takes three arguments, a helper ``ema(values, alpha, start)``
    and, for ``os``, ``os:makedirs``); a config may still name any function ``module:attribute``."""
    try:
        first = next(iter(inspect.signature(fn).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    if first is None:
        return False
    annotation = first.annotation
    said = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return first.name in ("history", "hist", "h") or "History" in str(said)


def set_member(rule_set: str, name: str) -> list[dict[str, Any]]:
    """``tripwire rules NAME --set SET``: NAME as the set holds it (with the set's parameters), or a
    ConfigError naming the set's rules where it holds no such rule (trial 22k: ``rules overfit --set
    default`` printed ``rule set 'default': overfit``, a rule that set does not hold)."""
    from ._errors import ConfigError

    members = listing(rule_set)  # (an unknown set: refused there, naming the sets)
    found = [m for m in members if m["name"] == name]
    if not found:
        raise ConfigError(f"{name!r} is not a rule of the rule set {rule_set!r}; accepted with --set {rule_set}: "
                          f"{', '.join(m['name'] for m in members)} (or leave --set out: tripwire rules {name})")
    return found


_ACCEPTED_REF = "accepted: a Rule subclass, a Rule instance or a function (history, step, mode)"


def _describe_ref(ref: str) -> dict[str, Any]:
    """A custom rule named ``module:attribute`` (a Rule subclass, a Rule instance or a function
    ``fn(history, step, mode)``), imported as a config would import it, the working directory first
    on the path (as for ``python -c``); anything else is refused, naming what it is.

    Its ``name`` is ``ref``, the name a config gives it (trial 32f F2: a module's
    ``loss_over_rule = FunctionRule(_over, ...)`` was listed as ``_over``, which a config refuses as
    an unknown rule, and ``grad_rule = FunctionRule(grad_too_small, ...)`` under the name of the
    function ``grad_too_small`` listed beside it); ``finding_rule`` is the rule name its findings
    carry (the class's or object's ``name``, a function's ``__name__``)."""
    out = _describe_ref_object(ref)
    out["finding_rule"], out["name"] = out["name"], ref
    return out


def _describe_ref_object(ref: str) -> dict[str, Any]:
    """:func:`_describe_ref`'s listing with ``name`` the rule name its findings carry."""
    from ._errors import ConfigError
    from .rules._registry import _import_object

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj = _import_object(ref, "rules")
    if isinstance(obj, type):
        if issubclass(obj, Rule):
            _check_builds(ref, obj)
            return {**describe(getattr(obj, "name", None) or ref, obj), "ref": ref}
        raise ConfigError(f"rules: {ref!r} is the class {obj.__module__}.{obj.__qualname__}, which is not a Rule "
                          f"subclass; {_ACCEPTED_REF}")
    if isinstance(obj, Rule):
        _check_builds(ref, obj)
        cls = type(obj)
        out = {**describe(obj.name, cls), "ref": ref}
        given = obj.params()  # (its own values; not a method named like a parameter, trial 22k)
        for param in out["parameters"]:
            if param in given:
                out["parameters"][param] = _plain(given[param])
            elif hasattr(obj, param) and not inspect.ismethod(getattr(obj, param)):
                out["parameters"][param] = _plain(getattr(obj, param))
        for common, default in _common_defaults().items():
            held = getattr(obj, common, default)  # (the object's own common parameters: trial 30h F4, a
            if held != default and common not in out["parameters"]:  # FunctionRule's actions went unsaid)
                out["parameters"][common] = _plain(held)
        fn = getattr(obj, "fn", None)
        if isinstance(obj, FunctionRule) and fn is not None:  # (its function's docstring, not FunctionRule's)
            out.update(_function_doc(fn))
        return out
    if callable(obj):
        try:
            inspect.signature(obj).bind(None, None, None)
        except TypeError:
            raise ConfigError(f"rules: {ref!r} is {_what(obj)} taking {inspect.signature(obj)}, which cannot be "
                              f"called as (history, step, mode); {_ACCEPTED_REF}") from None
        except ValueError:  # no signature to read (some builtins): taken as a function, as configs take it
            pass
        _check_builds(ref, obj)
        # what a config entry naming it may give (``{name: 'mod:fn', rule_name: ..., requirements: [...]}``),
        # with the defaults it runs with: the function's name for its findings, no requirements
        params = {"rule_name": getattr(obj, "__name__", "custom_rule"), "requirements": [],
                  "modes": list(Rule.default_modes), "severity": Rule.default_severity}
        return {"name": params["rule_name"], **_function_doc(obj), "parameters": params,
                "class": f"{FunctionRule.__module__}.{FunctionRule.__qualname__}", "ref": ref}
    raise ConfigError(f"rules: {ref!r} is {_what(obj)}, not a rule; {_ACCEPTED_REF}")


def _check_builds(ref: str, obj: Any) -> None:
    """A ``module:attribute`` rule is listed only where a config entry naming it builds (trial 29j
    F12: ``tripwire rules mod:NoSuper`` described, exit 0, a class whose ``__init__`` skips
    ``super().__init__``, which validate and a training refuse): built as ``rules: [ref]`` builds
    it, the ConfigError said as that build says it. A class with a required parameter cannot be
    built without it: its ``name`` alone is checked (:func:`check_rule_name`)."""
    from ._session import unregistered_rule_notes_muted
    from .rules._base import check_rule_name
    from .rules._registry import build_rules

    if isinstance(obj, type):
        required = [n for n, p in _init_parameters(obj).items() if p.default is inspect.Parameter.empty]
        if required:
            name = getattr(obj, "name", "")
            if name:
                check_rule_name(name, f"rules: {ref!r}: {obj.__qualname__}.name")
            return
    with unregistered_rule_notes_muted():
        build_rules([{"name": ref}])


def _what(obj: Any) -> str:
    """``a dict ({'a': 1})``, ``the function m.f``: what a refused object is, in a few words."""
    if inspect.isroutine(obj):
        return f"the function {getattr(obj, '__module__', None) or '?'}.{getattr(obj, '__qualname__', obj)}"
    shown = repr(obj) if len(repr(obj)) <= 60 else repr(obj)[:57] + "..."
    kind = type(obj).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} ({shown})"


def format_text(items: list[dict[str, Any]], rule_set: str | None = None, member: bool = False) -> str:
    """``member``: ``items`` is one rule of ``rule_set`` (``tripwire rules NAME --set SET``), not the set."""
    lines = []
    if rule_set is not None:
        lines.append(f"rule {items[0]['name']!r} of the rule set {rule_set!r}, with the set's parameters" if member
                     else f"rule set {rule_set!r}: {', '.join(i['name'] for i in items)}")
        lines.append("")
    for item in items:  # (a custom rule's name is its module:attribute, which a config accepts: trial 32f F2)
        lines.append(item["name"])
        lines.append(f"  {item['title']}")
        if item["condition"]:
            lines.append(f"  {item['condition']}")
        params = ", ".join(f"{k}={v!r}" for k, v in item["parameters"].items())
        lines.append(f"  parameters: {params}")
        if "finding_rule" in item:
            lines.append(f"  its findings' rule: {item['finding_rule']}")
        lines.append("")
    lines.append(
        "Common parameters of every rule: start_step=0, patience=1, every=1, modes, severity, actions, repeat=False "
        "(rules above list the defaults they change)."
    )
    if rule_set is None and len(items) > 1:  # (the full listing: the sets a config may name too)
        for name, members in RULE_SETS.items():
            names = [RuleSpec.parse(m, f"rule set {name}").name for m in members]
            lines.append(f"Rule set {name!r} (rules: [{name}]; `tripwire rules {name}` shows it): {', '.join(names)}.")
    return "\n".join(lines)


def format_markdown(items: list[dict[str, Any]]) -> str:
    """The rules as the Reference section of docs/rules.md (a test keeps that section equal to
    this): each rule's docstring, its paragraphs in order, marked when it is in the default set."""
    rules, default = available_rules(), set(RULE_SETS["default"])
    out: list[str] = []
    for item in items:
        mark = " (default set)" if item["name"] in default else ""
        out += [f"### `{item['name']}`{mark}", ""]
        for para in rule_paragraphs(rules[item["name"]]) or [item["title"]]:
            out += [para, ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _one_backtick(value: Any) -> Any:
    """``value`` with every string's reStructuredText ````code```` written `code`."""
    if isinstance(value, str):
        return value.replace("``", "`")
    if isinstance(value, list):
        return [_one_backtick(v) for v in value]
    if isinstance(value, dict):
        return {k: _one_backtick(v) for k, v in value.items()}
    return value


def _handle(args: argparse.Namespace) -> int:
    if args.name in RULE_SETS and args.set is None:  # (trial 22a: "unknown rule 'default'; did you mean 'default'?")
        args.set, args.name = args.name, None
    member = args.set is not None and args.name is not None
    try:
        if args.json and args.markdown:  # (trial 22k: --markdown was ignored in silence)
            from ._errors import ConfigError

            raise ConfigError("--json and --markdown: got both; accepted: one of them (or neither: text)")
        items = set_member(args.set, args.name) if member else listing(args.set, args.name)
    except TripwireError as exc:
        print(f"tripwire rules: error: {exc}", file=sys.stderr)
        return 2
    if args.json:  # (as the terminal's text: one backtick for code, not reStructuredText's two)
        print(json.dumps(_one_backtick(items), indent=2))
    elif args.markdown:
        print(format_markdown(items), end="")
    else:  # (docstrings use reStructuredText's ``code``: one backtick reads better in a terminal)
        print(format_text(items, args.set, member).replace("``", "`"))
    return 0


def register(subparsers: Any) -> None:
    """Add ``tripwire rules`` to the CLI."""
    from ._cli import EXIT_BAD_INPUT, exit_codes

    p = subparsers.add_parser(
        "rules",
        help="list the built-in rules with their conditions, parameters and defaults",
        description="List the built-in rules (or one rule, or a rule set) with conditions, parameters and defaults.",
        epilog=exit_codes("0 listed", f"{EXIT_BAD_INPUT}: an unknown rule or set, a NAME the --set does not hold, "
                                      "a module:attribute that is not a rule or does not build as a config entry "
                                      "naming it builds, --json with --markdown"),
    )
    p.add_argument("name", nargs="?", default=None,
                   help="show only this rule (a built-in name, or a custom rule as module:attribute), or the "
                        "rules a module of yours registers and defines (a module name: teamrules)")
    p.add_argument("--set", default=None, help="show the rules of a rule set (e.g. 'default'); with NAME, that rule "
                                               "as the set holds it")
    p.add_argument("--json", action="store_true", help="print JSON (not with --markdown)")
    p.add_argument("--markdown", action="store_true",
                   help="print the Reference section of docs/rules.md (not with --json)")
    p.set_defaults(func=_handle)


__all__ = ["describe", "listing", "register", "rule_doc", "rule_params"]
