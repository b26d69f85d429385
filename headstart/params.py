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
from typing import Any

from .errors import ParameterError

LOSSES = ("squared-hinge", "logistic")
INITS = ("aop", "zero", "bias", "ovap", "ovap-strict", "pretrained")


@dataclass(frozen=True)
class TrainParams:
    """Every option of training, with its default.

    Attributes are documented in the ``metadata["help"]`` of each field, which the CLI
    also uses for its ``--help`` text, so the two can never disagree.
    """

    loss: str = field(default="squared-hinge", metadata={
        "help": "margin loss phi: squared-hinge max(0,1-m)^2 or logistic log(1+exp(-m))"})
    C: float = field(default=1.0, metadata={
        "help": "weight of the loss term: 0.5*||w||^2 + C*sum_i phi(y_i w.x_i)"})
    epsilon: float = field(default=0.01, metadata={
        "help": "stop when ||grad f(w)|| <= epsilon*max(min(#pos,#neg),1)/n*||grad f(0)|| (LIBLINEAR's rule)"})
    max_iter: int = field(default=1000, metadata={"help": "maximum Newton iterations per label"})
    init: str = field(default="aop", metadata={
        "help": "initial weights: aop (average of positives), zero, bias, ovap, ovap-strict, pretrained"})
    aop_s: float = field(default=1.0, metadata={"help": "aop: score of the mean positive, <w0, mean(P)> = s"})
    aop_t: float = field(default=-2.0, metadata={"help": "aop: score of the mean negative, <w0, mean(N)> = t"})
    bias_init: float = field(default=-1.0, metadata={
        "help": "bias init: initial bias weight (the paper compares -1, -0.9 and -2)"})
    ovap_epsilon: float = field(default=0.01, metadata={
        "help": "ovap: the all-negative problem stops at ||grad|| <= ovap_epsilon*||grad f(0)|| (loose, paper section 3)"})
    pretrained: str | None = field(default=None, metadata={
        "help": "pretrained init: model directory whose weights start the same labels"})
    bias: float = field(default=1.0, metadata={
        "help": "value of the bias feature appended to every instance (0 disables the bias)"})
    regularize_bias: bool = field(default=False, metadata={
        "help": "include the bias weight in the L2 regulariser (True = LIBLINEAR -s 2 -B 1 exactly)"})
    prune: float = field(default=0.01, metadata={
        "help": "after solving, set weights with |w| < prune to zero (0 disables)"})
    cg_epsilon: float = field(default=0.5, metadata={"help": "CG stops on LIBLINEAR's quadratic-model rule with this eps_cg"})
    pcg_alpha: float = field(default=0.01, metadata={"help": "preconditioner (1-alpha) + alpha*diag(H)"})
    ls_eta: float = field(default=0.01, metadata={"help": "Armijo constant of the backtracking line search"})
    ls_max_steps: int = field(default=20, metadata={"help": "maximum halvings in the line search"})
    threads: int = field(default=0, metadata={"help": "label-parallel threads (0 = all cores)"})
    normalize: bool = field(default=False, metadata={"help": "L2-normalise every row of X before training"})
    tfidf: bool = field(default=False, metadata={
        "help": "turn counts into tf-idf (log-scaled tf, idf from the training data, stored in the model)"})

    def __post_init__(self) -> None:
        validate(self)

    # --- conversion -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
        return cls.from_dict(d)

    def replace(self, **changes: Any) -> "TrainParams":
        return dataclasses.replace(self, **changes)

    def effective_threads(self) -> int:
        return self.threads if self.threads > 0 else (os.cpu_count() or 1)


def _need(cond: bool, name: str, rule: str, value: Any) -> None:
    if not cond:
        raise ParameterError(f"parameter {name} must be {rule}, got {value!r}")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def validate(p: TrainParams) -> None:
    """Check every rule; raise :class:`ParameterError` naming parameter, rule and value."""
    _need(p.loss in LOSSES, "loss", f"one of {', '.join(LOSSES)}", p.loss)
    _need(p.init in INITS, "init", f"one of {', '.join(INITS)}", p.init)
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
    _need(_finite(p.pcg_alpha) and 0 <= p.pcg_alpha <= 1, "pcg_alpha", "a number in [0, 1]", p.pcg_alpha)
    _need(_finite(p.ls_eta) and 0 < p.ls_eta < 1, "ls_eta", "a number in (0, 1)", p.ls_eta)
    _need(_int(p.ls_max_steps) and p.ls_max_steps >= 1, "ls_max_steps", "an integer >= 1", p.ls_max_steps)
    _need(_int(p.threads) and p.threads >= 0, "threads", "an integer >= 0 (0 = all cores)", p.threads)
    _need(isinstance(p.normalize, bool), "normalize", "true or false", p.normalize)
    _need(isinstance(p.tfidf, bool), "tfidf", "true or false", p.tfidf)
    if p.init == "pretrained":
        _need(isinstance(p.pretrained, str) and p.pretrained != "", "pretrained",
              "a model directory when init='pretrained'", p.pretrained)
    if p.init == "bias":
        _need(p.bias > 0, "bias", "> 0 when init='bias' (the bias init needs a bias feature)", p.bias)


def param_help() -> dict[str, str]:
    return {f.name: f.metadata.get("help", "") for f in fields(TrainParams)}
