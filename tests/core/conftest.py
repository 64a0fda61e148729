"""Fixtures shared by the core tests: dummy AWS credentials and moto's SNS server for ``notify``."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials, nothing read from the machine's AWS files or instance metadata."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def sns_queue(aws_env: None) -> Iterator[tuple[str, str, Any]]:
    """moto's SNS server with a topic whose messages go to an SQS queue: ``(url, topic_arn, read)``,
    ``read()`` giving the messages as SNS delivered them (JSON envelopes)."""
    boto3 = pytest.importorskip("boto3")
    server_mod = pytest.importorskip("moto.moto_server.threaded_moto_server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        url = f"http://127.0.0.1:{server._server.server_port}"
        sns = boto3.client("sns", endpoint_url=url, region_name="us-east-1")
        sqs = boto3.client("sqs", endpoint_url=url, region_name="us-east-1")
        # (names of their own: moto keeps its state per process, not per server, so a queue of a name
        # an earlier test used still held that test's messages, and a full tests/core run read 3 of 2)
        tag = uuid.uuid4().hex[:12]
        topic = sns.create_topic(Name=f"team-health-{tag}")["TopicArn"]
        queue = sqs.create_queue(QueueName=f"inbox-{tag}")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)

        def read() -> list[dict[str, Any]]:
            got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=2).get("Messages", [])
            return [json.loads(m["Body"]) for m in got]

        yield url, topic, read
    finally:
        server.stop()


@pytest.fixture
def silent_endpoint() -> Iterator[tuple[str, list[socket.socket]]]:
    """An endpoint that accepts connections and never answers (a hung server); yields its URL and
    the connections it accepted."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.1)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            accepted.append(conn)  # held open, never read nor answered

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", accepted
    finally:
        done.set()
        t.join(5)
        for c in accepted:
            c.close()
        srv.close()
