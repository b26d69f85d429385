#!/usr/bin/env python
"""Synthetic XMC data shaped like the paper's benchmark sets (issue 12).

    python -m benchmarks.synth PRESET [-o DIR] [--scale S] [--seed N] [--plain] [--json FILE]
    python benchmarks/synth.py --list

The Extreme Classification Repository sets the paper uses (Amazon-670K, AmazonCat-13K,
WikiLSHTC-325K; also EURLex-4K and Wiki10-31K) cannot be downloaded on this machine.  This module writes a stand-in with
their published sizes -- rows, features, labels, labels per row, rows per label, non-zeros
per row -- so that the trainer's time and memory can be measured at the field's scale.  It
is *not* the real data: P@k on it says nothing about P@k on the real sets.

How a set is made (every step is whole-array numpy; no loop runs per row):

1. Labels per row: 1 + a gamma-Poisson (negative binomial) draw with the preset's mean.
2. Label frequencies: Zipf by rank, ``c_r = max(1, round(C r^-a))``, with ``C`` solved so
   that the frequencies add up to the label slots of step 1.  The exponent ``a`` sets the
   shape (tail-heavy Amazon-670K, head-heavy AmazonCat-13K); it is our choice, the
   repository does not publish it.  The slots are shuffled and dealt to the rows (a label
   dealt twice to one row is kept once), and label ids are a random permutation of the
   ranks, so ids say nothing about frequency (a label range is a random sample).
3. Features: every row draws background words from a Zipf-Mandelbrot distribution over a
   random permutation of the feature ids (``p_r ~ (r + 20)^-1``: a few very common
   words, a long tail, no feature in every row).  Learnable labels: each label has
   ``signature`` features (drawn uniformly outside the 1% most common words), and each of
   them enters each positive row of the label with probability ``signature_rate``.
   The number of background words is calibrated on a pilot sample so that the mean number
   of distinct features per row hits the preset.
4. Values: tf-idf like text: a term count (geometric; signature words a little more
   often repeated), ``(1 + log tf) * log((1 + n) / (1 + df))``, every row L2-normalised,
   float32.  Rows are i.i.d., so the first ``n_train`` rows are the training split and the
   rest the test split.

Files are written with :func:`headstart.io.write_xmc` (``train.txt.gz`` and
``test.txt.gz``, or ``.txt`` with ``--plain``) next to ``synth.json``, which records the
preset, the scale, the seed and the statistics printed beside the published ones.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

GENERATOR_VERSION = 1


@dataclass(frozen=True)
class Preset:
    """Published statistics of one repository set, and the generator's shape choices."""
    name: str
    title: str
    n_train: int
    n_test: int
    n_features: int
    n_labels: int
    labels_per_row: float          # published mean labels per training row
    rows_per_label: float          # published mean training rows per label
    nnz_per_row: float             # published mean non-zero features per training row
    label_zipf: float              # exponent of the label-frequency Zipf law (our choice)
    signature: int = 4             # signature features per label
    signature_rate: float = 0.5    # probability that a signature feature enters a positive row
    feature_zipf: float = 1.0      # exponent of the word-frequency law
    feature_offset: float = 20.0   # Zipf-Mandelbrot offset: no word is in every row
    labels_dispersion: float = 2.0  # gamma shape of the labels-per-row draw (smaller = more spread)
    nnz_sigma: float = 0.6         # log-normal spread of the words per row


#: Sizes from the Extreme Classification Repository's table (the paper's data sets).
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("amazon-670k", "Amazon-670K", 490_449, 153_025, 135_909, 670_091, 5.45, 3.99, 75.0,
           label_zipf=0.55),
    Preset("amazoncat-13k", "AmazonCat-13K", 1_186_239, 306_782, 203_882, 13_330, 5.04, 448.6, 71.0,
           label_zipf=1.0),
    Preset("wikilshtc-325k", "WikiLSHTC-325K", 1_778_351, 587_084, 1_617_899, 325_056, 3.19, 17.46, 42.0,
           label_zipf=0.85),
    # Not the paper's, but the small sets XMC papers report first: few rows, long
    # documents -- EURLex-4K with 5,000 features (its columns dense-ish), Wiki10-31K with
    # ~670 words and ~19 labels per row.  EURLex-4K's published 25.73 rows per label
    # counts the test rows too (5.31 x (15,539 + 3,809) / 3,993 = 25.73); for the
    # training split its other columns give 5.31 x 15,539 / 3,993 = 20.66, used here.
    Preset("eurlex-4k", "EURLex-4K", 15_539, 3_809, 5_000, 3_993, 5.31, 20.66, 236.8, label_zipf=0.8),
    Preset("wiki10-31k", "Wiki10-31K", 14_146, 6_616, 101_938, 30_938, 18.64, 8.52, 673.4, label_zipf=0.9),
)}


