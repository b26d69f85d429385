"""DiSMEC++'s model files: read into an :class:`OvAModel`, and written from one.

Users of the paper's own trainer (DiSMEC++) have models on disk; ``headstart
import-dismec`` makes them headstart models (to predict, evaluate, merge, or to start
training from with ``--init pretrained``) and ``headstart export-dismec`` goes the other
way, so either tool's predictor can be run on either tool's weights.

The format, as DiSMEC++ documents it (``src/io/model-io.h``, ``src/io/weights.cpp``): a
JSON *metadata* file with ``num-features``, ``num-labels``, ``date`` and ``files``, a
list of weight files, each ``{"first", "count", "file", "weight-format"}`` -- labels
``first .. first + count - 1``, the file name relative to the metadata file, and one of
three layouts, one label per row:

* ``SparseTXT``: a line of ``index:value`` pairs (0-based indices) per label; an empty
  line is a label without weights;
* ``DenseTXT``: a line of ``num-features`` numbers per label;
* ``DenseNPY``: a row-major ``(count, num-features)`` ``.npy`` array.

DiSMEC++ has no intercept.  Its ``--augment-for-bias [VALUE]`` appends a feature of
constant VALUE (default 1) to every instance *after* ``--transform`` and
``--normalize-instances``, so the last weight of such a model is the bias weight.
headstart keeps the bias as an intercept (weight times VALUE) and applies the transform
and the normalisation in the same order (:mod:`headstart.prediction.preprocess`), so a
model carries over exactly when the importer is told the same three options.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ModelFormatError, ParameterError
from ..io import _common
from ..io import _kernels as K
from ..io.atomic import atomic_write
from ..params import TRANSFORMS, TrainParams
from .model import OvAModel, Preprocessing
from .ranges import uncovered

#: DiSMEC++'s names of its weight layouts (``weight_format_names`` there)
FORMATS = ("SparseTXT", "DenseTXT", "DenseNPY")
#: labels per weight file when exporting: DiSMEC++'s own default (``SaveOption::SplitFiles``)
LABELS_PER_FILE = 4096
#: labels converted at a time from a dense layout (bounds the dense block in memory)
_DENSE_BLOCK = 256


# --------------------------------------------------------------------------- reading
def read_dismec_model(meta_path: str | os.PathLike, *, bias_feature: float | None = None,
                      normalize: bool = False, transform: str = "identity",
                      culling: float = 0.0, allow_gaps: bool = False) -> OvAModel:
    """The DiSMEC++ model whose metadata file is ``meta_path``, as an :class:`OvAModel`.

    ``bias_feature``: the model was trained with ``--augment-for-bias VALUE``; its last
    weight becomes the intercept (times VALUE).  ``normalize`` and ``transform``: its
    ``--normalize-instances`` and ``--transform``, applied to any input by headstart's
    predictor.  Weights with ``|w| <= culling`` are dropped (DiSMEC++'s
    ``--weight-culling``; 0 keeps every nonzero).  ``allow_gaps``: a partial model (a
    label range, or a run its ``--timeout`` ended; DiSMEC++'s predict takes those) is
    read with the labels it has; the others become the model's ``missing_ranges``.
    Every problem of the files is a :class:`~headstart.errors.DataFormatError` naming
    the file (and line)."""
    if transform not in TRANSFORMS:
        raise ParameterError(f"transform must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
    if bias_feature is not None and not (math.isfinite(bias_feature) and bias_feature > 0):
        raise ParameterError(f"the bias feature's value must be a finite number > 0, got {bias_feature!r}")
    if not (math.isfinite(culling) and culling >= 0):
        raise ParameterError(f"weight culling must be a finite number >= 0, got {culling!r}")
    meta_path = Path(meta_path)
    d_all, L, entries, gaps = _read_metadata(meta_path, allow_gaps)
    if bias_feature is not None and d_all < 1:
        raise DataFormatError("num-features is 0: there is no bias feature to take", meta_path)
    blocks = []
    for first, count, fmt, path in _with_gaps(entries, gaps):
        W = _read_weights(path, fmt, count, d_all) if path is not None else sp.csr_matrix((count, d_all),
                                                                                        dtype=np.float32)
        if culling > 0:
            W.data[np.abs(W.data) <= culling] = 0
            W.eliminate_zeros()
        blocks.append(W)
    W = sp.vstack(blocks, format="csr", dtype=np.float32) if blocks else sp.csr_matrix((0, d_all), dtype=np.float32)
    if bias_feature is not None:
        intercept = (W[:, d_all - 1].toarray().ravel().astype(np.float64) * bias_feature).astype(np.float32)
        W = W[:, : d_all - 1].tocsr()
        d = d_all - 1
    else:
        intercept = np.zeros(L, dtype=np.float32)
        d = d_all
    W.sort_indices()
    W.indices = W.indices.astype(np.int32, copy=False)
    # the parameters say how the data was prepared (what --pretrained and merge compare);
    # the training options DiSMEC++ used are not in its files
    params = TrainParams(bias=float(bias_feature) if bias_feature is not None else 0.0, normalize=bool(normalize),
                         feature_transform=transform)
    prep = Preprocessing(normalize=bool(normalize), transform=transform)
    return OvAModel(weights=W, intercept=intercept, n_features=d, label_space=L, params=params,
                    preprocessing=prep, missing_ranges=gaps)


def _with_gaps(entries: list, gaps: list[tuple[int, int]]) -> list:
    """The weight files' entries and the gaps between them (path None), in label order."""
    out = entries + [(a, b - a, None, None) for a, b in gaps]
    return sorted(out, key=lambda e: e[0])


def _read_metadata(meta_path: Path, allow_gaps: bool = False) \
        -> tuple[int, int, list[tuple[int, int, str, Path]], list[tuple[int, int]]]:
    """(num-features, num-labels, [(first, count, format, path)] ordered by first, the
    label ranges no file covers), the files covering every label at most once -- and
    every label exactly once unless ``allow_gaps``."""
    try:
        text = meta_path.read_text(encoding="utf-8")
    except OSError as e:
        raise DataFormatError(f"cannot read the model's metadata file: {e.strerror or e}", meta_path) from None
    except UnicodeDecodeError:
        raise DataFormatError("not a DiSMEC++ metadata file (not UTF-8 text)", meta_path) from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"not a DiSMEC++ metadata file: invalid JSON ({e.msg})", meta_path, e.lineno,
                              e.colno) from None
    if not isinstance(meta, dict):
        raise DataFormatError("not a DiSMEC++ metadata file: expected a JSON object", meta_path)

    def count_field(obj: dict, key: str, where: str) -> int:
        v = obj.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise DataFormatError(f"{where}{key!r} must be an integer >= 0, got {v!r}", meta_path)
        return v

    d = count_field(meta, "num-features", "")
    L = count_field(meta, "num-labels", "")
    files = meta.get("files", [])
    if not isinstance(files, list):
        raise DataFormatError(f"'files' must be a list, got {type(files).__name__}", meta_path)
    entries = []
    for k, f in enumerate(files):
        where = f"files[{k}]: "
        if not isinstance(f, dict):
            raise DataFormatError(f"{where}expected an object, got {f!r}", meta_path)
        first = count_field(f, "first", where)
        count = count_field(f, "count", where)
        fmt = f.get("weight-format")
        if fmt not in FORMATS:
            raise DataFormatError(f"{where}'weight-format' must be one of {', '.join(FORMATS)}, got {fmt!r}",
                                  meta_path)
        name = f.get("file")
        if not isinstance(name, str) or not name:
            raise DataFormatError(f"{where}'file' must be a file name, got {name!r}", meta_path)
        entries.append((first, count, fmt, meta_path.parent / name))
    entries.sort(key=lambda e: e[0])
    nxt = 0
    gaps = []
    partial = " (a partial model, e.g. of a label range or a --timeout: --allow-gaps imports the labels it has)"
    for first, count, _, path in entries:
        if first < nxt:
            raise DataFormatError(f"the weight files do not cover the labels once: {path.name} starts at label "
                                  f"{first}, inside the labels of the file before it", meta_path)
        if first > nxt:
            if not allow_gaps:
                raise DataFormatError(f"the weight files do not cover the labels once: labels {nxt}..{first - 1} "
                                      f"have no weight file{partial}", meta_path)
            gaps.append((nxt, first))
        nxt = first + count
    if nxt > L:
        raise DataFormatError(f"a weight file reaches label {nxt - 1}, beyond num-labels {L} (labels 0..{L - 1})",
                              meta_path)
    if nxt < L:
        if not allow_gaps:
            raise DataFormatError(f"the weight files cover labels 0..{nxt - 1}, but num-labels is {L}{partial}",
                                  meta_path)
        gaps.append((nxt, L))
    return d, L, entries, gaps


