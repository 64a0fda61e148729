"""Framework integrations: ``tripwire.integrations.<framework>`` (each an optional extra).

One helper for hand-written PyTorch loops lives here (it needs torch, imported on first use):
:func:`scaler_skips` tells whether fp16 mixed precision's ``torch.amp.GradScaler`` skips the
optimizer step (its gradients overflowed at the loss scale), so that a loop does not offer those
gradients (docs/architecture.md, "In a hand-written loop").

Without torch, ``from tripwire.integrations import *`` and ``help(tripwire.integrations)`` work as
with it: ``scaler_skips`` is then a stand-in with the same signature that raises the torch
:class:`~tripwire.MissingDependencyError` when it is called (trial 29k)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tripwire._errors import MissingDependencyError

if TYPE_CHECKING:  # pragma: no cover
    from ._torch import scaler_skips

__all__ = ["scaler_skips"]


def __getattr__(name: str) -> Any:
    """``scaler_skips``, loaded on first use (torch imported then): the function, or without torch its
    stand-in, which raises torch's MissingDependencyError when called."""
    if name == "scaler_skips":  # (torch imported here, not by `import tripwire.integrations.xgboost`)
        try:
            from ._torch import scaler_skips
        except MissingDependencyError as exc:  # (no torch: a stand-in that raises when called)
            if _STAND_INS.get(name) is None:
                _STAND_INS[name] = _scaler_skips_stand_in(exc)
            return _STAND_INS[name]
        globals()["scaler_skips"] = scaler_skips
        return scaler_skips
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """This module's names, ``scaler_skips`` included before its first use."""
    return sorted(set(globals()) | set(__all__))  # scaler_skips included, though it loads on first access


#: The stand-ins made so far, by name (one per name: the same object at every access)
_STAND_INS: dict[str, Callable[..., Any]] = {}


def _scaler_skips_stand_in(missing: MissingDependencyError) -> Callable[[Any, Any], bool]:
    """``scaler_skips`` where torch is not installed: its signature, a help that names what to install,
    and a call that raises ``missing`` again (trial 29k: ``from tripwire.integrations import *``
    raised the torch ImportError, and ``help()`` did not list scaler_skips)."""

    def scaler_skips(scaler: Any, optimizer: Any) -> bool:
        err = MissingDependencyError(str(missing))
        err.name = missing.name
        raise err from missing.__cause__

    scaler_skips.__qualname__ = "scaler_skips"
    scaler_skips.__doc__ = (
        "Whether fp16 mixed precision's ``torch.amp.GradScaler`` skips this step of ``optimizer`` (its "
        "gradients overflowed at the loss scale), so that a hand-written loop does not offer those gradients.\n\n"
        f"Not available here: {missing}\n\nCalling it raises that MissingDependencyError; with torch "
        "installed, help(tripwire.integrations.scaler_skips) says the rest.")
    return scaler_skips
