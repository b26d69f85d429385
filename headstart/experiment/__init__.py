"""Reproduce the paper's experiments on any data: one model per initialisation, the
table and the figures (the functional core of ``headstart experiment``).

    from headstart.experiment import load_dataset, parse_inits, run_experiment, write_report
    data = load_dataset("train.txt.gz", "test.txt.gz")
    runs = parse_inits("zero,bias:-2,ovap,aop", TrainParams(threads=2))
    exp = run_experiment(data, runs)
    write_report(exp, "report/")
"""

from .run import (Dataset, Experiment, RunResult, evaluate_model, load_dataset, load_experiment, load_stats,
                  run_experiment, save_stats)
from .report import write_report
from .spec import DEFAULT_INITS, RunSpec, parse_grid, parse_inits, parse_label_range, plan_runs
from .table import build_tables

__all__ = ["Dataset", "Experiment", "RunResult", "RunSpec", "DEFAULT_INITS", "build_tables", "evaluate_model",
           "load_dataset", "load_experiment", "load_stats", "parse_grid", "parse_inits", "parse_label_range",
           "plan_runs", "run_experiment", "save_stats", "write_report"]
