"""The validate stage: targets and inputs checked before training."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.validation import check_targets


@pytest.mark.parametrize("missing", [None, np.nan, np.float32("nan"), pd.NA, pd.NaT])
def test_a_missing_label_in_every_form_is_refused(missing: object) -> None:
    """One missing-value test for inputs, labels and the rule list (np.float32('nan') was a class)."""
    with pytest.raises(ValueError, match="Input y contains NaN or None"):
        check_targets(np.array([0, 1, missing], dtype=object))
