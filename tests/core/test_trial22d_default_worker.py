"""Trial 22d: a run written by workers that do not include rank 0 (XGBoost's ``ranks=[1]``, a DDP
job whose ``writer.ranks`` leaves rank 0 out) raised ``worker: got 0; accepted: one of the run's
workers (1)`` at ``run.series(name)`` and ``run.tensor(name).steps()``, whose default was worker 0.
The readers' default worker is now rank 0 when the run has it, else the run's lowest worker; an
explicit ``worker=`` is read as given (one the run lacks is still the ConfigError naming its workers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire._cli import main

CONFIG = {"save": {"interval": 1},
          "collections": {"weights": {"reductions": ["l2", "raw", "histogram"], "histogram_bins": 4},
                          "losses": None}}


def _write(out: Path, writers: list[int], world_size: int) -> None:
    """A run of ``world_size`` ranks of which ``writers`` write their shard; rank r's values are
    offset by 100 * r, so that what is read names the worker it came from."""
    sessions = [tripwire.Session({**CONFIG, "out_dir": str(out), "writer": {"ranks": writers}},
                                 rank=r, world_size=world_size, rules=[]) for r in range(world_size)]
    for step in range(3):
        for r, s in enumerate(sessions):
            s.step("train", step, {"loss": (100.0 * r + 1.0 / (step + 1), "losses"),
                                   "fc.weight": (np.full(4, 100.0 * r + step), "weights")})
    for r, s in enumerate(sessions):
        s.step("eval", 0, {"val_loss": (100.0 * r + 0.5, "losses")})
        s.close()


@pytest.fixture
def rank1(tmp_path: Path) -> Path:
    _write(tmp_path / "rank1", [1], 2)
    return tmp_path / "rank1"


def test_the_default_readers_read_a_run_that_only_rank_1_wrote(rank1: Path) -> None:
    run = tripwire.open_run(rank1)
    assert run.workers == [1]
    # the README's "Read a run", with its defaults
    steps, values = run.series("val_loss")  # raised: worker: got 0; accepted: one of the run's workers (1)
    assert steps.tolist() == [0] and values.tolist() == [100.5]
    assert run.series("loss")[1].tolist() == pytest.approx([101.0, 100.5, 100 + 1 / 3])
    assert run.tensor("val_loss").steps() == [0] and run.tensor("val_loss").series()[1].tolist() == [100.5]
    weight = run.tensor("fc.weight")
    assert weight.steps() == [0, 1, 2] and weight.modes() == ["train"]
    assert weight.value("l2", 2) == pytest.approx(np.linalg.norm(np.full(4, 102.0)))
    assert weight.reduction("l2", 0) == pytest.approx(200.0)
    np.testing.assert_array_equal(weight.value(1), np.full(4, 101.0))
    counts, edges = weight.histogram(2)
    assert counts.sum() == 4 and len(edges) == 5
    assert run.latest("loss") == (2, pytest.approx(100 + 1 / 3))
    assert run.value("val_loss", "raw", 0) == 100.5
    assert run.array_steps("fc.weight") == [0, 1, 2]
    np.testing.assert_array_equal(run.array("fc.weight", 0), np.full(4, 100.0))
    assert run.histogram("fc.weight", 1)[0].sum() == 4
    assert run.wall_times("train")[0].tolist() == [0, 1, 2]
    assert run.steps_between("train", 0, 2) == [1, 2]
    assert run.steps("eval") == [0] and run.dataframe().worker.unique().tolist() == [1]
    # the same values as with worker=1 given
    assert run.series("loss")[1].tolist() == run.series("loss", worker=1)[1].tolist()


def test_an_explicit_worker_the_run_lacks_keeps_its_error(rank1: Path) -> None:
    run = tripwire.open_run(rank1)
    for read in (lambda: run.series("val_loss", worker=0), lambda: run.steps("train", worker=0),
                 lambda: run.tensor("val_loss").steps(worker=0), lambda: run.tensor("fc.weight").value(1, worker=0),
                 lambda: run.tensor("fc.weight").value("l2", 1, worker=0),
                 lambda: run.array_steps("fc.weight", worker=0),
                 lambda: run.array("fc.weight", 1, worker=0), lambda: run.value("loss", "raw", 1, worker=0),
                 lambda: run.latest("loss", worker=0), lambda: run.histogram("fc.weight", 1, worker=0)):
        with pytest.raises(ConfigError, match=r"worker: got 0; accepted: one of the run's workers \(1\)"):
            read()


def test_the_default_is_rank_0_where_the_run_has_it_else_its_lowest_worker(tmp_path: Path) -> None:
    _write(tmp_path / "both", [0, 1], 2)
    run = tripwire.open_run(tmp_path / "both")
    assert run.workers == [0, 1]
    assert run.series("val_loss")[1].tolist() == [0.5]  # rank 0, as before
    assert run.tensor("val_loss").series(worker=1)[1].tolist() == [100.5]  # an explicit worker: as given
    assert run.tensor("fc.weight").value("l2", 0, worker=1) == pytest.approx(200.0)

    _write(tmp_path / "two_and_one", [2, 1], 3)  # a DDP job whose writer ranks leave rank 0 out
    run = tripwire.open_run(tmp_path / "two_and_one")
    assert run.workers == [1, 2]
    assert run.series("val_loss")[1].tolist() == [100.5]  # the lowest worker, 1
    assert run.tensor("val_loss").series(worker=2)[1].tolist() == [200.5]
    assert run.latest("loss", worker=2) == (2, pytest.approx(200 + 1 / 3))


def test_an_in_process_history_of_rank_1_reads_its_own_values_by_default(tmp_path: Path) -> None:
    # (a framework callback's ``history`` on rank 1 read worker 0: empty)
    with tripwire.Session({**CONFIG, "out_dir": str(tmp_path / "run")}, rank=1, world_size=2, rules=[]) as s:
        for step in range(2):
            s.step("train", step, {"loss": (100.0 + step, "losses")})
        assert s.history.series("loss")[1].tolist() == [100.0, 101.0]
        assert s.history.latest("loss") == (1, 101.0)
        assert len(s.history.series("loss", worker=0)[0]) == 0  # given: as given (an in-process History checks none)


def test_inspect_and_watch_read_a_run_that_only_rank_1_wrote(rank1: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(rank1), "--tensors", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "workers: [1]" in out and "raw=100.5 @ 0 (eval)" in out and "l2=204 @ 2" in out
    # a rule out of process over a run that rank 1 alone wrote judges rank 1's values
    out_dir = tmp_path / "nan"
    sessions = [tripwire.Session({"out_dir": str(out_dir), "save": {"interval": 1}, "writer": {"ranks": [1]}},
                                 rank=r, world_size=2, rules=[]) for r in (0, 1)]
    for step in range(3):
        for r, s in enumerate(sessions):
            s.step("train", step, {"loss": (float("nan") if (r, step) == (1, 1) else 1.0, "losses")})
    for s in sessions:
        s.close()
    config = tmp_path / "rules.yaml"
    config.write_text("rules: [exploding_tensor]\n")
    assert main(["watch", str(out_dir), "--once", "--config", str(config)]) == 1
    assert "exploding_tensor at step 1 (train, rank 1)" in capsys.readouterr().out
    assert [(f.rule, f.step, f.worker) for f in tripwire.open_run(out_dir).findings] == [("exploding_tensor", 1, 1)]


def test_watchs_view_of_a_run_reads_the_default_worker_too(rank1: Path) -> None:
    # (trial 22n's review: tripwire watch's time-limited view kept worker=0 defaults; a custom rule
    # calling history.series(name) without a worker read nothing of a run only rank 1 wrote)
    from tripwire._watch import HistoryAsOf

    run = tripwire.open_run(rank1)
    view = HistoryAsOf(run)
    _, walls = run.wall_times("train", 1)
    view.set_limit(float(walls[1]))  # as of the second train record
    assert view.series("loss")[0].tolist() == [0, 1]
    assert view.wall_times("train")[0].tolist() == [0, 1]
    assert view.array_steps("fc.weight") == [0, 1]
    assert view.latest("loss") == (1, pytest.approx(100.5))
