#!/usr/bin/env bash
# The real-model rows of BENCHMARKS.md: Qwen2.5-Coder 0.5B Instruct and Gemma 3 270M on
# llama-server, BFCL simple_python / multiple / irrelevance, each with toolloop's narrowed
# schema and with no schema at all. Everything it needs is fetched and cached by
# scripts/real-model.sh and scripts/bfcl-data.sh.
#
#   scripts/eval-real-models.sh [CASES_PER_CATEGORY]      (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-20}"
out="${TOOLLOOP_EVAL_OUT:-target/eval}"
mkdir -p "$out"
cargo build --release -q
data=$(scripts/bfcl-data.sh)
scripts/real-model.sh build >/dev/null
port=8093
for model in qwen gemma; do
  pid=$(scripts/real-model.sh serve "$model" "$port")
  for mode in narrowed off; do
    flag=""; [ "$mode" = off ] && flag="--no-constraint"
    echo "== $model, schema $mode, $limit cases per category" >&2
    ./target/release/toolloop eval "$data" --limit "$limit" --backend openai \
      --base-url "http://127.0.0.1:$port/v1" --model "$model" --timeout 120 \
      --num-predict 256 $flag --json > "$out/$model-$mode.json"
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
print("| model | schema | category | cases | accuracy | invalid turns | iterations | s/case |")
print("|---|---|---|---|---|---|---|---|")
for model in ("qwen", "gemma"):
    for mode in ("narrowed", "off"):
        r = json.load(open(os.path.join(out, f"{model}-{mode}.json")))
        for s in r["summary"]:
            print(f"| {model} | {mode} | {s['category']} | {s['cases']} | {100*s['accuracy']:.1f}% | "
                  f"{100*s['invalid_turn_rate']:.1f}% | {s['mean_iterations']:.2f} | {s['mean_ms']/1000:.2f} |")
PY
