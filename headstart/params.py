"""The single source of training parameters and their defaults.

The Python API (:class:`headstart.OvAClassifier`), the command line and the distributed
backend all build a :class:`TrainParams`; it is validated once, here, at the boundary,
and saved in the model manifest so that a model always says how it was made.

Defaults follow LIBLINEAR's primal Newton solver (newton.cpp, linear.cpp, v2.4x) and the
paper (Schultheis & Babbar, section 4 and supplementary).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Collection

from ._threads import usable_cores
from .errors import ParameterError


# The choices of loss, regulariser, initialiser and weighting come from their registries
# (one module per strategy, see headstart/objective/losses, .../regularizers, headstart/init,
# headstart/objective/weighting.py); they are looked up lazily because those packages
# import this module.
def loss_names() -> tuple[str, ...]:
    from .objective import losses
    return losses.NAMES


def regularizer_names() -> tuple[str, ...]:
    from .objective import regularizers
    return regularizers.NAMES


def init_names() -> tuple[str, ...]:
    from . import init
    return init.NAMES


def weighting_names() -> tuple[str, ...]:
    from .objective import weighting
    return weighting.NAMES


def __getattr__(name):
    if name == "LOSSES":
        return loss_names()
    if name == "INITS":
        return init_names()
    raise AttributeError(name)


#: feature value transforms, DiSMEC++'s ``--transform`` names (src/data/transform.h)
#: exact L1's coordinate-descent methods (training/coordinate.py)
L1_SOLVERS = ("newglmnet", "cdn")
#: L2's methods: the primal Newton-CG core (the paper's), or dual coordinate descent
L2_SOLVERS = ("newton", "dual")
#: share_lanes: whether threads share 16 lanes in teams (training/budget.py, share_lanes)
SHARE_LANES = ("auto", "yes", "no")
TRANSFORMS = ("identity", "log-one-plus", "one-plus-log", "sqrt")
#: hashed feature ids are int32, like every feature id (headstart.io)
MAX_HASHED_FEATURES = 2**31 - 1


@dataclass(frozen=True)
class TrainParams:
    """Every option of training, with its default.

    Attributes are documented in the ``metadata["help"]`` of each field, which the CLI
    also uses for its ``--help`` text, so the two can never disagree.
    """

    loss: str = field(default="squared-hinge", metadata={
        "help": "margin loss phi(m) (docs/objective.md, 'Losses')"})
    huber_epsilon: float = field(default=1.0, metadata={
        "help": "huber-hinge: width of the parabola below margin 1 (DiSMEC++: 1 for huber-hinge, 0.1 for its hinge)"})
    C: float = field(default=1.0, metadata={
        "help": "weight of the loss term: reg_scale*R(w) + C*sum_i c_i phi(y_i w.x_i)"})
    regularizer: str = field(default="l2", metadata={
        "help": "R(w): l2 (||w||^2/2), l1 / l1-relaxed / huber (Huber, epsilon 0.01 / 0.1 / 1), "
                "elastic-50-50, elastic-90-10, elastic-net (Huber-L1 + L2 mixes), l1-exact (|w|, LIBLINEAR "
                "-s 5 / -s 6: coordinate descent from zero, exactly sparse weights)"})
    l1_solver: str = field(default="newglmnet", metadata={
        "help": "l1-exact's method: newglmnet (LIBLINEAR -s 6's, for every loss) or cdn (one-variable Newton "
                "steps, LIBLINEAR -s 5's: its solutions at the same epsilon; docs/objective.md, 'Exact L1')"})
    l2_solver: str = field(default="newton", metadata={
        "help": "l2's method: newton (primal Newton-CG from --init, the paper's and DiSMEC's) or dual (dual "
                "coordinate descent from zero, LIBLINEAR -s 1 / -s 3 / -s 7: squared-hinge, hinge, huber-hinge -- "
                "huber-epsilon 0 is the exact hinge --, logistic, a regularised bias; --epsilon is then the dual "
                "rule's, LIBLINEAR's default there 0.1; docs/objective.md, 'Dual')"})
    reg_scale: float = field(default=1.0, metadata={
        "help": "scale of the regulariser (DiSMEC++ --reg-scale; equivalent to C/reg_scale)"})
    reg_epsilon: float | None = field(default=None, metadata={
        "help": "epsilon of the Huber part of the regulariser (default: the regulariser's preset)"})
    reg_l2_share: float = field(default=0.5, metadata={
        "help": "elastic-net: share of the L2 part (0 = Huber-L1 only, 1 = L2 only)"})
    weighting: str = field(default="none", metadata={
        "help": "instance costs per label for missing labels: none, 2pm1 (positives 2/p-1), "
                "p2mp (negatives p/(2-p)), file (--weights-pos-file / --weights-neg-file), "
                "constant (--weight-pos / --weight-neg)"})
    propensity_a: float = field(default=0.55, metadata={"help": "propensity model A (Jain et al. 2016)"})
    propensity_b: float = field(default=1.5, metadata={"help": "propensity model B (Jain et al. 2016)"})
    weights_pos_file: str | None = field(default=None, metadata={
        "help": "weighting=file: one positive cost per label (.npy vector or whitespace-separated text)"})
    weights_neg_file: str | None = field(default=None, metadata={
        "help": "weighting=file: one negative cost per label (.npy vector or whitespace-separated text)"})
    weight_pos: float = field(default=1.0, metadata={
        "help": "weighting=constant: every label's positive cost (LIBLINEAR -w1)"})
    weight_neg: float = field(default=1.0, metadata={
        "help": "weighting=constant: every label's negative cost (LIBLINEAR -w-1)"})
    epsilon: float = field(default=0.01, metadata={
        "help": "stop when ||grad f(w)|| <= epsilon*max(min(#pos,#neg),1)/n*||grad f(0)|| (LIBLINEAR's rule)"})
    max_iter: int = field(default=1000, metadata={"help": "maximum Newton iterations per label (newGLMNET "
                                                          "iterations or CDN cycles with l1-exact)"})
    init: str = field(default="aop", metadata={
        "help": "initial weights; aop, the average of positives (the paper), by default "
                "(docs/objective.md, 'Initialisers')"})
    aop_s: float = field(default=1.0, metadata={"help": "aop: score of the mean positive, <w0, mean(P)> = s"})
    aop_t: float = field(default=-2.0, metadata={"help": "aop: score of the mean negative, <w0, mean(N)> = t"})
    max_num_pos: int = field(default=1, metadata={
        "help": "multi-pos init: labels with at most this many positives get the per-positive start"})
    bias_init: float = field(default=-1.0, metadata={
        "help": "bias init: initial bias weight (the paper compares -1, -0.9 and -2)"})
    ovap_epsilon: float = field(default=0.01, metadata={
        "help": "ovap: the all-negative problem stops at ||grad|| <= ovap_epsilon*||grad f(0)|| (loose, paper section 3)"})
    # (in Python also weights in memory: a fitted OvAClassifier, an OvAModel or (coef, intercept),
    # held as init.pretrained.InMemoryWeights -- see __post_init__ and docs/objective.md)
    pretrained: Any = field(default=None, metadata={
        "help": "pretrained init: model directory whose weights start the same labels"})
    bias: float = field(default=1.0, metadata={
        "help": "value of the bias feature appended to every instance (0 disables the bias)"})
    regularize_bias: bool = field(default=False, metadata={
        "help": "include the bias weight in the regulariser (True = LIBLINEAR's -B 1 exactly; False = its -R)"})
    prune: float = field(default=0.01, metadata={
        "help": "after solving, set weights with |w| < prune to zero (0 disables); an absolute threshold, "
                "DiSMEC's, for unit-norm (tf-idf) rows: on features of a large scale use --normalize or 0"})
    sparsify: float = field(default=0.0, metadata={
        "help": "instead of --prune: per label a pruning threshold, found by bisection over its weights' "
                "magnitudes, whose objective grows by at most this many percent (DiSMEC++ --sparsify; 0 = off)"})
    timeout: float = field(default=0.0, metadata={
        "help": "time budget in seconds (on the command line also 30m, 2h, 1d): no label starts after it; finished work "
                "is saved, and the command exits with code 3 if labels were left (--resume completes them; 0 = none)"})
    cg_epsilon: float = field(default=0.5, metadata={"help": "CG stops on LIBLINEAR's quadratic-model rule with this eps_cg"})
    pcg_alpha: float = field(default=0.01, metadata={
        "help": "preconditioner (1-alpha) + alpha*diag(H), 0 < alpha < 1"})
    ls_eta: float = field(default=0.01, metadata={"help": "Armijo constant of the backtracking line search"})
    ls_max_steps: int = field(default=20, metadata={"help": "maximum halvings in the line search"})
    direct_rows: int = field(default=128, metadata={
        "help": "shortlisted training: a sub-problem of at most this many rows (fewer than the data's) is solved "
                "by exact Newton steps in the span of its rows, O(rows^2) per step instead of O(columns) "
                "(0 = never; docs/shortlist.md)"})
    threads: int = field(default=0, metadata={"help": "label-parallel threads (0 = all cores this process may use: the affinity mask, a CPU quota; more run as asked, with a warning: each thread holds its own lane workspace)"})
    share_lanes: str = field(default="auto", metadata={
        "help": "whether threads share their lanes (the 16 labels one pass over X serves) in teams: "
                "auto (teams of four -- larger where those do not fit half the memory -- wherever X or a thread's "
                "16 lanes' buffers outgrow the cache, or where 16 lanes per thread do not fit: per thread 4 lanes' "
                "buffers instead of 16), yes (teams on small problems too), no (16 lanes per thread while they fit "
                "half the memory, else 8 or 1: on the Amazon-670K shape at 2 threads 0.84x the time with the "
                "logistic loss, 0.81-1.04x from zero, at 1.2x the peak memory: docs/design.md); "
                "the same weights bit for bit either way"})
    remove_no_label_data: bool = field(default=False, metadata={
        "help": "drop the training rows that have no label at all (in the whole label space) before anything "
                "else (LibMultiLabel's remove_no_label_data); by default they are kept, as negatives of every label"})
    normalize: bool = field(default=False, metadata={"help": "L2-normalise every row of X before training"})
    tfidf: bool = field(default=False, metadata={
        "help": "turn counts into tf-idf (log-scaled tf, idf from the training data, stored in the model)"})
    feature_transform: str = field(default="identity", metadata={
        "help": "feature value transform, applied after hashing and before tf-idf and normalisation, in training "
                "and prediction: identity, log-one-plus log(1+x), one-plus-log 1+log(x) for x>0 (zeros stay 0), "
                "sqrt"})
    hash_buckets: int = field(default=0, metadata={
        "help": "feature hashing: buckets per hash function (0 = no hashing); the model has "
                "hash_buckets*hash_functions features and predicting hashes the raw features the same way"})
    hash_functions: int = field(default=32, metadata={
        "help": "feature hashing: number of hash functions; each sends every feature to one bucket of its own "
                "block, colliding values add up (with hash_buckets > 0)"})
    hash_seed: int = field(default=42, metadata={
        "help": "feature hashing: seed of the hash functions, an integer in [0, 2^32) (with hash_buckets > 0)"})

    def __post_init__(self) -> None:
        # numpy scalars (np.int64(50), np.float32(0.5), np.bool_(True): what a grid of
        # GridSearchCV built with np.arange / np.logspace hands over) as the Python
        # numbers they stand for, so that the rules below and the JSON of a model see one type
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
                object.__setattr__(self, f.name, value.item())
            elif isinstance(value, os.PathLike):   # paths as the strings the model's JSON stores
                object.__setattr__(self, f.name, os.fspath(value))
        if self.pretrained is not None and not isinstance(self.pretrained, str):
            # weights in memory (a fitted estimator, a model, (coef, intercept)): checked
            # and held in the form a saved model has, once, here at the boundary
            from .init.pretrained import weight_source

            object.__setattr__(self, "pretrained", weight_source(self.pretrained))
        validate(self)

    # --- conversion -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if self.pretrained is not None and not isinstance(self.pretrained, str):
            # a start from weights in memory: the model's JSON says so (the weights are
            # not saved with it; reusing these parameters asks for a directory)
            from .init.pretrained import IN_MEMORY

            d["pretrained"] = IN_MEMORY
        return d

    def recorded(self) -> "TrainParams":
        """These parameters as a model records them: weights in memory (``pretrained``)
        by :data:`headstart.init.pretrained.IN_MEMORY` -- a trained model holding its
        start's arrays would keep them alive as long as itself."""
        if self.pretrained is None or isinstance(self.pretrained, str):
            return self
        from .init.pretrained import IN_MEMORY

        return dataclasses.replace(self, pretrained=IN_MEMORY)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainParams":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**d)

    @classmethod
    def from_liblinear(cls, options: str, **overrides: Any) -> "TrainParams":
        """The parameters of LIBLINEAR's ``train`` options, e.g. ``"-s 2 -c 4 -B 1"``
        (:mod:`headstart.liblinear`), with ``overrides`` on top; a class weight (-w1,
        -w-1) that an override leaves unread (``weighting="2pm1"``) is warned of."""
        import warnings

        from .liblinear import translate, unread_class_weights

        params = cls.from_dict({**translate(options), **overrides})
        for what in unread_class_weights(options, params, overrides):
            warnings.warn(f"{what}: ignored", UserWarning, stacklevel=2)
        return params

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "TrainParams":
        try:
            with open(path, encoding="utf-8") as fh:
                d = json.load(fh)
        except json.JSONDecodeError as e:
            raise ParameterError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
        except OSError as e:
            raise ParameterError(f"{path}: cannot read parameters: {e.strerror}") from None
        if not isinstance(d, dict):
            raise ParameterError(f"{path}: parameters must be a JSON object, got {type(d).__name__}")
        try:
            return cls.from_dict(d)
        except ParameterError as e:
            raise ParameterError(f"{path}: {e}") from None

    def replace(self, **changes: Any) -> "TrainParams":
        return dataclasses.replace(self, **changes)

    def effective_threads(self) -> int:
        return self.threads if self.threads > 0 else usable_cores()


