"""Trial 26c: a ``notify`` (SNS) message carried the finding's one line alone: no run, host, worker,
so one topic shared by a team's trainings could not tell which job to look at. Tested against moto's
SNS server, subscribed by an SQS queue, as tests/core/test_actions.py does."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import Finding
from tripwire._actions import RunContext, SnsNotify

boto3 = pytest.importorskip("boto3")


def test_a_notify_message_says_which_run_host_worker_and_step(tmp_path: Path, sns_queue) -> None:
    url, topic, read = sns_queue
    notify = {"name": "notify", "topic_arn": topic, "endpoint_url": url, "timeout": 2, "subject": "team: training health"}
    out = tmp_path / "job-17"
    s = tripwire.Session({"save": {"interval": 1}, "strict": True,
                          "rules": [{"name": "exploding_tensor", "actions": [notify]}]}, out_dir=str(out))
    for step in range(3):
        s.step("train", step, {"loss": (float("nan") if step == 1 else 1.0, "losses")})
    s.close()
    [msg] = read()
    assert msg["Subject"] == "team: training health"  # (the subject option kept)
    lines = msg["Message"].splitlines()
    # a readable first line (the finding), then one line per fact
    assert lines[0].startswith("[critical] exploding_tensor at step 1 (train): loss holds the value nan"), lines
    run_id = tripwire.open_run(out).run_id
    facts = dict(line.split(": ", 1) for line in lines[2:])
    assert facts["run"] == f"{out.resolve()} (run_id {run_id})"
    assert facts["host"] == f"{socket.gethostname()} (pid {os.getpid()})"
    assert facts["worker"] == "0 (rank 0 of 1)" and facts["step"] == "1 (train)"
    assert facts["rule"] == "exploding_tensor (severity critical)"
    # message attributes, for SNS subscription filter policies and for code reading the queue
    attrs = {k: (v["Type"], v["Value"]) for k, v in msg["MessageAttributes"].items()}
    assert attrs == {"rule": ("String", "exploding_tensor"), "severity": ("String", "critical"),
                     "mode": ("String", "train"), "step": ("Number", "1"), "worker": ("Number", "0"),
                     "host": ("String", socket.gethostname()), "run": ("String", str(out.resolve())),
                     "run_id": ("String", run_id)}


def test_a_notify_message_of_an_eval_step_on_a_rank_names_its_train_step_and_rank() -> None:
    # built without a client call: the text and attributes of a finding of rank 2 of 4 at an eval step
    action = SnsNotify.__new__(SnsNotify)
    action.context = RunContext(run="/runs/exp1", run_id="abc", host="node7", pid=42, world_size=4, framework="lightning")
    f = Finding(rule="overfit", step=3, mode="eval", message="val_loss rose", worker=2, details={"train_step": 47})
    lines = action.message(f).splitlines()
    assert lines[0] == "[warning] overfit at step 3 (eval, after train step 47, rank 2): val_loss rose"
    assert "step: 3 (eval, after train step 47)" in lines and "worker: 2 (rank 2 of 4)" in lines
    assert "run: /runs/exp1 (run_id abc)" in lines and "host: node7 (pid 42)" in lines
    assert "framework: lightning" in lines
    assert action.attributes(f)["worker"] == {"DataType": "Number", "StringValue": "2"}
    # no run known (an action fired outside a session): the finding's own facts, no empty attribute
    action.context = None
    lines = action.message(f).splitlines()
    assert not any(line.startswith(("run:", "host:")) for line in lines) and "worker: 2" in lines
    assert set(action.attributes(f)) == {"rule", "severity", "mode", "step", "worker"}


def test_a_session_that_writes_no_run_says_so_in_its_notify_context() -> None:
    s = tripwire.Session({"actions": [{"name": "notify", "topic_arn": "arn:aws:sns:us-east-1:123456789012:t",
                                       "endpoint_url": "http://127.0.0.1:9"}]}, write=False)
    [action] = s._default_actions
    assert action.fn.context.run == "none (this session writes no run)" and action.fn.context.run_id is None
    s.close()
