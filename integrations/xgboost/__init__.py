"""tripwire for XGBoost: ``TripwireCallback``, an ``xgboost.callback.TrainingCallback``.

    from tripwire.integrations.xgboost import TripwireCallback

    cb = TripwireCallback(rules=[{"name": "tree_depth", "max_depth": 6, "actions": ["stop_training"]}])
    booster = xgb.train(params, dtrain, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb])
    cb.findings, cb.stopped_by

Works with ``xgb.train``, the sklearn API (``XGBClassifier(callbacks=[cb])``) and ``xgboost.dask``.
XGBoost is imported on first use; without it the import raises an ImportError naming the extras
``tripwire[xgboost]`` and ``tripwire[xgboost-cpu]``. See docs/xgboost.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._callback import TripwireCallback

from tripwire._errors import require

require(("xgboost",), "xgboost", " (or 'tripwire[xgboost-cpu]' for the smaller CPU-only build; never both)")

__all__ = ["TripwireCallback"]


def __getattr__(name: str) -> Any:
    if name == "TripwireCallback":
        try:
            import xgboost  # noqa: F401
        except ImportError as exc:
            from tripwire._errors import MissingDependencyError, install_hint

            err = MissingDependencyError(
                f"'xgboost' is not installed; install it with: {install_hint('xgboost')}, or "
                f"{install_hint('xgboost-cpu')} for the smaller CPU-only build; never both"
            )
            err.name = "xgboost"
            raise err from exc
        from ._callback import TripwireCallback

        return TripwireCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
