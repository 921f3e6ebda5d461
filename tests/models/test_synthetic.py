"""The paper's synthetic generator and recovery of planted rule lists."""

from __future__ import annotations

import numpy as np
import pytest

from models import RuleList, make_rule_list_data


def test_generator_shapes_and_planted_list() -> None:
    X, y, planted = make_rule_list_data(d=20, n=5000, s=0.1, k=2, m=2, random_state=0)
    assert X.shape == (5000, 20) and y.shape == (5000,)
    assert set(np.unique(y)) <= {0, 1}
    assert isinstance(planted, RuleList)
    assert len(planted.rules) == 2
    for rule in planted.rules:
        assert len(rule.conditions) == 2
        for c in rule.conditions:
            assert c.high - c.low == pytest.approx(0.1**0.5)
    # each rule covers about s of the rows; the planted list decides every covered row exactly
    ids = planted.apply(X)
    covered = ids > 0
    assert 0.12 < covered.mean() < 0.26
    pred = planted.predict(X)
    assert np.array_equal(pred[covered], y[covered])
    # the same seed gives the same data
    X2, y2, p2 = make_rule_list_data(d=20, n=5000, s=0.1, k=2, m=2, random_state=0)
    assert np.array_equal(X.to_numpy(), X2.to_numpy()) and np.array_equal(y, y2)
    assert p2.to_dict() == planted.to_dict()


@pytest.mark.parametrize("m", [2, 4])
def test_recovers_planted_rule_list(m: int) -> None:
    pytest.importorskip("torch")
    from sklearn.metrics import f1_score

    from models import NeuRulesClassifier

    X, y, planted = make_rule_list_data(d=20, n=5000, s=0.1, k=2, m=m, random_state=m)
    tr, te = np.arange(4000), np.arange(4000, 5000)
    clf = NeuRulesClassifier(n_rules=10, random_state=0).fit(X.iloc[tr], y[tr])
    ours = f1_score(y[te], clf.predict(X.iloc[te]), average="weighted")
    theirs = f1_score(y[te], planted.predict(X.iloc[te]), average="weighted")
    covered = planted.apply(X.iloc[te]) > 0  # rows a planted rule decides (the rest are coin flips)
    acc_covered = float(np.mean(clf.predict(X.iloc[te])[covered] == y[te][covered]))
    print(f"m={m}: NeuRules held-out weighted F1 {ours:.4f}, planted list {theirs:.4f}; ", end="")
    print(f"accuracy on the planted rules' rows {acc_covered:.3f}")
    assert ours >= theirs - 0.03
    assert acc_covered >= 0.8
