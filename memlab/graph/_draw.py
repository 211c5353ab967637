"""Drawing a piece of a knowledge graph (networkx + matplotlib, both imported on use)."""

from __future__ import annotations

from typing import Any

from memlab.exceptions import ValidationError
from memlab.graph._graph import KnowledgeGraph

#: node colours by type
_COLOURS = {"entity": "#4c72b0", "chunk": "#dd8452", "summary": "#55a868", "document": "#c44e52"}


def neighborhood(graph: KnowledgeGraph, name: str, *, radius: int = 1, types: tuple[str, ...] = ("entity",)) -> Any:
    """The networkx subgraph within ``radius`` hops of the node named ``name``, keeping only ``types``.

    Hops follow edges both ways; nodes of other types are skipped (default:
    entities only, so the picture shows facts rather than chunk plumbing).
    Raises ``ValidationError`` when no node has that name.
    """
    import networkx as nx

    start = next((node["id"] for node in graph.nodes() if node["name"].casefold() == name.casefold()), None)
    if start is None:
        raise ValidationError(f"no node named {name!r} in this graph")
    keep = {node["id"] for node in graph.nodes() if node["type"] in types} | {start}
    view = graph.nx.subgraph(keep)
    reach = nx.single_source_shortest_path_length(view.to_undirected(as_view=True), start, cutoff=radius)
    return view.subgraph(reach)


def draw_neighborhood(graph: KnowledgeGraph, name: str, *, radius: int = 1, types: tuple[str, ...] = ("entity",), ax: Any = None, seed: int = 7) -> Any:
    """Draw :func:`neighborhood` with node names and relation labels; returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    import networkx as nx

    piece = neighborhood(graph, name, radius=radius, types=types)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 6))
    layout = nx.spring_layout(piece, seed=seed)
    labels = {node_id: data.get("name", node_id) for node_id, data in piece.nodes(data=True)}
    colours = [_COLOURS.get(data.get("type"), "#8c8c8c") for _, data in piece.nodes(data=True)]
    nx.draw_networkx(piece, layout, ax=ax, labels=labels, node_color=colours, font_size=8, node_size=600, arrows=True)
    edge_labels = {(source, target): data.get("relation", "") for source, target, data in piece.edges(data=True)}
    nx.draw_networkx_edge_labels(piece, layout, edge_labels=edge_labels, ax=ax, font_size=7)
    ax.set_axis_off()
    ax.set_title(f"{name}: {radius}-hop neighbourhood")
    return ax
