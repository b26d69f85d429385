#!/usr/bin/env bash
# Coverage-guided fuzzing of the readers (fuzz/fuzz_readers.py) for SECONDS seconds.
#   fuzz/run.sh [SECONDS] [libFuzzer flags...]      e.g.  fuzz/run.sh 3600 -jobs=2 -workers=2
# Needs atheris in the virtual environment (.venv/bin/pip install atheris).  The numba
# kernels run interpreted (NUMBA_DISABLE_JIT=1) so that atheris sees their branches.
# The corpus grows in build/fuzz/corpus (seeded from fuzz/corpus); crashes are saved as
# build/fuzz/crash-*; the corpus is then replayed with the compiled kernels; a summary (inputs tried, coverage, crashes) is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
SECONDS_TO_RUN=${1:-60}
shift || true
mkdir -p build/fuzz/corpus
cp -n fuzz/corpus/* build/fuzz/corpus/ 2>/dev/null || true
export NUMBA_DISABLE_JIT=1
start=$(date +%s)
set +e
"$PY" fuzz/fuzz_readers.py -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=4096 -max_len=4096 -artifact_prefix=build/fuzz/ "$@" build/fuzz/corpus 2>&1 | tee build/fuzz/last.log
rc=${PIPESTATUS[0]}
# replay the whole corpus through the compiled (numba) kernels as well
NUMBA_DISABLE_JIT=0 "$PY" fuzz/fuzz_readers.py -runs=0 -artifact_prefix=build/fuzz/jit- build/fuzz/corpus \
    > build/fuzz/replay.log 2>&1
replay=$?
[ "$rc" -eq 0 ] && rc=$replay
set -e
echo "--- summary ($(( $(date +%s) - start )) s, exit code $rc)"
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov: " build/fuzz/last.log | tail -3 || true
echo "compiled-kernel replay of the corpus: exit code $replay"
echo "corpus: $(ls build/fuzz/corpus | wc -l) inputs; crashes: $(ls build/fuzz/crash-* build/fuzz/timeout-* build/fuzz/oom-* 2>/dev/null | wc -l)"
exit "$rc"
