#!/usr/bin/env bash
# Installs the real MCP servers the test suite talks to, into a cache outside the repo
# (default ~/.cache/toolloop), and prints, as shell `export` lines, what the tests read:
#   TOOLLOOP_MCP_EVERYTHING  command line of @modelcontextprotocol/server-everything (stdio)
#   TOOLLOOP_MCP_PYTHON      a Python with the `mcp` package (for tests/mcp_http_server.py)
# A second run only checks the cache.
set -euo pipefail
CACHE="${TOOLLOOP_CACHE:-$HOME/.cache/toolloop}"
mkdir -p "$CACHE"
log() { printf '[mcp-servers] %s\n' "$*" >&2; }

npm_dir="$CACHE/npm"
entry="$npm_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ ! -f "$entry" ]; then
  log "installing @modelcontextprotocol/server-everything"
  mkdir -p "$npm_dir"
  npm install --silent --no-audit --no-fund --prefix "$npm_dir" @modelcontextprotocol/server-everything >&2
fi
if [ ! -f "$entry" ]; then
  entry=$(find "$npm_dir/node_modules/@modelcontextprotocol/server-everything" -name 'index.js' -path '*dist*' | head -n1)
fi

venv="$CACHE/mcp-venv"
if ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
  log "installing the Python mcp package"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q mcp >&2
fi

printf 'export TOOLLOOP_MCP_EVERYTHING=%q\n' "node $entry stdio"
printf 'export TOOLLOOP_MCP_PYTHON=%q\n' "$venv/bin/python"
