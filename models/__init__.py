"""NeuRules: differentiable rule lists that end as crisp, human-readable rule lists.

`RuleList` (numpy only) is imported eagerly; everything that needs torch is imported lazily so
that `from models import RuleList` works on a machine without torch.
"""

from importlib import import_module
from typing import Any

from models.rulelist import RuleList, category_key

_LAZY = {
    "NeuRulesClassifier": "models.estimator",
    "TrainingCancelled": "models.exceptions",
    "make_rule_list_data": "models.synthetic",
}

__all__ = ["NeuRulesClassifier", "RuleList", "TrainingCancelled", "category_key", "make_rule_list_data"]


def __getattr__(name: str) -> Any:
    """Import torch-backed names on first use."""
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'models' has no attribute {name!r}")
