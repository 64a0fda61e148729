"""Rules: conditions over captured values that produce findings.

Built-in rules are registered by YAML name (``tripwire rules`` lists them); write your own by
subclassing :class:`Rule` (and ``@register_rule``) or with a plain function.
"""

from .._finding import Finding
from ._base import FunctionRule, Requirement, Rule
from ._registry import RULE_SETS, available_rules, build_rule, build_rules, get_rule, register_rule

__all__ = sorted(
    [
        "Finding",
        "FunctionRule",
        "RULE_SETS",
        "Requirement",
        "Rule",
        "available_rules",
        "build_rule",
        "build_rules",
        "get_rule",
        "register_rule",
    ]
)
