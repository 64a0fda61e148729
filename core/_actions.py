"""Actions: what happens when a rule fires.

``stop_training`` (the integration sets its framework's stop flag), ``log`` (the ``tripwire``
logger), ``raise`` (:class:`~tripwire.TrainingStopped`, also a RuntimeError), ``record`` (the
finding is only written; findings are always written), ``notify`` (an SNS topic, needs
``tripwire[notify]``; :class:`SnsNotify`: short timeouts, no retry, a pause after 3 failures in a row) and any callable ``fn(finding)``
(or ``module:attribute`` in YAML).

A custom action (a callable, a ``module:attribute``) is called as ``fn(finding, **params)``: ``params``
are the other keys of its mapping (``{name: 'team:post', channel: ml}`` calls ``post(finding,
channel='ml')``), checked against its signature when the action is resolved (:func:`resolve_action`:
``tripwire validate``, a session or watch being made; trial 29j F6: a parameter the function did not
take failed at the first finding, and the alert was lost). One that has a parameter named ``run`` is
also given the run's :class:`RunContext` (where the finding was made: run directory, ``run_id``,
host, pid, worker, world size, framework; trial 29j F8: two runs posting to one channel sent the
same payload).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._config import ActionSpec
from ._errors import ActionError, ConfigError, TrainingStopped
from ._finding import Finding, log_line
from ._validate import check_float, check_keys, check_str, did_you_mean, did_you_mean_attribute, import_failure, import_user_module

logger = logging.getLogger("tripwire")

BUILTIN_ACTIONS: tuple[str, ...] = ("log", "notify", "raise", "record", "stop_training")


@dataclass
class Action:
    """A resolved action. ``stops``: asks the integration to stop training. ``fn``: what
    :meth:`fire` calls with the finding (None for ``stop_training``, ``raise`` and ``record``,
    which the session carries out itself)."""

    name: str
    fn: Callable[[Finding], None] | None = None
    stops: bool = False
    raises: bool = False

    def fire(self, finding: Finding) -> None:
        """Carry the action out for ``finding`` (``fn(finding)``; nothing where ``fn`` is None)."""
        if self.fn is not None:
            self.fn(finding)

    @property
    def wants_run(self) -> bool:
        """Whether the action uses the run's :class:`RunContext`, which :func:`bind_run` gives it: a
        ``notify`` action (its message's ``run``, ``host`` ... lines), a ``log`` action (the world
        size: its line names every rank of a distributed run) and a custom action with a ``run``
        parameter. A session or watch binds the context of its actions when one wants it."""
        return isinstance(self.fn, _BOUND) and getattr(self.fn, "wants_run", True)


_SEVERITY_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
                    "critical": logging.CRITICAL}


class LogFinding:
    """The ``log`` action's call: log the finding's line (:func:`~tripwire._finding.log_line`,
    ``tripwire: [warning] exploding_gradient at step 10 (train): ...``) on the ``tripwire`` logger
    at ``level``, or (None) at the finding's severity. The ``tripwire:`` prefix says where the line
    comes from under Python's default logging (trial 30f F8). Where the run's :class:`RunContext`
    is bound (a session, a watch: :func:`bind_run`) and its world size is > 1, every rank is named,
    rank 0 too (``(train, rank 0)``; trial 30b: rank 0's lines named no rank)."""

    wants_run = True  # (the world size: bind_run gives the run's context)

    def __init__(self, level: int | None) -> None:
        self.level = level
        self.context: RunContext | None = None

    def __call__(self, finding: Finding) -> None:
        level = _SEVERITY_LEVELS.get(finding.severity, logging.WARNING) if self.level is None else self.level
        logger.log(level, "%s", log_line(finding, 1 if self.context is None else self.context.world_size))

    def __repr__(self) -> str:
        return f"LogFinding(level={None if self.level is None else logging.getLevelName(self.level)!r})"


NOTIFY_TIMEOUT = 5.0  # seconds: the notify action's default ``timeout``
#: Failed publishes in a row after which the ``notify`` action pauses (trial 28f: a hung endpoint held
#: every step of a ``repeat: true`` rule for the whole timeout).
NOTIFY_FAILURES_BEFORE_PAUSE = 3
NOTIFY_PAUSE = 60.0  # seconds: the notify action's first pause; doubled after each failed try, up to
NOTIFY_MAX_PAUSE = 960.0  # seconds


@dataclass(frozen=True)
class RunContext:
    """Where findings are made, for an action that sends them away from the run (``notify``, and a
    custom action with a ``run`` parameter, which gets it as ``run=``): ``run``, the run's directory
    (absolute; ``none (this session writes no run)`` where the session writes none: :attr:`out_dir`
    is None then) and ``run_id`` (None where not known), ``host`` and ``pid`` of the training
    process, its ``world_size``, its integration (``framework``: ``python``, ``lightning``, ``keras``,
    ``xgboost``, ``mxnet``) and ``worker``, the rank that made the finding (the finding's
    ``worker``: set for each finding a custom action is given; None in the context bound to the
    actions). A :class:`~tripwire.Session` gives its actions one (:func:`bind_run`); ``tripwire
    watch`` the watched run's (:func:`watched_run_context`). Frozen: a value to read, send or log
    (``dataclasses.asdict(run)``)."""

    run: str
    run_id: str | None = None
    host: str = ""
    pid: int = 0
    world_size: int = 1
    framework: str = "python"
    worker: int | None = None
    #: the run's directory (absolute), or None where the session writes no run: made from ``run``, a
    #: field so that ``dataclasses.asdict(run)`` holds it too (trial 37c: it was a property, left out)
    out_dir: str | None = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "out_dir", self.run if os.path.isabs(self.run) else None)


