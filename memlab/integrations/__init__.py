"""memlab in other frameworks: each adapter imports its framework lazily and needs its extra.

* :mod:`memlab.integrations.mcp`: ``memlab mcp``, an MCP server on the official SDK (``pip install 'memlab[mcp]'``)
"""
