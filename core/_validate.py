"""Small validation helpers shared by configs, rules and actions.

Every error names the key path, the bad value and what is accepted.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import inspect
import math
import numbers
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ._errors import ConfigError


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """Return ``"; did you mean 'x'?"`` when ``value`` is close to one of ``choices``."""
    choices = [str(c) for c in choices]
    v = str(value)
    # the same name in other letter case first (trial 41b: mode='EVAL' got no "did you mean 'eval'?")
    folded = [c for c in choices if c != v and c.lower() == v.lower()]
    if folded:
        return f"; did you mean {folded[0]!r}?"
    # the closest name first: one a single edit away (a letter added, dropped, changed or two swapped:
    # activation -> activations, gradeints -> gradients), the likeliest of them by difflib's ratio
    # (trial 33b F2: 'activation' was offered activation_inputs, which continues it, not activations)
    near = [c for c in choices if len(v) >= 3 and _one_edit(v, c)]
    close = difflib.get_close_matches(v, near, n=1, cutoff=0)
    # then a name that continues this one (val_loss: val_loss/dataloader_idx_0, Lightning's per-loader
    # names), likelier meant than one that merely looks alike (train_loss)
    close = close or [c for c in choices if len(c) > len(v) >= 3 and c.startswith(v) and c[len(v)] in "/_-.:@"][:1]
    close = close or difflib.get_close_matches(v, choices, n=1, cutoff=0.5)
    if not close and len(str(value)) >= 3:
        close = [c for c in choices if c.startswith(str(value)) or str(value).startswith(c)][:1]
    return f"; did you mean {close[0]!r}?" if close else ""


def _one_edit(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one letter added, dropped or changed, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) < len(b):  # one added
        return a[i:] == b[i + 1:]
    return a[i + 1:] == b[i + 1:] or (a[i + 2:] == b[i + 2:] and a[i:i + 2] == b[i:i + 2][::-1])


def did_you_mean_attribute(obj: Any, name: str) -> str:
    """:func:`did_you_mean` among the public attributes of ``obj`` (a module of a ``module:attribute``
    reference)."""
    return did_you_mean(name, [n for n in dir(obj) if not n.startswith("_")])


def import_user_module(name: str) -> Any:
    """``importlib.import_module(name)`` for a config's module (``imports:``, a ``module:attribute``
    rule or action), which the docs say imports from the current directory and PYTHONPATH: where the
    module is not found and the current directory is not on ``sys.path`` (a script run from elsewhere,
    ``python scripts/train.py`` from the project's root, has its own folder there instead), it is
    appended and the import tried again (trial 43j: ``tripwire validate``, which puts the current
    directory there, passed a file whose training could not import its module)."""
    import importlib
    import os
    import sys

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = getattr(exc, "name", None)
        here = os.getcwd()
        if not missing or not (name == missing or name.startswith(f"{missing}.")) or here in sys.path \
                or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(name)


def import_failure(module: str, exc: ImportError) -> str:
    """Why ``import module`` raised ``exc``, in words: not found on the path (the module, or a package
    above it), or found, and its own code's import of another module failed (trial 38c: that case
    was blamed on the search path: "No module named 'pandas_extra' (it imports from the current
    directory and PYTHONPATH)" of a module that was there)."""
    missing = getattr(exc, "name", None)
    if isinstance(exc, ModuleNotFoundError) and missing and (module == missing or module.startswith(f"{missing}.")):
        return f"{type(exc).__name__}: {exc} (it imports from the current directory and PYTHONPATH)"
    return (f"the module was found, but its own import raised {type(exc).__name__}: {exc} (fix that import in the "
            f"module, or install what it needs)")


def _where(path: str) -> str:
    return path if path else "<root>"


Hint = Callable[[str, Any], str | None]
"""``hint(key, value)``: the "did you mean" for an unknown key that is another library's name of an
accepted one (smdebug's ``include_regex`` is ``include``), or None for the plain one."""


class UnknownArgumentError(ConfigError, TypeError):
    """An unknown keyword argument of a config class (``SaveConfig(save_interval=5)``): a
    :class:`ConfigError` naming the class, the argument and what is accepted, and a ``TypeError``
    as Python's own "unexpected keyword argument" is, so ``except TypeError`` still catches it."""


class MissingArgumentError(ConfigError, TypeError):
    """A call that leaves out an argument it needs, in a form of its own that Python's message would
    misname (``tensor.value("raw")``, no step: Python named the method it dispatches to): a
    :class:`ConfigError` naming what was given and the accepted forms, and a ``TypeError`` as
    Python's own "missing 1 required positional argument" is, so ``except TypeError`` still catches it."""


