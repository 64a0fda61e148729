"""Fresh-user trial 20a: ``tripwire watch`` over a shard cut short after the run ended, the finding of
a stop asked with ``tripwire.request_stop``, plots of a run that holds some steps twice, and the
categories of ``run.dataframe()["mode"]``."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Finding
from tripwire._format import shard_name
from tripwire._run import read_stop_requests
from tripwire._watch import Watcher, register


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers())
    args = parser.parse_args(["watch", *argv])
    return args.func(args)


def _step(s: tripwire.Session, i: int, loss: float = 1.0):
    s._stop_checked = 0.0  # (requests are read at most once a second)
    return s.step("train", i, {"loss": (loss, "losses")})


# ------------------------------------------------------------ 1. watch over a shard cut short: exit 3
RULES = ("def late(history, step, mode):\n    return f'step {step} reached' if step >= 25 else None\n\n\n"
         "def never(history, step, mode):\n    return None\n")


@pytest.fixture()
def rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Configs of a rule that fires from step 25 on, and of one that never fires."""
    (tmp_path / "rules20a.py").write_text(RULES)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = {}
    for name in ("late", "never"):
        cfg = tmp_path / f"{name}.yaml"
        cfg.write_text(f"rules: ['rules20a:{name}']\nactions: [record]\n")
        out[name] = str(cfg)
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete run of 30 train steps, one record each (a record with an array per step: records are
    not batched, so cutting the shard loses steps), and no findings of its own."""
    out = tmp_path_factory.mktemp("finished") / "run"
    config = {"out_dir": str(out), "save": {"interval": 1}, "rules": [],
              "collections": {"weights": {"reductions": ["l2", "raw"]}, "losses": None}}
    with tripwire.Session(config) as s:
        for i in range(30):
            s.step("train", i, {"w": (np.full(4, float(i)), "weights"), "loss": (1.0 / (i + 1), "losses")})
    return out


def _cut(finished: Path, tmp_path: Path, keep: float | None = None, torn: int = 0) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    shard = run / "workers" / shard_name(0)
    data = shard.read_bytes()
    shard.write_bytes(data[: int(len(data) * keep)] if keep is not None else data[:-torn])
    return run


def test_watch_exits_3_over_a_shard_truncated_after_the_run_ended(finished: Path, tmp_path: Path,
                                                                   rules: dict[str, str],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """trial 20a: a complete run whose shard lost most of its records (``run.damaged``) exited 0, "no
    finding", although the rules never saw the steps that are gone; the intact run exits 0."""
    assert _cli([str(finished), "--config", rules["never"], "--once"]) == 0
    capsys.readouterr()
    run = _cut(finished, tmp_path, keep=1 / 3)
    expected, read = tripwire.open_run(run).damaged[0]
    assert expected == 30 and 0 < read < 30
    assert _cli([str(run), "--config", rules["never"], "--once"]) == 3
    err = capsys.readouterr().err
    assert (f"tripwire watch: worker 0's shard holds {read} of the 30 step records its end marker counts "
            f"(truncated or damaged after the run ended): the {30 - read} records missing were not judged") in err
    assert _cli([str(run), "--config", rules["never"]]) == 3  # (not --once: the run is complete, watch ends at once)


