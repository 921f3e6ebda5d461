"""The constants that make a network exactly a rule list at zero temperature (torch-free)."""

from __future__ import annotations

import numpy as np

# Active priority of the default (else) rule: below every firing rule (priorities are kept in
# [PRIORITY_MIN, PRIORITY_MAX]) and above every blocked one once every kept predicate weighs at
# least MIN_WEIGHT: one failing predicate of weight w caps the conjunction below eps / w, so a
# blocked rule's active priority is below eps * PRIORITY_MAX / MIN_WEIGHT (0.2 at eps = 1e-3).
# Such a network is exactly a rule list at zero temperature (see `SoftRuleList.project_`).
DEFAULT_PRIORITY = 0.5
PRIORITY_MIN = 1.0
PRIORITY_MAX = 10.0
MIN_WEIGHT = 0.05
MAX_EPS = DEFAULT_PRIORITY * MIN_WEIGHT / PRIORITY_MAX / 2  # keeps blocked rules below the default


def first_match_order(priority: np.ndarray, alive: np.ndarray) -> list[int]:
    """The rules of one list in the order the zero-temperature selector tries them: priority
    descending, ties by index (as arg max does), dead rules left out. The one first-match order."""
    return [j for j in sorted(range(len(priority)), key=lambda j: (-float(priority[j]), j)) if alive[j]]