def _read_weights(path: Path, fmt: str, count: int, d: int) -> sp.csr_matrix:
    """The ``count`` x ``d`` weights of one weight file, float32 CSR without zeros."""
    if not path.is_file():
        raise DataFormatError("cannot read the weight file the metadata file lists: no such file", path)
    if fmt == "DenseNPY":
        return _read_dense_npy(path, count, d)
    raw = _common.read_bytes(path)
    if fmt == "SparseTXT":
        return _read_sparse_txt(raw, path, count, d)
    return _read_dense_txt(raw, path, count, d)


def _read_sparse_txt(raw: bytes, path: Path, count: int, d: int) -> sp.csr_matrix:
    buf = np.frombuffer(raw, dtype=np.uint8)
    # the XMC reader's kernel, told that lines hold no label list: errors then come with
    # the file, line, column and token like every data file's
    spec = _common.SparseSpec(has_labels=False, n_features=d, max_rows=count, what="row",
                              feature_word="weight", dtype=np.dtype(np.float32))
    try:
        r = _common.parse_sparse(buf, 0, len(buf), spec, path, 1)
    except DataFormatError as e:
        if e.message.startswith("more rows than"):   # the count comes from the metadata, not a header
            raise DataFormatError(f"more than the {count} labels' rows the metadata file gives this file", path,
                                  e.line) from None
        raise
    if r.rows < count:
        raise DataFormatError(f"the file ends after {r.rows} labels' rows, but the metadata file gives it "
                              f"{count}", path, r.rows + 1)
    return _common.csr(r.indptr, r.indices, r.data, (count, d))