def bind_run(actions: Iterable[Action], context: RunContext) -> None:
    """Tell the actions that use where findings are made (:attr:`Action.wants_run`: ``notify``,
    ``log``, a custom action with a ``run`` parameter) the run's context; the others are left as they
    are."""
    for action in actions:
        if action.wants_run and isinstance(action.fn, _BOUND):
            action.fn.context = context


def watched_run_context(run: Any, worker: int) -> RunContext:
    """The :class:`RunContext` of the findings ``tripwire watch`` makes for ``worker`` of ``run``
    (a :class:`~tripwire.Run`): the watched run's directory (absolute), ``run_id``, world size and
    framework, and the host and pid of the training process that wrote that worker's records (its
    worker meta file's: ``""`` and 0 where it names none), not the watch's own: an action of a
    watch says which training to look at. The finding's ``source`` is ``"watch"``."""
    from ._format import WORKERS_DIR, worker_meta_name
    from ._run import _writer_of

    path = Path(run.path)
    host, pid, _, _ = _writer_of(path / WORKERS_DIR / worker_meta_name(worker))
    return RunContext(run=str(path.resolve()), run_id=run.run_id, host=host or "", pid=pid or 0,
                      world_size=run.world_size, framework=str(run.info.get("framework", "python")))


_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class CustomCall:
    """A custom action's call: ``fn(finding, **params)``, and ``run=`` the run's
    :class:`RunContext` (with the finding's ``worker``) where ``fn`` has a parameter named ``run``
    (:attr:`wants_run`; None where nothing bound a context: an action fired by hand, outside a
    session and a watch). Made by :func:`resolve_action`, which checks ``params`` against ``fn``'s
    signature first (:func:`check_call`)."""

    def __init__(self, fn: Callable[..., Any], params: Mapping[str, Any], wants_run: bool) -> None:
        self.fn = fn
        self.params = dict(params)
        self.wants_run = wants_run
        self.context: RunContext | None = None  # (set by the session or watch: bind_run)

    def __call__(self, finding: Finding) -> None:
        if self.wants_run:
            context = None if self.context is None else dataclasses.replace(self.context, worker=finding.worker)
            self.fn(finding, **self.params, run=context)
        else:
            self.fn(finding, **self.params)

    def __repr__(self) -> str:
        return f"CustomCall({self.fn!r}, params={self.params!r}, wants_run={self.wants_run})"


