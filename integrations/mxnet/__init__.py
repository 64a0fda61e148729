"""MXNet (Gluon) integration: capture, rules and stopping for MXNet 1.9.1.

``TripwireHook`` drives hand-written Gluon loops (``begin_step`` / ``end_step``;
``step_learning_rate(trainer)`` is the learning rate of the step in progress, to pass as a metric),
``TripwireHandler`` plugs into ``mxnet.gluon.contrib.estimator``, ``MXNetBackend`` computes
reductions with ``mx.nd`` operators where the arrays live. MXNet is imported on first use of one of
these names (``pip install 'tripwire[mxnet]'``; it needs numpy<2). See docs/mxnet.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ._backend import MXNetBackend
    from ._estimator import TripwireHandler
    from ._hook import TripwireHook, step_learning_rate

from tripwire._errors import require

require(("mxnet",), "mxnet", " (mxnet 1.9.1 needs numpy<2: use its own environment)")

_LAZY = {
    "MXNetBackend": "._backend",
    "TripwireHandler": "._estimator",
    "TripwireHook": "._hook",
    "step_learning_rate": "._hook",
}

__all__ = ["MXNetBackend", "TripwireHandler", "TripwireHook", "step_learning_rate"]  # (sorted(_LAZY), as a literal for type checkers)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; available: {', '.join(__all__)}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