def scaled(preset: Preset, scale: float) -> Preset:
    """Rows, features and labels multiplied by ``scale`` (per-row and per-label means kept)."""
    if not (0 < scale <= 1):
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    if scale == 1:
        return preset
    r = lambda v, lo: max(lo, int(round(v * scale)))  # noqa: E731
    return replace(preset, n_train=r(preset.n_train, 20), n_test=r(preset.n_test, 10),
                   n_features=r(preset.n_features, 200), n_labels=r(preset.n_labels, 10))


# --------------------------------------------------------------------------- pieces
def _zipf_counts(n_labels: int, total: int, a: float, cap: int) -> np.ndarray:
    """Integer frequencies by rank, ``max(1, round(C r^-a))`` (at most ``cap``), adding up
    to ``total`` (C by bisection; the rounding remainder goes to the head)."""
    ranks = np.arange(1, n_labels + 1, dtype=np.float64) ** -a

    def counts(C: float) -> np.ndarray:
        return np.clip(np.rint(C * ranks), 1, cap).astype(np.int64)

    lo, hi = 0.0, float(total)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if counts(mid).sum() < total:
            lo = mid
        else:
            hi = mid
    c = counts(hi)
    diff = int(total - c.sum())
    # the rounding remainder is small (C moves one rank across a threshold at a time):
    # one more, or one fewer, for the most frequent labels
    if diff > 0:
        head = np.flatnonzero(c < cap)[:diff]
        c[head] += 1
    elif diff < 0:
        head = np.flatnonzero(c > 1)[:-diff]
        c[head] -= 1
    return c


def _deal_labels(rng: np.random.Generator, m: np.ndarray, counts: np.ndarray, label_of_rank: np.ndarray
                 ) -> sp.csr_matrix:
    """Shuffle the label slots (label ``label_of_rank[r]`` ``counts[r]`` times) and give
    row ``i`` the next ``m[i]`` of them.

    A head label dealt twice to one row would be lost (and with a head-heavy law that is
    several percent of the slots): such a slot swaps its label with a random other slot,
    a few rounds, so rows keep their label counts and labels their frequencies; what is
    still repeated after that is kept once.
    """
    n, L = m.shape[0], label_of_rank.shape[0]
    slots = np.repeat(label_of_rank.astype(np.int64), counts)
    rng.shuffle(slots)
    rows = np.repeat(np.arange(n, dtype=np.int64), m)
    for _ in range(30):
        _, first = np.unique(rows * L + slots, return_index=True)
        if first.shape[0] == slots.shape[0]:
            break
        dup = np.ones(slots.shape[0], dtype=bool)
        dup[first] = False
        dup = np.flatnonzero(dup)
        other = rng.integers(0, slots.shape[0], size=dup.shape[0])
        slots[dup], slots[other] = slots[other], slots[dup].copy()
    keys = np.unique(rows * L + slots)
    r, lab = np.divmod(keys, L)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
    return sp.csr_matrix((np.ones(keys.shape[0], dtype=np.float32), lab.astype(np.int32), indptr), shape=(n, L))


@dataclass
class _Words:
    """What the feature draw needs: the word law and the label signatures."""
    cdf: np.ndarray                # cumulative Zipf-Mandelbrot probabilities by rank
    feature_of_rank: np.ndarray    # random permutation: rank -> feature id
    signatures: np.ndarray         # (labels, signature) feature ids
    rate: float