def check_call(fn: Callable[..., Any], name: str, params: Mapping[str, Any], path: str) -> bool:
    """Check that a custom action ``fn`` can be called as ``fn(finding, **params)``: it takes a
    positional argument (the finding), every key of ``params`` is one of its other named parameters
    (or it takes ``**kwargs``), and every parameter it needs besides the finding (and ``run``) is
    given. A :class:`ConfigError` naming ``path`` (and the parameter), the action ``name``, the
    function's signature and the parameters it accepts otherwise. Returns whether ``fn`` has a
    parameter named ``run`` after the finding's (it is given the :class:`RunContext`; ``params``
    may not give one). A callable whose signature Python cannot read (some built-ins) is called
    as it is, unchecked, and gets no ``run``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    title = getattr(fn, "__name__", None) or type(fn).__name__
    shown = f"{title}{sig.replace(return_annotation=inspect.Signature.empty)}"
    ps = list(sig.parameters.values())
    positional = [p for p in ps if p.kind in _POSITIONAL]
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps)
    if not positional and not any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in ps):
        raise ConfigError(f"{path}: action {name!r} cannot be called with the finding: {shown} takes no positional "
                          f"parameter; accepted: a callable fn(finding), its other parameters given as keywords "
                          f"(the action mapping's keys)")
    first = positional[0].name if positional else None
    rest = [p for p in ps if p.name != first and p.kind in (*_NAMED, inspect.Parameter.POSITIONAL_ONLY)]
    wants_run = any(p.name == "run" and p.kind in _NAMED for p in rest)
    accepted = [p.name for p in rest if p.kind in _NAMED and p.name != "run"]
    listing = (", ".join(accepted) + (" (and any other: it takes **kwargs)" if var_kw else "") if accepted
               else "any keyword (it takes **kwargs)" if var_kw else "none besides the finding")
    run_note = " (run: the run's context, given by tripwire)" if wants_run else ""
    for key in params:
        where = f"{path}.{key}"
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(f"{where}: action {name!r} is given the parameter {key!r}, which is no Python keyword "
                              f"name; {shown} accepts: {listing}{run_note}")
        if key == first:
            raise ConfigError(f"{where}: action {name!r}: {key!r} is the parameter {shown} gets the finding in, "
                              f"not one to give; accepted: {listing}{run_note}")
        if key == "run" and wants_run:
            raise ConfigError(f"{where}: action {name!r}: 'run' is the run's context (where the finding was made), "
                              f"which tripwire gives {shown}; not a parameter to give; accepted: {listing}")
        if key in accepted or (var_kw and key not in sig.parameters):
            continue
        kind = sig.parameters[key].kind if key in sig.parameters else None
        why = (f"{key!r} is positional-only in {shown}, and the action's parameters are given as keywords"
               if kind is inspect.Parameter.POSITIONAL_ONLY else f"{shown} has no parameter {key!r}")
        raise ConfigError(f"{where}: action {name!r} takes no parameter {key!r}: {why}, and the action mapping's "
                          f"other keys are passed to it as keywords ({title}(finding, {key}=...))"
                          f"{did_you_mean(key, accepted)} (accepted: {listing}{run_note})")
    for p in rest:
        if p.default is not inspect.Parameter.empty or p.name in params or (p.name == "run" and wants_run):
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ConfigError(f"{path}: action {name!r} cannot be called: {shown} needs the positional-only "
                              f"parameter {p.name!r} besides the finding, and the action's parameters are given as "
                              f"keywords; accepted: a callable fn(finding), its other parameters keywords")
        raise ConfigError(f"{path}: action {name!r} needs the parameter {p.name!r}: {shown} is called with the "
                          f"finding and the action mapping's other keys as keywords; give it there, {{name: "
                          f"{name!r}, {p.name}: ...}}")
    return wants_run


def _custom(name: str, fn: Callable[..., Any], params: Mapping[str, Any], path: str) -> Action:
    """The :class:`Action` of a custom action, its parameters checked (:func:`check_call`): ``fn``
    itself where it gets the finding alone, else a :class:`CustomCall`."""
    wants_run = check_call(fn, name, params, path)
    if not params and not wants_run:
        return Action(name, fn)
    return Action(name, CustomCall(fn, params, wants_run))


class SnsNotify:
    """The ``notify`` action: publish each finding to an SNS topic, once, with short timeouts.

    The message (:meth:`message`) is the finding's line, then one line per fact: ``run`` (the run's
    directory and ``run_id``), ``host`` (and pid), ``worker`` (the rank, of the world size), ``step``
    (and mode: an eval step's finding also names the train step it came after), ``rule`` (and
    severity), ``framework`` and ``time`` (UTC); ``run`` and ``host`` when a session made the
    action (:class:`RunContext`). The same facts go as SNS message attributes (:meth:`attributes`:
    ``rule``, ``severity``, ``mode``, ``step``, ``worker``, ``host``, ``run``, ``run_id``), which
    subscription filter policies and code reading a queue use. ``subject``: the message's subject
    (default ``tripwire: a rule fired``).

    ``timeout`` (seconds, default :data:`NOTIFY_TIMEOUT`): connecting gives up after ``timeout`` and
    the answer is awaited at most ``timeout`` after the request, with no retry, so a publish blocks
    the training step for at most about ``2 * timeout`` (botocore's defaults, 60 s with retries,
    held a training ~180 s per finding on an endpoint that never answered). ``region`` defaults to
    the topic ARN's region; one that differs from it is a :class:`ConfigError` (SNS publishes to a topic
    from its own region only).

    Back-off: after :data:`NOTIFY_FAILURES_BEFORE_PAUSE` failed publishes in a row (3) the action
    pauses: the findings of the next :data:`NOTIFY_PAUSE` seconds (60) are not sent (they are in the
    run all the same), then one is tried; each failed try doubles the pause, up to
    :data:`NOTIFY_MAX_PAUSE` (960 s), and a publish that succeeds ends it. The failure that starts a
    pause says so, a failed try after one says how many findings were not sent during it, and the
    first publish that succeeds after failures says so (WARNING). A failure with the same error as the
    one before is said short (``ReadTimeoutError again (2 failures in a row)``). ``pause`` (the first
    pause, seconds) and ``failures_before_pause`` are attributes of the action."""

    def __init__(self, params: Mapping[str, Any], path: str) -> None:
        self.topic, self.timeout, region, self.endpoint_url = self.check_params(params, path)
        self.subject = str(params.get("subject", "tripwire: a rule fired"))
        self.context: RunContext | None = None  # (where the findings are made: set by the session, bind_run)
        self.failures_before_pause = NOTIFY_FAILURES_BEFORE_PAUSE
        self.pause = NOTIFY_PAUSE  # (the first pause; each failed try after one doubles it)
        self.max_pause = NOTIFY_MAX_PAUSE
        self.failures = 0  # failed publishes in a row
        self.skipped = 0  # findings not sent during the current pause
        self._pause_now = 0.0  # the length of the current (or last) pause
        self._paused_until: float | None = None  # (time.monotonic) while paused, or after a pause until a try
        self._last_cause: tuple[str, str] | None = None  # (error type, hint) of the last failure
        try:
            import boto3
            from botocore.config import Config as BotoConfig
            from botocore.exceptions import NoRegionError
        except ImportError as exc:
            from ._errors import missing_extra

            raise missing_extra("boto3", "notify", exc) from exc
        config = BotoConfig(connect_timeout=self.timeout, read_timeout=self.timeout, retries={"max_attempts": 0})
        try:
            # a session of its own: boto3's default session keeps the first credentials it found
            self.client = boto3.session.Session().client("sns", region_name=region, endpoint_url=self.endpoint_url,
                                                         config=config)
        except NoRegionError:
            raise ConfigError(f"{path}.region: not given, the topic_arn {self.topic!r} names none and boto3 finds "
                              "none (AWS_DEFAULT_REGION, ~/.aws/config); accepted: an AWS region such as "
                              "'us-east-1'") from None

    @staticmethod
    def check_params(params: Mapping[str, Any], path: str) -> tuple[str, float, str | None, str | None]:
        """``(topic_arn, timeout, region, endpoint_url)`` of the action's parameters, checked (no
        client made: ``load_config`` checks them too)."""
        check_keys(params, ("endpoint_url", "region", "subject", "timeout", "topic_arn"), path)
        if "topic_arn" not in params:
            given = f"got {dict(params)!r}" if params else "got no parameters"
            # (trial 38a: the one action error without what was given and what is accepted)
            raise ConfigError(f"{path}: the notify action needs 'topic_arn', {given}; accepted: topic_arn, an SNS "
                              f"topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME), with endpoint_url, region, subject and "
                              f"timeout optional")
        subject = params.get("subject", "tripwire: a rule fired")
        if not isinstance(subject, str) or not subject.strip() or len(subject) > 100:
            # (trial 36k: 5, [a] and '' were taken, as str(); SNS takes a subject of 1 to 100 characters)
            raise ConfigError(f"{path}.subject: got {subject!r}; accepted: a non-empty string of at most 100 characters "
                              f"(SNS's limit; default 'tripwire: a rule fired')")
        topic = check_str(params["topic_arn"], f"{path}.topic_arn")
        if not re.fullmatch(r"arn:[\w-]+:sns:[\w-]*:\d*:[\w.-]+", topic):  # (failed only when a rule fired: trial 18d)
            raise ConfigError(f"{path}.topic_arn: got {topic!r}; accepted: an SNS topic ARN, "
                              "arn:aws:sns:REGION:ACCOUNT:NAME")
        timeout = float(check_float(params.get("timeout", NOTIFY_TIMEOUT), f"{path}.timeout", minimum=0.0,
                                    min_inclusive=False, maximum=3600.0))
        region = params.get("region")
        parts = topic.split(":")  # arn:aws:sns:REGION:ACCOUNT:NAME
        topic_region = parts[3] if len(parts) >= 6 and parts[3] else None
        if region is not None:
            check_str(region, f"{path}.region")
            if topic_region is not None and region != topic_region:
                # (trial 29d: taken, and the first finding's publish failed: NotFound, Endpoint does not exist)
                raise ConfigError(f"{path}.region: got {region!r}, but the topic_arn {topic!r} is in {topic_region} (an "
                                  f"SNS topic is published to in its own region); accepted: {topic_region!r} or leave "
                                  f"region out")
        else:
            region = topic_region
        endpoint_url = params.get("endpoint_url")
        if endpoint_url is not None:
            check_str(endpoint_url, f"{path}.endpoint_url")
            if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", endpoint_url):  # (botocore's bare ValueError: trial 18d)
                raise ConfigError(f"{path}.endpoint_url: got {endpoint_url!r}; accepted: an http:// or https:// URL "
                                  "(http://127.0.0.1:9911)")
        return topic, timeout, region, endpoint_url
    def message(self, finding: Finding) -> str:
        """The text published for ``finding``: its line, a blank line, then ``key: value`` lines."""
        ctx = self.context
        lines = [str(finding), ""]
        if ctx is not None:
            lines.append(f"run: {ctx.run}" + (f" (run_id {ctx.run_id})" if ctx.run_id else ""))
            lines.append(f"host: {ctx.host} (pid {ctx.pid})")
        lines.append(f"worker: {finding.worker}" + (f" (rank {finding.worker} of {ctx.world_size})" if ctx else ""))
        train_step = finding.details.get("train_step") if finding.mode != "train" else None
        lines.append(f"step: {finding.step} ({finding.mode}"
                     + (f", after train step {train_step})" if train_step is not None else ")"))
        lines.append(f"rule: {finding.rule} (severity {finding.severity})")
        if ctx is not None:
            lines.append(f"framework: {ctx.framework}")
        lines.append("time: " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(finding.wall_time)))
        return "\n".join(lines)

    def attributes(self, finding: Finding) -> dict[str, dict[str, str]]:
        """SNS ``MessageAttributes`` of ``finding`` (values SNS refuses empty are left out)."""
        ctx = self.context
        values: dict[str, tuple[str, Any]] = {
            "rule": ("String", finding.rule), "severity": ("String", finding.severity),
            "mode": ("String", finding.mode), "step": ("Number", int(finding.step)),
            "worker": ("Number", int(finding.worker)),
        }
        if ctx is not None:
            values.update(host=("String", ctx.host), run=("String", ctx.run), run_id=("String", ctx.run_id))
        return {k: {"DataType": t, "StringValue": str(v)} for k, (t, v) in values.items() if v is not None and str(v)}

    def __call__(self, finding: Finding) -> None:
        """Publish ``finding``; an :class:`ActionError` saying why where that fails. While paused
        (see the class's Back-off) the finding is counted, not sent, and nothing is raised."""
        if self._paused_until is not None and time.monotonic() < self._paused_until:
            self.skipped += 1
            return
        try:
            self.client.publish(TopicArn=self.topic, Subject=self.subject, Message=self.message(finding),
                                MessageAttributes=self.attributes(finding))
        except Exception as exc:  # botocore: NoCredentialsError, ReadTimeoutError, ClientError, ...
            raise ActionError(self._failed(exc)) from exc
        if self.failures:
            if self._paused_until is not None:
                logger.warning("tripwire: notify: published to %s again after %d failures in a row; %s not sent "
                               "while paused (the run's findings hold them)", self.topic, self.failures,
                               _findings_were(self.skipped))
            self.failures = self.skipped = 0
            self._paused_until, self._last_cause = None, None

    def _failed(self, exc: BaseException) -> str:
        """The message of a failed publish, counted (pausing where it is the
        ``failures_before_pause``-th in a row, or a try after a pause)."""
        self.failures += 1
        hint = self._hint(exc)
        cause = (type(exc).__name__, hint)
        if self.failures > 1 and cause == self._last_cause:  # (said in full the first time)
            text = f"notify: could not publish to {self.topic}: {cause[0]} again ({self.failures} failures in a row)"
        else:
            text = f"notify: could not publish to {self.topic}: {cause[0]}: {exc} ({hint})"
        self._last_cause = cause
        if self._paused_until is not None:  # a try after a pause: a longer one
            self._pause_now = min(2 * self._pause_now, self.max_pause)
            text += (f": {_findings_were(self.skipped)} not sent during the pause; none is sent for the next "
                     f"{self._pause_now:g} s, then one is tried again")
        elif self.failures >= self.failures_before_pause:
            self._pause_now = min(self.pause, self.max_pause)
            text += (f": no finding is sent for the next {self._pause_now:g} s, then one is tried again (each failed "
                     f"try doubles the pause, up to {self.max_pause:g} s); the findings stay in the run")
        else:
            return text
        self.skipped = 0
        self._paused_until = time.monotonic() + self._pause_now
        return text

    def _hint(self, exc: BaseException) -> str:
        """What the error means, for the one line that is logged."""
        from botocore import exceptions as bx

        where = self.client.meta.endpoint_url
        if isinstance(exc, bx.ConnectTimeoutError):
            return f"could not connect to {where} within {self.timeout:g} s: the action's timeout"
        if isinstance(exc, bx.ReadTimeoutError):
            return (f"{where} accepted the connection but did not answer within {self.timeout:g} s: the "
                    "action's timeout")
        if isinstance(exc, bx.EndpointConnectionError):
            return f"could not connect to {where}: check the action's endpoint_url and region"
        if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError)):
            return "it needs AWS credentials where boto3 finds them: environment, ~/.aws/credentials or a role"
        if isinstance(exc, bx.ClientError):
            return "SNS answered with an error: check the topic ARN, its region and the permissions"
        return "not published; training goes on"


