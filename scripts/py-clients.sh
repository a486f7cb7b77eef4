#!/usr/bin/env bash
# Installs the official Python clients the proxy's real tests use (`openai`, `ollama`, and
# `openai-agents`, an agent framework with its own tool loop) into a cache outside the repo
# (default ~/.cache/toolloop), and prints, as a shell `export` line, what the tests read:
#   TOOLLOOP_CLIENTS_PYTHON  a Python with those packages
# A second run only checks the cache.
set -euo pipefail
CACHE="${TOOLLOOP_CACHE:-$HOME/.cache/toolloop}"
mkdir -p "$CACHE"
venv="$CACHE/clients-venv"
if ! "$venv/bin/python" -c 'import openai, ollama, agents' 2>/dev/null; then
  printf '[py-clients] installing openai, ollama and openai-agents\n' >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q openai ollama openai-agents >&2
fi
printf 'export TOOLLOOP_CLIENTS_PYTHON=%q\n' "$venv/bin/python"
