"""Greedy post-pruning in extraction, and the wide-data candidate inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from models import NeuRulesClassifier
from models.extraction import _list_score, extract_rule_list
from models.metrics import weighted_f1
from tests.models.conftest import toy_frame


def _n_conditions(doc: dict) -> int:
    return sum(len(r["conditions"]) for r in doc["rules"])


def test_list_score_is_weighted_f1_of_the_first_match_list() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 200)
    fires = rng.random((4, 200)) < 0.3
    order = [2, 0, 3]
    pred = np.zeros(200, dtype=np.int64)
    open_ = np.ones(200, dtype=bool)
    for j in order:
        cap = fires[j] & open_
        if cap.any():
            pred[cap] = np.argmax(np.bincount(y[cap], minlength=3))
        open_ &= ~cap
    pred[open_] = np.argmax(np.bincount(y[open_], minlength=3))
    assert _list_score(order, fires, y, 3) == pytest.approx(weighted_f1(y, pred))


def test_pruning_never_lowers_training_f1_and_keeps_the_network_equal_to_the_list() -> None:
    X, y = toy_frame(600)
    clf = NeuRulesClassifier(n_rules=6, n_restarts=3, target_steps=300, random_state=0)
    clf.fit(X, y)
    assert clf.train_agreement_ == 1.0
    assert clf.train_rule_agreement_ == 1.0
    # re-extract every restart of a fresh fit with and without pruning: pruning keeps or raises
    # the training F1 and never lengthens the list
    clf2 = NeuRulesClassifier(n_rules=6, n_restarts=3, target_steps=300, random_state=1)
    clf2.fit(X, y)
    enc = clf2.encoder_
    raw = enc.raw_columns(X)
    Z = enc.transform(X, raw).astype(np.float32)
    y_idx = np.searchsorted(clf2.classes_, y)
    net = clf2.network_
    doc_full, pred_full = extract_rule_list(net.select(0), enc, Z, raw, y_idx, [0, 1], rewrite=False, prune=False)
    sub = net.select(0)
    doc_pruned, pred_pruned = extract_rule_list(sub, enc, Z, raw, y_idx, [0, 1], prune=True)
    assert weighted_f1(y_idx, pred_pruned) >= weighted_f1(y_idx, pred_full) - 1e-12
    assert _n_conditions(doc_pruned) <= _n_conditions(doc_full)
    assert len(doc_pruned["rules"]) <= len(doc_full["rules"])
    # the rewritten network decides every training row as the pruned list does
    _, cls = sub.zero_temperature(torch.tensor(Z))
    assert np.array_equal(cls[0].numpy(), pred_pruned)


def test_wide_data_only_candidate_inputs_enter_the_rules() -> None:
    rng = np.random.default_rng(0)
    n, width = 800, 200
    X = pd.DataFrame(rng.normal(size=(n, width)), columns=[f"x{i}" for i in range(width)])
    y = ((X["x3"] > 0.3) & (X["x7"] < 0.5)).astype(int).to_numpy()
    clf = NeuRulesClassifier(n_rules=4, max_candidates=8, target_steps=300, n_restarts=1, random_state=0).fit(X, y)
    used = {c["feature"] for r in clf.rule_list_.to_dict()["rules"] for c in r["conditions"]}
    assert used and used <= {"x3", "x7"}  # no noise input enters the pruned list
    assert clf.score(X, y) > 0.85
    assert clf.train_agreement_ == 1.0
    unrestricted = NeuRulesClassifier(
        n_rules=4, max_candidates=None, target_steps=300, n_restarts=1, random_state=0
    ).fit(X, y)
    assert clf.score(X, y) >= unrestricted.score(X, y)
