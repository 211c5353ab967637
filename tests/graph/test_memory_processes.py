"""Two OS processes remembering into one dataset at once: neither loses the other's documents."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from memlab import MemoryStack, StackConfig
from memlab.config import EmbeddingConfig

WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from memlab import MemoryStack, StackConfig
    from memlab.config import EmbeddingConfig

    root, tag, start = sys.argv[1], sys.argv[2], float(sys.argv[3])

    async def main():
        config = StackConfig(data_root=root, embedding=EmbeddingConfig(model="memlab/hashing"))
        async with MemoryStack.from_config(config) as stack:
            while time.time() < start:  # both processes write at the same moment
                await asyncio.sleep(0.005)
            for index in range(3):
                await stack.remember(f"Writer {tag} met Person{tag}{index} in Lisbon in 19{index}0.")

    asyncio.run(main())
    """
)


async def test_two_processes_writing_one_dataset_keep_every_document(tmp_path):
    config = StackConfig(data_root=tmp_path, embedding=EmbeddingConfig(model="memlab/hashing"))
    async with MemoryStack.from_config(config) as stack:  # default user and dataset exist before the race
        await stack.datasets.create("main_dataset")
    import time

    start = time.time() + 6.0  # after both interpreters have imported memlab and litellm
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, str(start)], env=env, stderr=subprocess.PIPE, text=True)
        for tag in ("A", "B")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err

    async with MemoryStack.from_config(config) as stack:
        records = await stack.datasets.list_data("main_dataset")
        assert len(records) == 6
        dataset = await stack.datasets.get("main_dataset")
        graph = await stack.memory.graph(dataset.id)
        assert graph.data_ids() == frozenset(str(record.id) for record in records)
        people = {node["name"] for node in graph.nodes(type="entity")}
        assert {f"Person{tag}{index}" for tag in "AB" for index in range(3)} <= people
