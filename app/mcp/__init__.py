"""MCP over streamable HTTP at `/mcp`: the memory verbs as tools, thin over the `/v1` services."""

PATH = "/mcp"
