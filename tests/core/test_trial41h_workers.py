"""Trial 41h F2/F4: a rank that closed before its first record was in ``tripwire inspect``'s workers
and ``run.end_markers`` but not ``run.workers``: ``tripwire plot --worker 1`` called it "not one of the
run's workers"; ``run.tensor(name).workers()`` listed every worker, rank 0 too where only rank 1
logged the tensor."""

from __future__ import annotations

from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError
from tripwire._cli import main


@pytest.fixture
def two_ranks(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    with tripwire.Session({"out_dir": str(out), "save": {"interval": 1}}, rank=0, world_size=2, rules=[]) as s:
        for step in range(3):
            s.step("train", step, {"loss": (1.0, "losses")})
    tripwire.Session({"out_dir": str(out)}, rank=1, world_size=2, rules=[]).close()  # (before its first record)
    return out


def test_a_worker_without_records_is_known(two_ranks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tripwire.open_run(two_ranks)
    assert run.workers == [0] and run.known_workers() == [0, 1]
    assert run.series("loss", worker=1)[0].tolist() == []  # (known: reads empty)
    with pytest.raises(ConfigError, match=r"worker: got 2; accepted: one of the run's workers \(0, 1\)"):
        run.series("loss", worker=2)
    pytest.importorskip("matplotlib")
    assert main(["plot", str(two_ranks), "loss", "--worker", "1"]) == 2
    assert ("worker: got 1, which has written no step record (a training still starting, or one that ended before "
            "its first): nothing to plot; the run's workers with records: 0") in capsys.readouterr().err


def test_a_tensor_view_lists_the_workers_holding_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    for rank in range(2):
        with tripwire.Session({"out_dir": str(out), "save": {"interval": 1}}, rank=rank, world_size=2,
                              rules=[]) as s:
            for step in range(3):
                values = {"loss": (1.0, "losses")}
                if rank == 1:
                    values["aux"] = (0.5, "losses")
                s.step("train", step, values)
    run = tripwire.open_run(out)
    assert run.tensor("aux").workers() == [1] and run.tensor("loss").workers() == [0, 1]


def test_train_steps_of_a_mode_only_another_worker_recorded(tmp_path: Path) -> None:
    """Trial 41j F2: ``run.train_steps('test', run.steps('test'))`` of a mode only rank 1 recorded was
    [-1, -1] ("before training")."""
    out = tmp_path / "run"
    for rank in range(2):
        with tripwire.Session({"out_dir": str(out), "save": {"interval": 1}}, rank=rank, world_size=2,
                              rules=[]) as s:
            for step in range(4):
                s.step("train", step, {"loss": (1.0, "losses")})
            s.step("eval" if rank == 0 else "test", 0, {"m": (0.5, "metrics")})
    run = tripwire.open_run(out)
    assert run.steps("test") == [0]
    with pytest.raises(ConfigError, match=r"train_steps\('test'\): worker 0, which worker=None reads .*recorded no test "
                                          r"step; worker 1 did: pass worker=1"):
        run.train_steps("test", run.steps("test"))
    assert run.train_steps("test", worker=1).tolist() == [3]
    assert run.train_steps("eval").tolist() == [3]
