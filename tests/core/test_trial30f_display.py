"""Trial 30f (a data scientist in Jupyter notebooks): what a notebook shows of tripwire's objects and
lines.

- F5: ``Run``'s repr said ``complete=True`` (``is_complete``: every worker left its end marker) for a
  failed or stopped run, which read as its end status.
- F6: ``History`` had the default ``<... at 0x...>`` repr, ``Config`` one line of ~900 characters,
  ``Finding`` one of 563 (the whole advice, ``wall_time`` a raw float); no ``_repr_html_``.
- F7: ``!tripwire inspect RUN`` runs on an 80-column pseudo-terminal with ipykernel's
  ``FORCE_COLOR=1``: rich drew 80-column tables with colour codes.
- F8: the ``log`` action's finding line had no ``tripwire:`` prefix (the stop line has one), and
  (trial 30b) rank 0's finding line named no rank under world_size > 1 while rank 1's did.
- F3 (part): inspect said a second training was made "by a later process" when the same process
  (a second callback in one notebook kernel) made it.
"""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Finding, History, Session, load_config
from tripwire import _cli, _finding
from tripwire._actions import RunContext, bind_run, resolve_action
from tripwire._cli import main

LONG = ("the gradient gradients/net.0.weight has norm 1.52e+09, 1.5e+06 times its median over the last 20 save "
        "steps (1013); the gradients grow without bound: lower the learning rate, clip the gradients "
        "(gradient_clip_val), check the loss scale of mixed precision, and the initialisation and any "
        "normalisation layers.")
STOP_AT_3 = [{"name": "exploding_tensor", "actions": ["log", "stop_training"]}]


def _train(out: Path, steps: int = 8, nan_at: int | None = None, rules: Any = STOP_AT_3, **kw: Any) -> Session:
    s = Session(out_dir=str(out), save_interval=1, rules=rules, include_collections=["gradients"], **kw)
    for step in range(steps):
        loss = float("nan") if nan_at is not None and step >= nan_at else 1.0 / (1 + step)
        decision = s.step("train", step, {"loss": (loss, "losses"), "gradients/w <b>": (np.full(3, 0.1), "gradients")})
        if decision.stop:
            break
    for step in range(2):
        s.step("eval", step, {"val_loss": (0.5, "losses")})
    return s


def _make(**kw: Any) -> Finding:
    base = dict(rule="exploding_gradient", step=10, mode="train", message=LONG, tensors=("gradients/net.0.weight",),
                severity="warning", wall_time=1796541891.0869024)
    return Finding(**{**base, **kw})


# ------------------------------------------------------------------------------ F5: Run's repr
def test_run_repr_shows_the_status_not_complete(tmp_path: Path) -> None:
    out = tmp_path / "stopped"
    s = _train(out, nan_at=3)
    s.close()
    run = tripwire.open_run(out)
    assert run.status == "stopped" and run.is_complete  # (is_complete stays what it was)
    assert repr(run) == f"Run({str(out)!r}, status='stopped', workers=[0])"
    assert "complete" not in repr(run)
    failed = tmp_path / "failed"
    s = _train(failed)
    s.close("failed")
    assert repr(tripwire.open_run(failed)) == f"Run({str(failed)!r}, status='failed', workers=[0])"
    ok = tmp_path / "ok"
    _train(ok).close()
    assert repr(tripwire.open_run(ok)) == f"Run({str(ok)!r}, status='complete', workers=[0])"


def test_run_repr_of_a_run_still_written_says_running(tmp_path: Path) -> None:
    s = _train(tmp_path / "live")
    try:
        assert ", status='running', workers=" in repr(tripwire.open_run(tmp_path / "live"))
    finally:
        s.close()


# -------------------------------------------------------------------------- F6: concise reprs
def test_finding_repr_is_short_and_keeps_where_and_what() -> None:
    f = _make()
    text = repr(f)
    assert len(text) < 250, (len(text), text)
    assert text.startswith("Finding(rule='exploding_gradient', step=10, mode='train', severity='warning', message='the "
                           "gradient gradients/net.0.weight has norm 1.52e+09, 1.5e+06 times its median")
    assert text.endswith(" ...')") and "wall_time" not in text and "\n" not in text
    # what is not the default is named
    other = repr(_make(worker=1, kind="error", source="watch", message="boom"))
    assert other == ("Finding(rule='exploding_gradient', step=10, mode='train', severity='warning', worker=1, "
                     "kind='error', source='watch', message='boom')")
    # str(finding) is the whole line, as before (log lines, stop reasons)
    assert str(f) == f"[warning] exploding_gradient at step 10 (train): {LONG}"
    assert str(_make(worker=1, mode="eval", details={"train_step": 4})).startswith(
        "[warning] exploding_gradient at step 10 (eval, after train step 4, rank 1): the gradient")