def _hint_or_guess(key: str, value: Any, allowed: Sequence[str], hint: Hint | None) -> str:
    said = hint(key, value) if hint is not None else None
    return said if said else did_you_mean(key, allowed)


#: Spaces YAML does not take for the space after a key's colon, by the name a message gives them
#: (other Unicode spaces: their Unicode name).
_SPACE_NAMES = {"\u00a0": "non-breaking space", "\u202f": "narrow non-breaking space", "\u200b": "zero-width space",
                "\ufeff": "zero-width no-break space", "\u3000": "ideographic space"}
_ODD_SPACE_RE = re.compile(r"^([^:]*):([\u00a0\u1680\u2000-\u200b\u202f\u205f\u3000\ufeff])")


def odd_space_after_colon(text: str, what: str = "key") -> str | None:
    """Why ``text`` (a key, or a string where a mapping was meant) is one ``what`` where the user
    wrote a key and its value: a Unicode space that is not YAML's (a non-breaking space, U+00A0, as
    editors and web pages put there) right after its first ``:``; None when it has none (trial 29d:
    ``save.interval: 5: unknown key 'interval:\\xa05'``, printed raw)."""
    found = _ODD_SPACE_RE.match(text)
    if found is None:
        return None
    char = found.group(2)
    name = _SPACE_NAMES.get(char) or unicodedata.name(char, "space").lower()
    article = "an" if name[:1] in "aeiou" else "a"
    return (f"{article} {name} (U+{ord(char):04X}) after ':' makes it one {what}, not the key {found.group(1)!r} and "
            f"its value; write an ordinary space there")


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], path: str, hint: Hint | None = None) -> None:
    """Reject unknown keys with a "did you mean" hint (``hint``: see :data:`Hint`); a key that holds a
    Unicode space after a colon (``interval:\\xa05``) is named with that space, under its parent's path."""
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            accepted = f"(accepted keys: {', '.join(sorted(allowed))})" if allowed else \
                "(it takes no parameters)"  # (was "(accepted keys: )", trial 18a)
            odd = odd_space_after_colon(key) if isinstance(key, str) else None
            if odd is not None:
                raise ConfigError(f"{_where(path)}: unknown key {key!r}: {odd} {accepted}")
            guess = _hint_or_guess(str(key), data[key], allowed, hint)
            raise ConfigError(f"{_where(_join(path, str(key)))}: unknown key {key!r}{guess} {accepted}")


def check_arguments(owner: str, kwargs: Mapping[str, Any], params: Sequence[str], hint: Hint | None = None) -> None:
    """Reject keyword arguments of ``owner`` (a class name) that are none of ``params``, with a
    "did you mean" (trial 20b: ``SaveConfig(save_interval=5)`` was Python's bare TypeError, which
    names nothing tripwire accepts). Raises :class:`UnknownArgumentError`."""
    for key, value in kwargs.items():
        if key not in params:
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise UnknownArgumentError(
                f"{owner}({key}={shown}): unknown argument {key!r}{_hint_or_guess(key, value, params, hint)} "
                f"(accepted: {', '.join(params)})")


_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_T = TypeVar("_T", bound=type)


def keyword_parameters(cls: type) -> tuple[str, ...]:
    """The named ``__init__`` parameters of ``cls`` and its bases (the subclass's first): the keywords
    a call of ``cls`` may give."""
    out: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        try:
            params = inspect.signature(init).parameters.items()
        except (TypeError, ValueError):
            continue
        for n, p in params:
            if n != "self" and p.kind in _NAMED and n not in out:
                out.append(n)
    return tuple(out)


def checked_init(init: Callable[..., None], hint: Hint | None = None) -> Callable[..., None]:
    """``init`` (an ``__init__``) with a misspelled keyword named: an
    :class:`~tripwire._validate.UnknownArgumentError` (a ConfigError and a TypeError, as Python's own
    "unexpected keyword argument" is) naming the class called, the keyword, a "did you mean" and every
    keyword the class takes. An ``__init__`` with ``**kwargs`` passes them on to its base's, which
    checks them there (trial 24f: ``DeadRelu(threshhold=0.9)``, ``Hyperband(reducton_factor=3)`` were
    Python's bare "got an unexpected keyword argument", with no accepted list)."""
    if getattr(init, "_tripwire_checked", False):
        return init
    try:
        params = inspect.signature(init).parameters.values()
    except (TypeError, ValueError):  # (an __init__ that is no plain function: left as it is)
        return init
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return init
    known = frozenset(p.name for p in params if p.kind in _NAMED)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs and not known.issuperset(kwargs):
            owner = type(self)
            check_arguments(owner.__name__, {k: v for k, v in kwargs.items() if k not in known},
                            keyword_parameters(owner), hint)
        init(self, *args, **kwargs)

    __init__._tripwire_checked = True  # type: ignore[attr-defined]
    return __init__


