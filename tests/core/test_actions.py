"""The ``notify`` action against real local endpoints: one that never answers (a raw socket), one
that refuses connections, and moto's SNS server (a working endpoint)."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest

import tripwire
from tripwire import ConfigError
from tripwire._actions import NOTIFY_TIMEOUT, resolve_action

pytest.importorskip("boto3")

TOPIC = "arn:aws:sns:us-east-1:123456789012:t"


def _nan_at_step_1(session: tripwire.Session, steps: int = 3) -> list[float]:
    """Step times (seconds) of a loss that is NaN at step 1 (exploding_tensor fires there)."""
    times = []
    for step in range(steps):
        t0 = time.monotonic()
        session.step("train", step, {"loss": (float("nan") if step == 1 else 1.0, "losses")})
        times.append(time.monotonic() - t0)
    return times


def test_notify_to_an_endpoint_that_never_answers_gives_up_after_its_timeout(
        aws_env: None, silent_endpoint: tuple[str, list[socket.socket]], caplog: pytest.LogCaptureFixture) -> None:
    """botocore's defaults (60 s read timeout, retried) held the step ~180 s; the action now waits
    ``timeout`` for the answer, once, and the logged line says the endpoint did not answer."""
    url, accepted = silent_endpoint
    notify = {"name": "notify", "topic_arn": TOPIC, "endpoint_url": url, "timeout": 0.5}
    s = tripwire.Session({"save": {"interval": 1}, "rules": [{"name": "exploding_tensor", "actions": [notify]}]},
                         write=False)
    with caplog.at_level(logging.ERROR, logger="tripwire"):
        times = _nan_at_step_1(s)
    s.close()
    assert [f.step for f in s.findings] == [1]
    assert len(accepted) == 1  # one attempt: no retry
    assert times[1] < 10.0  # 0.5 s and some slack on a loaded machine, not minutes
    [err] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "action 'notify' failed" in err and "ReadTimeoutError" in err
    assert f"{url} accepted the connection but did not answer within 0.5 s: the action's timeout" in err
    assert "credentials" not in err


def test_notify_hint_matches_the_error(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    finding = tripwire.Finding("r", 1, "train", "boom")
    probe = socket.socket()  # a port nobody listens on: the connection is refused
    probe.bind(("127.0.0.1", 0))
    closed = probe.getsockname()[1]
    probe.close()
    refused = resolve_action({"name": "notify", "topic_arn": TOPIC, "endpoint_url": f"http://127.0.0.1:{closed}",
                              "timeout": 1})
    with pytest.raises(tripwire.ActionError, match=r"EndpointConnectionError.*could not connect to http://127\.0\.0\.1") as info:
        refused.fire(finding)
    assert "credentials" not in str(info.value)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    no_credentials = resolve_action({"name": "notify", "topic_arn": TOPIC, "timeout": 1})
    with pytest.raises(tripwire.ActionError, match=r"NoCredentialsError.*it needs AWS credentials where boto3 finds them"):
        no_credentials.fire(finding)


def test_notify_timeout_and_region_defaults_and_validation(aws_env: None) -> None:
    action = resolve_action({"name": "notify", "topic_arn": "arn:aws:sns:eu-west-3:123456789012:alerts"})
    notify = action.fn
    config = notify.client.meta.config  # type: ignore[union-attr]
    assert notify.timeout == NOTIFY_TIMEOUT == 5.0  # type: ignore[union-attr]
    assert (config.connect_timeout, config.read_timeout) == (5.0, 5.0)
    assert config.retries["total_max_attempts"] == 1  # no retry
    assert notify.client.meta.region_name == "eu-west-3"  # type: ignore[union-attr]  # the topic's region
    # (a region given with a topic ARN that names none: trial 29d refuses one that contradicts the ARN's)
    given = resolve_action({"name": "notify", "topic_arn": "arn:aws:sns::123456789012:alerts", "region": "eu-west-1",
                            "timeout": 2})
    assert given.fn.client.meta.region_name == "eu-west-1"  # type: ignore[union-attr]
    assert given.fn.client.meta.config.read_timeout == 2.0  # type: ignore[union-attr]
    for bad, shown in ((-1, "-1"), (0, "0"), ("5", r"'5' \(a string, not a number\)"), (True, "True"), (float("nan"), "nan")):
        with pytest.raises(ConfigError, match=rf"actions\[0\]\.timeout: got {shown}; accepted: a number in \(0\.0, 3600\.0\]"):
            tripwire.Session({"actions": [{"name": "notify", "topic_arn": TOPIC, "timeout": bad}]}, write=False)
    with pytest.raises(ConfigError, match=r"unknown key 'timout'; did you mean 'timeout'\?"):
        tripwire.Session({"actions": [{"name": "notify", "topic_arn": TOPIC, "timout": 1}]}, write=False)
    with pytest.raises(ConfigError, match=r"actions\[0\]\.region: not given, the topic_arn 'arn:aws:sns::123:my-topic' "
                                          r"names none"):
        tripwire.Session({"actions": [{"name": "notify", "topic_arn": "arn:aws:sns::123:my-topic"}]}, write=False)
    # trial 18d: a topic that is no ARN and an endpoint that is no URL failed only when a rule fired
    # (or as botocore's bare ValueError)
    with pytest.raises(ConfigError, match=r"actions\[0\]\.topic_arn: got 'mytopic'; accepted: an SNS topic ARN, "
                                          r"arn:aws:sns:REGION:ACCOUNT:NAME"):
        tripwire.Session({"actions": [{"name": "notify", "topic_arn": "mytopic", "region": "us-east-1"}]}, write=False)
    with pytest.raises(ConfigError, match=r"actions\[0\]\.endpoint_url: got 'not a url'; accepted: an http:// or https:// URL"):
        tripwire.Session({"actions": [{"name": "notify", "topic_arn": TOPIC, "endpoint_url": "not a url"}]}, write=False)
    # Python's spelling of a log level; an action without parameters says it takes none
    assert resolve_action({"name": "log", "level": "WARNING"}).name == "log"
    with pytest.raises(ConfigError, match=r"actions\[0\]\.type: unknown key 'type' \(it takes no parameters\)"):
        tripwire.Session({"actions": [{"name": "raise", "type": "ValueError"}]}, write=False)


def test_notify_publishes_to_a_working_endpoint(sns_queue: tuple[str, str, Any]) -> None:
    """Short timeouts leave a working endpoint (moto's SNS server, subscribed by an SQS queue) alone."""
    url, topic, read = sns_queue
    notify = {"name": "notify", "topic_arn": topic, "endpoint_url": url, "timeout": 2, "subject": "run 7"}
    s = tripwire.Session({"save": {"interval": 1}, "strict": True,
                          "rules": [{"name": "exploding_tensor", "actions": [notify]}]}, write=False)
    _nan_at_step_1(s)
    s.close()
    messages = read()
    assert len(messages) == 1
    assert "exploding_tensor at step 1 (train)" in messages[0]["Message"] and "run 7" in messages[0]["Subject"]


def test_log_logs_a_finding_at_its_severity_unless_level_says_otherwise(caplog: pytest.LogCaptureFixture) -> None:
    # a critical finding (NaN) was logged as a WARNING record: a handler filtering on ERROR missed it
    for actions, level in ((["log"], logging.CRITICAL), ([{"name": "log", "level": "info"}], logging.INFO)):
        s = tripwire.Session({"save": {"interval": 1}, "rules": [{"name": "exploding_tensor", "actions": actions}]},
                             write=False)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="tripwire"):
            _nan_at_step_1(s)
        s.close()
        [rec] = [r for r in caplog.records if "exploding_tensor at step 1" in r.getMessage()]
        assert rec.levelno == level, (actions, rec.levelname)
    s = tripwire.Session({"save": {"interval": 1}, "rules": [{"name": "oscillating_loss", "initial": 1,
                                                              "actions": ["log"]}]}, write=False)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="tripwire"):
        for step in range(30):
            s.step("train", step, {"loss": (1.0 + 2.0 * (step % 2), "losses")})
    s.close()
    [rec] = [r for r in caplog.records if "oscillating_loss at step" in r.getMessage()]
    assert rec.levelno == logging.WARNING  # a warning finding: WARNING