def _read_dense_txt(raw: bytes, path: Path, count: int, d: int) -> sp.csr_matrix:
    lines = raw.split(b"\n")
    if lines and lines[-1].strip() == b"":
        lines.pop()
    if len(lines) != count:
        raise DataFormatError(f"{len(lines)} lines of weights, but the metadata file gives this file {count} labels",
                              path, min(len(lines), count) + 1)
    blocks = []
    for a in range(0, count, _DENSE_BLOCK):
        part = lines[a: a + _DENSE_BLOCK]
        widths = [len(line.split()) for line in part]   # per label, not per weight
        try:
            A = np.array(b" ".join(part).split(), dtype=np.float64)
        except ValueError:
            raise _dense_txt_error(part, a, path, d) from None
        if any(w != d for w in widths):
            raise _dense_txt_error(part, a, path, d)
        blocks.append(_finite_block(A.reshape(len(part), d), path, a, "line"))
    return sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, d), dtype=np.float32)


def _finite_block(A: np.ndarray, path: Path, first_row: int, unit: str) -> sp.csr_matrix:
    """Rows of weights as float32 CSR; a NaN, an infinity or a value beyond float32's range
    is refused with its row (text line or array row, 1-based)."""
    with np.errstate(over="ignore", invalid="ignore"):
        B = A.astype(np.float32)
    bad = ~np.isfinite(B)
    if bad.any():
        r, c = (int(x) for x in np.argwhere(bad)[0])
        value = float(A[r, c])
        if unit == "line":
            raise DataFormatError(f"weight {c} is {value!r}: not a finite float32", path, first_row + r + 1)
        raise DataFormatError(f"row {first_row + r}, weight {c}: {value!r} is not a finite float32", path)
    return sp.csr_matrix(B)


