"""The one place memlab imports litellm (lazily: ``import litellm`` takes seconds)."""

from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["load_litellm"]


@functools.cache
def load_litellm() -> Any:
    """Import and return litellm, set up to stay offline.

    Sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` before the import (unless the
    environment already chose), so litellm reads its bundled cost map instead of
    fetching one, and ``litellm.suppress_debug_info = True``, so a failed call does
    not print litellm's "Give Feedback / Get Help" banner into notebooks; the
    error itself still reaches the caller as :class:`~memlab.llm.LLMError`.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm
