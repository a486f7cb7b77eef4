#!/usr/bin/env bash
# Whole questions against a real model: each question of tests/data/whole/questions.jsonl
# is asked with `toolloop ask --builtin --demo` (calculator, current_time, the demo
# get_weather), tools run for real, until the answer. `toolloop eval` stops a case at its
# first calls; this is what a person waits for: model turns per needed round of calls,
# requests, seconds, and whether the answer holds the tool's facts.
#
# Turns are the requests for a model turn, declined ones too (the transcript's
# model_request events); requests add the fit questions.
# A case is right when the answer holds one of each group of `expect`, every tool of
# `tools` was called, and (for `rounds` 0) no tool was called. Its turns are within the
# goal when they are at most `rounds` + 1 (one per round of calls, one for the answer).
# The turns over are put down to what made them: a turn of calls declined, a turn asked
# again for more calls, or a needless call let through and answered after; run with
# `--check all=off` to see how many over the model makes alone.
# A case with `lang` (tests/data/whole/languages.jsonl) also has its answer's language
# judged: kana for Japanese, Han without kana for Chinese, else `langid` (pip install
# langid) among English and the set's languages; an answer with no letters (a number
# alone) is left out of that count.
# Cases are split by the number that ends their id (even: tuning, odd: validation), the
# rule `toolloop eval` uses, fixed before any result was read.
#
#   scripts/whole-questions.sh URL MODEL [NAME] [-- FLAGS...]
#     URL    an OpenAI-compatible base URL (http://127.0.0.1:8080/v1)
#     MODEL  the model name sent, and the calibration it reads
#     NAME   the report's name under target/whole/ (default: MODEL)
#     FLAGS  more flags for `toolloop ask` (a variant to compare)
#
# TOOLLOOP_WHOLE_NATIVE=1 asks the questions through scripts/native-loop.py instead: the
# loop a person writes on the server's own tool calling, with the same tools
# (`toolloop serve-tools --demo` on 127.0.0.1:TOOLLOOP_WHOLE_TOOLS_PORT, default 5077).
# Seconds are given by phase: the model's turns, the checks' questions aside (the fit
# question), the tools, and toolloop's own work.
# The binary is target/release/toolloop (built here), or TOOLLOOP_WHOLE_BIN (another
# revision's build, for the "before"); TOOLLOOP_WHOLE_DATA another set
# (tests/data/whole/held_back.jsonl was written while the rules were being tried on
# questions.jsonl, and read only to check them; arithmetic.jsonl, arithmetic said other
# ways and questions about a number, was written in the twenty-fifth pass before any of
# it was run); TOOLLOOP_WHOLE_JOBS cases at once
# (default 1: a person's one question at a time, and the server's cache as it is then);
# TOOLLOOP_WHOLE_READ=1 reads the transcripts already under target/whole/NAME again,
# asking nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
url="$1"; model="$2"; shift 2
name="$model"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then name="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
flags=("$@")
out=target/whole
mkdir -p "$out/$name"
# Another revision's build is run as it is: nothing here is built then.
[ "${TOOLLOOP_WHOLE_READ:-}" = 1 ] || [ -n "${TOOLLOOP_WHOLE_BIN:-}" ] || cargo build --release -q
data="${TOOLLOOP_WHOLE_DATA:-tests/data/whole/questions.jsonl}"
jobs="${TOOLLOOP_WHOLE_JOBS:-1}"

tools_url=""
if [ "${TOOLLOOP_WHOLE_NATIVE:-}" = 1 ] && [ "${TOOLLOOP_WHOLE_READ:-}" != 1 ]; then
  tools_url="http://127.0.0.1:${TOOLLOOP_WHOLE_TOOLS_PORT:-5077}"
  "${TOOLLOOP_WHOLE_BIN:-./target/release/toolloop}" serve-tools --demo --addr "${tools_url#http://}" \
    >"$out/$name/serve-tools.log" 2>&1 &
  tools_pid=$!
  trap 'kill $tools_pid 2>/dev/null' EXIT
  for _ in $(seq 1 50); do curl -sf "$tools_url/health" >/dev/null && break; sleep 0.1; done
  # A port already taken would leave the loop calling whatever answers there.
  kill -0 "$tools_pid" 2>/dev/null && curl -sf "$tools_url/health" >/dev/null ||
    { echo "toolloop serve-tools did not start on $tools_url: see $out/$name/serve-tools.log" >&2; exit 1; }
fi

run_case() {
  local line="$1" id question
  id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$line")
  question=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["question"])' "$line")
  if [ -n "$tools_url" ]; then
    python3 scripts/native-loop.py "$url" "$model" "$tools_url" "$question" --timeout 120 --num-predict 256 \
      --transcript "$out/$name/$id.transcript.jsonl" >"$out/$name/$id.json" 2>"$out/$name/$id.log" || true
    echo "$id done" >&2
    return
  fi
  "${TOOLLOOP_WHOLE_BIN:-./target/release/toolloop}" ask --backend openai --base-url "$url" --model "$model" \
    --builtin --demo --timeout 120 --num-predict 256 --json --transcript "$out/$name/$id.transcript.jsonl" "${flags[@]}" "$question" \
    >"$out/$name/$id.json" 2>"$out/$name/$id.log" || true
  echo "$id done" >&2
}
export -f run_case
export url model name out tools_url TOOLLOOP_WHOLE_BIN
export FLAGS_Q="${flags[*]:-}"
if [ "${TOOLLOOP_WHOLE_READ:-}" = 1 ]; then
  :