def _draw_rows(rng: np.random.Generator, Y: sp.csr_matrix, r0: int, r1: int, n_bg: np.ndarray, w: _Words
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COO (local row, feature, term count) of rows [r0, r1): background words plus the
    signature words of each row's labels, not yet merged."""
    nb = n_bg[r0:r1]
    rows_bg = np.repeat(np.arange(r1 - r0, dtype=np.int64), nb)
    ranks = np.searchsorted(w.cdf, rng.random(rows_bg.shape[0]), side="right")
    feats_bg = w.feature_of_rank[np.minimum(ranks, w.cdf.shape[0] - 1)]
    tf_bg = rng.geometric(0.7, size=rows_bg.shape[0])
    a, z = Y.indptr[r0], Y.indptr[r1]
    labs = Y.indices[a:z]
    pair_rows = np.repeat(np.arange(r1 - r0, dtype=np.int64), np.diff(Y.indptr[r0:r1 + 1]))
    keep = rng.random((labs.shape[0], w.signatures.shape[1])) < w.rate
    sig_rows = np.broadcast_to(pair_rows[:, None], keep.shape)[keep]
    sig_feats = w.signatures[labs][keep]
    tf_sig = rng.geometric(0.5, size=sig_rows.shape[0])
    return (np.concatenate([rows_bg, sig_rows]), np.concatenate([feats_bg, sig_feats]),
            np.concatenate([tf_bg, tf_sig]).astype(np.float32))


def _merge(rows: np.ndarray, feats: np.ndarray, tf: np.ndarray, n: int, d: int) -> sp.csr_matrix:
    """CSR of the term counts, a word drawn twice in a row adding up its counts."""
    M = sp.csr_matrix((tf, (rows, feats.astype(np.int64))), shape=(n, d))
    M.sum_duplicates()
    return M


def _calibrate_background(rng: np.random.Generator, Y: sp.csr_matrix, target: float, sigma: float, w: _Words,
                          d: int, pilot_rows: int = 50_000) -> float:
    """Mean background draws per row such that the mean distinct features per row of a
    pilot sample is ``target`` (repeated draws of common words merge, so more draws are
    needed than distinct words wanted)."""
    p = min(pilot_rows, Y.shape[0])
    Yp = Y[:p]
    base = rng.lognormal(-0.5 * sigma ** 2, sigma, size=p)
    sig_mean = Yp.nnz / p * w.signatures.shape[1] * w.rate
    mu = max(1.0, target - sig_mean)
    for _ in range(6):
        nb = np.maximum(1, np.rint(mu * base)).astype(np.int64)
        r, f, t = _draw_rows(rng, Yp, 0, p, nb, w)
        got = _merge(r, f, t, p, d).nnz / p
        if abs(got - target) < 0.002 * target:
            break
        mu = max(1.0, mu * target / got)
    return mu


def _tfidf(T: sp.csr_matrix) -> sp.csr_matrix:
    """``(1 + log tf) * idf`` with ``idf = log((1 + n) / (1 + df))``, rows L2-normalised, float32."""
    n, d = T.shape
    df = np.bincount(T.indices, minlength=d)
    idf = np.log((1.0 + n) / (1.0 + df))
    v = (1.0 + np.log(T.data.astype(np.float64))) * idf[T.indices]
    lengths = np.diff(T.indptr)
    sq = np.zeros(n)
    nz = lengths > 0
    sq[nz] = np.add.reduceat(v * v, T.indptr[:-1][nz])
    norm = np.sqrt(sq)
    norm[norm == 0] = 1.0
    v /= np.repeat(norm, lengths)
    X = sp.csr_matrix((v.astype(np.float32), T.indices, T.indptr), shape=(n, d))
    X.eliminate_zeros()  # a word in every row has idf 0: nothing to write
    return X


# --------------------------------------------------------------------------- the generator
@dataclass
class SynthData:
    preset: Preset                 # as generated (scaled)
    scale: float
    seed: int
    X_train: sp.csr_matrix
    Y_train: sp.csr_matrix
    X_test: sp.csr_matrix
    Y_test: sp.csr_matrix
    seconds: float


def generate(preset: Preset | str, scale: float = 1.0, seed: int = 0, block_rows: int = 65_536) -> SynthData:
    """Generate the train and test splits of ``preset`` at ``scale`` (deterministic in ``seed``)."""
    t0 = time.perf_counter()
    base = PRESETS[preset] if isinstance(preset, str) else preset
    P = scaled(base, scale)
    rng = np.random.default_rng(seed)
    n, d, L = P.n_train + P.n_test, P.n_features, P.n_labels
    # 1. labels per row (>= 1): 1 + gamma-Poisson with mean labels_per_row - 1
    extra = max(P.labels_per_row - 1.0, 0.0)
    lam = rng.gamma(P.labels_dispersion, extra / P.labels_dispersion, size=n) if extra > 0 else np.zeros(n)
    m = 1 + rng.poisson(lam)
    m = np.minimum(m, L)
    # 2. label frequencies (Zipf by rank) and the deal; ids are a random permutation of ranks
    counts = _zipf_counts(L, int(m.sum()), P.label_zipf, cap=n)
    label_of_rank = rng.permutation(L).astype(np.int32)
    Y = _deal_labels(rng, m, counts, label_of_rank)
    # 3. words: Zipf-Mandelbrot law over a random permutation of the feature ids; signatures
    p = (np.arange(1, d + 1, dtype=np.float64) + P.feature_offset) ** -P.feature_zipf
    cdf = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    feature_of_rank = rng.permutation(d).astype(np.int32)
    head = max(1, d // 100)
    sig = feature_of_rank[rng.integers(head, d, size=(L, P.signature))]
    words = _Words(cdf=cdf, feature_of_rank=feature_of_rank, signatures=sig, rate=P.signature_rate)
    mu = _calibrate_background(np.random.default_rng([seed, 1]), Y, P.nnz_per_row, P.nnz_sigma, words, d)
    n_bg = np.maximum(1, np.rint(mu * rng.lognormal(-0.5 * P.nnz_sigma ** 2, P.nnz_sigma, size=n))
                      ).astype(np.int64)
    blocks = []
    for r0 in range(0, n, block_rows):
        r1 = min(r0 + block_rows, n)
        blocks.append(_merge(*_draw_rows(rng, Y, r0, r1, n_bg, words), r1 - r0, d))
    T = sp.vstack(blocks, format="csr") if len(blocks) > 1 else blocks[0]
    del blocks
    # 4. tf-idf values (idf over all generated rows, as a fixed vocabulary would have)
    X = _tfidf(T)
    del T
    nt = P.n_train
    return SynthData(preset=P, scale=scale, seed=seed, X_train=X[:nt], Y_train=Y[:nt], X_test=X[nt:],
                     Y_test=Y[nt:], seconds=time.perf_counter() - t0)


# --------------------------------------------------------------------------- statistics
def statistics(X: sp.csr_matrix, Y: sp.csr_matrix) -> dict:
    """The repository's columns for one split, plus the shape of the label law."""
    n, d = X.shape
    L = Y.shape[1]
    pos = np.bincount(Y.indices, minlength=L)
    df = np.bincount(X.indices, minlength=d)
    return {
        "rows": int(n), "features": int(d), "labels": int(L),
        "labels_per_row": Y.nnz / max(n, 1),
        "rows_per_label": Y.nnz / max(L, 1),
        "nnz_per_row": X.nnz / max(n, 1),
        "share_labels_le5": float(np.mean(pos <= 5)) if L else 0.0,
        "share_labels_without_positive": float(np.mean(pos == 0)) if L else 0.0,
        "max_label_rows": int(pos.max()) if L else 0,
        "features_used": int(np.count_nonzero(df)),
        "max_feature_row_share": float(df.max() / max(n, 1)) if d else 0.0,
        "nnz": int(X.nnz),
    }


def published(P: Preset) -> dict:
    return {"rows": P.n_train, "features": P.n_features, "labels": P.n_labels,
            "labels_per_row": P.labels_per_row, "rows_per_label": P.rows_per_label,
            "nnz_per_row": P.nnz_per_row, "share_labels_le5": None}


ROWS = (("rows", "train rows", "d"), ("features", "features", "d"), ("labels", "labels", "d"),
        ("labels_per_row", "labels / row", ".2f"), ("rows_per_label", "rows / label", ".2f"),
        ("nnz_per_row", "nonzeros / row", ".1f"), ("share_labels_le5", "labels with <= 5 positives", ".1%"))


def _f(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def comparison_table(P: Preset, stats: dict, scale: float) -> str:
    """Plain-text table: generated (train split) next to published (scaled) values."""
    pub = published(scaled(P, scale)) if scale != 1 else published(P)
    if scale != 1:  # the means are kept, the sizes are scaled
        pub = {**pub, "labels_per_row": P.labels_per_row, "rows_per_label": P.rows_per_label,
               "nnz_per_row": P.nnz_per_row}
    lines = [f"{'':<28}{'generated':>12}{'published' + (' x scale' if scale != 1 else ''):>20}"]
    for key, name, spec in ROWS:
        lines.append(f"{name:<28}{_f(stats[key], spec):>12}{_f(pub[key], spec):>20}")
    lines.append(f"(published: {P.title}, Extreme Classification Repository; the share of labels with <= 5 "
                 "positives is not in its table)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- files
def describe(data: SynthData) -> dict:
    """What ``synth.json`` records: preset, scale, seed, parameters, published and generated statistics."""
    base = PRESETS.get(data.preset.name)
    return {
        "generator_version": GENERATOR_VERSION, "preset": data.preset.name, "scale": data.scale,
        "seed": data.seed, "parameters": asdict(data.preset),
        "published": published(base) if base else None,
        "train": statistics(data.X_train, data.Y_train), "test": statistics(data.X_test, data.Y_test),
        "generate_s": round(data.seconds, 2),
    }


def _write_json(path: str | Path, info: dict) -> None:
    from headstart.io.atomic import atomic_write

    with atomic_write(path, "w") as fh:
        fh.write(json.dumps(info, indent=1) + "\n")


def write(data: SynthData, out_dir: str | Path, gzip: bool = True) -> dict:
    """Write ``train.txt[.gz]``, ``test.txt[.gz]`` and ``synth.json``; returns the JSON."""
    from headstart.io import write_xmc

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ext = ".txt.gz" if gzip else ".txt"
    t0 = time.perf_counter()
    write_xmc(out / f"train{ext}", data.X_train, data.Y_train)
    write_xmc(out / f"test{ext}", data.X_test, data.Y_test)
    info = {**describe(data), "write_s": round(time.perf_counter() - t0, 2), "files": [f"train{ext}", f"test{ext}"]}
    _write_json(out / "synth.json", info)
    return info


def dataset_name(preset: str, scale: float, seed: int) -> str:
    """Folder name of a generated set: ``amazon-670k``, ``amazon-670k-x0.05``, ``...-seed3``."""
    s = preset if scale == 1 else f"{preset}-x{scale:g}"
    return s if seed == 0 else f"{s}-seed{seed}"


def ensure(preset: str, scale: float, seed: int, cache_dir: str | Path, log=print) -> Path:
    """The folder of the generated set in ``cache_dir``, generating it when missing."""
    out = Path(cache_dir) / dataset_name(preset, scale, seed)
    info = out / "synth.json"
    if info.is_file() and (out / "train.txt.gz").is_file() and (out / "test.txt.gz").is_file():
        meta = json.loads(info.read_text())
        if meta.get("generator_version") == GENERATOR_VERSION:
            return out
    log(f"generating {out.name} into {out.parent} (preset {preset}, scale {scale:g}, seed {seed}) ...")
    data = generate(preset, scale, seed)
    meta = write(data, out)
    log(comparison_table(PRESETS[preset], meta["train"], scale))
    log(f"generated in {meta['generate_s']:.1f} s, written in {meta['write_s']:.1f} s")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.synth", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("preset", nargs="?", choices=sorted(PRESETS), help="published set to imitate")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="folder for train/test files and synth.json (without it: only print the statistics)")
    p.add_argument("--json", metavar="FILE", help="also write the statistics (synth.json's content) here")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply rows, features and labels by S in (0, 1] (means per row/label kept; default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0); same seed, same files")
    p.add_argument("--plain", action="store_true", help="write .txt instead of .txt.gz")
    p.add_argument("--list", action="store_true", help="list the presets with their published statistics")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        for P in PRESETS.values():
            print(f"{P.name:<16} {P.title}: {P.n_train} train / {P.n_test} test rows, {P.n_features} features, "
                  f"{P.n_labels} labels, {P.labels_per_row} labels/row, {P.rows_per_label} rows/label, "
                  f"~{P.nnz_per_row:g} nonzeros/row; label Zipf exponent {P.label_zipf}")
        return 0
    if args.preset is None:
        build_parser().error("give a PRESET (or --list)")
    if not (0 < args.scale <= 1):
        build_parser().error(f"argument --scale: must be in (0, 1], got {args.scale}")
    data = generate(args.preset, args.scale, args.seed)
    print(f"generated {data.preset.n_train + data.preset.n_test} rows in {data.seconds:.1f} s", flush=True)
    meta = write(data, args.output, gzip=not args.plain) if args.output else describe(data)
    print(comparison_table(PRESETS[args.preset], meta["train"], args.scale))
    if args.output:
        print(f"wrote {', '.join(meta['files'])} and synth.json to {args.output} in {meta['write_s']:.1f} s")
    if args.json:
        _write_json(args.json, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):  # run as a script: make the repository importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
