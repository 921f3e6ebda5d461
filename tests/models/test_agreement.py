"""The served list against the network as training left it, on rows training never saw."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models import NeuRulesClassifier


def _on_a_bound(clf: NeuRulesClassifier, X) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Rows lying exactly on a weighted bound of the final network (zero-temperature ties)."""
    net = clf.stage_networks_["final"]
    Z = torch.tensor(clf.encoder_.transform(X), dtype=torch.float32)
    on = (torch.relu(net.weight[0]) > 0)[None]
    a, b = torch.minimum(net.lower[0], net.upper[0]), torch.maximum(net.lower[0], net.upper[0])
    tie = ((Z[:, None, :] == a[None]) | (Z[:, None, :] == b[None])) & on
    return tie.any(dim=(1, 2)).numpy()


@pytest.mark.parametrize("name", ["heart", "crx"])
def test_served_list_agrees_with_the_network_on_test_rows(name: str, load_dataset) -> None:  # type: ignore[no-untyped-def]
    X, y = load_dataset(name)
    rng = np.random.default_rng(0)
    test = rng.random(len(X)) < 0.25
    Xtr, ytr, Xte = X[~test], y[~test], X[test]
    clf = NeuRulesClassifier(random_state=0, target_steps=200, n_restarts=4).fit(Xtr, ytr)
    served = clf.predict(Xte)
    final = clf.predict_network(Xte, stage="final")
    differ = final != served
    print(f"{name}: final network vs served list: {1 - differ.mean():.4f}; ties on a bound: {differ.sum()}")
    assert not (differ & ~_on_a_bound(clf, Xte)).any()  # lossless up to rows exactly on a bound
    assert np.array_equal(clf.predict_network(Xtr, stage="final"), clf.predict(Xtr))
    trained = float(np.mean(clf.predict_network(Xte) == served))  # as gradient training left it
    print(f"{name}: trained network vs served list on test rows: {trained:.4f}")
    assert trained >= 0.97


def test_the_network_read_off_as_a_list_predicts_as_the_network() -> None:
    from tests.models.conftest import toy_frame

    X, y = toy_frame(400, seed=9)
    clf = NeuRulesClassifier(random_state=1, target_steps=150, n_restarts=2).fit(X[:300], y[:300])
    for stage in ("pruned", "trained", "final"):
        audit = clf.network_rule_list(X[:300], y[:300], stage=stage)
        assert np.array_equal(audit.predict(X[300:]), clf.predict_network(X[300:], stage=stage)), stage
    with pytest.raises(ValueError, match="stage"):
        clf.network_rule_list(X[:300], y[:300], stage="annealed")


def test_the_audit_copy_names_labels_it_cannot_count() -> None:
    from tests.models.conftest import toy_frame

    X, y = toy_frame(60)
    clf = NeuRulesClassifier(random_state=0, epochs=3, n_restarts=1).fit(X, y)
    with pytest.raises(ValueError, match="not fitted on: '0', '1'"):  # was KeyError: np.int64(0)
        clf.network_rule_list(X, y.astype(str))
    with pytest.raises(ValueError, match="X has 60 rows but y has 59 labels"):
        clf.network_rule_list(X, y[:59])