def test_finding_repr_cuts_a_long_first_sentence_after_a_word() -> None:
    text = repr(_make(message="x" * 10 + " " + "word " * 60))
    message = re.search(r"message='(.*)'\)$", text).group(1)  # type: ignore[union-attr]
    assert message.endswith("word ...") and len(message) <= 104, message


def test_finding_html_is_a_table_with_everything_escaped() -> None:
    f = _make(rule="<script>alert(1)</script>", message="loss <b>nan</b> & more", mode="eval",
                 details={"train_step": 7}, tensors=("a<b",))
    page = f._repr_html_()
    assert page.startswith("<table>") and page.endswith("</table>")
    assert "<script>" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "loss &lt;b&gt;nan&lt;/b&gt; &amp; more" in page
    assert "eval step 10, after train step 7" in page and "a&lt;b" in page
    assert "2026-" in page or "UTC" in page  # (the time, readable: not a raw float)
    assert "1796541891" not in page


def test_history_repr_says_what_it_holds(tmp_path: Path) -> None:
    h = History()
    assert repr(h) == "History(tensors=0, workers=[], steps={})"
    s = _train(tmp_path / "run", rules=[])
    assert repr(s.history) == "History(tensors=3, workers=[0], steps={'train': 8, 'eval': 2})"
    s.close()


def test_config_repr_names_only_what_differs_from_the_defaults() -> None:
    assert repr(load_config({})) == "Config()"
    cfg = load_config({
        "out_dir": "runs/x", "save": {"interval": 5},
        "collections": {"losses": {}, "gradients": {}, "weights": {"reductions": ["l2"]}},
        "rules": ["default", {"name": "loss_not_decreasing", "patience": 5, "actions": ["stop_training"]}],
        "writer": {"ranks": [0]}, "strict": True})
    text = repr(cfg)
    assert text == ("Config(out_dir='runs/x', save={interval: 5}, collections=[losses, gradients, "
                    "weights(reductions=[l2])], rules=[default, loss_not_decreasing(patience=5, "
                    "actions=[stop_training])], writer={ranks: [0]}, strict=True)"), text
    # a long config stays a few hundred characters: values cut, long lists counted
    many = load_config({"collections": {"mine": {"kinds": ["weights"], "include": ["a" * 200], "reductions": ["l2"]},
                                        **{f"c{i}": {"kinds": ["weights"], "include": [f"w{i}"], "reductions": ["l2"]} for i in range(29)}}})
    text = repr(many)
    assert len(text) < 1000, (len(text), text)
    assert text.endswith(", ... (18 more, 30 in all)])") and "a" * 200 not in text and "mine(include=[aaa" in text, text


def _small_run(tmp_path: Path) -> tripwire.Run:
    out = tmp_path / "r<u>n"
    _train(out, nan_at=3).close()
    return tripwire.open_run(out)


