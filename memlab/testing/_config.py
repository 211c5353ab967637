"""A stack config for fast offline tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memlab.config import EmbeddingConfig, StackConfig


def fast_config(data_root: str | Path, **sections: Any) -> StackConfig:
    """``StackConfig`` under ``data_root`` with the hashing embedder (no model load); ``sections`` override the rest."""
    sections.setdefault("embedding", EmbeddingConfig(model="memlab/hashing"))
    return StackConfig(data_root=data_root, **sections)
