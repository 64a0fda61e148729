"""Actions: what happens when a rule fires.

``stop_training`` (the integration sets its framework's stop flag), ``log`` (the ``tripwire``
logger), ``raise`` (:class:`~tripwire.TrainingStopped`, also a RuntimeError), ``record`` (the
finding is only written; findings are always written), ``notify`` (an SNS topic, needs
``tripwire[s3]``) and any callable ``fn(finding)`` (or ``module:attribute`` in YAML).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._config import ActionSpec
from ._errors import ActionError, ConfigError, TrainingStopped
from ._finding import Finding
from ._validate import check_keys, check_str, did_you_mean

logger = logging.getLogger("tripwire")

BUILTIN_ACTIONS: tuple[str, ...] = ("log", "notify", "raise", "record", "stop_training")


@dataclass
class Action:
    """A resolved action. ``stops``: asks the integration to stop training."""

    name: str
    fn: Callable[[Finding], None] | None = None
    stops: bool = False
    raises: bool = False

    def fire(self, finding: Finding) -> None:
        if self.fn is not None:
            self.fn(finding)


def _log(level: int) -> Callable[[Finding], None]:
    def fire(finding: Finding) -> None:
        logger.log(level, "%s", finding)

    return fire


def _notify(params: Mapping[str, Any], path: str) -> Callable[[Finding], None]:
    check_keys(params, ("topic_arn", "region", "endpoint_url", "subject"), path)
    if "topic_arn" not in params:
        raise ConfigError(f"{path}: the notify action needs 'topic_arn' (an SNS topic ARN)")
    topic = check_str(params["topic_arn"], f"{path}.topic_arn")
    try:
        import boto3
    except ImportError as exc:
        from ._errors import missing_extra

        raise missing_extra("boto3", "s3", exc) from exc
    client = boto3.client("sns", region_name=params.get("region"), endpoint_url=params.get("endpoint_url"))
    subject = str(params.get("subject", "tripwire: a rule fired"))[:100]

    def fire(finding: Finding) -> None:
        try:
            client.publish(TopicArn=topic, Subject=subject, Message=str(finding))
        except Exception as exc:  # botocore: NoCredentialsError, EndpointConnectionError, ClientError, ...
            raise ActionError(
                f"notify: could not publish to {topic}: {type(exc).__name__}: {exc} (it needs AWS credentials "
                "and a region where boto3 finds them, or the action's region/endpoint_url)") from exc

    return fire


def resolve_action(spec: ActionSpec | str | Callable[[Finding], None], path: str = "actions") -> Action:
    """Turn an action spec into an :class:`Action`; unknown names are errors."""
    if not isinstance(spec, ActionSpec):
        spec = ActionSpec.parse(spec, path)
    name, params = spec.name, dict(spec.params)
    if name == "<callable>":
        fn = params["callable"]
        return Action(getattr(fn, "__name__", "callable"), fn)
    if name == "stop_training":
        check_keys(params, (), path)
        return Action(name, stops=True)
    if name == "raise":
        check_keys(params, (), path)
        return Action(name, raises=True)
    if name == "record":
        check_keys(params, (), path)
        return Action(name)
    if name == "log":
        check_keys(params, ("level",), path)
        level = check_str(params.get("level", "warning"), f"{path}.level", choices=("debug", "info", "warning", "error", "critical"))
        return Action(name, _log(getattr(logging, level.upper())))
    if name == "notify":
        return Action(name, _notify(params, path))
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{path}: cannot load action {name!r}: {exc}") from None
        if not callable(obj):
            raise ConfigError(f"{path}: action {name!r} is not callable")
        if params:
            fn = obj
            obj = lambda finding, _fn=fn, _p=params: _fn(finding, **_p)  # noqa: E731
        return Action(name, obj)
    raise ConfigError(
        f"{path}: unknown action {name!r}{did_you_mean(name, BUILTIN_ACTIONS)}; accepted: "
        f"{', '.join(BUILTIN_ACTIONS)}, 'module:attribute' or a callable"
    )


def raise_for(finding: Finding) -> None:
    raise TrainingStopped(f"tripwire stopped training: {finding}", finding)
