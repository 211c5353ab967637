"""A small bundled corpus for notebooks and examples (.md, .json and .csv files).

    from memlab.samples import corpus_paths
    await stack.remember(corpus_paths())
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["corpus_paths"]


def corpus_paths() -> list[Path]:
    """Paths of the bundled sample documents, sorted by name."""
    folder = Path(str(resources.files("memlab.samples") / "corpus"))
    return sorted(path for path in folder.iterdir() if path.is_file())
