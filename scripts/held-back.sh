#!/usr/bin/env bash
# The held-back sets (tests/data/domains, errands, scripts, each with its no-tool
# requests) on a fresh install: no calibration file and no leanings cache. Both models
# on llama-server with two slots, two cases at once, greedy. One JSON report per model
# and set goes to OUT (default target/held-back); `toolloop eval FILE --rescore REPORT
# --check NAME=on` judges a report again with a check turned on, as BENCHMARKS does.
#
#   scripts/held-back.sh [OUT [EVAL FLAGS...]]   TOOLLOOP_EVAL_MODELS picks the models
#                                               (default "qwen gemma")
#
# `scripts/held-back.sh target/alone --native-tools` measures the model alone: its own
# tool calling on the same server, JSON written in the text taken as calls.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/held-back}"
shift || true
mkdir -p "$out"
cargo build --release -q
export TOOLLOOP_CALIBRATION="$(mktemp -d)"/calibration.json
export TOOLLOOP_LEANINGS="$(mktemp -d)"/leanings.json
port=8094
for model in ${TOOLLOOP_EVAL_MODELS:-qwen gemma}; do
  pid=$(scripts/real-model.sh serve "$model" "$port" 2)
  for set in domains/BFCL_v4_domains domains/BFCL_v4_domains_irrelevance \
    errands/BFCL_v4_errands errands/BFCL_v4_errands_irrelevance \
    scripts/BFCL_v4_scripts scripts/BFCL_v4_scripts_irrelevance; do
    ./target/release/toolloop eval "tests/data/$set.json" --jobs 2 --backend openai \
      --base-url "http://127.0.0.1:$port/v1" --model "$model" --timeout 120 --num-predict 256 \
      --json "$@" > "$out/$model-$(basename "$set").json"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
echo "reports in $out" >&2