def _need(cond: bool, name: str, rule: str, value: Any) -> None:
    if not cond:
        raise ParameterError(f"parameter {name} must be {rule}, got {value!r}")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def validate(p: TrainParams) -> None:
    """Check every rule; raise :class:`ParameterError` naming parameter, rule and value."""
    for name, choices in (("loss", loss_names()), ("init", init_names()), ("regularizer", regularizer_names()),
                          ("weighting", weighting_names())):
        _need(getattr(p, name) in choices, name, f"one of {', '.join(choices)}", getattr(p, name))
    if p.l2_solver == "dual" and p.regularizer == "l2":
        # the dual has no curvature to divide by: eps = 0 is the exact hinge (-s 3)
        _need(_finite(p.huber_epsilon) and p.huber_epsilon >= 0, "huber_epsilon",
              "a finite number >= 0 (0: the exact hinge, with l2_solver dual)", p.huber_epsilon)
    else:
        _need(_finite(p.huber_epsilon) and p.huber_epsilon > 0, "huber_epsilon",
              "a finite number > 0 (0, the exact hinge, only with l2_solver dual)", p.huber_epsilon)
    _need(_finite(p.reg_scale) and p.reg_scale > 0, "reg_scale", "a finite number > 0", p.reg_scale)
    _need(p.reg_epsilon is None or (_finite(p.reg_epsilon) and p.reg_epsilon > 0), "reg_epsilon",
          "a finite number > 0 (or null for the preset)", p.reg_epsilon)
    _need(_finite(p.reg_l2_share) and 0 <= p.reg_l2_share <= 1, "reg_l2_share", "a number in [0, 1]",
          p.reg_l2_share)
    # (metrics.propensities: p = 1 / (1 + (log N - 1)(B + 1)^A e^(-A log(n_l + B))) needs
    # A >= 0 for p to grow with the label's count)
    _need(_finite(p.propensity_a) and p.propensity_a >= 0, "propensity_a", "a finite number >= 0", p.propensity_a)
    _need(_finite(p.propensity_b) and p.propensity_b > -1, "propensity_b", "a finite number > -1", p.propensity_b)
    for name in ("weights_pos_file", "weights_neg_file"):
        v = getattr(p, name)
        if v is not None and not isinstance(v, str):   # an array would fail bool() below
            raise ParameterError(f"parameter {name} must be a file path (or None), got a {type(v).__name__}"
                                 + "; save the costs with numpy.save and pass the path")
    if p.weighting == "file":
        _need(bool(p.weights_pos_file) or bool(p.weights_neg_file), "weights_pos_file",
              "given (or weights_neg_file) when weighting='file'", p.weights_pos_file)
    _need(_finite(p.weight_pos) and p.weight_pos >= 0, "weight_pos", "a finite number >= 0", p.weight_pos)
    _need(_finite(p.weight_neg) and p.weight_neg >= 0, "weight_neg", "a finite number >= 0", p.weight_neg)
    _need(_int(p.max_num_pos) and p.max_num_pos >= 0, "max_num_pos", "an integer >= 0", p.max_num_pos)
    _need(_finite(p.sparsify) and 0 <= p.sparsify, "sparsify", "a finite number >= 0 (percent; 0 = off)",
          p.sparsify)
    _need(_finite(p.timeout) and 0 <= p.timeout, "timeout", "a finite number of seconds >= 0 (0 = none)",
          p.timeout)
    _need(_finite(p.C) and p.C > 0, "C", "a finite number > 0", p.C)
    _need(_finite(p.epsilon) and p.epsilon > 0, "epsilon", "a finite number > 0", p.epsilon)
    _need(_int(p.max_iter) and p.max_iter >= 1, "max_iter", "an integer >= 1", p.max_iter)
    _need(_finite(p.aop_s), "aop_s", "a finite number", p.aop_s)
    _need(_finite(p.aop_t), "aop_t", "a finite number", p.aop_t)
    _need(_finite(p.aop_t) and _finite(p.aop_s) and p.aop_t < p.aop_s, "aop_t",
          f"smaller than aop_s={p.aop_s!r} (the mean negative must score below the mean positive)", p.aop_t)
    _need(_finite(p.bias_init), "bias_init", "a finite number", p.bias_init)
    _need(_finite(p.ovap_epsilon) and p.ovap_epsilon > 0, "ovap_epsilon", "a finite number > 0", p.ovap_epsilon)
    _need(_finite(p.bias) and p.bias >= 0, "bias", "a finite number >= 0 (0 disables the bias feature)", p.bias)
    _need(isinstance(p.regularize_bias, bool), "regularize_bias", "true or false", p.regularize_bias)
    _need(_finite(p.prune) and p.prune >= 0, "prune", "a finite number >= 0", p.prune)
    _need(_finite(p.cg_epsilon) and 0 < p.cg_epsilon, "cg_epsilon", "a finite number > 0", p.cg_epsilon)
    # Open interval, as the authors' trainer requires: at alpha = 1 the preconditioner is
    # diag(H) alone, which is 0 on the unregularised bias of a label with no active
    # instance (e.g. one positive at score s = 1 and every negative below -1 after aop),
    # and CG divides by it.  alpha = 0 is no preconditioning at all.
    _need(_finite(p.pcg_alpha) and 0 < p.pcg_alpha < 1, "pcg_alpha", "a number in (0, 1)", p.pcg_alpha)
    _need(_finite(p.ls_eta) and 0 < p.ls_eta < 1, "ls_eta", "a number in (0, 1)", p.ls_eta)
    _need(_int(p.ls_max_steps) and p.ls_max_steps >= 1, "ls_max_steps", "an integer >= 1", p.ls_max_steps)
    _need(_int(p.direct_rows) and p.direct_rows >= 0, "direct_rows", "an integer >= 0", p.direct_rows)
    _need(_int(p.threads) and p.threads >= 0, "threads", "an integer >= 0 (0 = all cores)", p.threads)
    _need(p.share_lanes in SHARE_LANES, "share_lanes", f"one of {', '.join(SHARE_LANES)}", p.share_lanes)
    _need(isinstance(p.normalize, bool), "normalize", "true or false", p.normalize)
    _need(isinstance(p.remove_no_label_data, bool), "remove_no_label_data", "true or false", p.remove_no_label_data)
    _need(isinstance(p.tfidf, bool), "tfidf", "true or false", p.tfidf)
    _need(p.l1_solver in L1_SOLVERS, "l1_solver", f"one of {', '.join(L1_SOLVERS)}", p.l1_solver)
    _need(p.l2_solver in L2_SOLVERS, "l2_solver", f"one of {', '.join(L2_SOLVERS)}", p.l2_solver)
    if p.l2_solver == "dual" and p.regularizer == "l2" and p.loss in loss_names():
        from .objective import losses

        _need(losses.get(p.loss).has_dual, "l2_solver", "newton with loss " + repr(p.loss) + " (the dual solver "
              "takes " + ", ".join(n for n in loss_names() if losses.get(n).has_dual) + ")", p.l2_solver)
        _need(p.bias == 0 or p.regularize_bias, "regularize_bias",
              "true with l2_solver dual and a bias (the dual regularises the bias like LIBLINEAR -s 1 / 3 / 7 "
              "with -B; or bias 0)", p.regularize_bias)
    _need(p.feature_transform in TRANSFORMS, "feature_transform", f"one of {', '.join(TRANSFORMS)}",
          p.feature_transform)
    _need(_int(p.hash_buckets) and p.hash_buckets >= 0, "hash_buckets", "an integer >= 0 (0 = no hashing)",
          p.hash_buckets)
    _need(_int(p.hash_functions) and p.hash_functions >= 1, "hash_functions", "an integer >= 1", p.hash_functions)
    _need(_int(p.hash_seed) and 0 <= p.hash_seed < 2**32, "hash_seed", "an integer in [0, 2^32)", p.hash_seed)
    _need(p.hash_buckets * p.hash_functions <= MAX_HASHED_FEATURES, "hash_buckets",
          f"such that hash_buckets * hash_functions <= {MAX_HASHED_FEATURES} (feature ids are int32; "
          f"hash_functions={p.hash_functions})", p.hash_buckets)
    if p.regularizer in regularizer_names() and _solver_of(p) == "coordinate":
        _need(p.sparsify == 0, "sparsify", f"0 with regularizer {p.regularizer!r} (its weights are exactly sparse "
              "already; sparsify re-solves on the Newton path): use prune", p.sparsify)
    if p.regularizer == "l2" and p.l2_solver == "dual":
        _need(p.sparsify == 0, "sparsify", "0 with l2_solver dual (sparsify re-solves on the Newton path): use prune",
              p.sparsify)
    if p.init == "pretrained":
        from .init.pretrained import WeightSource

        _need((isinstance(p.pretrained, str) and p.pretrained != "") or isinstance(p.pretrained, WeightSource),
              "pretrained", "a model directory (or, in Python, weights in memory) when init='pretrained'",
              p.pretrained)
    if p.init == "bias":
        _need(p.bias > 0, "bias", "> 0 when init='bias' (the bias init needs a bias feature)", p.bias)