def _dense_txt_error(part: list[bytes], a: int, path: Path, d: int) -> DataFormatError:
    """The first line of a dense block that has a token that is no number or the wrong
    number of them."""
    for r, line in enumerate(part):
        toks = line.split()
        for c, tok in enumerate(toks):
            try:
                float(tok)
            except ValueError:
                col = line.find(tok) + 1
                return DataFormatError("weight is not a number", path, a + r + 1, col, tok.decode(errors="replace"))
        if len(toks) != d:
            return DataFormatError(f"{len(toks)} weights on the line, but num-features is {d}", path, a + r + 1)
    return DataFormatError("malformed dense weights", path, a + 1)  # pragma: no cover


def _read_dense_npy(path: Path, count: int, d: int) -> sp.csr_matrix:
    try:
        A = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise DataFormatError(f"not a readable .npy array: {e}", path) from None
    if A.dtype not in (np.float32, np.float64) or A.dtype.hasobject:
        raise DataFormatError(f"weights must be float32 or float64, got {A.dtype}", path)
    if A.shape != (count, d):
        raise DataFormatError(f"array of shape {A.shape}, but the metadata file gives ({count}, {d})", path)
    blocks = [_finite_block(np.asarray(A[a: a + _DENSE_BLOCK]), path, a, "row") for a in range(0, count, _DENSE_BLOCK)]
    return sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, d), dtype=np.float32)


# --------------------------------------------------------------------------- writing
#: the metadata key of headstart's exports: the predict options (see write_dismec_model)
EXPORT_KEY = "headstart-export"


