#!/usr/bin/env bash
# The real-model rows of BENCHMARKS.md: Qwen2.5-Coder 0.5B Instruct and Gemma 3 270M on
# llama-server (4 slots), BFCL simple_python / multiple / irrelevance, N cases per
# category spread over each file, greedy decoding. Each model runs in two settings:
#   before  the decision as it was: kind first, every argument the model wrote kept
#           (--decide direct --keep-invented-arguments)
#   after   toolloop's defaults (the decision step and argument grounding)
# plus any extra settings named in TOOLLOOP_EVAL_VARIANTS ("name:flags;name:flags").
# Everything it needs is fetched and cached by scripts/real-model.sh and
# scripts/bfcl-data.sh. JSON reports go to target/eval/.
#
#   scripts/eval-real-models.sh [CASES_PER_CATEGORY] [JOBS]      (default 50, 4)
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-50}"
jobs="${2:-4}"
out="${TOOLLOOP_EVAL_OUT:-target/eval}"
mkdir -p "$out"
cargo build --release -q
data=$(scripts/bfcl-data.sh)
scripts/real-model.sh build >/dev/null
port=8093
variants="before:--decide direct --keep-invented-arguments;after:${TOOLLOOP_EVAL_VARIANTS:+;$TOOLLOOP_EVAL_VARIANTS}"
for model in qwen gemma; do
  pid=$(scripts/real-model.sh serve "$model" "$port" "$jobs")
  IFS=';' read -ra vs <<<"$variants"
  for v in "${vs[@]}"; do
    [ -n "$v" ] || continue
    name="${v%%:*}"; flags="${v#*:}"
    echo "== $model, $name ($flags), $limit cases per category, $jobs at once" >&2
    # shellcheck disable=SC2086
    ./target/release/toolloop eval "$data" --limit "$limit" --jobs "$jobs" --backend openai \
      --base-url "http://127.0.0.1:$port/v1" --model "$model" --timeout 120 \
      --num-predict 256 $flags --json > "$out/$model-$name.json"
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
python3 - "$out" "$variants" <<'PY'
import json, sys, os
out, variants = sys.argv[1], [v.split(":")[0] for v in sys.argv[2].split(";") if v]
print("| model | setting | category | cases | accuracy | invalid turns | s/case | tokens/case |")
print("|---|---|---|---|---|---|---|---|")
for model in ("qwen", "gemma"):
    for name in variants:
        path = os.path.join(out, f"{model}-{name}.json")
        if not os.path.exists(path):
            continue
        for s in json.load(open(path))["summary"]:
            print(f"| {model} | {name} | {s['category']} | {s['cases']} | {100*s['accuracy']:.1f}% | "
                  f"{100*s['invalid_turn_rate']:.1f}% | {s['mean_ms']/1000:.2f} | {s.get('mean_tokens', 0):.1f} |")
PY