def _default_epsilon(p: TrainParams):
    from .objective import regularizers

    return regularizers.get(p.regularizer).default_epsilon


def _huber_regularizers() -> str:
    """The regularisers with a Huber part, from the registry (a new one is listed too)."""
    from .objective import regularizers

    return "with a Huber part (" + ", ".join(n for n, info in regularizers.REGISTRY.items()
                                              if info.default_epsilon is not None) + ")"


def method_of(p: TrainParams) -> str:
    """The method that trains with these parameters: "newton" (Newton-CG, the core),
    exact L1's coordinate descent, "newglmnet" or "cdn" (``l1_solver``), or L2's dual
    coordinate descent, "dual" (``l2_solver``)."""
    if _solver_of(p) == "coordinate":
        return p.l1_solver
    if p.regularizer == "l2" and p.l2_solver == "dual":
        return "dual"
    return "newton"


def _solver_of(p: TrainParams) -> str:
    """"newton" or "coordinate": which solver the regulariser takes (regularizers/base.py)."""
    from .objective import regularizers

    return regularizers.get(p.regularizer).solver


#: Parameters that only some choices of another parameter read: name -> (that parameter,
#: test of the parameters, the choices in words).  The command line warns about such an
#: option given where nothing reads it (DiSMEC++ refuses some of them; a file or a model
#: given for nothing is refused here too: :data:`UNUSED_IS_AN_ERROR`).
def _in(field: str, *names: str):
    return field, (lambda p: getattr(p, field) in names), " or ".join(names)


