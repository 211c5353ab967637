"""What the benchmarks share: fixed-width text tables, percentiles and timed loops, targets, the stack under test."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memlab._stats import percentile as percentile  # re-exported: the benchmarks call _table.percentile

T = TypeVar("T")


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], *, right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell, ``right`` ones right-aligned; a dashed rule under the header."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(row: Sequence[str]) -> str:
        parts = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), "  ".join("-" * width for width in widths)]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def number(value: float | None, digits: int = 0) -> str:
    """``12,345`` style; an em dash for None."""
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def size(num_bytes: int | None) -> str:
    """Bytes as ``812.0 KiB`` / ``1.4 MiB``."""
    if num_bytes is None:
        return "—"
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def verdict(row: dict) -> str:
    """``PASS`` / ``MISS`` for a row whose ``passed`` is a bool; ``""`` when it has no target."""
    return "" if row["passed"] is None else ("PASS" if row["passed"] else "MISS")


def timed(items: Sequence[T], timings: list[float]) -> Iterator[T]:
    """``items[0]`` once untimed (a warm-up), then each item, appending to ``timings`` the seconds the loop body took on it."""
    yield items[0]
    for item in items:
        begin = time.perf_counter()
        yield item
        timings.append(time.perf_counter() - begin)


def judge(value: float | None, target: float | None, *, at_most: bool = False) -> dict[str, Any]:
    """A row's ``target`` and ``passed``: None without a target (or value), else ``value >= target`` (``<=`` with ``at_most``)."""
    if value is None or target is None:
        return {"target": target, "passed": None}
    return {"target": target, "passed": value <= target if at_most else value >= target}


def stack(root: Path, embedder: str, **sections: Any) -> Any:
    """A ``MemoryStack`` (not yet open) under ``root`` embedding with ``embedder``; ``sections`` set the other config sections."""
    from memlab import MemoryStack, StackConfig
    from memlab.config import EmbeddingConfig

    return MemoryStack.from_config(StackConfig(data_root=root, embedding=EmbeddingConfig(model=embedder), **sections))
