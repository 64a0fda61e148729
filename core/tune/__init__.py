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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    if name == "DaskExecutor":  # distributed loads lazily
        from ._dask import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'tripwire.tune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)  # DaskExecutor included, though it loads on first access
