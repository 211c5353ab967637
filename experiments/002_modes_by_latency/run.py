"""Experiment 002: analysis modes by LLM latency (every knob is in config.toml; see experiments/README.md)."""

import sys
from pathlib import Path

from memlab.experiments import run_experiment

if __name__ == "__main__":
    sys.exit(run_experiment(Path(__file__).parent, sys.argv[1:]))