def exported_options(meta_path: str | os.PathLike) -> dict[str, Any] | None:
    """The predict options headstart recorded when it exported the model of ``meta_path``
    ({"augment-for-bias": value or None, "normalize-instances": bool, "transform": name}),
    or None (a model DiSMEC++ trained, or an unreadable file: the import reports it)."""
    try:
        meta = json.loads(Path(meta_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    got = meta.get(EXPORT_KEY) if isinstance(meta, dict) else None
    if not (isinstance(got, dict) and set(got) == {"augment-for-bias", "normalize-instances", "transform"}):
        return None
    # written by export-dismec; edited by hand, a value of another type is named, not
    # taken for what it might mean ("false" is a true string)
    bias, normalize, transform = got["augment-for-bias"], got["normalize-instances"], got["transform"]
    bad = None
    if bias is not None and not (isinstance(bias, (int, float)) and not isinstance(bias, bool)
                                 and math.isfinite(bias) and bias > 0):
        bad = f"'augment-for-bias' must be null or a number > 0, got {bias!r}"
    elif not isinstance(normalize, bool):
        bad = f"'normalize-instances' must be true or false, got {normalize!r}"
    elif transform not in TRANSFORMS:
        bad = f"'transform' must be one of {', '.join(TRANSFORMS)}, got {transform!r}"
    if bad is not None:
        raise ModelFormatError(f"{meta_path}: {EXPORT_KEY}: {bad}")
    return got


def dismec_options(model: OvAModel) -> list[str]:
    """The DiSMEC++ ``predict`` options under which an exported model scores as here."""
    opts = []
    if model.preprocessing.transform != "identity":
        opts += ["--transform", model.preprocessing.transform]
    if model.preprocessing.normalize:
        opts.append("--normalize-instances")
    if _has_bias(model):
        # a CLI11 flag with a default value (src/app.cpp): a value other than 1 goes after '='
        v = _bias_value(model)
        opts.append("--augment-for-bias" if v == 1.0 else f"--augment-for-bias={v!r}")   # repr: shortest exact
    return opts


def _has_bias(model: OvAModel) -> bool:
    return model.params.bias > 0 or bool(np.any(model.intercept != 0))


def _bias_value(model: OvAModel) -> float:
    """The bias feature's value: the training's, or 1 for intercepts without one."""
    return float(model.params.bias) if model.params.bias > 0 else 1.0


def write_dismec_model(model: OvAModel, meta_path: str | os.PathLike, *, fmt: str = "SparseTXT",
                       labels_per_file: int = LABELS_PER_FILE, allow_gaps: bool = False) -> list[Path]:
    """Write ``model`` as a DiSMEC++ model: the metadata file ``meta_path`` and weight files
    ``<meta_path>.weights-<first>-<last>`` next to it (all weight files under temporary
    names first, renamed into place once every one is written, the metadata file last and
    atomically: an interrupted export leaves an earlier export to the same name as it
    was, and no metadata file without its weights).  The intercept becomes the weight of a
    last feature of value ``params.bias`` (DiSMEC++'s ``--augment-for-bias``).  Returns
    the files written.  float32 weights are written exactly (shortest round-trip
    decimals in the text layouts); an intercept goes through its bias weight (intercept
    / bias value, in float32), so it reads back to within a float32 rounding.
    ``allow_gaps``: a model of some labels only (a label range, or one loaded with its
    missing ranges) is written as DiSMEC++ writes a partial model -- weight files for the
    labels it has, in the label space's numbering (its predict and ``--continue`` take
    those)."""
    if fmt not in FORMATS:
        raise ParameterError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if labels_per_file < 1:
        raise ParameterError(f"labels per file must be >= 1, got {labels_per_file}")
    _check_exportable(model, allow_gaps)
    meta_path = Path(meta_path)
    W = model.weights.tocsr().astype(np.float32)
    bias = _has_bias(model)
    if bias:
        col = (model.intercept.astype(np.float64) / _bias_value(model)).astype(np.float32)
        W = sp.hstack([W, sp.csr_matrix(col.reshape(-1, 1))], format="csr", dtype=np.float32)
        W.eliminate_zeros()
    W.sort_indices()
    L, d_all = model.label_space, W.shape[1]
    first = model.first_label
    covered = uncovered(model.missing_ranges, first, first + model.num_labels)
    # Every weight file goes to a temporary name first and all are renamed into place only
    # when all are written, the metadata file last: an export that fails leaves an earlier
    # export to the same name as it was, and never a metadata file without its weights.
    # The new weight files never take the names the earlier metadata lists (a kill between
    # the renames and the metadata's would pair the old metadata -- its bias value, its
    # label ranges -- with the new weights, helper-46); those files go once the new
    # metadata is in place.
    blocks = [(a, min(stop, a + labels_per_file)) for start, stop in covered
              for a in range(start, stop, labels_per_file)]
    earlier = _listed_weight_files(meta_path)
    tag = ""
    while not earlier.isdisjoint(f"{meta_path.name}.weights-{a}-{b - 1}{tag}" for a, b in blocks):
        tag = f".{os.urandom(3).hex()}"
    pending: list[tuple[Path, Path]] = []
    files: list[dict[str, Any]] = []
    try:
        for a, b in blocks:
            path = meta_path.with_name(f"{meta_path.name}.weights-{a}-{b - 1}{tag}")
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            pending.append((tmp, path))
            try:
                f = open(tmp, "wb")
            except OSError as e:   # name the file asked for, not the temporary one
                raise type(e)(e.errno, e.strerror, os.fspath(path)) from None
            with f:
                _write_block(f, W[a - first:b - first], fmt)
                f.flush()
                os.fsync(f.fileno())
            files.append({"first": a, "count": b - a, "file": path.name, "weight-format": fmt})
    except BaseException:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in pending:
        os.replace(tmp, path)
    meta = {"num-features": int(d_all), "num-labels": int(L),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d - %H:%M:%S"),
            "files": files,
            # how to predict with it, for 'headstart import-dismec' (DiSMEC++ reads the keys
            # above only): a re-import without options then scores as the model did
            EXPORT_KEY: {"augment-for-bias": _bias_value(model) if bias else None,
                         "normalize-instances": bool(model.preprocessing.normalize),
                         "transform": str(model.preprocessing.transform)}}
    with atomic_write(meta_path, "w") as f:
        f.write(json.dumps(meta, indent=4) + "\n")
    for name in earlier - {p.name for _, p in pending}:
        meta_path.with_name(name).unlink(missing_ok=True)
    return [*(p for _, p in pending), meta_path]


def _listed_weight_files(meta_path: Path) -> set[str]:
    """The weight files an existing metadata file at ``meta_path`` lists that are an export's
    of that name (``<name>.weights-...`` beside it); none if there is no readable one."""
    try:
        listed = json.loads(meta_path.read_text(encoding="utf-8")).get("files", [])
        names = {e["file"] for e in listed if isinstance(e, dict) and isinstance(e.get("file"), str)}
    except (OSError, ValueError, AttributeError, TypeError):
        return set()
    return {n for n in names if n.startswith(f"{meta_path.name}.weights-") and os.sep not in n
            and (os.altsep is None or os.altsep not in n)}


def _check_exportable(model: OvAModel, allow_gaps: bool = False) -> None:
    if not allow_gaps and (model.first_label != 0 or model.missing_ranges
                           or model.num_labels != model.label_space):
        raise ModelFormatError("the model has weights for some labels only: merge the label ranges first, or "
                               "export it as a partial DiSMEC++ model (allow_gaps; on the command line "
                               "--allow-gaps)")
    # classes are label ids and the input width a note for the estimator: exportable (a
    # hashed model's hashing is refused below, in its own words)
    kinds = ", ".join(sorted(k for k in model.extensions or {} if k not in ("classes", "input")))
    if kinds:
        raise ModelFormatError(f"a {kinds} model has no DiSMEC++ counterpart for its predictor: "
                               "only plain one-vs-all models can be exported")
    prep = model.preprocessing
    if prep.idf is not None:
        raise ModelFormatError("the model applies tf-idf (--tfidf) to its input, which DiSMEC++'s predictor "
                               "cannot: transform the data with tf-idf first and train without --tfidf")
    if prep.hashing is not None:
        raise ModelFormatError("the model hashes its features (--hash-buckets): DiSMEC++'s predictor would not "
                               "hash them the same way; export a model trained without hashing")


def _write_block(f, W: sp.csr_matrix, fmt: str) -> None:
    count, d = W.shape
    if fmt == "DenseNPY":
        header = {"descr": "<f4", "fortran_order": False, "shape": (count, d)}
        np.lib.format.write_array_header_1_0(f, header)
        for a in range(0, count, _DENSE_BLOCK):
            f.write(np.ascontiguousarray(W[a: a + _DENSE_BLOCK].toarray(), dtype="<f4").tobytes())
        return
    if fmt == "DenseTXT":
        line = " ".join(["%.9g"] * d) + "\n"   # 9 significant digits: every float32 reads back exactly
        for a in range(0, count, _DENSE_BLOCK):
            A = W[a: a + _DENSE_BLOCK].toarray().astype(np.float64)
            f.write("".join(line % tuple(row) for row in A).encode())
        return
    indptr = W.indptr.astype(np.int64)
    lptr = np.zeros(count + 1, dtype=np.int64)
    cost = 2 + (13 + K.FLOAT_MAX_CHARS) * np.diff(indptr)
    out = np.empty(int(cost.sum()) + 1, dtype=np.uint8)
    used = K.format_sparse(0, count, indptr, W.indices, W.data, lptr, np.zeros(0, dtype=np.int32), 0, True,
                           True, out)
    # format_sparse writes XMC body lines, which start with a blank when there are no
    # labels: DiSMEC++ lines start with the first pair (blanks are skipped either way)
    text = out[:used].tobytes().replace(b"\n ", b"\n")
    f.write(text[1:] if text.startswith(b" ") else text)
