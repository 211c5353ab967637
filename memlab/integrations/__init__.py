"""Adapters that plug memlab into agent frameworks.

Each submodule imports its framework when it is imported itself, never from
``import memlab``; each framework comes with an extra:

* :mod:`memlab.integrations.langchain` (``memlab[langchain]``): a chat message
  history over a memlab session and a retriever over ``recall()``;
* :mod:`memlab.integrations.langgraph` (``memlab[langgraph]``): a LangGraph
  ``BaseStore`` backed by memlab and remember / recall tools for agents;
* :mod:`memlab.integrations.mcp` (``memlab[mcp]``): ``memlab mcp``, an MCP server on the official SDK.
"""
