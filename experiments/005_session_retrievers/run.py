"""Experiment 005: session retrievers on the conversational benchmark.

Loads ``config.toml`` (or the path given) into a :class:`memlab.experiments.Grid`, runs
it, prints the medians per cell and writes ``results/<UTC time>.parquet`` / ``.csv`` /
``.txt`` beside this file (gitignored): :func:`memlab.experiments.run_experiment`.
Every knob is in the config.
"""

import sys
from pathlib import Path

from memlab.experiments import run_experiment

if __name__ == "__main__":
    sys.exit(run_experiment(Path(__file__).parent, sys.argv[1:]))
