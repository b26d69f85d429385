#!/bin/sh
# The committed reports of docs/reproduction/, from a checkout with .venv set up
# ('make venv'), run from the repository root:  sh docs/reproduction/run.sh
# DATA points at the real data sets (default ../shared/data); the bibtex copy shipped in
# data/bibtex is identical to $DATA/bibtex.  The runs are sequential on purpose: they
# time themselves.  Per-run statistics go to <report>/stats/ (not committed: the
# debian-deps ones are ~35 MB; 'headstart experiment --replot -o <report>' redraws a
# report from them).
set -eu
HS=".venv/bin/headstart"
DATA="${DATA:-../shared/data}"
OUT=docs/reproduction
GRID="1,2:-1,-2,-3"

# bibtex and delicious: binary bag-of-words, rows L2-normalised (--normalize)
$HS experiment data/bibtex/train.txt.gz data/bibtex/test.txt.gz -o $OUT/bibtex \
    --normalize --threads 2 --aop-grid $GRID
$HS experiment "$DATA/delicious/train.txt.gz" "$DATA/delicious/test.txt.gz" -o $OUT/delicious \
    --normalize --threads 2 --aop-grid $GRID

# debian-deps: tf-idf rows already L2-normalised; all 22908 labels, every initialisation
$HS experiment "$DATA/debian-deps/train.txt.gz" "$DATA/debian-deps/test.txt.gz" -o $OUT/debian-deps \
    --threads 2

# the aop (s, t) grid of the supplementary, on a label range of debian-deps
$HS experiment "$DATA/debian-deps/train.txt.gz" "$DATA/debian-deps/test.txt.gz" -o $OUT/debian-deps-aop-grid \
    --threads 2 --labels 0:4000 --inits zero,aop --aop-grid $GRID

# the logistic loss (the paper's last Table 1 row and its aop* with t = -3)
$HS experiment "$DATA/debian-deps/train.txt.gz" "$DATA/debian-deps/test.txt.gz" -o $OUT/debian-deps-logistic \
    --threads 2 --labels 0:2000 --loss logistic --inits zero,bias:-2,ovap,aop,aop:-3
$HS experiment data/bibtex/train.txt.gz data/bibtex/test.txt.gz -o $OUT/bibtex-logistic \
    --normalize --threads 2 --loss logistic --inits zero,bias:-2,ovap,aop,aop:-3
