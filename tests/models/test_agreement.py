"""Soft model at zero temperature vs the crisp rule list, on real data sets."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models import NeuRulesClassifier
from models.extraction import rule_ids_from_selection


@pytest.mark.parametrize("name", ["heart", "diabetes", "crx", "titanic"])
def test_crisp_list_agrees_with_network_at_zero_temperature(name: str, load_dataset) -> None:  # type: ignore[no-untyped-def]
    X, y = load_dataset(name)
    clf = NeuRulesClassifier(n_rules=10, random_state=0, target_steps=300, n_restarts=2).fit(X, y)
    net = clf.network_
    Z = torch.tensor(clf.encoder_.transform(X), dtype=torch.float32)
    sel, cls = net.zero_temperature(Z)
    net_pred = clf.classes_[cls[0].numpy()]
    crisp_pred = clf.rule_list_.predict(X)
    agreement = float(np.mean(net_pred == crisp_pred))
    rule_agreement = float(np.mean(rule_ids_from_selection(net, sel[0].numpy()) == clf.rule_list_.apply(X)))
    print(f"{name}: class agreement {agreement:.4f}, rule agreement {rule_agreement:.4f}")
    assert agreement >= 0.995
    assert clf.train_agreement_ >= 0.995
    # the soft forward at a tiny temperature (eval mode: no noise) decides the same way
    logits, _ = net.eval()(Z, 1e-4, 1e-4)
    soft_pred = clf.classes_[logits[0].argmax(dim=1).numpy()]
    assert float(np.mean(soft_pred == crisp_pred)) >= 0.995
