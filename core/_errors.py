"""Exception hierarchy.

Every tripwire exception subclasses :class:`TripwireError` *and* the builtin that
matches its meaning, so ``except ValueError`` and ``except tripwire.TripwireError``
both work.
"""

from __future__ import annotations

from typing import Any


class TripwireError(Exception):
    """Base class of every error raised by tripwire."""


class ConfigError(TripwireError, ValueError):
    """A configuration value is invalid. The message names the key path, the value and
    what is accepted."""


class MissingDependencyError(TripwireError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class RunNotFoundError(TripwireError, FileNotFoundError):
    """No tripwire run exists at the given path."""


class CorruptRunError(TripwireError, OSError):
    """A stored run cannot be decoded (not a crash-truncated tail, which is tolerated)."""


class RunReplacedError(CorruptRunError):
    """The directory an open :class:`~tripwire.Run` reads was replaced by another run (its run id
    changed) or its files shrank under the reader: what was read no longer matches it. Open the run
    again."""


class TensorNotFoundError(TripwireError, KeyError):
    """A tensor (or collection, rule, ...) name is unknown; the message lists what exists."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class StoreClosedError(TripwireError, RuntimeError):
    """A write was attempted on a closed run writer."""


class StepEndedError(TripwireError, RuntimeError):
    """A tensor was offered to a :class:`~tripwire.StepPlan` whose step has ended (``end_step`` ran):
    it would never be saved."""


class RuleError(TripwireError, RuntimeError):
    """A rule raised while evaluating (re-raised only with ``strict=True``). Raised as an instance
    of the rule's own exception type too where Python allows it (:func:`rule_error`), so that both
    ``except RuleError`` and ``except ZeroDivisionError`` catch a rule's ``ZeroDivisionError``."""


_RULE_ERROR_TYPES: dict[type[BaseException], type[RuleError]] = {}


def rule_error(exc: BaseException, message: str) -> RuleError:
    """A :class:`RuleError` with ``message`` for a rule's exception ``exc`` (the caller chains it:
    ``raise rule_error(exc, msg) from exc``): an instance of a subclass of both ``RuleError`` and
    ``type(exc)`` ("strict re-raises"), or a plain ``RuleError`` where the two cannot be combined
    (an exception type whose instance layout conflicts, or one that cannot be subclassed)."""
    cls = type(exc)
    if isinstance(exc, RuleError) or not isinstance(exc, Exception):
        return RuleError(message)
    both = _RULE_ERROR_TYPES.get(cls)
    if both is None:
        try:
            both = type(f"RuleError[{cls.__name__}]", (RuleError, cls), {
                "__module__": __name__,
                "__init__": BaseException.__init__,  # not the rule's type's own (its arguments are its own)
                "__str__": BaseException.__str__,  # (a KeyError's would quote the message)
                "__reduce__": lambda self: (RuleError, self.args),  # pickled as a plain RuleError
            })
        except TypeError:  # a layout conflict, a final class
            return RuleError(message)
        _RULE_ERROR_TYPES[cls] = both
    try:
        err = both.__new__(both, message)
        BaseException.__init__(err, message)
    except Exception:  # noqa: BLE001 - a __new__ of the rule's type that wants other arguments
        return RuleError(message)
    return err


class ActionError(TripwireError, RuntimeError):
    """An action could not do its work (``notify`` could not publish); logged in one line, training
    goes on (re-raised only with ``strict=True``)."""


class TrainingStopped(TripwireError, RuntimeError):
    """Raised by the ``raise`` action. ``finding`` holds the finding that fired."""

    def __init__(self, message: str, finding: Any = None) -> None:
        super().__init__(message)
        self.finding = finding


def install_hint(extra: str) -> str:
    """How to install the pip extra ``extra``: its name, and the command that works today (README,
    "Install": tripwire is installed from a clone; trial 24c: the bare command found no distribution)."""
    return f"pip install 'tripwire[{extra}]' (in a clone of tripwire: pip install -e '.[{extra}]')"


def missing_extra(module: str, extra: str, exc: BaseException | None = None) -> MissingDependencyError:
    """Build the ImportError raised when ``module`` is missing, naming the pip extra."""
    err = MissingDependencyError(f"{module!r} is not installed; install it with: {install_hint(extra)}")
    err.name = module
    if exc is not None:
        err.__cause__ = exc
    return err


def is_installed(module: str) -> bool:
    """Is ``module`` importable as a real package (not a stray folder of the same name)?
    Looks it up without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def require(modules: tuple[str, ...], extra: str, hint: str = "") -> None:
    """Raise :class:`MissingDependencyError` naming ``extra`` unless every module is installed.

    Integrations call it at import time, so importing one whose framework is missing fails at once
    (the framework itself is still imported lazily, on first use)."""
    for module in modules:
        if not is_installed(module):
            err = MissingDependencyError(f"{module!r} is not installed; install it with: {install_hint(extra)}{hint}")
            err.name = module
            raise err