def checked_keywords(cls: _T | None = None, *, hint: Hint | None = None) -> Any:
    """Class decorator (apply it above ``@dataclass``; ``@checked_keywords`` or
    ``@checked_keywords(hint=...)``): a misspelled keyword argument of ``cls`` is named, with a "did
    you mean" (``hint``: names of another library it knows, smdebug's) and the accepted keywords (see
    :func:`checked_init`)."""
    def wrap(klass: _T) -> _T:
        init = klass.__dict__.get("__init__")
        if init is not None:
            klass.__init__ = checked_init(init, hint)  # type: ignore[misc]
        return klass

    return wrap if cls is None else wrap(cls)


def check_init_keys(cls: type, data: Mapping[str, Any], path: str) -> None:
    """Reject keys that are not keyword parameters of ``cls.__init__`` (a YAML mapping about to
    become ``cls(**data)``), naming them with a "did you mean" and the accepted ones."""
    params = [p.name for p in inspect.signature(cls).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    check_keys(data, params, path)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_mapping(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` if it is a mapping with string keys, else a :class:`~tripwire.ConfigError` naming
    ``path`` and the value (a string with a Unicode space after its colon says so)."""
    if not isinstance(value, Mapping):
        odd = odd_space_after_colon(value, "string") if isinstance(value, str) else None
        raise ConfigError(f"{_where(path)}: expected a mapping, got {value!r} ({type(value).__name__})"
                          + (f": {odd}" if odd else ""))
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(f"{_where(path)}: keys must be strings, got {key!r}")
    return value


def check_int(
    value: Any, path: str, *, minimum: int | None = None, maximum: int | None = None, allow_none: bool = False
) -> int | None:
    """``value`` as an ``int``, or a :class:`~tripwire.ConfigError` (a ``ValueError``) that names
    ``path`` (the parameter, e.g. ``"my_rule.window"``), the value and what is accepted.

    Accepted: an integer (numpy's too; a float with no fraction, such as YAML's ``5.0``), not a
    bool, within ``minimum``/``maximum`` (inclusive; None: no bound); None where ``allow_none``
    (returned as None)."""
    if value is None and allow_none:
        return None
    accepted = _range_text(minimum, maximum, "an integer") + (" or null" if allow_none else "")
    # numpy's integers are integers (trial 24f: Session(save_interval=np.int64(5)), rank=np.int64(0)
    # and histogram_bins=np.int64(5) were "got np.int64(5); accepted: an integer", while
    # SaveConfig(interval=np.int64(5)) was taken); a bool (numpy's too) is not one
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) and not (
        isinstance(value, float) and value.is_integer()
    ):
        raise ConfigError(f"{_where(path)}: got {value!r}; accepted: {accepted}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        # (both errors name the same accepted values: trial 24a, num_boost_round -5 left null out)
        raise ConfigError(f"{_where(path)}: got {value!r}; accepted: {accepted}")
    return value


def check_float(
    value: Any,
    path: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
    allow_none: bool = False,
) -> float | None:
    """``value`` as a ``float``, or a :class:`~tripwire.ConfigError` (a ``ValueError``) that names
    ``path`` (the parameter, e.g. ``"my_rule.threshold"``), the value and the accepted range.

    Accepted: a real number (numpy's too; not a bool, not NaN, not a string: ``"inf"`` is said to be
    one, YAML writes infinity ``.inf``) within ``minimum``/``maximum`` (None: no bound; each bound
    inclusive unless ``min_inclusive``/``max_inclusive`` is False); None where ``allow_none``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # (numpy's numbers too: trial 24f)
        # a string that reads as a number (trial 18a: "trend_z: inf" is the string 'inf' in YAML,
        # whose infinity is .inf)
        hint = ""
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
            else:
                hint = (f" (a string: YAML writes infinity as {'-' if number < 0 else ''}.inf)" if math.isinf(number)
                        else " (a string, not a number)")
        raise ConfigError(
            f"{_where(path)}: got {value!r}{hint}; accepted: "
            f"{_range_text(minimum, maximum, 'a number', min_inclusive, max_inclusive)}"
        )
    # the value as written in the message (trial 25g: threshold: 2 was "got 2.0"); numpy's as Python's
    shown = value if type(value) in (int, float) else int(value) if isinstance(value, numbers.Integral) else float(value)
    value = float(value)
    bad = math.isnan(value)
    if minimum is not None:
        bad |= value < minimum if min_inclusive else value <= minimum
    if maximum is not None:
        bad |= value > maximum if max_inclusive else value >= maximum
    if bad:
        raise ConfigError(
            f"{_where(path)}: got {shown!r}; accepted: "
            f"{_range_text(minimum, maximum, 'a number', min_inclusive, max_inclusive)}"
            f"{' (not NaN)' if math.isnan(value) else ''}"  # (trial 43j: "got nan; accepted: a number")
        )
    return value


def plain_bool(value: Any) -> bool | None:
    """``value`` as a Python bool where it is one: a bool, or numpy's bool (``np.True_``, as numpy's
    integers are taken for ints: trial 33i F1); ``None`` for anything else (``1``, ``"yes"``)."""
    if isinstance(value, bool):
        return value
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"):
        return bool(value)
    return None


def check_bool(value: Any, path: str) -> bool:
    """``value`` if it is a bool (``true``/``false`` in YAML; numpy's bool as a Python one), else a
    :class:`~tripwire.ConfigError` naming ``path`` and the value (``1``, ``"yes"`` are refused: no
    silent truthiness)."""
    got = plain_bool(value)
    if got is None:
        raise ConfigError(f"{_where(path)}: got {value!r}; accepted: true or false")
    return got


def check_str(value: Any, path: str, *, choices: Iterable[str] | None = None) -> str:
    """``value`` if it is a string (one of ``choices`` where given), else a
    :class:`~tripwire.ConfigError` naming ``path``, the value, a likely meant choice and the
    accepted ones."""
    if not isinstance(value, str):
        # (trial 38l: "accepted: a string" of a log level, 30, listed no level; a YAML date or number, name:
        # 2024-01-01, got no hint to quote it)
        listed = f": {', '.join(choices)}" if choices is not None else ""
        kind = "a date" if isinstance(value, datetime.date) else "a number"
        quote = (f" (in YAML, {value} unquoted is {kind}: quote it, '{value}')"
                 if choices is None and isinstance(value, (int, float, datetime.date)) and not isinstance(value, bool)
                 else "")
        raise ConfigError(f"{_where(path)}: got {value!r} ({type(value).__name__}); accepted: a string{listed}{quote}")
    if choices is not None:
        choices = list(choices)
        if value not in choices:
            raise ConfigError(
                f"{_where(path)}: got {value!r}{did_you_mean(value, choices)}; accepted: {', '.join(choices)}"
            )
    return value


def check_str_list(value: Any, path: str, *, choices: Iterable[str] | None = None) -> tuple[str, ...]:
    """Accept a string or a list of strings."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{_where(path)}: got {value!r}; accepted: a string or a list of strings")
    return tuple(check_str(v, f"{path}[{i}]", choices=choices) for i, v in enumerate(value))


def _range_text(
    minimum: float | None,
    maximum: float | None,
    what: str,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
) -> str:
    if minimum is not None and maximum is not None:
        lo = "[" if min_inclusive else "("
        hi = "]" if max_inclusive else ")"
        return f"{what} in {lo}{minimum}, {maximum}{hi}"
    if minimum is not None:
        return f"{what} {'>=' if min_inclusive else '>'} {minimum}"
    if maximum is not None:
        return f"{what} {'<=' if max_inclusive else '<'} {maximum}"
    return what


join_path = _join


def check_trial(trial: Any, trial_metric: Any, *, example: str, metric_required: bool = True) -> None:
    """The ``trial``/``trial_metric`` pair the framework callbacks take: ``trial`` None or an object
    with ``report(step, value) -> bool`` (a tuner trial); ``trial_metric`` a string naming what is
    reported (``example`` shows the framework's form), given only with a trial and, unless the
    framework has a default (``metric_required=False``), always with one."""
    if trial is not None and not callable(getattr(trial, "report", None)):
        raise ConfigError(f"trial: got {trial!r}; accepted: None or an object with report(step, value) -> bool (a tuner trial)")
    if trial_metric is None:
        if trial is not None and metric_required:
            raise ConfigError(f"trial_metric: got None with a trial; accepted: {example}")
        return
    check_str(trial_metric, "trial_metric")
    if not trial_metric.strip():  # (trial 24f: taken by every callback; XGBoost refused it inside xgb.train)
        raise ConfigError(f"trial_metric: got {trial_metric!r}; accepted: a metric name ({example}), or None")
    if trial is None:
        raise ConfigError(f"trial_metric: got {trial_metric!r} without a trial; pass trial= too, or leave both None")
