"""Experiment 004: one conversation on every session cache backend.

Run it under ``scripts/with-servers.sh`` so the redis and postgres cells have servers
(without one, its cells are recorded as failed, naming the variable to set).

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