#: the action calls that hold a :class:`RunContext` (``context``), which :func:`bind_run` sets
_BOUND = (LogFinding, SnsNotify, CustomCall)


def _findings_were(n: int) -> str:
    return "1 finding was" if n == 1 else f"{n} findings were"


def check_action(spec: ActionSpec, path: str) -> None:
    """Check a built-in action's name and parameters without making it (a ``notify`` action makes
    no client); ``module:attribute`` names and callables wait for :func:`resolve_action`."""
    if spec.name == "<callable>" or ":" in spec.name:
        return
    if spec.name == "notify":
        SnsNotify.check_params(dict(spec.params), path)
        return
    resolve_action(spec, path)


def resolve_action(spec: ActionSpec | str | Callable[[Finding], None], path: str = "actions") -> Action:
    """Turn an action spec into an :class:`Action`; unknown names are errors. A callable or
    ``module:attribute`` is checked against its signature with its parameters (:func:`check_call`),
    and made a :class:`CustomCall` where it has parameters or a ``run`` parameter."""
    if not isinstance(spec, ActionSpec):
        spec = ActionSpec.parse(spec, path)
    name, params = spec.name, dict(spec.params)
    if name == "<callable>":
        fn = params["callable"]
        label = getattr(fn, "__name__", "callable")
        return _custom(label, fn, {k: v for k, v in params.items() if k != "callable"}, path)
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
        level = params.get("level")
        if level is not None:  # (Python's own spelling, WARNING, too: trial 18a)
            levels = ("debug", "info", "warning", "error", "critical")
            if not isinstance(level, str) or level.lower() not in levels:  # (named as written: trial 25g, LOUD was 'loud')
                check_str(level, f"{path}.level", choices=levels)
            level = level.lower()
        return Action(name, LogFinding(None if level is None else getattr(logging, level.upper())))
    if name == "notify":
        return Action(name, SnsNotify(params, path))
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            obj: Any = import_user_module(module)
        except ImportError as exc:
            raise ConfigError(f"{path}: cannot load action {name!r}: {import_failure(module, exc)}") from None
        except Exception as exc:  # noqa: BLE001 - (the module's own code raised: trial 38l, a traceback from validate)
            raise ConfigError(f"{path}: cannot load action {name!r}: importing module {module!r} raised "
                              f"{type(exc).__name__}: {exc} (fix the module's code that runs at import)") from exc
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:  # (trial 19a: no "did you mean" for 'mymod:notify_mee')
                raise ConfigError(f"{path}: cannot load action {name!r}: {getattr(obj, '__name__', module)!r} has no "
                                  f"attribute {part!r}{did_you_mean_attribute(obj, part)}") from None
        if not callable(obj):
            raise ConfigError(f"{path}: action {name!r} is not callable")
        return _custom(name, obj, params, path)
    raise ConfigError(
        f"{path}: unknown action {name!r}{did_you_mean(name, BUILTIN_ACTIONS)}; accepted: "
        f"{', '.join(BUILTIN_ACTIONS)}, 'module:attribute' or a callable"
    )


def raise_for(finding: Finding) -> None:
    raise TrainingStopped(f"tripwire stopped training: {finding}", finding)
