"""Trial 43b: each tuning job's ``setup()`` plugin stayed registered on a Dask cluster the user passed
(the scheduler runs every registered worker plugin in each worker that starts later, a nanny's
restart too): after three jobs, a worker a trial killed restarted into every earlier job's
``setup``, one of them a job refused for a module its workers could not import, so the restart
failed and the cluster lost the worker for good. A job now unregisters its plugin as it ends, and a
job refused at its plugin leaves none behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Categorical, RandomSearch, Tuner
from tripwire.tune._errors import TuneError

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def _plugins(cluster: Any) -> list[str]:
    with distributed.Client(cluster, set_as_default=False) as client:
        return sorted(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins)))


def setup() -> dict[str, int]:
    return {"offset": 1}


def train(params: dict[str, Any], trial: Any) -> float:
    return float(params["k"]) + trial.context["offset"]


def test_a_jobs_setup_plugin_is_gone_from_the_cluster_when_it_ends(cluster: Any, tmp_path: Path) -> None:
    before = _plugins(cluster)
    for job in range(2):
        tuner = Tuner(train, space={"k": Categorical([1, 2])}, objective="v", mode="max",
                      strategy=RandomSearch(max_resource=1), max_jobs=2, journal=str(tmp_path / f"j{job}.db"),
                      executor=cluster, setup=setup, seed=job)
        result = tuner.fit()
        assert result.best.value == 3.0
        assert _plugins(cluster) == before


def test_a_job_refused_at_its_setup_leaves_no_plugin(cluster: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "only_here_43b.py").write_text("def setup():\n    return 1\n\ndef train(params, trial):\n    return 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # this process imports it; the workers started without it
    import only_here_43b

    before = _plugins(cluster)
    tuner = Tuner(only_here_43b.train, space={"k": Categorical(["a"])}, objective="v", mode="max",
                  strategy=RandomSearch(max_resource=1), max_jobs=1, journal=str(tmp_path / "s.db"),
                  executor=cluster, setup=only_here_43b.setup)
    with pytest.raises(TuneError, match=r"cannot import module 'only_here_43b'"):
        tuner.fit()
    assert _plugins(cluster) == before


def test_a_trial_that_killed_its_worker_is_worker_died_at_its_time_limit(tmp_path: Path) -> None:
    """Trial 43b F2: on the tuner's own cluster, a trial that killed its worker, whose replacement was
    still in a slow ``setup()`` when the trial's time limit came, read ``failed (timeout)``, its task
    said to keep a thread of the dead worker; it is ``worker_died`` now, naming that worker."""
    import session43_trainables as t43

    from tripwire.tune import Continuous

    result = Tuner(t43.train_kills_its_worker, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(1), max_jobs=2,
                   max_parallel_jobs=1, seed=0, journal=str(tmp_path / "j.db"), executor="dask",
                   setup=t43.slow_setup, trial_timeout=2).fit()
    first, second = result.trials
    assert (first.status, first.reason) == ("failed", "failed (worker_died)"), (first.reason, first.error)
    assert "died while running trial 0" in first.error and "keeps its thread" not in first.error
    assert second.status == "completed"
