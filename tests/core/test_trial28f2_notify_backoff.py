"""Trial 28f finding 6: ``notify`` had no back-off. With ``repeat: true`` and an SNS endpoint that
accepts connections and never answers, every step's finding blocked the training for the action's
whole ``timeout`` (25 failures took 25 s at timeout 1 s), each logging the finding and the full
error again. After 3 failures in a row the action now pauses (60 s, doubled after each failed try,
up to 960 s), says so in one line, and says how many findings it did not send when it tries again;
a repeated error is said short."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import tripwire
from tripwire._actions import SnsNotify

pytest.importorskip("boto3")

TOPIC = "arn:aws:sns:us-east-1:123456789012:alerts"


class _Switch(BaseHTTPRequestHandler):
    """SNS's Publish answered (``server.ok``) or left unanswered past the client's timeout."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests += 1  # type: ignore[attr-defined]
        if not self.server.ok:  # type: ignore[attr-defined]
            time.sleep(1.5)  # (the client gave up long before)
            return
        body = (b'<PublishResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishResult>'
                b"<MessageId>m-1</MessageId></PublishResult><ResponseMetadata><RequestId>r-1</RequestId>"
                b"</ResponseMetadata></PublishResponse>")
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def switch_endpoint() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Switch)
    server.daemon_threads = True
    server.ok = False  # type: ignore[attr-defined]
    server.requests = 0  # type: ignore[attr-defined]
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _session(url: str, timeout: float) -> tripwire.Session:
    notify = {"name": "notify", "topic_arn": TOPIC, "endpoint_url": url, "timeout": timeout}
    return tripwire.Session({"save": {"interval": 1},
                             "rules": [{"name": "exploding_tensor", "actions": [notify], "repeat": True}]}, write=False)


def _nan_steps(s: tripwire.Session, steps: range) -> list[float]:
    times = []
    for step in steps:
        t0 = time.monotonic()
        s.step("train", step, {"loss": (float("nan"), "losses")})
        times.append(time.monotonic() - t0)
    return times


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_defaults() -> None:
    from tripwire._actions import NOTIFY_FAILURES_BEFORE_PAUSE, NOTIFY_MAX_PAUSE, NOTIFY_PAUSE

    assert (NOTIFY_FAILURES_BEFORE_PAUSE, NOTIFY_PAUSE, NOTIFY_MAX_PAUSE) == (3, 60.0, 960.0)


def test_a_silent_endpoint_is_tried_three_times_then_paused(aws_env: None, silent_endpoint: tuple[str, list[socket.socket]],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    url, accepted = silent_endpoint
    s = _session(url, 0.3)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        times = _nan_steps(s, range(20))
    s.close()
    assert len([f for f in s.findings if f.kind == "finding"]) == 20  # every finding recorded all the same
    assert len(accepted) == 3  # three tries, then none while paused
    assert sum(times[3:]) < 2.0, times  # the 17 steps after: not 17 timeouts (5.1 s)
    errors = _errors(caplog)
    assert len(errors) == 3, errors
    first, second, third = errors
    assert f"{url} accepted the connection but did not answer within 0.3 s" in first
    # a repeated error is said short: its type, and how many in a row
    assert second.endswith(f"notify: could not publish to {TOPIC}: ReadTimeoutError again (2 failures in a row)"), second
    assert "did not answer within" not in second and "did not answer within" not in third
    assert third.endswith(f"notify: could not publish to {TOPIC}: ReadTimeoutError again (3 failures in a row): "
                          f"no finding is sent for the next 60 s, then one is tried again (each failed try doubles the "
                          f"pause, up to 960 s); the findings stay in the run"), third


def test_the_pause_grows_and_the_skipped_findings_are_counted_then_publishing_resumes(
        aws_env: None, switch_endpoint: ThreadingHTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{switch_endpoint.server_address[1]}"
    s = _session(url, 0.3)
    [action] = s._rule_actions[0]
    notify = action.fn
    assert isinstance(notify, SnsNotify)
    notify.pause = 0.8  # (the first pause; 60 s by default)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _nan_steps(s, range(0, 5))  # 3 failures, then 2 findings skipped
        assert switch_endpoint.requests == 3  # type: ignore[attr-defined]
        time.sleep(0.9)
        _nan_steps(s, range(5, 8))  # one try (fails: the pause doubles), then 2 skipped
        assert switch_endpoint.requests == 4  # type: ignore[attr-defined]
        errors = _errors(caplog)
        assert len(errors) == 4
        assert errors[3].endswith("ReadTimeoutError again (4 failures in a row): 2 findings were not sent during the "
                                  "pause; none is sent for the next 1.6 s, then one is tried again"), errors[3]
        time.sleep(0.9)
        _nan_steps(s, range(8, 9))  # still paused (1.6 s): skipped, no try
        assert switch_endpoint.requests == 4  # type: ignore[attr-defined]
        switch_endpoint.ok = True  # type: ignore[attr-defined]
        time.sleep(1.0)
        caplog.clear()
        _nan_steps(s, range(9, 12))  # published again: every finding from now on
    s.close()
    assert switch_endpoint.requests == 7  # type: ignore[attr-defined]
    assert _errors(caplog) == []
    [back] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "notify" in r.getMessage()]
    assert back == (f"tripwire: notify: published to {TOPIC} again after 4 failures in a row; 3 findings were not sent "
                    f"while paused (the run's findings hold them)")
    # a later failure starts from the first pause again, after 3 failures in a row
    assert notify.pause == 0.8 and notify.failures == 0


def test_a_different_error_is_said_in_full(aws_env: None, silent_endpoint: tuple[str, list[socket.socket]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = silent_endpoint
    notify = SnsNotify({"topic_arn": TOPIC, "endpoint_url": url, "timeout": 0.3}, "actions[0]")
    finding = tripwire.Finding("r", 1, "train", "boom")
    with pytest.raises(tripwire.ActionError, match=r"ReadTimeoutError: .*did not answer within 0\.3 s"):
        notify(finding)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    other = SnsNotify({"topic_arn": TOPIC, "endpoint_url": url, "timeout": 0.3}, "actions[0]")
    other.failures, other._last_cause = notify.failures, notify._last_cause  # (as if the same action)
    with pytest.raises(tripwire.ActionError, match=r"NoCredentialsError: .*it needs AWS credentials"):
        other(finding)
