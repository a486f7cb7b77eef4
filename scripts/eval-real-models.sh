#!/usr/bin/env bash
# The real-model rows of BENCHMARKS.md: Qwen2.5-Coder 0.5B Instruct and Gemma 3 270M on
# llama-server (JOBS slots), BFCL simple_python / multiple / irrelevance, N cases per
# category spread over each file (or every case with N=all), greedy decoding. Each model
# runs in these settings:
#   baseline  another revision's defaults, built in target/baseline, when
#             TOOLLOOP_EVAL_BASELINE=REV names one (the "before" of a round)
#   before    this revision with every check off and --decide direct: the model alone
#             (--decide direct --check all=off: the model alone, through the loop)
#   after     this revision's defaults
# plus any extra settings named in TOOLLOOP_EVAL_VARIANTS ("name:flags;name:flags").
# TOOLLOOP_EVAL_CATEGORIES picks the categories (default "simple_python multiple
# irrelevance"; everyday_simple, everyday_multiple, everyday_parallel and
# everyday_irrelevance are the set shipped in tests/data/everyday).
# TOOLLOOP_EVAL_MODELS picks the models (default "qwen gemma"). Everything it needs is
# fetched and cached by scripts/real-model.sh and scripts/bfcl-data.sh. JSON reports go
# to target/eval/ (`toolloop eval DATA --rescore REPORT` replays them under later rules).
#
#   scripts/eval-real-models.sh [CASES_PER_CATEGORY|all] [JOBS]      (default 50, 4)
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-50}"
jobs="${2:-4}"
out="${TOOLLOOP_EVAL_OUT:-target/eval}"
mkdir -p "$out"
cargo build --release -q
data=$(scripts/bfcl-data.sh)
scripts/real-model.sh build >/dev/null
baseline_bin=""
if [ -n "${TOOLLOOP_EVAL_BASELINE:-}" ]; then
  wt=$(mktemp -d)
  git worktree add -q --detach "$wt" "$TOOLLOOP_EVAL_BASELINE"
  built=0
  CARGO_TARGET_DIR="$PWD/target/baseline" cargo build --release -q --manifest-path "$wt/Cargo.toml" && built=1
  # Removed whether or not the build worked, so a failed one leaves no worktree behind.
  git worktree remove --force "$wt"
  [ "$built" = 1 ] || { echo "the baseline $TOOLLOOP_EVAL_BASELINE did not build" >&2; exit 1; }
  baseline_bin="$PWD/target/baseline/release/toolloop"
fi
limit_flag=(--limit "$limit")
[ "$limit" = all ] && limit_flag=()
port=8093
variants="${baseline_bin:+baseline:;}before:--decide direct --check all=off;after:${TOOLLOOP_EVAL_VARIANTS:+;$TOOLLOOP_EVAL_VARIANTS}"
for model in ${TOOLLOOP_EVAL_MODELS:-qwen gemma}; do
  pid=$(scripts/real-model.sh serve "$model" "$port" "$jobs")
  IFS=';' read -ra vs <<<"$variants"
  for v in "${vs[@]}"; do
    [ -n "$v" ] || continue
    name="${v%%:*}"; flags="${v#*:}"
    bin=./target/release/toolloop
    [ "$name" = baseline ] && bin="$baseline_bin"
    echo "== $model, $name ($flags), $limit cases per category, $jobs at once" >&2
    for category in ${TOOLLOOP_EVAL_CATEGORIES:-simple_python multiple irrelevance}; do
      file="$data/BFCL_v4_$category.json"
      case "$category" in everyday_*) file="tests/data/everyday/BFCL_v4_$category.json" ;; esac
      # shellcheck disable=SC2086
      "$bin" eval "$file" "${limit_flag[@]}" --jobs "$jobs" \
        --backend openai --base-url "http://127.0.0.1:$port/v1" --model "$model" \
        --timeout 120 --num-predict 256 $flags --json > "$out/$model-$name-$category.json"
    done
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
python3 - "$out" "$variants" "${TOOLLOOP_EVAL_CATEGORIES:-simple_python multiple irrelevance}" <<'PY'
import json, sys, os
out, variants = sys.argv[1], [v.split(":")[0] for v in sys.argv[2].split(";") if v]
categories = sys.argv[3].split()
def share(half):
    passed, of = half if half else (0, 0)
    return f"{passed}/{of}" if of else "-"
print("| model | setting | category | cases | accuracy | tuning | validation | invalid turns | s/case | tokens/case |")
print("|---|---|---|---|---|---|---|---|---|---|")
for model in ("qwen", "gemma"):
    for name in variants:
        for category in categories:
            path = os.path.join(out, f"{model}-{name}-{category}.json")
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                continue
            for s in json.load(open(path))["summary"]:
                if s["category"] == "all":
                    continue
                print(f"| {model} | {name} | {s['category']} | {s['cases']} | {100*s['accuracy']:.1f}% | "
                      f"{share(s.get('tuning'))} | {share(s.get('validation'))} | "
                      f"{100*s['invalid_turn_rate']:.1f}% | {s['mean_ms']/1000:.2f} | {s.get('mean_tokens', 0):.1f} |")
PY