elif [ "$jobs" = 1 ]; then
  while IFS= read -r line; do run_case "$line"; done <"$data"
else
  # shellcheck disable=SC2016
  tr '\n' '\0' <"$data" | xargs -0 -P "$jobs" -I{} bash -c 'flags=($FLAGS_Q); run_case "$1"' _ {}
fi

python3 - "$data" "$out/$name" <<'PY'
import json, os, sys
data, dir = sys.argv[1], sys.argv[2]
cases = [json.loads(l) for l in open(data) if l.strip()]
rows = {"tuning": [], "validation": []}
langs = sorted({c["lang"] for c in cases if c.get("lang")})
def answer_language(text):
    import re
    if re.search(r"[\u3040-\u30ff]", text):
        return "ja"
    if re.search(r"[\u4e00-\u9fff]", text):
        return "zh"
    if not re.search(r"[^\W\d_]", text):
        return None
    import langid
    langid.set_languages(["en"] + [l for l in langs if l not in ("ja", "zh")])
    return langid.classify(text)[0]
for c in cases:
    half = "tuning" if int(c["id"].rsplit("_", 1)[1]) % 2 == 0 else "validation"
    path = os.path.join(dir, c["id"] + ".json")
    try:
        r = json.load(open(path))
    except Exception:
        r = {}
    answer = (r.get("answer") or "").lower().replace(",", "").replace("\u202f", "")
    used = [s.get("tool") for s in r.get("steps", []) if s.get("tool")]
    facts = all(any(e.lower().replace(",", "") in answer for e in g) for g in c["expect"])
    tools = all(t in used for t in c["tools"]) and (c["rounds"] > 0 or not used)
    right = bool(r.get("answer")) and facts and tools
    # Every request for a model turn, declined ones too (the fit question is not one).
    try:
        events = [json.loads(l) for l in open(os.path.join(dir, c["id"] + ".transcript.jsonl"))]
        turns = sum(e.get("event") == "model_request" for e in events)
        # Where a turn past the first comes from: a turn of calls declined or an answer
        # refused (the model is asked again, for an answer or another tool)
        # (a check's `decline` or `refuse_answer`), a turn asked again for more (`ask_model`).
        checks = [e.get("action") for e in events if e.get("event") == "check"]
        declined = sum(a in ("decline", "refuse_answer") for a in checks)
        asked = sum(a == "ask_model" for a in checks)
    except Exception:
        turns, declined, asked = r.get("iterations", 0), 0, 0
    budget = r.get("budget", {})
    within = right and turns <= c["rounds"] + 1
    over = max(0, turns - c["rounds"] - 1)
    # Each turn over, put down to a decline first, then to an asking; the rest is a
    # needless call let through, then answered.
    over_declined = min(over, declined)
    over_asked = min(over - over_declined, asked)
    lang = None
    if c.get("lang") and r.get("answer"):
        lang = answer_language(r["answer"])
    rows[half].append(dict(id=c["id"], right=right, lang=c.get("lang"), said=lang, within=within, turns=turns,
                           over=over, over_declined=over_declined, over_asked=over_asked,
                           used=used,
                           requests=budget.get("model_requests", 0),
                           secs=(budget.get("model_ms", 0) + budget.get("tool_ms", 0) + budget.get("own_ms", 0)) / 1000,
                           phases=[(budget.get("model_ms", 0) - budget.get("aside_ms", 0)) / 1000,
                                   budget.get("aside_ms", 0) / 1000, budget.get("tool_ms", 0) / 1000,
                                   budget.get("own_ms", 0) / 1000],
                           tokens=sum((budget.get("generated") or {}).values()),
                           stop=r.get("stop_reason")))
def reply(c):
    try:
        return json.load(open(os.path.join(dir, c["id"] + ".json")))
    except Exception:
        return {}
# A run that never reached the model (server down, model missing) says why in its JSON.
if all(reply(c).get("stop_reason", "error") == "error" for c in cases):
    first = reply(cases[0]).get("error", f"see {dir}/*.log")
    sys.exit(f"no question got a reply from the model: {first}")
print(f"| half | right | right within rounds+1 turns | turns over (declined or refused / asked again / let through) | requests/case (fit questions too) | generated tokens/case | s/case (turns + aside + tools + own) |" + (" answers in the question's language (of those with words) |" if langs else ""))
print("|---|---|---|---|---|---|---|" + ("---|" if langs else ""))
for half, rs in rows.items():
    n = max(len(rs), 1)
    over = sum(r['over'] for r in rs)
    d, a = sum(r['over_declined'] for r in rs), sum(r['over_asked'] for r in rs)
    print(f"| {half} | {sum(r['right'] for r in rs)}/{len(rs)} | {sum(r['within'] for r in rs)}/{len(rs)} | "
          f"{over} ({d} / {a} / {over - d - a}) | {sum(r['requests'] for r in rs)/n:.2f} | "
          f"{sum(r['tokens'] for r in rs)/n:.0f} | {sum(r['secs'] for r in rs)/n:.1f} ("
          + " + ".join(f"{sum(r['phases'][i] for r in rs)/n:.1f}" for i in range(4)) + ") |"
          + (f" {sum(r['said'] == r['lang'] for r in rs)}/{sum(r['said'] is not None for r in rs)} |" if langs else ""))
with open(os.path.join(dir, "summary.jsonl"), "w") as f:
    for half, rs in rows.items():
        for r in rs:
            f.write(json.dumps(dict(half=half, **r)) + "\n")
PY
