"""`NeuRulesClassifier`: a scikit-learn compatible estimator whose model is a crisp rule list.

torch is imported inside `fit` only, so this module (and `models`) imports without it.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from models.encoding import TabularEncoder, to_frame
from models.metrics import weighted_f1
from models.rulelist import RuleList, json_label

# restarts="auto": as many restarts as keep batch * rules * (dense inputs + two-valued / 10)
# * restarts under this
RESTART_BUDGET = 1_000_000


# at most this many elements per step (batch * rules * restarts * effective inputs): wider data
# gets smaller batches, never below MIN_BATCH
MAX_STEP_WORK = 1_200_000
MIN_BATCH = 128


def _check_targets(y: Any) -> np.ndarray:
    """Validate a classification target; returns a 1-D array."""
    if y is None:
        raise ValueError("requires y to be passed, but the target y is None")
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        try:
            from sklearn.exceptions import DataConversionWarning as category
        except ImportError:  # scikit-learn is optional
            category = UserWarning  # type: ignore[assignment,misc]
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the shape of y "
            "to (n_samples, ), for example using ravel().",
            category,
            stacklevel=3,
        )
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {arr.shape} instead.")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError("Input y contains NaN or infinity.")
        if not np.all(arr == np.round(arr)):
            raise ValueError("Unknown label type: continuous. Only classification targets are supported.")
    if arr.dtype.kind == "O" and any(v is None or (isinstance(v, float) and math.isnan(v)) for v in arr):
        raise ValueError("Input y contains NaN or None.")
    return arr


def _split_scores(Z: np.ndarray, y: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Univariate score of each input: the best Gini gain of a one-threshold split at the
    1/8 .. 7/8 quantiles, measured on at most 4096 rows (cheap: one pass per threshold)."""
    n = Z.shape[0]
    rows = rng.choice(n, size=min(n, 4096), replace=False) if n > 4096 else np.arange(n)
    Zs, ys = Z[rows], y[rows]
    onehot = np.eye(n_classes)[ys]  # (s, C)
    tot = onehot.sum(axis=0)
    s = len(ys)
    gini0 = 1.0 - np.sum((tot / s) ** 2)
    thr = np.quantile(Zs, np.arange(1, 8) / 8.0, axis=0)  # (7, F)
    best = np.zeros(Z.shape[1])
    for t in thr:
        left = (Zs <= t).astype(np.float64)  # (s, F)
        lc = left.T @ onehot  # (F, C)
        nl = lc.sum(axis=1)
        nr = s - nl
        rc = tot[None, :] - lc
        gl = 1.0 - np.sum((lc / np.maximum(nl, 1)[:, None]) ** 2, axis=1)
        gr = 1.0 - np.sum((rc / np.maximum(nr, 1)[:, None]) ** 2, axis=1)
        gain = gini0 - (nl * gl + nr * gr) / s
        gain[(nl == 0) | (nr == 0)] = 0.0
        best = np.maximum(best, gain)
    return np.maximum(best, 0.0)


