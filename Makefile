# Two commands for a fresh checkout (needs only python3.11 with pip, and gcc):
#   make demo   set up .venv, train on the shipped bibtex data with aop, evaluate
#   make test   set up .venv, run the test suite
# The virtual environment is created on first use and re-installed when
# pyproject.toml changes.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.headstart-installed
DEMO   := build/demo
DATA   := data/bibtex

.PHONY: demo test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[test]'
	@# compile the demo's kernels ahead into numba's cache, as an extension is built at
	@# install time (headstart/cli/compile_ahead.py); other options compile on first use.
	@# Not needed for correctness: a failure here only leaves the compiling to the first run.
	-$(PY) -m headstart compile --init aop --normalize
	@touch $(STAMP)

demo: $(STAMP)
	@mkdir -p $(DEMO)
	$(PY) -m headstart train $(DATA)/train.txt.gz -o $(DEMO)/model --init aop --normalize --stats $(DEMO)/stats.csv
	$(PY) -m headstart predict $(DEMO)/model $(DATA)/test.txt.gz -o $(DEMO)/predictions.txt -k 5
	$(PY) -m headstart evaluate --predictions $(DEMO)/predictions.txt $(DATA)/test.txt.gz --train $(DATA)/train.txt.gz

# The suite in up to 4 worker processes (pytest-xdist; one per usable core, at
# most 4: each holds its own numba kernels, ~0.5-1 GB), whole files to one worker so
# that a module's fixtures are built once.  Fresh clone, 2 cores, 2026-11-28: the tests
# 14:41 min, bash .ci/run 16:31 with the install (1074 tests) on a busy day; 8:47 and
# 9:36 (1105 tests) on a quiet machine later that day; 2026-11-29, 14:46 (1153 tests,
# quiet) to 17:27 (1161 tests, other work beside it), 27-34 CPU minutes; after the kernels
# lost numba's unused wrappers (headstart/_compile.py), 14:55 (1167 tests, 28.6 CPU
# minutes) and 14:46 (1204 tests); 2026-11-29 (stop 42), 13:54 (1226 tests, 26.5 CPU
# minutes with the install).  Profiled that day (cold cache, 2 workers): compiling is 800
# of 1610 CPU s -- 35 specialisations of the two train_chunk kernels (one per loss x
# regulariser x start x post-processing the tests cover, ~10-14 s each, the whole trainer
# optimised again by LLVM for each), almost none compiled twice across workers; with a
# warm cache the same suite takes 8:13.  With NUMBA_OPT=1 the suite took 13:12 (-21% CPU): not
# used, the tests would no longer run the optimised code users get.  Most of the time
# is Numba compiling each loss x regulariser x initialiser the suite covers, once (the
# slowest tests are the cold-cache commands of test_precompile and a new initialiser
# compiled through shortlisted training, 60-90 s each).  2026-11-30, another VM: 17:20
# (1245 tests, quiet) and, per test, 1174 of 1747 CPU s compiling (26 specialisations of
# the core train_chunk, 604 s; 11 of the shortlisted one, 185 s), warm cache 8:24; after
# one-label chunks stopped compiling a second copy of the trainer (trainer.make_records),
# 13:35 (1248 tests, quiet).  2026-12-05, CI (.ci/run, fresh checkouts): 8:58, 10:04 and
# 9:46 of tests (1593-1619 passed; the last on bfb2cbe) -- the README's figure.
test: $(STAMP)
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile

clean:
	rm -rf build
