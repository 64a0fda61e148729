"""tripwire: catch broken training runs while they run, and tune the ones worth keeping.

``import tripwire`` needs only numpy and PyYAML. Framework callbacks live in
``tripwire.integrations.<framework>``; the tuner in ``tripwire.tune``.
"""

from ._actions import Action, RunContext, resolve_action
from ._config import (
    BASIC_REDUCTIONS,
    BUILTIN_COLLECTIONS,
    MODES,
    ActionSpec,
    Collection,
    Config,
    ModeSaveConfig,
    ReductionConfig,
    RuleSpec,
    SaveConfig,
    WriterConfig,
    load_config,
)
from ._errors import (
    ActionError,
    ConfigError,
    CorruptRunError,
    MissingDependencyError,
    RuleError,
    RunNotFoundError,
    RunReplacedError,
    StepEndedError,
    StoreClosedError,
    TensorNotFoundError,
    TrainingStopped,
    TripwireError,
)
from ._finding import Decision, Finding
from ._format import StepRecord
from ._history import History
from ._reductions import NumpyBackend, ReductionBackend
from ._plot import plot
from ._run import Run, TensorView, open_run, request_stop
from ._session import Session, StepPlan
from ._watch import FindingNotRecordedError, Watcher, watch
from ._writer import RunWriter
from .rules import FunctionRule, Requirement, Rule, register_rule

#: The version, written here only: pyproject.toml reads it (dynamic), ``tripwire --version`` prints it
__version__ = "0.1.0"

# (a literal, sorted list: type checkers read only a literal as the exported names)
__all__ = [
    "Action",
    "ActionError",
    "ActionSpec",
    "BASIC_REDUCTIONS",
    "BUILTIN_COLLECTIONS",
    "Collection",
    "Config",
    "ConfigError",
    "CorruptRunError",
    "Decision",
    "Finding",
    "FindingNotRecordedError",
    "FunctionRule",
    "History",
    "MODES",
    "MissingDependencyError",
    "ModeSaveConfig",
    "NumpyBackend",
    "ReductionBackend",
    "ReductionConfig",
    "Requirement",
    "Rule",
    "RuleError",
    "RuleSpec",
    "Run",
    "RunContext",
    "RunNotFoundError",
    "RunReplacedError",
    "RunWriter",
    "SaveConfig",
    "Session",
    "StepEndedError",
    "StepPlan",
    "StepRecord",
    "StoreClosedError",
    "TensorNotFoundError",
    "TensorView",
    "TrainingStopped",
    "TripwireError",
    "Watcher",
    "WriterConfig",
    "load_config",
    "open_run",
    "plot",
    "register_rule",
    "request_stop",
    "resolve_action",
    "watch",
]