def test_run_html_table_has_status_workers_steps_and_findings(tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    page = run._repr_html_()
    assert page.startswith("<table>") and "<u>" not in page and "r&lt;u&gt;n" in page
    assert "stopped" in page and "worker 0: [critical] exploding_tensor at step 3 (train)" in page
    assert "train: 4 steps (0 to 3)" in page and "eval: 2 steps (0 to 1)" in page
    assert "findings</th><td" in page and "1: exploding_tensor (1)" in page
    assert "&lt;b&gt;" in run.tensor("gradients/w <b>")._repr_html_()  # (a tensor's name escaped too)


def test_tensor_html_table_has_collections_reductions_steps_and_latest(tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    view = run.tensor("val_loss")
    page = view._repr_html_()
    assert "<th" in page and "val_loss" in page and "losses" in page
    assert "eval (worker 0)" in page and "2 steps (0 to 1); raw at step 1: 0.5" in page
    assert repr(view) == f"TensorView('val_loss', run={str(run.path)!r})"


# ------------------------------------------------------------------- F8: the log action's line
def test_the_log_action_line_starts_with_tripwire(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")
    _train(tmp_path / "run", nan_at=3).close()
    lines = [r.getMessage() for r in caplog.records if "exploding_tensor at step" in r.getMessage()
             and "stopping" not in r.getMessage()]
    assert lines and lines[0].startswith("tripwire: [critical] exploding_tensor at step 3 (train): loss holds"), lines
    assert "tripwire: stopping training: rule 'exploding_tensor' at step 3 (train)" in caplog.text


def test_the_log_action_names_rank_0_too_under_a_world_size_above_1(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")
    out = tmp_path / "ddp"
    ranks = [Session(out_dir=str(out), rank=r, world_size=2, save_interval=1, rules=STOP_AT_3) for r in (0, 1)]
    for step in range(4):
        for s in ranks:
            s.step("train", step, {"loss": (float("nan") if step == 2 else 1.0, "losses")})
    for s in ranks:
        s.close()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tripwire: [critical]")]
    assert "tripwire: [critical] exploding_tensor at step 2 (train, rank 0): loss holds" in "\n".join(said), said
    assert "tripwire: [critical] exploding_tensor at step 2 (train, rank 1): loss holds" in "\n".join(said), said


def test_log_line_and_the_bound_log_action(caplog: pytest.LogCaptureFixture) -> None:
    log_line = _finding.log_line
    f = _make(message="m")
    assert log_line(f) == "tripwire: [warning] exploding_gradient at step 10 (train): m"
    assert log_line(f, world_size=4) == "tripwire: [warning] exploding_gradient at step 10 (train, rank 0): m"
    assert log_line(_make(message="m", worker=2), 1) == \
        "tripwire: [warning] exploding_gradient at step 10 (train, rank 2): m"
    action = resolve_action("log")
    assert action.wants_run  # (a session or watch binds its run's context: the world size)
    caplog.set_level(logging.INFO, logger="tripwire")
    action.fire(f)
    bind_run([action], RunContext(run="/r", world_size=2))
    action.fire(f)
    levelled = resolve_action({"name": "log", "level": "error"})
    levelled.fire(f)
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [(logging.WARNING, "tripwire: [warning] exploding_gradient at step 10 (train): m"),
                    (logging.WARNING, "tripwire: [warning] exploding_gradient at step 10 (train, rank 0): m"),
                    (logging.ERROR, "tripwire: [warning] exploding_gradient at step 10 (train): m")], said


def test_the_distributed_stop_line_of_rank_0_is_a_finding_line_with_its_rank(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tripwire")
    s = Session(out_dir=str(tmp_path / "ddp"), rank=0, world_size=2, save_interval=1, rules=STOP_AT_3)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.stopped_by_rank(1, _make(worker=1, rule="exploding_tensor", step=0, message="loss holds nan"))
    s.close()
    said = [r.getMessage() for r in caplog.records if "distributed_stop" in r.getMessage()]
    assert said and said[0].startswith("tripwire: [warning] distributed_stop at step 0 (train, rank 0): rank 1's "
                                       "rule 'exploding_tensor'"), said


# ------------------------------------------------------------------------ F7: !tripwire in Jupyter
# (what ipykernel 7.4's init_environment sets, and jupyter_client's JPY_PARENT_PID)
KERNEL_ENV = {"TERM": "xterm-color", "CLICOLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "FORCE_COLOR": "1",
              "CLICOLOR_FORCE": "1", "JPY_PARENT_PID": "1"}


def test_under_jupyter_kernel_reads_ipykernels_environment() -> None:
    under_jupyter_kernel = _cli.under_jupyter_kernel
    assert under_jupyter_kernel(KERNEL_ENV)
    assert not under_jupyter_kernel({"TERM": "xterm-256color", "PAGER": "less"})
    assert not under_jupyter_kernel({"TERM": "xterm-color"})  # (a terminal of that name alone is not a kernel)
    assert not under_jupyter_kernel({k: v for k, v in KERNEL_ENV.items() if k != "PAGER"})


def _inspect_on_a_pty(run: Path, env: dict[str, str]) -> str:
    """``tripwire inspect RUN`` on a pseudo-terminal of 80 columns, as IPython's ``!`` runs it."""
    code = "import sys; from tripwire._cli import main; sys.exit(main(sys.argv[1:]))"
    master, slave = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR",
                                                               "TERM", "PAGER", "GIT_PAGER", "CLICOLOR")}
    proc = subprocess.Popen([sys.executable, "-c", code, "inspect", str(run)], stdin=slave, stdout=slave,
                            stderr=slave, env={**clean, **env}, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # (EIO: the child closed the terminal)
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_inspect_under_a_jupyter_kernel_draws_as_piped(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = Session(out_dir=str(out), save_interval=1,
                rules=[{"name": "exploding_tensor", "actions": ["record", "stop_training"]}])
    for step in range(4):
        s.step("train", step, {"loss": (float("nan") if step == 3 else 1.0, "losses")})
    s.close()
    message = tripwire.open_run(out).findings[0].message
    assert len(message) > 100  # (folded over several lines at 80 columns)
    printed = _inspect_on_a_pty(out, KERNEL_ENV)
    assert "\x1b[" not in printed, printed[:2000]  # no colour codes, though ipykernel sets FORCE_COLOR=1
    flat = printed.replace("\r\n", "\n")
    assert any(len(line) > 100 for line in flat.splitlines()), flat  # 200 columns, not 80
    assert message[:120] in flat, flat
    # COLUMNS still says the width
    assert max(map(len, _table_lines(flat))) > 100, flat
    narrow = _inspect_on_a_pty(out, {**KERNEL_ENV, "COLUMNS": "90"})
    assert max(map(len, _table_lines(narrow))) <= 90, narrow
    # a terminal (no kernel) is drawn as before: its width, colour where asked
    terminal = _inspect_on_a_pty(out, {"TERM": "xterm-256color", "FORCE_COLOR": "1"})
    assert "\x1b[" in terminal
    assert max(len(re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in _table_lines(terminal)) <= 80, terminal


def _table_lines(printed: str) -> list[str]:
    """The lines of rich's tables (the headline lines are printed whole, at any width)."""
    return [line for line in printed.replace("\r\n", "\n").splitlines() if "\u2502" in line or "\u2503" in line]


# -------------------------------------------------------------- F3 (part): the same process or a later one
def _fit(out: Path, steps: int = 6) -> None:
    with Session(out_dir=str(out), save_interval=1, rules=[], actions=["record"]) as s:
        for step in range(steps):
            s.step("train", step, {"loss": (1.0 / (1 + step), "losses")})


def test_inspect_says_the_same_process_made_a_second_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    _fit(out)
    _fit(out)  # (a second callback in the same notebook kernel)
    run = tripwire.open_run(out)
    assert run.training_processes(0) == [(socket.gethostname(), os.getpid())] * 2
    assert main(["inspect", str(out), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert f"2 from train step 0, a new training (judged alone), by the same process (pid {os.getpid()})" in text
    assert "later process" not in text


def test_inspect_says_a_later_process_made_a_second_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    _fit(out)
    code = textwrap.dedent(f"""
        import tripwire
        with tripwire.Session(out_dir={str(out)!r}, save_interval=1, rules=[], actions=["record"]) as s:
            for step in range(4):
                s.step("train", step, {{"loss": (1.0, "losses")}})
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run = tripwire.open_run(out)
    processes = run.training_processes(0)
    assert processes[0] == (socket.gethostname(), os.getpid()) and processes[1] is not None, processes
    assert processes[1][1] != os.getpid()
    assert main(["inspect", str(out), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert "2 from train step 0, a new training (judged alone), by a later process: -c" in text, text


def test_inspect_says_a_later_session_where_the_run_does_not_name_the_processes(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    _fit(out)
    _fit(out)
    meta_path = out / "workers" / "worker-00000.json"
    meta = json.loads(meta_path.read_text())
    meta["environment"].pop("pid")  # (a meta file that names no writer)
    for training in meta.get("trainings", []):  # (nor its trainings: a run written before session 30)
        training.pop("pid", None)
    meta_path.write_text(json.dumps(meta))
    assert tripwire.open_run(out).training_processes(0) == [(socket.gethostname(), os.getpid()), None]
    assert main(["inspect", str(out), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert "2 from train step 0, a new training (judged alone), by a later session: " in text, text


def test_a_later_fit_through_one_session_is_its_sessions_process(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    _fit(out)
    with Session(out_dir=str(out), save_interval=1, rules=[], actions=["record"]) as s:  # (a later callback)
        for step in range(4):
            s.step("train", step, {"loss": (1.0, "losses")})
        s.new_training(continued=False)  # (a second Keras fit through that callback)
        for step in range(4, 8):
            s.step("train", step, {"loss": (1.0, "losses")})
    run = tripwire.open_run(out)
    here = (socket.gethostname(), os.getpid())
    assert [bool(t.get("argv")) for t in run.trainings[0]] == [True, True, False]
    assert run.training_processes(0) == [here, here, here]
    assert run.training_processes(5) == []  # (a worker with no trainings)
    assert main(["inspect", str(out), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert f"by the same process (pid {os.getpid()}); 3 from train step 4, a new training (judged alone)" in text, text


def test_the_repr_of_a_run_that_failed_before_its_first_record_names_its_worker(tmp_path: Path) -> None:
    """Trial 42i F4: ``Run(..., status='failed', workers=[])`` where ``tripwire inspect`` said
    ``workers: [0] (no records read of worker 0)``."""
    out = tmp_path / "early"
    s = tripwire.Session(out_dir=str(out), rules=[])
    s.close("failed")
    assert repr(tripwire.open_run(out)) == f"Run({str(out)!r}, status='failed', workers=[0])"
