"""`NeuRulesClassifier`: a scikit-learn compatible estimator whose model is a crisp rule list.

torch is imported inside `fit` (and `predict_network`) only, so this module imports without it.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from models.budget import BudgetRequest, plan_budget
from models.crossfit import KindChoice, auto_folds
from models.exceptions import TrainingCancelled
from models.metrics import weighted_f1
from models.params import check_params
from models.rulelist import RuleList
from models.validation import TrainingData, check_targets, document_labels, fit_frame, predict_frame, training_data

if TYPE_CHECKING:
    import torch

    from models.network import SoftRuleList
    from models.stages import Encoded, Trained

STAGES = ("annealed", "pruned", "tuned", "trained", "final")


def _json_param(value: Any) -> Any:
    """A parameter as JSON for the document's metadata: numpy scalars (a grid search's
    np.arange values) as Python numbers, tuples as lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | list):
        return [_json_param(v) for v in value]
    return value


class NeuRulesClassifier:
    """NeuRules: learns a crisp rule list by gradient descent on its continuous relaxation.

    fit = validate -> encode -> initialise -> train -> select -> extract:
    - initialise: `n_restarts` rule lists: two seeded from greedy Gini trees' leaves (11 leaves,
      one with leaves of at least 2 % of the rows), the others random quantile boxes whose rules
      predict the class most over-represented in them (minority-class seeding), see
      `models.seeding`. The tree-seeded restarts depend on the data only;
    - train (all restarts at once, `models.stages`): the paper's annealed training; snapping of the
      bounds into gaps between training values and pruning of the predicates that cannot block
      their rule or route nothing (at most `max_conditions` conditions per rule); fine-tuning of
      that structure at the final temperatures, projected after every step onto the networks that
      are exactly rule lists at zero temperature; re-snapping, dropping what routes nothing, and
      gradient training of the consequents on the fixed routes (the end of training); then the
      consequents' exact optimum, i.e. the smoothed class frequencies the document stores;
    - select: the restart with the best weighted F1 on the held-out rows (with
      `validation_fraction` > 0; then it is refit on all rows) or else on the training rows. With
      `selection_folds` the seeding kinds are also cross-fitted: every restart is
      trained again on each fold's other rows, and when another kind's out-of-fold F1 beats that
      of the training-best restart's kind by more than two bootstrap standard errors, that kind's
      training-best restart is kept (`models.crossfit`). The networks decide exactly as their
      lists, so the choice is made on them;
    - extract: the kept network read off exactly as a `RuleList` (`models.extraction`).
    `predict_network` predicts with the network as training left it, and `network_rule_list`
    reads any crisp stage off with the network's own consequents, so the agreement of the served
    list with the network can be measured on any rows.

    Parameters
    ----------
    n_rules: maximum number of rules (besides the default rule).
    epochs: passes over the training data, all stages together; "auto": about `target_steps`
        optimiser steps in the annealed stage (clipped to [min_epochs, max_epochs] epochs), plus
        `tune_fraction` and `refit_fraction` of that for fine-tuning and refit.
    batch_size, lr: mini-batch size (smaller for very wide data) and Adam learning rate.
    min_support, max_support, lambda_support: the support regulariser's bounds and weight.
    t_pi, t_rl: (start, end) temperatures of the predicates and of the rule selector, annealed
        linearly over the second half of the annealed stage (consequents frozen in its first
        half); fine-tuning and refit run at the end temperatures.
    eps: slack of the relaxed conjunction (at most `models.network.MAX_EPS`).
    smoothing: additive smoothing of the rule probabilities measured on training rows.
    max_conditions: at most this many conditions (features) per rule.
    free_weight: start weight of the predicates that are not part of a rule's seed.
    max_candidates: on wide data (more than 4 * max_candidates inputs) only the max_candidates
        inputs with the best univariate score (and each rule's seeds) start with a weight.
    n_restarts: rule lists trained together in one tensor program; "auto" uses as many as fit a
        fixed compute budget (at least 4, at most `max_restarts`).
    validation_fraction: share of the training rows held out (stratified) to choose the restart;
        0: choose on the training rows, no refit.
    selection_folds: folds of the cross-fitted choice of the seeding kind (only without held-out
        rows); 0 (default): none; "auto": 4 folds on at most 500 training rows, none on more (it
        costs about three more fits). Off by default: its effect on the benchmark's small
        datasets changed sign with the draw of the folds (benchmarks/RESULTS.md).
    device: "auto" (CUDA when available), "cpu", "cuda", ...
    n_threads: CPU threads for torch during fit; None means one (restored after fit).
    random_state: seed for the split, initialisation, shuffling and the Gumbel noise.
    """

    # fitted attributes
    feature_names_in_: np.ndarray
    rule_list_: RuleList
    network_: SoftRuleList | None
    restart_networks_: SoftRuleList | None
    stage_networks_: dict[str, SoftRuleList]
    kind_scores_: dict[str, float] | None
    selected_kind_: str | None
    kind_choice_: KindChoice | None

    def __init__(
        self,
        n_rules: int = 10,
        epochs: int | str = "auto",
        batch_size: int = 1024,
        lr: float = 0.02,
        min_support: float = 0.05,
        max_support: float = 0.9,
        lambda_support: float = 0.4,
        t_pi: tuple[float, float] = (0.2, 0.04),
        t_rl: tuple[float, float] = (1.0, 0.2),
        eps: float = 1e-3,
        smoothing: float = 1.0,
        max_conditions: int = 6,
        free_weight: float = 0.5,
        max_candidates: int | None = 32,
        n_restarts: int | str = "auto",
        max_restarts: int = 8,
        target_steps: int = 300,
        min_epochs: int = 5,
        max_epochs: int = 300,
        tune_fraction: float = 0.2,
        refit_fraction: float = 0.1,
        validation_fraction: float = 0.0,
        selection_folds: int | str = 0,
        device: str = "auto",
        n_threads: int | None = None,
        random_state: int | None = None,
        verbose: bool = False,
    ) -> None:
        self.n_rules = n_rules
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.min_support = min_support
        self.max_support = max_support
        self.lambda_support = lambda_support
        self.t_pi = t_pi
        self.t_rl = t_rl
        self.eps = eps
        self.smoothing = smoothing
        self.max_conditions = max_conditions
        self.free_weight = free_weight
        self.max_candidates = max_candidates
        self.n_restarts = n_restarts
        self.max_restarts = max_restarts
        self.target_steps = target_steps
        self.min_epochs = min_epochs
        self.max_epochs = max_epochs
        self.tune_fraction = tune_fraction
        self.refit_fraction = refit_fraction
        self.validation_fraction = validation_fraction
        self.selection_folds = selection_folds
        self.device = device
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ---- scikit-learn plumbing ---------------------------------------------------------------

    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn convention)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> NeuRulesClassifier:
        """Set constructor parameters (scikit-learn convention)."""
        valid = set(self._get_param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"Invalid parameter {key!r} for estimator {type(self).__name__}. "
                    f"Valid parameters are: {sorted(valid)!r}."
                )
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = []
        for k, v in self.get_params().items():
            d = defaults[k]
            same = v is d if (v is None or d is None) else (type(v) is type(d) and v == d)
            if not same:
                changed.append(f"{k}={v!r}")
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:
        """Estimator tags for scikit-learn >= 1.6 (imported lazily)."""
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        tags = Tags(
            estimator_type="classifier",
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags(),
            input_tags=InputTags(allow_nan=True, categorical=True, string=True),
        )
        # a stochastic-gradient learner is not expected to fit every toy check perfectly
        tags.classifier_tags.poor_score = True
        tags.non_deterministic = False
        return tags

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy of `predict(X)` against y (a column vector too), weighted by `sample_weight` when given."""
        truth = np.asarray(y, dtype=object)
        if truth.ndim == 2 and truth.shape[1] == 1:  # (n, 1) against (n,) predictions broadcast to n x n
            truth = truth[:, 0]
        pred = self.predict(X)
        if truth.shape != pred.shape:
            raise ValueError(f"y has shape {truth.shape}; expected ({len(pred)},) for {len(pred)} rows of X")
        return float(np.average(pred == truth, weights=sample_weight))

    # ---- fitting -----------------------------------------------------------------------------

    def _budget_request(self) -> BudgetRequest:
        return BudgetRequest(
            n_rules=int(self.n_rules),
            epochs=self.epochs,
            batch_size=int(self.batch_size),
            n_restarts=self.n_restarts,
            max_restarts=int(self.max_restarts),
            target_steps=int(self.target_steps),
            min_epochs=int(self.min_epochs),
            max_epochs=int(self.max_epochs),
            tune_fraction=float(self.tune_fraction),
            refit_fraction=float(self.refit_fraction),
        )

    def _validate_params(self) -> None:
        """Raise ValueError naming the first invalid constructor parameter (the service calls this
        before it queues a job)."""
        check_params(self.get_params())

    def _validate(self, X: Any, y: Any) -> TrainingData:
        """The validate stage: parameters, inputs and target; records the input columns."""
        self._validate_params()
        frame = fit_frame(X)
        data = training_data(frame, y)
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        if isinstance(X, pd.DataFrame) and all(isinstance(c, str) for c in X.columns):
            self.feature_names_in_ = np.asarray(list(X.columns), dtype=object)
        self._feature_names = [str(c) for c in frame.columns]
        self.n_features_in_ = frame.shape[1]
        self.classes_ = data.classes
        return data

    def fit(
        self,
        X: Any,
        y: Any,
        callback: Callable[[dict[str, Any]], Any] | None = None,
        eval_set: tuple[Any, Any] | None = None,
    ) -> NeuRulesClassifier:
        """Train, extract the crisp rule list into `rule_list_`; returns self.

        callback(progress) is called once per epoch (all stages together) with epoch, n_epochs,
        loss and val_score: the weighted F1 on eval_set of the best restart's zero-temperature
        network every few epochs, else None. The last epoch is reported after extraction, `stage` "final",
        its score the served list's (what the version's held-out F1 says). Cross-fitting
        (`selection_folds`) then calls it per fold epoch with the last epoch again and `stage`
        "crossfit", so it can still cancel. Returning True cancels training and raises
        `TrainingCancelled`.
        """
        from models.stages import encode

        t0 = time.perf_counter()
        data = self._validate(X, y)
        enc = encode(data.frame)
        seed = int(self.random_state) if self.random_state is not None else int(np.random.randint(0, 2**31 - 1))
        if enc.Z.shape[1] == 0:
            return self._fit_without_inputs(data, enc, seed, t0)
        t1 = time.perf_counter()
        with self._torch_threads():
            net, split = self._initialise(data, enc, seed)
            trained = self._train(net, split, data, enc, seed, callback, eval_set)
            self.kind_scores_, self.kind_choice_ = None, None
            self.selected_kind_ = None if len(split[1]) else self._crossfit(data, enc, seed, trained, callback)
        t2 = time.perf_counter()
        chosen = self._select(trained, enc)
        self.rule_list_ = self._extract(chosen, trained, data, enc, seed)
        self._report_served(callback, eval_set)
        self.fit_seconds_ = time.perf_counter() - t0
        self.timings_ = {"encode": t1 - t0, "train": t2 - t1, "extract": time.perf_counter() - t2}
        return self

    @contextmanager
    def _torch_threads(self) -> Iterator[None]:
        import torch

        before = torch.get_num_threads()
        threads = self.n_threads
        if threads is None and self._device().type == "cpu":
            threads = 1
        try:
            if threads:
                torch.set_num_threads(int(threads))
            yield
        finally:
            torch.set_num_threads(before)

    def _device(self) -> torch.device:
        import torch

        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}") from exc
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r}: CUDA is not available here (device='auto' uses the CPU)")
        return device

    def _initialise(
        self, data: TrainingData, enc: Encoded, seed: int
    ) -> tuple[SoftRuleList, tuple[np.ndarray, np.ndarray]]:
        """The initialise stage: the held-out split, the budget and the seeded restarts."""
        from models.selection import inner_split
        from models.stages import initialise

        rng = np.random.default_rng(seed)
        split = inner_split(data.y, float(self.validation_fraction), rng)
        two = enc.two_valued()[0]
        self.budget_ = plan_budget(
            self._budget_request(), len(split[0]), len(data.y), enc.Z.shape[1] - len(two), len(two)
        )
        settings = self._seed_settings(len(data.classes))
        net, self.restart_kinds_ = initialise(enc, data.y, split[0], self.budget_.n_restarts, settings, rng)
        self.split_ = split
        return net.to(self._device()), split

    def _train(
        self,
        net: SoftRuleList,
        split: tuple[np.ndarray, np.ndarray],
        data: TrainingData,
        enc: Encoded,
        seed: int,
        callback: Callable[[dict[str, Any]], Any] | None,
        eval_set: tuple[Any, Any] | None,
    ) -> Trained:
        """The train stage, for every restart at once."""
        import torch

        from models.stages import Rows, train_restarts
        from models.training import Progress

        device = net.lower.device
        generators = (torch.Generator().manual_seed(seed), self._noise_generators(self.restart_kinds_, seed, device))
        scorer = self._val_score(eval_set, enc, data, device)
        progress = Progress(self.budget_.total_epochs, callback, scorer, hold_last=True)
        rows = Rows(enc, data.y, device)
        try:
            trained = train_restarts(net, rows, split, self.budget_, self._train_settings(), generators, progress)
        except Exception:
            if callback is not None and progress.held is not None:  # diverged after the last epoch: still told
                with suppress(Exception):  # (a callback's own stop must not hide why training failed)
                    callback(progress.held)
            raise
        self.training_steps_ = progress.steps
        self._last_point = progress.held
        return trained

    def _report_served(
        self, callback: Callable[[dict[str, Any]], Any] | None, eval_set: tuple[Any, Any] | None
    ) -> None:
        """The last epoch's progress point, held back until the list is extracted, `stage` "final": with an
        eval_set, its score is the served list's weighted F1 there. The other epochs score the networks before
        consolidation, which can decide otherwise (a job's last score read 0.494, its version's F1 0.564)."""
        point = getattr(self, "_last_point", None)
        if callback is None or point is None:
            return
        score = None if eval_set is None else weighted_f1(check_targets(eval_set[1]), self.predict(eval_set[0]))
        if callback({**point, "val_score": score, "stage": "final"}) is True:
            raise TrainingCancelled(f"training cancelled by the callback at epoch {point['epoch']}")

    def _crossfit(
        self,
        data: TrainingData,
        enc: Encoded,
        seed: int,
        trained: Trained,
        callback: Callable[[dict[str, Any]], Any] | None = None,
    ) -> str | None:
        """The seeding kind chosen by cross-fitting (`models.crossfit`), or None when
        `selection_folds` resolves to fewer than two folds for this many rows. The callback is
        called once per epoch of every fold, with the main fit's last epoch and `stage`
        "crossfit" (progress stays complete; a caller records nothing new): returning True
        cancels here too."""
        from models.crossfit import choose_kind, out_of_fold, stratified_folds
        from models.seeding import DATA_SEED
        from models.selection import choose_restart

        k = auto_folds(self.selection_folds, len(data.y))
        if k < 2:
            return None
        rng = np.random.default_rng(DATA_SEED)  # the folds depend on the data only
        folds = stratified_folds(data.y, k, rng)
        n = self.budget_.total_epochs
        fold_info = {"epoch": n, "n_epochs": n, "val_score": None, "stage": "crossfit"}
        told = None if callback is None else lambda info: callback({**info, **fold_info})
        oof = out_of_fold(
            data.y, self.restart_kinds_, folds, lambda fit, held: self._train_fold(data, enc, seed, fit, held, told)
        )
        self.kind_scores_ = {kind: weighted_f1(data.y, pred) for kind, pred in oof.items()}
        usual = self.restart_kinds_[choose_restart(trained.training, trained.training)]
        self.kind_choice_ = choose_kind(data.y, oof, usual, rng)
        return self.kind_choice_.kind

    def _train_fold(
        self,
        data: TrainingData,
        enc: Encoded,
        seed: int,
        fit: np.ndarray,
        held: np.ndarray,
        callback: Callable[[dict[str, Any]], Any] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every restart initialised and trained on the `fit` rows as fit does (the callback told each
        epoch, to cancel): their training F1 there and their classes on the `held` rows."""
        import dataclasses

        import torch

        from models.stages import Encoded, Rows, initialise, train_restarts
        from models.training import Progress

        sub = Encoded(enc.encoder, [col[fit] for col in enc.raw], enc.Z[fit])
        every = np.arange(len(fit))
        two = sub.two_valued()[0]
        request = dataclasses.replace(self._budget_request(), n_restarts=self.budget_.n_restarts)
        budget = plan_budget(request, len(fit), len(fit), sub.Z.shape[1] - len(two), len(two))
        settings = self._seed_settings(len(data.classes))
        net, kinds = initialise(sub, data.y[fit], every, budget.n_restarts, settings, np.random.default_rng(seed))
        device = self._device()
        generators = (torch.Generator().manual_seed(seed), self._noise_generators(kinds, seed, device))
        rows = Rows(sub, data.y[fit], device)
        empty = np.zeros(0, dtype=np.int64)
        progress = Progress(budget.total_epochs, callback)
        trained = train_restarts(
            net.to(device), rows, (every, empty), budget, self._train_settings(), generators, progress
        )
        _, cls = trained.net.zero_temperature(torch.tensor(enc.Z[held], device=device))
        return trained.training, cls.cpu().numpy()

    @staticmethod
    def _noise_generators(kinds: tuple[str, ...], seed: int, device: torch.device) -> list[torch.Generator]:
        """One Gumbel-noise generator per restart: from random_state, or fixed for the tree kinds."""
        import torch

        from models.seeding import DATA_SEED, DETERMINISTIC

        seeds = [DATA_SEED + m if kind in DETERMINISTIC else seed + 1 + m for m, kind in enumerate(kinds)]
        return [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def _seed_settings(self, n_classes: int) -> Any:
        from models.stages import SeedSettings

        return SeedSettings(
            n_rules=int(self.n_rules),
            n_classes=n_classes,
            free_weight=float(self.free_weight),
            max_candidates=None if self.max_candidates is None else int(self.max_candidates),
            eps=float(self.eps),
        )

    def _train_settings(self) -> Any:
        from models.stages import TrainSettings
        from models.training import Objective

        return TrainSettings(
            objective=Objective(float(self.min_support), float(self.max_support), float(self.lambda_support)),
            lr=float(self.lr),
            t_pi=(float(self.t_pi[0]), float(self.t_pi[1])),
            t_rl=(float(self.t_rl[0]), float(self.t_rl[1])),
            max_conditions=int(self.max_conditions),
            smoothing=float(self.smoothing),
        )

    def _val_score(
        self, eval_set: tuple[Any, Any] | None, enc: Encoded, data: TrainingData, device: torch.device
    ) -> Callable[[SoftRuleList], float] | None:
        """Weighted F1 on eval_set of the best restart at zero temperature (None without one)."""
        if eval_set is None:
            return None
        import torch

        from models.encoding import to_frame

        Zv = torch.tensor(enc.encoder.transform(to_frame(eval_set[0], self._feature_names)), dtype=torch.float32)
        Zv = Zv.to(device)
        yv = check_targets(eval_set[1])
        if len(yv) != len(Zv):  # checked before training, not at the first scoring epoch
            raise ValueError(f"eval_set: X has {len(Zv)} rows but y has {len(yv)} labels")
        classes = data.classes

        def score(net: SoftRuleList) -> float:
            _, cls = net.zero_temperature(Zv)
            return max(weighted_f1(yv, classes[c]) for c in cls.cpu().numpy())

        return score

    def _metadata(self, seed: int, n_train: int, extra: Mapping[str, Any]) -> dict[str, Any]:
        params = {k: _json_param(v) for k, v in self.get_params().items()}
        return {"learner": "NeuRules", "params": params, "seed": seed, "n_train": n_train, **extra}

    def _select(self, trained: Trained, enc: Encoded) -> int:
        """The select stage: keep the restart with the best held-out score (the networks decide
        as their lists do, so only the kept one is extracted)."""
        from models.crossfit import best_within_kinds
        from models.selection import choose_restart

        chosen = choose_restart(trained.held_out, trained.training)
        if self.selected_kind_ is not None:
            chosen = best_within_kinds(self.restart_kinds_, trained.training)[self.selected_kind_]
        self.restart_ = chosen
        self.restart_scores_ = {"held_out": trained.held_out, "training": trained.training}
        self.network_ = trained.net.select(chosen)
        self.restart_networks_ = trained.net
        self.stage_networks_ = {name: net.select(chosen) for name, net in trained.snapshots.items()}
        self.encoder_ = enc.encoder
        self.loss_curve_ = trained.losses
        self.n_iter_ = self.budget_.total_epochs
        return chosen

    def _extract(self, chosen: int, trained: Trained, data: TrainingData, enc: Encoded, seed: int) -> RuleList:
        """The extract stage: the kept restart's network read off exactly as a rule list."""
        from models.extraction import extract_rule_list

        assert self.network_ is not None
        meta = self._metadata(
            seed,
            len(data.y),
            {
                "epochs": self.budget_.total_epochs,
                "device": str(self.network_.lower.device),
                "n_restarts": trained.net.n_models,
                "restart": chosen,
                "restart_kind": self.restart_kinds_[chosen],
                "held_out_f1": float(trained.held_out[chosen]),
            },
        )
        grids = enc.grids(np.arange(len(data.y)))
        return extract_rule_list(
            self.network_, enc.encoder, grids, data.frame, data.label_per_row, data.labels, float(self.smoothing), meta
        )

    def _fit_without_inputs(self, data: TrainingData, enc: Encoded, seed: int, t0: float) -> NeuRulesClassifier:
        """No usable input: the rule list is the default rule alone (nothing of an earlier fit kept)."""
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("_")]:
            delattr(self, name)  # budget_, restart_, split_, ... of a previous fit would describe another model
        self.rule_list_ = RuleList.build(
            classes=data.labels,
            features=enc.encoder.features(),
            rules=[],
            X=data.frame,
            y=data.label_per_row,
            smoothing=float(self.smoothing),
            metadata=self._metadata(seed, len(data.y), {"epochs": 0, "device": "cpu"}),
        )
        self.encoder_ = enc.encoder
        self.network_ = None
        self.restart_networks_ = None
        self.stage_networks_ = {}
        self.loss_curve_ = []
        self.n_iter_ = 0
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    # ---- prediction --------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if hasattr(self, "rule_list_"):
            return
        message = (
            f"This {type(self).__name__} instance is not fitted yet. "
            "Call 'fit' with appropriate arguments before using this estimator."
        )
        try:
            from sklearn.exceptions import NotFittedError
        except ImportError:  # pragma: no cover
            raise ValueError(message) from None
        raise NotFittedError(message)

    def _predict_frame(self, X: Any) -> pd.DataFrame:
        self._check_fitted()
        names_in = getattr(self, "feature_names_in_", None)
        frame = predict_frame(X, self._feature_names, None if names_in is None else list(names_in), type(self).__name__)
        if len(frame) == 0:
            raise ValueError(f"0 sample(s) (shape=(0, {frame.shape[1]})) while a minimum of 1 is required.")
        self.encoder_.raw_columns(frame)  # validates types / infinities like fit does
        return frame

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the matched rule; columns follow `classes_`."""
        frame = self._predict_frame(X)
        return np.asarray(self.rule_list_.predict_proba(frame))

    def predict(self, X: Any) -> np.ndarray:
        """Class of the matched rule (first class on ties)."""
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])

    def apply(self, X: Any) -> np.ndarray:
        """Id of the deciding rule per row (1..k, 0 = default rule)."""
        frame = self._predict_frame(X)
        return self.rule_list_.apply(frame)

    def network_rule_list(self, X: Any, y: Any, stage: str = "trained") -> RuleList:
        """The network of a stage read off exactly, with its own consequents (softmax of its
        logits): an audit copy that predicts as `predict_network(stage=stage)` on every row, up to
        rows exactly on a bound. X, y: the training rows (counts and threshold gaps). Stages after
        pruning only ("pruned", "trained", "final"); "annealed" is not yet a rule list."""
        from models.extraction import extract_rule_list
        from models.stages import encode_with

        frame = self._predict_frame(X)
        if stage not in STAGES[1:] or self.network_ is None:
            raise ValueError(f"stage must be one of {STAGES[1:]} of a fitted network, got {stage!r}")
        enc = encode_with(self.encoder_, frame)
        labels = document_labels(self.classes_)
        per_row = np.asarray([labels[i] for i in self._class_indices(y, len(frame))], dtype=object)
        grids = enc.grids(np.arange(len(frame)))
        net = self.stage_networks_[stage]
        return extract_rule_list(
            net, self.encoder_, grids, frame, per_row, labels, float(self.smoothing), {}, network_consequents=True
        )

    def _class_indices(self, y: Any, n_rows: int) -> list[int]:
        """Each label's index in `classes_`; ValueError for another length or an unknown label."""
        y_arr = check_targets(y)
        if len(y_arr) != n_rows:
            raise ValueError(f"X has {n_rows} rows but y has {len(y_arr)} labels")
        index = {c: i for i, c in enumerate(self.classes_)}
        unknown = sorted({repr(v.item() if isinstance(v, np.generic) else v) for v in y_arr if v not in index})
        if unknown:
            raise ValueError(f"y holds labels the model was not fitted on: {', '.join(unknown[:5])}")
        return [index[v] for v in y_arr]

    def predict_network(self, X: Any, stage: str = "trained") -> np.ndarray:
        """Classes of the kept restart's network at zero temperature, as gradient training left it
        (stage "trained": after its last optimiser step), or after another stage: "annealed" (the
        paper's annealed training), "pruned" (snapped and pruned), "tuned" (fine-tuned, and refit
        when rows were held out), "final" (consequents at their exact optimum: the network
        `rule_list_` is read off from). Never a network rebuilt from the list."""
        frame = self._predict_frame(X)
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        if self.network_ is None:
            return self.predict(frame)
        import torch

        net = self.stage_networks_[stage]
        Z = torch.tensor(self.encoder_.transform(frame), dtype=torch.float32, device=net.lower.device)
        _, cls = net.zero_temperature(Z)
        return np.asarray(self.classes_[cls[0].cpu().numpy()])
