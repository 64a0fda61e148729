"""Rules: conditions over captured values that produce findings.

Built-in rules are registered by YAML name (``tripwire rules`` lists them); write your own by
subclassing :class:`Rule` (and ``@register_rule``) or with a plain function.
"""

from .._finding import Finding
from .._validate import check_bool, check_float, check_int, check_str
from ._base import FunctionRule, Requirement, Rule
from ._contract import RuleContractError, check_rule
from ._registry import RULE_SETS, available_rules, build_rule, build_rules, get_rule, register_rule
from .all_zero import AllZero
from .class_imbalance import ClassImbalance
from .confusion import Confusion
from .dead_relu import DeadRelu
from .exploding_gradient import ExplodingGradient
from .exploding_tensor import ExplodingTensor
from .feature_importance_overweight import FeatureImportanceOverweight
from .input_not_normalized import InputNotNormalized
from .loss_diverging import LossDiverging
from .loss_not_decreasing import LossNotDecreasing
from .loss_scale_collapse import LossScaleCollapse
from .oscillating_loss import OscillatingLoss
from .overfit import Overfit
from .overtraining import Overtraining
from .poor_weight_initialization import PoorWeightInitialization
from .saturated_activation import SaturatedActivation
from .similar_across_runs import SimilarAcrossRuns
from .stalled_training import StalledTraining
from .tensor_variance import TensorVariance
from .tree_depth import TreeDepth
from .unchanged_tensor import UnchangedTensor
from .vanishing_gradient import VanishingGradient
from .weight_update_ratio import WeightUpdateRatio

# (a literal, sorted list: type checkers read only a literal as the exported names)
__all__ = [
    "AllZero",
    "ClassImbalance",
    "Confusion",
    "DeadRelu",
    "ExplodingGradient",
    "ExplodingTensor",
    "FeatureImportanceOverweight",
    "Finding",
    "FunctionRule",
    "InputNotNormalized",
    "LossDiverging",
    "LossNotDecreasing",
    "LossScaleCollapse",
    "OscillatingLoss",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "RULE_SETS",
    "Requirement",
    "Rule",
    "RuleContractError",
    "SaturatedActivation",
    "SimilarAcrossRuns",
    "StalledTraining",
    "TensorVariance",
    "TreeDepth",
    "UnchangedTensor",
    "VanishingGradient",
    "WeightUpdateRatio",
    "available_rules",
    "build_rule",
    "build_rules",
    "check_bool",
    "check_float",
    "check_int",
    "check_rule",
    "check_str",
    "get_rule",
    "register_rule",
]
