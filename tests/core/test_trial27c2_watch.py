"""Trials 27c and 27e, follow-ups I and E of ``tripwire watch``.

I. A finding the training's integration records itself, not by a rule (Keras's
``loss_output_mismatch``, trial 27e; XGBoost's ``eval_is_train``; Lightning's ``distributed_stop``:
``Session.record_finding``), cannot be judged again by a rule, and watch replays rules only: a run
whose only finding was such a check exited 0, and a CI gate passed it. The watch now reads them from
the run's findings, prints them ("a check, not a rule"; ``--json``: ``"type": "check"``) and, at
severity warning or above, exits 1 as for a rule's finding; an ``info`` one is printed only.

E. In text, a healthy ``watch --once`` printed nothing at all: a CI log did not show that it ran.
It ends with one summary line on stdout (the text of ``--json``'s summary), but on exit 2 (the
error's one stderr line) and 130.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire._cli import main
from tripwire._watch import Watcher


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _session(path: Path, *checks: tripwire.Finding, rules: Any = (), steps: int = 30,
             nan_at: int | None = None) -> tripwire.Session:
    """A session that wrote ``steps`` train losses and a validation loss, and recorded ``checks``."""
    s = tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": list(rules),
                          "collections": ["losses"]})
    for step in range(steps):
        s.step("train", step, {"loss": (float("nan") if step == nan_at else 1.0 / (step + 1), "losses")})
    s.step("eval", 0, {"val_loss": (0.5, "losses")})
    for finding in checks:
        s.record_finding(finding)
    s.flush()
    return s


def _run(path: Path, *checks: tripwire.Finding, rules: Any = (), steps: int = 30, nan_at: int | None = None) -> Path:
    """A closed run (see :func:`_session`)."""
    _session(path, *checks, rules=rules, steps=steps, nan_at=nan_at).close()
    return path


def _config(tmp_path: Path, rules: str = "[exploding_tensor, loss_not_decreasing]") -> Path:
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(f"rules: {rules}\n")
    return cfg


MISMATCH = tripwire.Finding("loss_output_mismatch", 0, "train", "the loss 'sparse_categorical_crossentropy' has "
                            "from_logits=True, but the model's output layer 'out' applies softmax",
                            details={"layer": "out"})


# ------------------------------------------------------------------------------------------ I
def test_a_check_the_training_recorded_fails_the_watch_as_a_rule_finding_does(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path / "run", MISMATCH)
    # trial 27e: exit 0 and nothing printed; the rules watched find nothing in this healthy run
    assert main(["watch", str(run), "--config", str(_config(tmp_path)), "--once"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == (f"recorded before, by the training (a check, not a rule): [warning] loss_output_mismatch at "
                        f"step 0 (train): {MISMATCH.message}")
    assert lines[1] == (f"tripwire watch: {str(run)!r} (complete), 2 rules watched over 30 train and 1 eval records: "
                        "no finding; 1 check the training recorded (1 of severity warning or above); exit status 1")
    assert len(lines) == 2 and "Traceback" not in captured.err
    # again, the run's own rules (the default set): the same, and the watch never writes the check again
    assert main(["watch", str(run), "--once"]) == 1
    assert "loss_output_mismatch" in capsys.readouterr().out
    assert [f.rule for f in tripwire.open_run(run).findings] == ["loss_output_mismatch"]


def test_watch_json_gives_a_check_its_own_line_type_and_counts(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path / "run", MISMATCH)
    assert main(["watch", str(run), "--config", str(_config(tmp_path)), "--once", "--json"]) == 1
    check, summary = [_strict(line) for line in capsys.readouterr().out.splitlines()]
    assert check["type"] == "check" and check["origin"] == "recorded_before"
    assert {k: check[k] for k in ("rule", "step", "mode", "severity", "source", "details")} == {
        "rule": "loss_output_mismatch", "step": 0, "mode": "train", "severity": "warning", "source": "check",
        "details": {"layer": "out"}}
    assert summary["exit_code"] == 1 and summary["findings"] == 0  # (the rules watched found nothing)
    assert summary["checks"] == 1 and summary["failing_checks"] == 1


def test_an_info_check_is_printed_and_does_not_fail_the_watch(tmp_path: Path, capsys) -> None:
    told = tripwire.Finding("distributed_stop", 12, "train", "another rank's rule stopped training; every rank stops "
                            "at the same step", severity="info")
    run = _run(tmp_path / "run", told)
    assert main(["watch", str(run), "--config", str(_config(tmp_path)), "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("recorded before, by the training (a check, not a rule): [info] distributed_stop at "
                               "step 12 (train)")
    assert lines[1].endswith("no finding; 1 check the training recorded (none of severity warning or above); exit "
                             "status 0")
    assert main(["watch", str(run), "--config", str(_config(tmp_path)), "--once", "--json"]) == 0
    summary = _strict(capsys.readouterr().out.splitlines()[-1])
    assert (summary["checks"], summary["failing_checks"], summary["exit_code"]) == (1, 0, 0)


def test_a_finding_of_a_rule_not_watched_is_no_check(tmp_path: Path, capsys, monkeypatch) -> None:
    # a built-in rule's finding (the training's exploding_tensor) where --config watches others: not this watch's
    run = _run(tmp_path / "run", rules=["exploding_tensor"], nan_at=20)
    assert [f.rule for f in tripwire.open_run(run).findings] == ["exploding_tensor"]
    assert main(["watch", str(run), "--config", str(_config(tmp_path, "[loss_not_decreasing]")), "--once"]) == 0
    assert "exploding_tensor" not in capsys.readouterr().out
    # a module:attribute rule of the run's config, by the name it ran under: imported, or (its module not
    # importable here) by the function's name
    (tmp_path / "teamrules27c2.py").write_text(
        "def loss_above_half(history, step, mode):\n"
        "    steps, values = history.series('loss', 'raw', mode)\n"
        "    return f'loss {values[-1]} > 0.5' if len(values) and values[-1] > 0.5 else None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    other = _run(tmp_path / "other", rules=["teamrules27c2:loss_above_half"], steps=3)
    assert [f.rule for f in tripwire.open_run(other).findings] == ["loss_above_half"]
    (tmp_path / "cfg").mkdir()  # (not beside the module: watch imports from its config's folder)
    cfg = _config(tmp_path / "cfg", "[loss_not_decreasing]")
    assert main(["watch", str(other), "--config", str(cfg), "--once"]) == 0
    assert "loss_above_half" not in capsys.readouterr().out
    monkeypatch.delitem(sys.modules, "teamrules27c2")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    assert main(["watch", str(other), "--config", str(cfg), "--once"]) == 0
    assert "loss_above_half" not in capsys.readouterr().out
    assert "teamrules27c2" not in sys.modules  # (it was not imported: named by the function's name)


def test_a_check_recorded_while_the_watch_runs_is_recorded_during(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    s = _session(out, steps=5)
    try:
        watcher = Watcher(out, {"rules": ["exploding_tensor"]}, stop=True, json_lines=True)
        assert watcher.poll() == [] and watcher.checks == []
        s.record_finding(MISMATCH)
        s.flush()
        assert watcher.poll() == []
        assert [f.rule for f in watcher.checks] == ["loss_output_mismatch"]
        line = _strict(capsys.readouterr().out)
        assert (line["type"], line["origin"], line["rule"]) == ("check", "recorded_during", "loss_output_mismatch")
        watcher.json_lines = False  # (the text of one recorded while the watch runs)
        s.record_finding(tripwire.Finding("eval_is_train", 5, "train", "the evaluation set 'validation' is the "
                                          "training data"))
        s.flush()
        assert watcher.poll() == [] and [f.rule for f in watcher.checks] == ["loss_output_mismatch", "eval_is_train"]
        assert capsys.readouterr().out == ("recorded by the training (a check, not a rule): [warning] eval_is_train at "
                                           "step 5 (train): the evaluation set 'validation' is the training data\n")
        # never acted on: no stop asked for, with --stop either (the integration chose no action)
        assert watcher.stop_requested is None and not (out / "control" / "stop.json").exists()
    finally:
        s.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_a_real_keras_fit_with_the_loss_output_mismatch_fails_the_watch(tmp_path: Path, capsys) -> None:
    keras = pytest.importorskip("keras")
    torch = pytest.importorskip("torch")
    from tripwire.integrations.keras import TripwireCallback

    torch.set_num_threads(1)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(2, activation="softmax", name="out")])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    out = tmp_path / "run"
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[TripwireCallback(out_dir=out)])
    assert [f.rule for f in tripwire.open_run(out).findings] == ["loss_output_mismatch"]
    capsys.readouterr()
    assert main(["watch", str(out), "--once"]) == 1  # (trial 27e: 0, a CI gate passed it)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("recorded before, by the training (a check, not a rule): [warning] "
                               "loss_output_mismatch at step 0 (train): the loss 'sparse_categorical_crossentropy' "
                               "has from_logits=True, but the model's output layer 'out' applies softmax")
    assert lines[-1].endswith("exit status 1")


# ------------------------------------------------------------------------------------------ E
def test_a_healthy_watch_ends_with_one_summary_line_on_stdout(tmp_path: Path, capsys) -> None:
    # trial 27c: nothing at all; the exit status alone said what happened
    run = _run(tmp_path / "run")
    assert main(["watch", str(run), "--config", str(_config(tmp_path)), "--once"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (f"tripwire watch: {str(run)!r} (complete), 2 rules watched over 30 train and 1 eval "
                            "records: no finding; exit status 0\n")
    assert captured.err == ""


def test_the_summary_line_names_findings_and_an_unjudged_run(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path / "run", nan_at=20)
    cfg = _config(tmp_path, "[exploding_tensor]")
    assert main(["watch", str(run), "--config", str(cfg), "--once"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[critical] exploding_tensor at step 20 (train)")
    assert lines[1].endswith("1 rule watched over 30 train and 1 eval records: 1 finding (1 new); exit status 1")
    assert main(["watch", str(run), "--config", str(cfg), "--once"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].endswith(": 1 finding (1 recorded before); exit status 1")
    # a run still written (--once): exit 3, the reasons on stderr
    live = tmp_path / "live"
    session = _session(live)
    try:
        assert main(["watch", str(live), "--config", str(cfg), "--once"]) == 3
        captured = capsys.readouterr()
        assert captured.out == (f"tripwire watch: {str(live)!r} (running), 1 rule watched over 30 train and 1 eval "
                                "records: no finding; not everything judged (stderr says why); exit status 3\n")
        assert "the run has not ended (--once)" in captured.err
    finally:
        session.close()
    # no run appeared before --timeout: said on stdout too
    missing = tmp_path / "not-yet"
    assert main(["watch", str(missing), "--timeout", "0", "--interval", "0.01"]) == 3
    assert capsys.readouterr().out == (f"tripwire watch: no run at {str(missing)!r} (--timeout ran out before one "
                                       "appeared): nothing judged; exit status 3\n")


def test_exit_2_prints_no_summary_line(tmp_path: Path, capsys) -> None:
    assert main(["watch", str(tmp_path / "nope"), "--config", str(_config(tmp_path, "[]")), "--once"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("tripwire watch: error: --config:")
