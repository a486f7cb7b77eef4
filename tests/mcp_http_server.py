"""A real MCP server over Streamable HTTP, built on the official Python `mcp` package.

    python tests/mcp_http_server.py PORT [json]

`json` makes it answer with plain JSON instead of an SSE stream. It serves on 127.0.0.1.
"""
import sys

import anyio

from mcp.server.mcpserver import MCPServer

server = MCPServer("toolloop-test", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(reason)


@server.tool()
async def nap(seconds: float) -> str:
    """Sleeps, then says how long (for calls that overlap)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


if __name__ == "__main__":
    port = int(sys.argv[1])
    json_response = len(sys.argv) > 2 and sys.argv[2] == "json"
    server.run(
        transport="streamable-http",
        host="127.0.0.1",
        port=port,
        json_response=json_response,
    )