_NEWTON = "other than l1-exact, and l2_solver newton"


def _method_decider(p: TrainParams) -> str:
    """What leaves the Newton-CG method unused: l2_solver dual, else the regulariser."""
    return "l2_solver" if p.regularizer == "l2" and p.l2_solver == "dual" else "regularizer"


def _aop_decider(p: TrainParams) -> str:
    """What leaves aop's s and t unread: another start, else a method without starts."""
    if p.init not in ("aop", "multi-pos"):
        return "init"
    return "regularizer" if p.regularizer == "l1-exact" else "l2_solver"


# name -> (the parameter whose choices read it, whether it is read, those choices (or a
# function giving them)[, a function naming the parameter that leaves it unread, when that
# is not always the first])
READ_ONLY_WITH: dict[str, tuple] = {
    "huber_epsilon": _in("loss", "huber-hinge"),
    "reg_epsilon": ("regularizer", lambda p: _default_epsilon(p) is not None, _huber_regularizers),
    # exact L1 and the dual start every label from zero (training/coordinate.py)
    "init": ("regularizer", lambda p: method_of(p) == "newton" or p.init == "zero",
             "other than l1-exact, and l2_solver newton (l1-exact and the dual start from zero)", _method_decider),
    "reg_l2_share": _in("regularizer", "elastic-net"),
    "l1_solver": ("regularizer", lambda p: _solver_of(p) == "coordinate", "l1-exact"),
    "l2_solver": _in("regularizer", "l2"),
    "weights_pos_file": _in("weighting", "file"),
    "weights_neg_file": _in("weighting", "file"),
    "weight_pos": _in("weighting", "constant"),
    "weight_neg": _in("weighting", "constant"),
    "aop_s": ("init", lambda p: p.init in ("aop", "multi-pos") and method_of(p) == "newton",
              "aop or multi-pos (and the Newton-CG method: not l1-exact, not l2_solver dual)", _aop_decider),
    "aop_t": ("init", lambda p: p.init in ("aop", "multi-pos") and method_of(p) == "newton",
              "aop or multi-pos (and the Newton-CG method: not l1-exact, not l2_solver dual)", _aop_decider),
    # the Newton-CG method's settings; exact L1's newGLMNET keeps LIBLINEAR's (solver/glmnet.py)
    "cg_epsilon": ("regularizer", lambda p: method_of(p) == "newton", _NEWTON, _method_decider),
    "pcg_alpha": ("regularizer", lambda p: method_of(p) == "newton", _NEWTON, _method_decider),
    "ls_eta": ("regularizer", lambda p: method_of(p) == "newton", _NEWTON, _method_decider),
    "ls_max_steps": ("regularizer", lambda p: method_of(p) == "newton", _NEWTON, _method_decider),
    "max_num_pos": _in("init", "multi-pos"),
    "bias_init": _in("init", "bias"),
    "ovap_epsilon": _in("init", "ovap", "ovap-strict"),
    # exact L1 and the dual start every label from zero: a model given to start them is
    # read by nothing (it was ignored silently when init was implied by the model)
    "pretrained": ("init", lambda p: p.init == "pretrained" and method_of(p) == "newton",
                   "pretrained (and the Newton-CG method: not l1-exact, not l2_solver dual)",
                   lambda p: "init" if p.init != "pretrained" else _method_decider(p)),
    "prune": ("sparsify", lambda p: p.sparsify == 0, "0 (sparsify replaces pruning)"),
    "hash_functions": ("hash_buckets", lambda p: p.hash_buckets > 0, "> 0"),
    "hash_seed": ("hash_buckets", lambda p: p.hash_buckets > 0, "> 0"),
}
UNUSED_IS_AN_ERROR = ("weights_pos_file", "weights_neg_file", "pretrained")


