"""LIBLINEAR's ``train`` options as headstart's training parameters.

People who train one-vs-all models with LIBLINEAR (directly, or through LibMultiLabel,
which hands LIBLINEAR an option string such as ``"-s 2 -e 0.0001 -c 1"`` for every
label) can give that string unchanged: ``headstart train --liblinear="-s 2 -c 4"`` or
``TrainParams.from_liblinear("-s 2 -c 4")``.  Each label is then the binary problem
LIBLINEAR would solve for it (its positives +1, every other instance -1): the same loss,
regulariser, C, class weights, bias feature, stopping rule and tolerance, and every
nonzero weight kept (``prune 0``).

The facts used (LIBLINEAR 2.4x, ``train.c`` and ``linear.cpp``): the default solver is
``-s 1``; the default tolerance is 0.01 for ``-s 0 / 2 / 5 / 6`` and 0.1 for the dual
solvers ``-s 1 / 3 / 7``; the default ``-B`` is -1, no bias feature; with ``-B b > 0`` the
bias weight is regularised unless ``-R`` (which LIBLINEAR accepts only with ``-B 1``
and the primal solvers); ``-wi`` multiplies C for class i (each time it is given); ``-m``
is multi-core LIBLINEAR's thread count; ``-n`` (the one-class nu) and ``-p`` (the
regression epsilon) mean nothing to the classification solvers and are ignored.

``-C`` (its search for C) and ``-v n`` (its cross-validation) are ``headstart cv``'s, which
takes them inside ``--liblinear`` (:func:`search`): ``-C`` is ``--Cs auto``
(:func:`headstart.tuning.cv.cross_validate`), LIBLINEAR's grid -- from the largest power of 2
not above 1 / (l max ||x_i||^2) (``-s 0``) or 1 / (2 l max ||x_i||^2) (``-s 2``), or from
``-c``, doubling up to 1024, each fold warm-started from its weights at the C before, stopped
once no weights move -- on 5 folds unless ``-v`` says otherwise, solver ``-s 2`` unless ``-s``
says otherwise, and only ``-s 0`` or ``-s 2`` (as LIBLINEAR).  What differs: the best C is
the one of the best multi-label metric (``cv --metric``, P@1 by default) over all labels,
not a binary problem's accuracy.  Elsewhere (``train``) both are refused with a pointer to
``headstart cv``.

One deliberate difference: the primal Newton solvers (``-s 0``, ``-s 2``) start from
headstart's initialisation (aop unless ``--init`` says otherwise), the paper's
contribution, which reaches the same optimum under the same stopping rule faster than
LIBLINEAR's start at zero; ``--init zero`` gives LIBLINEAR's start.  Solvers without a
counterpart here (multi-class, regression, one-class) are refused with the reason.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any, Callable, Collection

from .errors import ParameterError

#: -s value -> (LIBLINEAR's name for it, headstart's parameters, LIBLINEAR's default -e)
SOLVERS: dict[int, tuple[str, dict[str, Any], float]] = {
    0: ("L2-regularized logistic regression (primal)",
        {"loss": "logistic", "regularizer": "l2", "l2_solver": "newton"}, 0.01),
    1: ("L2-regularized L2-loss support vector classification (dual)",
        {"loss": "squared-hinge", "regularizer": "l2", "l2_solver": "dual"}, 0.1),
    2: ("L2-regularized L2-loss support vector classification (primal)",
        {"loss": "squared-hinge", "regularizer": "l2", "l2_solver": "newton"}, 0.01),
    # the Huber hinge with epsilon 0 is the hinge itself, which only the dual solves.
    # LIBLINEAR's train_one stops -s 3 after dual_solver_max_iter = 300 cycles ("reaching max
    # number of iterations"), with no primal method to switch to as -s 1 / -s 7 have: so
    # does headstart (helper-70: on unnormalised dense features, where the dual rule is
    # rarely met, the default 1000 cycles made -s 3 1.4x slower than LIBLINEAR itself)
    3: ("L2-regularized L1-loss support vector classification (dual)",
        {"loss": "huber-hinge", "huber_epsilon": 0.0, "regularizer": "l2", "l2_solver": "dual", "max_iter": 300},
        0.1),
    5: ("L1-regularized L2-loss support vector classification",
        {"loss": "squared-hinge", "regularizer": "l1-exact", "l1_solver": "cdn"}, 0.01),
    6: ("L1-regularized logistic regression",
        {"loss": "logistic", "regularizer": "l1-exact", "l1_solver": "newglmnet"}, 0.01),
    7: ("L2-regularized logistic regression (dual)",
        {"loss": "logistic", "regularizer": "l2", "l2_solver": "dual"}, 0.1),
}

#: -s values without a counterpart, and why
NOT_OFFERED: dict[int, str] = {
    4: "Crammer and Singer's multi-class SVM solves one problem for all classes, not one per label",
    11: "support vector regression is not classification",
    12: "support vector regression is not classification",
    13: "support vector regression is not classification",
    21: "the one-class SVM is not a one-vs-all classifier",
}

#: options that take no value
_FLAGS = ("-q", "-R")
_WEIGHT = re.compile(r"^-w([+-]?\d+)$")
#: the training parameter a class weight -wi sets (:func:`translate`)
_WEIGHT_PARAMS = {1: "weight_pos", -1: "weight_neg"}


def translate(options: str, search: bool = False) -> dict[str, Any]:
    """headstart's training parameters for LIBLINEAR's ``train`` options ``options``
    (a string such as ``"-s 2 -c 4 -e 0.001 -B 1"``); raises :class:`ParameterError`
    naming the option and the problem.  ``search``: the caller (``headstart cv``) runs
    ``-C`` and ``-v`` itself (:func:`search`), so they are taken, not refused; with ``-C``
    the default solver is ``-s 2`` and only ``-s 0`` and ``-s 2`` are allowed, LIBLINEAR's
    rules."""
    try:
        tokens = shlex.split(options)
    except ValueError as e:
        raise _error(options, f"cannot split into options: {e}") from None
    given: dict[str, str | None] = {}
    weights: dict[int, float] = {}
    k = 0
    while k < len(tokens):
        opt = tokens[k]
        if not opt.startswith("-") or len(opt) < 2:
            raise _error(options, f"{opt!r} is not an option (LIBLINEAR's options are -s, -c, -e, -B, -R, "
                                  "-wi, -m, -q)")
        if opt == "-C" and not search:
            raise _error(options, "-C (LIBLINEAR's search for C) is a command of its own here: headstart cv "
                                  "--liblinear=\"-C ...\" or --Cs auto (LIBLINEAR's grid; the best C by held-out "
                                  "P@1 or another metric), or --Cs 0.25,1,4")
        if opt == "-v" and not search:
            raise _error(options, "-v (cross-validation) is a command of its own here: headstart cv --folds N "
                                  "--liblinear=\"...\" (ranking metrics of held-out folds)")
        if opt in _FLAGS or opt == "-C":
            given[opt] = None
            k += 1
            continue
        if k + 1 >= len(tokens):
            raise _error(options, f"{opt} needs a value")
        value = tokens[k + 1]
        m = _WEIGHT.match(opt)
        if m:
            # LIBLINEAR multiplies C by every -wi given for class i (linear.cpp), so a
            # repeated one (as LibMultiLabel's cost-sensitive runs append -w1) multiplies
            w = _number(options, opt, value, float)
            if not (math.isfinite(w) and w >= 0):
                raise _error(options, f"{opt} must be a finite number >= 0, got {value!r}")
            weights[int(m.group(1))] = weights.get(int(m.group(1)), 1.0) * w
        elif opt == "-v":
            folds = _number(options, opt, value, int)
            if folds < 2:
                raise _error(options, f"-v needs a number of folds >= 2, got {value!r}")
            given[opt] = value
        elif opt in ("-s", "-c", "-e", "-B", "-m", "-n", "-p"):
            # -p (the regression epsilon) is read and ignored by LIBLINEAR's classification
            # solvers; -n is the one-class nu (ignored there too) or, before multi-core
            # LIBLINEAR 2.43 renamed it -m, the thread count (below); the regression and
            # one-class solvers are refused
            given[opt] = value
        else:
            raise _error(options, f"unknown option {opt} (LIBLINEAR's options are -s, -c, -e, -B, -R, -wi, "
                                  "-m, -q)")
        k += 2

    # LIBLINEAR: -C without -s searches with -s 2, and only -s 0 / 2 (and regression's 11)
    solver = _number(options, "-s", given["-s"], int) if "-s" in given else (2 if "-C" in given else 1)
    if "-C" in given and solver not in (0, 2):
        raise _error(options, f"-C with -s {solver}: LIBLINEAR's search for C (warm-started) is for -s 0 and "
                              "-s 2 only (-s 11, regression, is not offered here)")
    if solver in NOT_OFFERED:
        raise _error(options, f"-s {solver}: {NOT_OFFERED[solver]}")
    if solver not in SOLVERS:
        raise _error(options, f"-s {solver}: unknown solver (LIBLINEAR's are 0-7, 11-13, 21; "
                              f"here {', '.join(map(str, SOLVERS))})")
    _, out, default_eps = SOLVERS[solver]
    out = dict(out)
    out["C"] = _positive(options, "-c", given.get("-c", "1"))
    out["epsilon"] = _positive(options, "-e", given["-e"]) if "-e" in given else default_eps
    bias = _number(options, "-B", given.get("-B", "-1"), float)
    if "-R" in given and bias != 1.0:
        raise _error(options, "-R (an unregularised bias) needs -B 1 (LIBLINEAR's rule)")
    if "-R" in given and out.get("l2_solver") == "dual":
        raise _error(options, f"-R is not for -s {solver}: LIBLINEAR's dual solvers regularise the bias")
    out["bias"] = bias if bias > 0 else 0.0
    out["regularize_bias"] = bias > 0 and "-R" not in given
    out["prune"] = 0.0                                  # LIBLINEAR keeps every nonzero weight
    if weights:
        other = sorted(set(weights) - {1, -1})
        if other:
            raise _error(options, f"-w{other[0]}: every label is a +1 / -1 problem here, so only -w1 (positives) "
                                  "and -w-1 (negatives) apply; per-label costs: --weights-pos-file FILE -- "
                                  f"LIBLINEAR's multi-class -w{other[0]} W is W on line {other[0] + 1} of FILE "
                                  f"(label id {other[0]}) and 1 on the others")
        out["weighting"] = "constant"
        out.update({name: weights.get(cls, 1.0) for cls, name in _WEIGHT_PARAMS.items()})
    if "-m" in given:                                   # multi-core LIBLINEAR's (2.43+) thread count
        threads = _number(options, "-m", given["-m"], int)
        if threads < 1:
            raise _error(options, f"-m must be a number of threads >= 1, got {threads}")
        out["threads"] = threads
    elif "-n" in given and re.fullmatch(r"[1-9]\d*", given["-n"]):
        # the thread count of multi-core LIBLINEAR before 2.43 (helper-63: "-n 1" ran on
        # every core); a nu (a fraction) stays ignored, as LIBLINEAR's classifiers ignore it
        out["threads"] = int(given["-n"])
    return out


def search(options: str) -> dict[str, Any]:
    """What LIBLINEAR options (already accepted by ``translate(options, search=True)``)
    ask of ``headstart cv``: ``auto`` (``-C``: LIBLINEAR's search for C), ``folds``
    (``-v n``; 5 with ``-C`` alone, LIBLINEAR's default there; None when neither says)
    and ``first_C`` (``-c``: where a search for C starts, LIBLINEAR's meaning of it with
    ``-C``; None when not given)."""
    tokens = shlex.split(options)
    auto = "-C" in tokens
    values = {opt: tokens[k + 1] for k, opt in enumerate(tokens[:-1]) if opt in ("-v", "-c")}
    folds = int(values["-v"]) if "-v" in values else (5 if auto else None)
    first = float(values["-c"]) if "-c" in values else None
    return {"auto": auto, "folds": folds, "first_C": first}


def quiet(options: str) -> bool:
    """Whether LIBLINEAR options (already accepted by :func:`translate`) ask for -q,
    LIBLINEAR's quiet mode: the command line then says nothing but warnings and errors."""
    return "-q" in shlex.split(options)


def _number(options: str, opt: str, value: str, kind):
    try:
        return kind(value)
    except ValueError:
        raise _error(options, f"{opt} needs {'an integer' if kind is int else 'a number'}, got {value!r}") from None


def _positive(options: str, opt: str, value: str) -> float:
    x = _number(options, opt, value, float)
    if not (math.isfinite(x) and x > 0):
        raise _error(options, f"{opt} must be a finite number > 0, got {value!r}")
    return x


def _error(options: str, problem: str) -> ParameterError:
    return ParameterError(f"LIBLINEAR options {options!r}: {problem}")


def class_weights(options: str) -> list[str]:
    """The ``-wi`` options of LIBLINEAR options (already accepted by :func:`translate`),
    as given (``["-w1"]``)."""
    return [t for t in shlex.split(options) if _WEIGHT.match(t)]


def unread_class_weights(options: str, params: Any, overridden: Collection[str],
                         spell: Callable[[str], str] = str) -> list[str]:
    """What to say of every class weight (-w1, -w-1) of LIBLINEAR options (already
    accepted by :func:`translate`) that ``params`` leave unread: parameters given beside
    the options win (``overridden`` names them), and one of them may choose a weighting
    that reads no constant weights (``--weighting 2pm1``), which dropped -w1 silently.  A
    weight that ``overridden`` replaces itself is not reported: that is the rule, stated
    in the docs.  ``spell`` names a parameter (the command line: its option)."""
    from .params import unused_message, unused_parameters

    written = {_WEIGHT_PARAMS[int(_WEIGHT.match(t).group(1))]: t for t in class_weights(options)}
    written = {name: t for name, t in written.items() if name not in overridden}
    return [f"LIBLINEAR options {options!r}: {written[name]} is {spell(name)} here, and "
            + unused_message(params, name, by, choices, decided, spell)
            for name, by, choices, decided in unused_parameters(params, list(written))]


def one_class_per_row(Y) -> bool:
    """Whether the label matrix Y is a multi-class file's: at least two labels, at least
    one row, and exactly one label on every row (LIBLINEAR's one class per row)."""
    import numpy as np

    Y = Y.tocsr()
    return Y.shape[1] >= 2 and Y.shape[0] > 0 and bool(np.all(np.diff(Y.indptr) == 1))


def multiclass_weight_warning(options: str, Y) -> str | None:
    """What to say when LIBLINEAR options with ``-w1`` / ``-w-1`` train data of one class
    per row (at least two labels, exactly one per row; a +1/-1 file is one label): LIBLINEAR
    weights there only class 1's positives (``-w1``) -- ``-w-1`` names a class -1 --, headstart
    every label's positives (negatives), as LibMultiLabel means it; None otherwise."""
    given = class_weights(options)
    if not given or not one_class_per_row(Y):
        return None
    return (f"{' '.join(dict.fromkeys(given))} on data of one class per row: here -w1 W multiplies the cost of "
            "every label's positives and -w-1 W of every label's negatives (each label's own +1 / -1 problem, "
            "LibMultiLabel's meaning); LIBLINEAR's multi-class -wi W multiplies C for class i's positives only "
            "-- for that, give --weights-pos-file FILE with W on line i + 1 (label id i) and 1 on the others")
