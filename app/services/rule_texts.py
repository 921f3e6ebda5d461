"""The one place the service turns a rule list's conditions into text for people.

The version page, evaluations, monitoring, comparisons and the exports all read a rule through these
functions, so a condition reads the same everywhere (and the same as in a prediction's explanation,
which `models.RuleList.explain` writes). The rendering itself is `models.rulelist`'s: nothing here
re-implements it.
"""

from __future__ import annotations

from models.rulelist import Condition, RuleList

DEFAULT_RULE_TEXT = "else"


def condition_text(rl: RuleList, condition: Condition) -> str:
    """One condition of `rl` as people read it (in the feature's original units)."""
    return rl.condition_text(condition)


def rule_text(rl: RuleList, rule_id: int) -> str:
    """A rule's conditions joined by `and` (`true` without any); the default rule (id 0) is `else`."""
    return DEFAULT_RULE_TEXT if rule_id == 0 else rl.rule_text(rule_id)


def condition_texts(rl: RuleList) -> list[list[str]]:
    """Per rule of the list, in order, the text of each of its conditions."""
    return [[condition_text(rl, c) for c in rule.conditions] for rule in rl.rules]


__all__ = ["DEFAULT_RULE_TEXT", "condition_text", "condition_texts", "rule_text"]
