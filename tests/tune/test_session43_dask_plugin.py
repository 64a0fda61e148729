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
