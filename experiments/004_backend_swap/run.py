"""Experiment 004: one conversation on every session cache backend.

Run it under ``scripts/with-servers.sh`` so the redis and postgres cells have servers
(without one, its cells are recorded as failed, naming the variable to set).

Every knob is in config.toml; see experiments/README.md.
"""

import sys
from pathlib import Path

from memlab.experiments import run_experiment

if __name__ == "__main__":
    sys.exit(run_experiment(Path(__file__).parent, sys.argv[1:]))
