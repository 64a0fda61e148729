"""Hyperband tuning: asynchronous Hyperband, random and grid search over a search space, trials on
a warm local process pool or a Dask cluster, every event in a SQLite journal that a killed job
resumes from.

>>> from tripwire.tune import Tuner, Integer, Continuous, Hyperband
>>> tuner = Tuner(train, space={"eta": Continuous(0.01, 1, scale="log"), "max_depth": Integer(1, 10)},
...               objective="validation:auc", mode="max",
...               strategy=Hyperband(min_resource=1, max_resource=30, reduction_factor=3),
...               max_jobs=30, max_parallel_jobs=4, seed=0, journal="tuning.db")  # doctest: +SKIP
>>> result = tuner.fit()  # doctest: +SKIP

After the tuning process was killed (even with SIGKILL), continue the job from its journal; a job
that had already finished is returned as it is, without rerunning anything:

>>> result = Tuner.resume("tuning.db").fit()  # doctest: +SKIP

Trials run on Dask with ``executor=`` a ``distributed.Client``, a cluster (``LocalCluster``...), a
scheduler address (``"tcp://host:8786"``), ``"dask"`` (a new local cluster) or
``DaskExecutor(cluster)`` (extra ``tripwire[dask]``).

``Hyperband(..., sampler="tpe")`` proposes configurations from the results so far (BOHB-style,
Optuna's TPE; extra ``tripwire[bohb]``).

Without the dask extra, ``from tripwire.tune import *`` and ``help(tripwire.tune)`` work as with it:
``DaskExecutor`` is then a stand-in that raises the extra's :class:`~tripwire.MissingDependencyError`
when it is called or subclassed (an attribute read is an AttributeError naming the extra);
``isinstance(x, DaskExecutor)`` is False.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from .._errors import MissingDependencyError

if TYPE_CHECKING:  # pragma: no cover - loaded on first use (the dask extra)
    from ._dask import DaskExecutor

from ._errors import JournalError, JournalLockedError, ReportError, TrialDetachedError, TuneError
from ._executor import Executor, LocalExecutor
from ._hyperband import HyperbandPlan
from ._result import TrialRecord, TuningResult
from ._scheduler import Decision, FIFOScheduler, HyperbandScheduler
from ._space import Categorical, Continuous, Integer, Space
from ._strategy import GridSearch, Hyperband, RandomSearch
from ._trial import Trial
from ._tuner import Tuner

__all__ = [
    "Categorical",
    "Continuous",
    "DaskExecutor",
    "Decision",
    "Executor",
    "FIFOScheduler",
    "GridSearch",
    "Hyperband",
    "HyperbandPlan",
    "HyperbandScheduler",
    "Integer",
    "JournalError",
    "JournalLockedError",
    "LocalExecutor",
    "RandomSearch",
    "ReportError",
    "Space",
    "Trial",
    "TrialDetachedError",
    "TrialRecord",
    "TuneError",
    "Tuner",
    "TuningResult",
]


class _Unavailable(type):
    """The metaclass of a public class whose extra is not installed (trial 29k: ``from tripwire.tune
    import *`` and ``help(tripwire.tune)`` raised the dask extra's ImportError in a core install).
    Importing the name works; calling it or subclassing it raises the extra's MissingDependencyError.
    Reading one of the real class's attributes raises an AttributeError (so that ``help()``,
    ``hasattr`` and ``getattr(cls, name, default)`` see a class without it) whose message names the
    extra to install."""

    _missing: MissingDependencyError

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise _again(cls._missing)

    def __getattr__(cls, name: str) -> NoReturn:
        if name.startswith("_"):
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}: {cls._missing}")


def _again(missing: MissingDependencyError) -> MissingDependencyError:
    """A fresh copy of ``missing`` (same message, module name and cause) to raise once more."""
    err = MissingDependencyError(str(missing))
    err.name = missing.name
    err.__cause__ = missing.__cause__
    return err


#: The stand-ins made so far, by name (one per name: ``tripwire.tune.DaskExecutor`` is always the same object)
_STAND_INS: dict[str, type] = {}


def _stand_in(name: str, summary: str, missing: MissingDependencyError) -> type:
    """The class ``name`` of this module whose extra is missing: its help says ``summary`` and the
    install hint; any use raises ``missing`` again (see :class:`_Unavailable`)."""
    if name not in _STAND_INS:

        def __init_subclass__(cls: type, **kwargs: Any) -> NoReturn:  # (named so: pydoc looks it up by name)
            raise _again(missing)

        doc = (f"{summary}\n\nNot available here: {missing}\n\nImporting this name works (``from tripwire.tune "
               f"import *``, ``help()``); calling it or subclassing it raises that MissingDependencyError "
               f"(an attribute of it, an AttributeError that names the extra). ``isinstance(x, {name})`` is False.")
        cls = _Unavailable(name, (), {"__doc__": doc, "__module__": __name__, "__qualname__": name,
                                      "__init_subclass__": classmethod(__init_subclass__)})
        cls._missing = missing
        _STAND_INS[name] = cls
    return _STAND_INS[name]


def __getattr__(name: str) -> Any:
    """``DaskExecutor``, loaded on first use (distributed imported then): the class, or without the
    dask extra its stand-in, which raises the extra's MissingDependencyError when used."""
    if name == "DaskExecutor":  # distributed loads lazily
        try:
            from ._dask import DaskExecutor
        except MissingDependencyError as exc:  # (the dask extra is not installed: a stand-in that raises when used)
            return _stand_in(name, "Trials on a Dask cluster (the extra tripwire[dask]).", exc)
        return DaskExecutor
    raise AttributeError(f"module 'tripwire.tune' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, ``DaskExecutor`` included before its first use."""
    return sorted(__all__)  # DaskExecutor included, though it loads on first access