class NeuRulesClassifier:
    """NeuRules: learns a crisp rule list by gradient descent on its continuous relaxation.

    Parameters
    ----------
    n_rules: maximum number of rules (besides the default rule).
    epochs: passes over the training data; "auto" picks enough epochs for about
        `target_steps` optimiser steps (clipped to [min_epochs, max_epochs]).
    batch_size, lr: mini-batch size (smaller for very wide data, so that one step's work stays
        bounded) and Adam learning rate.
    min_support, max_support, lambda_support: the support regulariser's bounds and weight.
    t_pi, t_rl: (start, end) temperatures of the predicates and of the rule selector; both are
        annealed linearly over the second half of training (consequents frozen in the first half).
    eps: slack of the relaxed conjunction.
    smoothing: additive smoothing of the rule probabilities measured on training rows.
    init: "range" (every predicate starts as the whole training range, as the authors) or
        "quantile" (each rule starts on a random quantile box over two features, the other
        predicates on the whole range).
    seed_features: how the two features of each rule's quantile box are drawn: "uniform", or
        "score" (even restarts draw them with probability proportional to the squared best Gini
        gain of a one-threshold split of the feature, odd restarts uniformly).
    free_weight: start weight of the predicates that are not a rule's seed (seeds start at 0.5).
    max_candidates: on wide data (more than 4 * max_candidates inputs) only the max_candidates
        inputs with the best univariate score (and each rule's seeds) start with a weight; the
        others start at 0 and stay off, so hundreds of noise features cannot enter the rules.
        None: no restriction.
    consequent_init: class of each rule's initial (first-half frozen) consequent: "cycle" (the
        classes in turn), "lift" (the class most over-represented in the rule's initial box, so
        minority-class rules start where that class is), or "mixed" (restarts alternate).
    n_restarts: independent rule lists trained together in one tensor program; the one whose
        crisp rule list has the best weighted F1 on the training rows is kept. "auto" uses as many
        (at most `max_restarts`) as fit a fixed compute budget, so small data sets get several
        and large ones one.
    device: "auto" (CUDA when available), "cpu", "cuda", ...
    n_threads: CPU threads for torch during fit; None means one (the per-step tensors are small:
        thread synchronisation costs more than it saves, and badly so on a shared machine). The
        previous setting is restored after fit.
    random_state: seed for initialisation, shuffling and the Gumbel noise.

    Defaults versus the authors' runs (500 epochs, batch 2048, lr 0.01, min support 0.2, lambda
    0.4, t_pi 0.2 -> 0.04, t_rl 1.0 -> 0.2, annealed over the second half, consequents frozen in
    the first half): the temperatures, lambda, schedule and freezing are theirs; training is
    counted in optimiser steps (about 600, batch 1024, lr 0.02) instead of 500 epochs, which fits
    a 20 s budget on two CPU cores at equal or better F1; min support 0.02 (ten rules cannot each
    hold 20 % of the rows of a first-match list); several restarts are trained at once on small
    data and the best crisp list on the training rows is kept.
    """

    def __init__(
        self,
        n_rules: int = 10,
        epochs: int | str = "auto",
        batch_size: int = 1024,
        lr: float = 0.02,
        min_support: float = 0.02,
        max_support: float = 0.9,
        lambda_support: float = 0.4,
        t_pi: tuple[float, float] = (0.2, 0.04),
        t_rl: tuple[float, float] = (1.0, 0.2),
        eps: float = 1e-3,
        smoothing: float = 1.0,
        init: str = "quantile",
        seed_features: str = "uniform",
        free_weight: float = 0.5,
        max_candidates: int | None = 32,
        consequent_init: str = "mixed",
        n_restarts: int | str = "auto",
        max_restarts: int = 8,
        target_steps: int = 600,
        min_epochs: int = 20,
        max_epochs: int = 300,
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
        self.init = init
        self.seed_features = seed_features
        self.free_weight = free_weight
        self.max_candidates = max_candidates
        self.consequent_init = consequent_init
        self.n_restarts = n_restarts
        self.max_restarts = max_restarts
        self.target_steps = target_steps
        self.min_epochs = min_epochs
        self.max_epochs = max_epochs
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
                    f"Invalid parameter {key!r} for estimator {type(self).__name__}. Valid parameters are: {sorted(valid)!r}."
                )
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {
            p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values() if p.name != "self"
        }
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

    def score(self, X: Any, y: Any) -> float:
        """Accuracy of `predict(X)` against y."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # ---- fitting -----------------------------------------------------------------------------

    def _validate_params(self) -> None:
        if not isinstance(self.n_rules, (int, np.integer)) or self.n_rules < 1:
            raise ValueError(f"n_rules must be a positive int, got {self.n_rules!r}")
        if not (self.epochs == "auto" or (isinstance(self.epochs, (int, np.integer)) and self.epochs >= 1)):
            raise ValueError(f"epochs must be a positive int or 'auto', got {self.epochs!r}")
        if not isinstance(self.batch_size, (int, np.integer)) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        if not self.lr > 0:
            raise ValueError("lr must be > 0")
        if not (0 <= self.min_support <= self.max_support <= 1):
            raise ValueError("need 0 <= min_support <= max_support <= 1")
        if self.lambda_support < 0:
            raise ValueError("lambda_support must be >= 0")
        for name in ("t_pi", "t_rl"):
            t = getattr(self, name)
            if len(t) != 2 or min(t) <= 0:
                raise ValueError(f"{name} must be a (start, end) pair of positive temperatures")
        if self.eps <= 0 or self.smoothing < 0:
            raise ValueError("eps must be > 0 and smoothing >= 0")
        if self.init not in ("range", "quantile"):
            raise ValueError("init must be 'range' or 'quantile'")
        if self.seed_features not in ("uniform", "score"):
            raise ValueError("seed_features must be 'uniform' or 'score'")
        if not (0 < self.free_weight <= 1):
            raise ValueError("free_weight must be in (0, 1]")
        if self.max_candidates is not None and (
            not isinstance(self.max_candidates, (int, np.integer)) or self.max_candidates < 1
        ):
            raise ValueError("max_candidates must be a positive int or None")
        if self.consequent_init not in ("cycle", "lift", "mixed"):
            raise ValueError("consequent_init must be 'cycle', 'lift' or 'mixed'")
        if not (self.n_restarts == "auto" or (isinstance(self.n_restarts, (int, np.integer)) and self.n_restarts >= 1)):
            raise ValueError("n_restarts must be a positive int or 'auto'")
        if not isinstance(self.max_restarts, (int, np.integer)) or self.max_restarts < 1:
            raise ValueError("max_restarts must be a positive int")

    def _resolve_device(self) -> Any:
        import torch

        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def _frame(self, X: Any, fitting: bool) -> pd.DataFrame:
        """Input as a DataFrame with the training column names; checks names and width."""
        if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
            raise TypeError("Sparse data is not supported: pass a dense array or a DataFrame.")
        if isinstance(X, pd.DataFrame):
            has_names = all(isinstance(c, str) for c in X.columns)
            if fitting:
                if len(X.columns) and not has_names:
                    X = X.copy()
                    X.columns = [f"x{i}" for i in range(X.shape[1])]
                return X
            if getattr(self, "feature_names_in_", None) is not None:
                if not has_names or list(X.columns) != list(self.feature_names_in_):
                    raise ValueError(
                        "The feature names should match those that were passed during fit. "
                        f"Expected {list(self.feature_names_in_)}, got {list(X.columns)}."
                    )
                return X
            if has_names and len(X.columns):
                warnings.warn(
                    f"X has feature names, but {type(self).__name__} was fitted without feature names",
                    UserWarning,
                    stacklevel=3,
                )
            X = X.copy()
            X.columns = [f"x{i}" for i in range(X.shape[1])]
            if X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has {X.shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} features as input."
                )
            return X
        if isinstance(X, (dict, list)) and X and (isinstance(X, dict) or isinstance(X[0], dict)):
            return to_frame(X)
        arr = np.asarray(X)
        if arr.ndim != 2:
            to_frame(arr)  # raises the informative error
        if not fitting:
            if getattr(self, "feature_names_in_", None) is not None:
                warnings.warn(
                    f"X does not have valid feature names, but {type(self).__name__} was fitted with feature names",
                    UserWarning,
                    stacklevel=3,
                )
            if arr.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has {arr.shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} features as input."
                )
            return to_frame(arr, list(self._feature_names))
        return to_frame(arr)

    def _epochs_for(self, n: int, batch_size: int | None = None) -> int:
        if self.epochs != "auto":
            return int(self.epochs)
        bs = int(batch_size if batch_size is not None else self.batch_size)
        per_epoch = max(1, math.ceil(n / max(1, min(bs, n))))
        return int(
            min(
                self.max_epochs,
                max(self.min_epochs, math.ceil(self.target_steps / per_epoch)),
            )
        )

    def fit(
        self,
        X: Any,
        y: Any,
        callback: Callable[[dict[str, Any]], Any] | None = None,
        eval_set: tuple[Any, Any] | None = None,
    ) -> NeuRulesClassifier:
        """Train the network, extract the crisp rule list into `rule_list_`; returns self.

        callback(progress) is called once per epoch with epoch, n_epochs, loss, val_score
        (weighted F1 on eval_set every few epochs, else None); returning True cancels training
        and raises `TrainingCancelled`.
        """
        import torch

        from models.extraction import extract_rule_list, rule_ids_from_selection
        from models.network import SoftRuleList
        from models.training import TrainConfig, train

        self._validate_params()
        t0 = time.perf_counter()
        df = self._frame(X, fitting=True)
        y_arr = _check_targets(y)
        if df.shape[1] == 0:
            raise ValueError(f"0 feature(s) (shape=({df.shape[0]}, 0)) while a minimum of 1 is required.")
        if len(df) == 0:
            raise ValueError(f"0 sample(s) (shape=(0, {df.shape[1]})) while a minimum of 1 is required.")
        if len(y_arr) != len(df):
            raise ValueError(f"Found input variables with inconsistent numbers of samples: [{len(df)}, {len(y_arr)}]")
        classes, y_idx = np.unique(y_arr, return_inverse=True)
        if len(classes) < 2:
            raise ValueError("Classifier can't train when only one class is present.")
        for name in ("feature_names_in_",):
            if hasattr(self, name):
                delattr(self, name)
        if isinstance(X, pd.DataFrame) and all(isinstance(c, str) for c in X.columns):
            self.feature_names_in_ = np.asarray(list(X.columns), dtype=object)
        self._feature_names = [str(c) for c in df.columns]
        self.n_features_in_ = df.shape[1]
        self.classes_ = classes
        doc_classes = [json_label(c) for c in classes]
        if len(set(map(repr, doc_classes))) != len(doc_classes):
            doc_classes = [str(c) for c in classes]

        encoder = TabularEncoder().fit(df)
        raw = encoder.raw_columns(df)
        Z64 = encoder.transform(df, raw)
        n, n_units = Z64.shape
        device = self._resolve_device()
        seed = int(self.random_state) if self.random_state is not None else int(np.random.randint(0, 2**31 - 1))
        rng = np.random.default_rng(seed)
        cfg = TrainConfig(
            epochs=self._epochs_for(n),
            batch_size=int(self.batch_size),
            lr=float(self.lr),
            min_support=float(self.min_support),
            max_support=float(self.max_support),
            lambda_support=float(self.lambda_support),
            t_pi=(float(self.t_pi[0]), float(self.t_pi[1])),
            t_rl=(float(self.t_rl[0]), float(self.t_rl[1])),
        )
        n_classes = len(classes)
        k = int(self.n_rules)

        if n_units == 0:
            # nothing to condition on: the rule list is the default rule alone
            net = None
            losses: list[float] = []
        else:
            Zt = torch.tensor(Z64, dtype=torch.float32, device=device)
            yt = torch.tensor(y_idx, dtype=torch.long, device=device)
            two = [f for f in range(n_units) if len(np.unique(Z64[:, f])) == 2]
            n_models = self._restarts_for(n, n_units - len(two), len(two), cfg.batch_size)
            # wide data: smaller batches keep the work of one step bounded (same number of steps)
            width = k * n_models * (n_units - len(two) + 0.1 * len(two) + 1)
            cfg.batch_size = int(min(cfg.batch_size, max(MIN_BATCH, MAX_STEP_WORK // width)))
            cfg.epochs = self._epochs_for(n, cfg.batch_size)
            prior = np.bincount(y_idx, minlength=n_classes) / n
            order = np.argsort(-prior, kind="stable")
            lowers, uppers, prios, logit_list, weights = [], [], [], [], []
            feat_p = None
            free = np.full(n_units, float(self.free_weight))
            scores = None
            if self.init == "quantile" and (
                self.seed_features == "score" or (self.max_candidates is not None and n_units > 4 * self.max_candidates)
            ):
                scores = _split_scores(Z64, y_idx, n_classes, rng)
            if scores is not None and self.seed_features == "score":
                feat_p = scores**2
                feat_p = feat_p / feat_p.sum() if feat_p.sum() > 0 else None
            if scores is not None and self.max_candidates is not None and n_units > 4 * self.max_candidates:
                # wide data: only the best-scoring inputs (and each rule's seeds) start on;
                # the others start at weight 0 and stay off
                top = np.argsort(-scores, kind="stable")[: int(self.max_candidates)]
                mask = np.zeros(n_units, dtype=bool)
                mask[top] = True
                free = np.where(mask, free, 0.0)
            for m_ in range(n_models):
                # even restarts seed their boxes on features drawn by univariate score, odd
                # ones uniformly (one restart: by score)
                lower, upper, seeded = self._initial_bounds(Z64, k, rng, feat_p if m_ % 2 == 0 else None)
                weights.append(np.where(seeded, 0.5, free[None, :]))
                prio = rng.random(k)
                prio = prio - prio.min() + 1.0
                logits = np.zeros((k + 1, n_classes))
                mode = self.consequent_init
                if mode == "mixed":  # restarts alternate between the two initialisations
                    mode = "cycle" if len(lowers) % 2 == 0 else "lift"
                classes_j = self._initial_classes(mode, Z64, y_idx, lower, upper, prior, order, rng)
                for j in range(k):
                    logits[j, classes_j[j]] = 1.0
                logits[k] = np.log(prior + 1e-6)
                lowers.append(lower)
                uppers.append(upper)
                prios.append(prio)
                logit_list.append(logits)
            net = SoftRuleList(
                n_units,
                k,
                n_classes,
                torch.tensor(np.stack(lowers)),
                torch.tensor(np.stack(uppers)),
                torch.tensor(np.stack(prios)),
                torch.tensor(np.stack(logit_list)),
                eps=float(self.eps),
            ).to(device)
            with torch.no_grad():
                net.weight.copy_(torch.tensor(np.stack(weights), dtype=torch.float32))
            if two:
                vals = np.array([np.unique(Z64[:, f]) for f in two], dtype=np.float32)
                net.set_two_valued(
                    torch.tensor(two),
                    torch.tensor(vals[:, 0]),
                    torch.tensor(vals[:, 1]),
                )
            shuffle_gen = torch.Generator().manual_seed(seed)
            noise_gen = torch.Generator(device=device).manual_seed(seed + 1)
            val_fn = None
            if eval_set is not None:
                Xv_df = to_frame(eval_set[0], self._feature_names)
                Zv = torch.tensor(encoder.transform(Xv_df), dtype=torch.float32, device=device)
                yv = np.asarray(eval_set[1])

                def val_fn() -> float:
                    _, cls = net.zero_temperature(Zv)
                    return max(weighted_f1(yv, classes[c]) for c in cls.cpu().numpy())

            threads_before = torch.get_num_threads()
            threads = self.n_threads
            if threads is None and device.type == "cpu":
                threads = 1
            t_prep = time.perf_counter()
            try:
                if threads:
                    torch.set_num_threads(int(threads))
                losses = train(
                    net,
                    Zt,
                    yt,
                    cfg,
                    shuffle_gen,
                    noise_gen,
                    callback=callback,
                    val_score=val_fn,
                )
            finally:
                torch.set_num_threads(threads_before)

        t_train = time.perf_counter()
        metadata = {
            "learner": "NeuRules",
            "params": {k_: (list(v) if isinstance(v, tuple) else v) for k_, v in self.get_params().items()},
            "seed": seed,
            "n_train": int(n),
            "epochs": cfg.epochs,
            "device": str(device),
        }
        if net is None:
            from models.rulelist import FORMAT, VERSION, smoothed_probabilities

            cc = [int(c) for c in np.bincount(y_idx, minlength=n_classes)]
            doc = {
                "format": FORMAT,
                "version": VERSION,
                "target": "target",
                "classes": doc_classes,
                "features": encoder.feature_dicts(),
                "rules": [],
                "default": {
                    "class_counts": cc,
                    "probabilities": list(smoothed_probabilities(cc, float(self.smoothing))),
                },
                "smoothing": float(self.smoothing),
                "metadata": metadata,
            }
            self.train_agreement_ = 1.0
        else:
            best = None
            Z32 = Z64.astype(np.float32)
            for m in range(net.n_models):
                sub = net.select(m)
                doc_m, pred_m = extract_rule_list(
                    sub,
                    encoder,
                    Z32,
                    raw,
                    y_idx,
                    doc_classes,
                    float(self.smoothing),
                    "target",
                    metadata,
                )
                score = weighted_f1(y_idx, pred_m)
                if best is None or score > best[0]:
                    best = (score, m, doc_m, sub)
            assert best is not None
            _, chosen, doc, net = best
            doc["metadata"]["restart"] = chosen
            doc["metadata"]["n_restarts"] = len(lowers)
        t_extract = time.perf_counter()
        self.rule_list_ = RuleList.from_dict(doc)
        self.encoder_ = encoder
        self.network_ = net
        self.loss_curve_ = losses
        self.n_iter_ = cfg.epochs
        if net is not None:
            sel, cls = net.zero_temperature(Zt)
            sel, net_pred = sel[0], cls[0].cpu().numpy()
            crisp_ids = self.rule_list_.apply(df)
            crisp_pred = np.argmax(self.rule_list_._probability_table(), axis=1)[crisp_ids]
            self.train_agreement_ = float(np.mean(net_pred == crisp_pred))
            self.train_rule_agreement_ = float(np.mean(rule_ids_from_selection(net, sel.cpu().numpy()) == crisp_ids))
        t_end = time.perf_counter()
        self.fit_seconds_ = t_end - t0
        self.timings_ = {
            "prepare": (t_prep - t0) if net is not None else t_train - t0,
            "train": (t_train - t_prep) if net is not None else 0.0,
            "extract": t_extract - t_train,
            "check": t_end - t_extract,
        }
        return self

    def _restarts_for(self, n: int, n_dense: int, n_two: int, batch_size: int) -> int:
        if self.n_restarts != "auto":
            return int(self.n_restarts)
        work = min(batch_size, n) * int(self.n_rules) * (n_dense + 0.1 * n_two + 1)
        return int(min(self.max_restarts, max(1, RESTART_BUDGET // max(1.0, work))))

    def _initial_classes(
        self,
        mode: str,
        Z: np.ndarray,
        y: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        prior: np.ndarray,
        order: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Class of each rule's initial consequent: "cycle" gives the classes in turn (most
        frequent first); "lift" gives each rule the class most over-represented (relative to its
        prior) among the training rows inside its initial box."""
        k = lower.shape[0]
        if mode == "cycle":
            return np.array([order[j % len(prior)] for j in range(k)])
        sample = rng.choice(Z.shape[0], size=min(Z.shape[0], 4096), replace=False)
        Zs, ys = Z[sample], y[sample]
        out = np.empty(k, dtype=np.int64)
        for j in range(k):
            inside = np.all((Zs >= lower[j]) & (Zs <= upper[j]), axis=1)
            if not inside.any():
                out[j] = order[j % len(prior)]
                continue
            freq = np.bincount(ys[inside], minlength=len(prior)) / inside.sum()
            out[j] = int(np.argmax(freq / np.maximum(prior, 1e-12)))
        return out

    def _initial_bounds(
        self,
        Z: np.ndarray,
        k: int,
        rng: np.random.Generator,
        feat_p: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Initial (lower, upper) per rule and input, and which (rule, input) were seeded."""
        zmin, zmax = Z.min(axis=0), Z.max(axis=0)
        lower = np.tile(zmin, (k, 1))
        upper = np.tile(zmax, (k, 1))
        seeded = np.zeros((k, Z.shape[1]), dtype=bool)
        if self.init == "range":
            seeded[:] = True
        if self.init == "quantile":
            n_units = Z.shape[1]
            for j in range(k):
                m = min(n_units, 2)
                if feat_p is not None:
                    m = min(m, int(np.count_nonzero(feat_p)))
                feats = rng.choice(n_units, size=m, replace=False, p=feat_p)
                seeded[j, feats] = True
                for f in feats:
                    q = np.sort(rng.random(2))
                    lower[j, f], upper[j, f] = np.quantile(Z[:, f], q)
        return lower, upper, seeded

    # ---- prediction --------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "rule_list_"):
            try:
                from sklearn.exceptions import NotFittedError
            except ImportError:  # pragma: no cover
                NotFittedError = ValueError  # type: ignore[assignment,misc]
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with appropriate arguments before using this estimator."
            )

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the matched rule; columns follow `classes_`."""
        self._check_fitted()
        df = self._frame(X, fitting=False)
        if len(df) == 0:
            raise ValueError(f"0 sample(s) (shape=(0, {df.shape[1]})) while a minimum of 1 is required.")
        self.encoder_.raw_columns(df)  # validates types / infinities like fit does
        return self.rule_list_.predict_proba(df)

    def predict(self, X: Any) -> np.ndarray:
        """Class of the matched rule (first class on ties)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def apply(self, X: Any) -> np.ndarray:
        """Id of the deciding rule per row (1..k, 0 = default rule)."""
        self._check_fitted()
        return self.rule_list_.apply(self._frame(X, fitting=False))