def implied_choices(values: dict[str, Any], given: Collection[str]) -> dict[str, Any]:
    """``values`` with the choices that other given parameters imply where the choice
    itself is not ``given``: a pretrained model -> ``init`` "pretrained"; cost files ->
    ``weighting`` "file" (also from a parameters file that names no weighting); constant
    costs -> ``weighting`` "constant".  The command line's options and the estimator's
    parameters (given = those not at their defaults) alike."""
    out = dict(values)
    given = set(given)
    if _present(out.get("pretrained")) and "init" not in given and ("pretrained" in given or "init" not in out):
        out["init"] = "pretrained"
    files = {"weights_pos_file", "weights_neg_file"}
    if "weighting" not in given:
        if files & given or ("weighting" not in out and any(out.get(f) for f in files)):
            out["weighting"] = "file"
        elif {"weight_pos", "weight_neg"} & given:
            out["weighting"] = "constant"
    return out


def _present(v: Any) -> bool:
    """A value given for a path-or-weights parameter: not None or "" (not bool(v): weights
    in memory may be arrays, whose truth value numpy refuses)."""
    return v is not None and not (isinstance(v, str) and v == "")


def unused_message(p: TrainParams, name: str, by: str, choices: str, decided: str,
                   spell: Callable[[str], str] = str) -> str:
    """'NAME is read only with BY CHOICES; DECIDED is VALUE' (names through ``spell``)."""
    return f"{spell(name)} is read only with {spell(by)} {choices}; {spell(decided)} is {getattr(p, decided)!r}"


def unused_parameters(p: TrainParams, given) -> list[tuple[str, str, str, str]]:
    """(name, the parameter whose choices read it, those choices, the parameter that
    leaves it unread here) of every parameter in ``given`` that ``p``'s other choices
    leave unread."""
    out = []
    for name in given:
        rule = READ_ONLY_WITH.get(name)
        if rule is not None and not rule[1](p):
            choices = rule[2]() if callable(rule[2]) else rule[2]    # (a callable: read from a registry)
            out.append((name, rule[0], choices, rule[3](p) if len(rule) > 3 else rule[0]))
    return out


def param_help() -> dict[str, str]:
    return {f.name: f.metadata.get("help", "") for f in fields(TrainParams)}