def test_watch_exits_3_over_a_torn_tail_of_a_run_that_ended(finished: Path, tmp_path: Path, rules: dict[str, str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = _cut(finished, tmp_path, torn=5)
    assert tripwire.open_run(run).damaged == {0: (30, 29)}
    assert _cli([str(run), "--config", rules["never"], "--once"]) == 3
    assert "worker 0's shard holds 29 of the 30 step records" in capsys.readouterr().err


def test_watch_still_exits_1_for_a_finding_in_a_damaged_run(finished: Path, tmp_path: Path, rules: dict[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = _cut(finished, tmp_path, torn=5)  # steps 0..28 are left: the rule fires at 25
    assert _cli([str(run), "--config", rules["late"], "--once"]) == 1
    assert "worker 0's shard holds 29 of the 30" in capsys.readouterr().err


def test_watch_over_an_emptied_shard_blames_the_damage_not_the_config(finished: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """trial 20d: a shard emptied after the run ended: the rule's "had nothing to read" advised
    capturing the collection in the training's config (the training had), and the closing line
    named the rule alone; a shard cut short had no closing line."""
    cfg = tmp_path / "et.yaml"
    cfg.write_text("rules: [exploding_tensor]\n")
    run = _cut(finished, tmp_path, keep=0.0)
    assert _cli([str(run), "--config", str(cfg), "--once"]) == 3
    err = capsys.readouterr().err
    assert "capture it in the training's config" not in err
    assert ("rule 'exploding_tensor' had nothing to read: no tensor of the 'losses' collection was captured (the run "
            "holds tensors of: none); the training may have captured it: records are missing from a damaged shard "
            "(below)") in err
    assert err.rstrip().endswith("no finding, but not everything was judged: rule 'exploding_tensor' judged "
                                 "nothing and 30 step records of damaged shards (said above)")
    shutil.rmtree(run)
    run = _cut(finished, tmp_path, torn=5)
    assert _cli([str(run), "--config", str(cfg), "--once"]) == 3
    assert capsys.readouterr().err.rstrip().endswith(
        "no finding, but not everything was judged: 1 step record of damaged shards (said above)")


# ------------------------------------------------- 2. the finding of a stop asked with request_stop
def test_a_stop_asked_with_request_stop_writes_its_finding_to_the_run_once(tmp_path: Path) -> None:
    """trial 20a: the training stopped and held the finding (session.findings, stopped_by), but
    ``open_run(...).findings`` was empty and ``tripwire inspect`` said "findings: none"."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    assert not _step(s, 0).stop
    tripwire.request_stop(out, Finding("manual", 0, "train", "stopped by hand"))
    assert read_stop_requests(out)[0]["record_by"] == 0
    d = _step(s, 1)
    assert d.stop and d.stopped_by.rule == "manual" and d.stopped_by.source == "request_stop"
    later = _step(s, 2)  # (read once: held, not recorded again; trial 26c: a stop is held at later steps)
    assert later.stop and later.findings == () and later.stopped_by is d.stopped_by
    s.close("stopped")
    run = tripwire.open_run(out)
    assert [(f.rule, f.step, f.source) for f in run.findings] == [("manual", 0, "request_stop")]
    assert s.findings == run.findings and s.stopped_by == run.findings[0]
    assert json.loads((out / "workers" / "worker-00000.end.json").read_text())["findings"] == 1
    # a source given by the caller is kept
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    tripwire.request_stop(out, Finding("manual", 3, "train", "from the notebook", source="notebook"))
    assert _step(s, 3).stop
    s.close("stopped")
    assert [f.source for f in tripwire.open_run(out).findings] == ["request_stop", "notebook"]


def test_a_stop_that_watch_requested_is_not_written_twice(tmp_path: Path) -> None:
    """watch writes its finding to its own file (findings/watch-00000.jsonl); the session that
    honours its request must not write it again: the request holds no record_by."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    w = Watcher(out, {"rules": [{"name": "exploding_tensor", "actions": ["stop_training"]}]}, echo=lambda f: None)
    assert not _step(s, 0).stop
    assert not _step(s, 1, float("nan")).stop
    s.flush()
    assert [f.step for f in w.poll()] == [1] and w.stop_requested is not None
    assert "record_by" not in read_stop_requests(out)[0]
    d = _step(s, 2)
    assert d.stop and d.stopped_by.source == "watch" and len(s.findings) == 1
    s.close("stopped")
    run = tripwire.open_run(out)
    assert [(f.rule, f.step, f.source) for f in run.findings] == [("exploding_tensor", 1, "watch")]
    assert json.loads((out / "workers" / "worker-00000.end.json").read_text())["findings"] == 1  # (the session's)


def test_a_stop_asked_of_two_workers_is_written_by_one(tmp_path: Path) -> None:
    out = tmp_path / "run"
    workers = [tripwire.Session(out_dir=str(out), save_interval=1, rules=[], rank=r, world_size=2) for r in (0, 1)]
    for s in workers:
        assert not _step(s, 0).stop
    tripwire.request_stop(out, Finding("manual", 0, "train", "stopped by hand", worker=1))
    assert read_stop_requests(out)[0]["record_by"] == 1
    for s in workers:
        assert _step(s, 1).stop
        s.close("stopped")
    assert [(f.rule, f.worker) for f in tripwire.open_run(out).findings] == [("manual", 1)]
    # a finding of a worker that runs no session: the lowest worker running writes it
    workers = [tripwire.Session(out_dir=str(out), save_interval=1, rules=[], rank=r, world_size=2) for r in (0, 1)]
    workers[0].close()
    tripwire.request_stop(out, Finding("manual", 2, "train", "stopped by hand", worker=0))
    assert read_stop_requests(out)[0]["record_by"] == 1
    assert _step(workers[1], 2).stop
    workers[1].close("stopped")
    assert [(f.step, f.worker) for f in tripwire.open_run(out).findings] == [(0, 1), (2, 0)]


def test_request_stop_refuses_a_recorded_that_is_not_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"recorded: got 'yes'; accepted: True .* or False"):
        tripwire.request_stop(tmp_path, Finding("manual", 0, "train", "x"), recorded="yes")  # type: ignore[arg-type]
    assert not (tmp_path / "control").exists()


# --------------------------------------------------------------- 3. plots of a run with steps twice
def _run_twice(out: Path, second: range) -> tripwire.Run:
    """Steps 0..9, then ``second`` again (a second training into the same out_dir, a resume past a crash)."""
    for attempt, steps in enumerate((range(10), second)):
        with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
            for i in steps:
                s.step("train", i, {"loss": (10.0 * attempt + i, "losses")})
                if i % 5 == 4:
                    s.step("eval", i // 5, {"val_loss": (100.0 * attempt + i, "losses")})
    return tripwire.open_run(out)


@pytest.mark.parametrize("second", [range(10), range(5, 10)], ids=["appended", "resumed"])
def test_plot_of_steps_written_twice_draws_the_value_written_last_once_per_step(tmp_path: Path,
                                                                                 second: range) -> None:
    """trial 20a: the line followed write order, a segment ran back from the last step to step 0,
    and a resume mixed stale values with new ones."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    run = _run_twice(tmp_path / "run", second)
    assert len(run.series("loss")[0]) == 10 + len(second)
    ax = tripwire.plot(run, ["loss", "val_loss"])
    loss, val = ax.get_lines()[:2]
    assert loss.get_xdata().tolist() == list(range(10))
    assert loss.get_ydata().tolist() == [run.value("loss", "raw", i) for i in range(10)]
    assert loss.get_ydata().tolist()[-1] == 19.0  # (the second training's)
    # eval at the train step it followed, each eval step once, with the value written last
    assert val.get_xdata().tolist() == [4, 9]
    assert val.get_ydata().tolist() == [run.value("val_loss", "raw", k, "eval") for k in (0, 1)]
    ax = tripwire.plot(run, "val_loss")  # alone: at its own steps
    assert ax.get_lines()[0].get_xdata().tolist() == [0, 1]


# ------------------------------------------------------------------------ 4. dataframe()'s modes
def test_dataframe_mode_has_the_documented_modes_only(tmp_path: Path) -> None:
    """trial 20a: the categories held a fifth, "other", which value_counts() showed as a phantom row."""
    pytest.importorskip("pandas")
    with tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[]) as s:
        for i in range(3):
            s.step("train", i, {"loss": (1.0, "losses")})
        s.step("eval", 0, {"val_loss": (2.0, "losses")})
    df = tripwire.open_run(tmp_path / "run").dataframe()
    assert list(df["mode"].cat.categories) == ["train", "eval", "test", "predict"]
    assert df["mode"].value_counts().to_dict() == {"train": 3, "eval": 1, "test": 0, "predict": 0}
    # a record of a mode no tripwire writes (a shard made by other software) has no mode there
    h = tripwire.History()
    h.add_step("train", 0, 0, 0.0, [("loss", ("raw",))], np.asarray([1.0]))
    h.add_step("warmup", 0, 0, 0.0, [("loss", ("raw",))], np.asarray([2.0]))
    df = h.dataframe()
    assert list(df["mode"].cat.categories) == ["train", "eval", "test", "predict"]
    assert df["mode"].tolist()[0] == "train" and df["mode"].isna().tolist() == [False, True]
