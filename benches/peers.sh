#!/usr/bin/env bash
# Repair speed against the peers, side by side in one run: toolloop, Python's json_repair
# (PyPI) and JavaScript's jsonrepair (npm), on the same generated corpus:
#   doc5mb    a 5 MB document truncated mid-string
#   quotes1mb a 1 MB document with single quotes and thousands of trailing commas
#   turns10k  10,000 small broken model turns, each repaired on its own
# Prints the time per corpus, the ratio toolloop/peer, and where the outputs disagree.
# Peers are installed into ~/.cache/toolloop (or $TOOLLOOP_CACHE).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${TOOLLOOP_CACHE:-$HOME/.cache/toolloop}"
work="${TOOLLOOP_PEERS_DIR:-target/peers}"
mkdir -p "$work" "$CACHE"

venv="$CACHE/peers-venv"
if ! "$venv/bin/python" -c 'import json_repair' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q json_repair >&2
fi
npm_dir="$CACHE/peers-npm"
if [ ! -d "$npm_dir/node_modules/jsonrepair" ]; then
  mkdir -p "$npm_dir"
  npm install --silent --no-audit --no-fund --prefix "$npm_dir" jsonrepair >&2
fi
cargo build --release -q --example repair_files

python3 - "$work" <<'PY'
import json, random, sys, os
work = sys.argv[1]
rnd = random.Random(7)
def item(i):
    return {"id": i, "name": f"item \"{i}\"", "score": i % 97 + 0.5, "ok": i % 3 == 0,
            "tags": ["a", "b"], "note": "café line\nnext"}
# 5 MB truncated mid-string
parts, size, i = [], 0, 0
while size < 5 << 20:
    s = json.dumps(item(i), ensure_ascii=False); parts.append(s); size += len(s) + 2; i += 1
doc = '{"results": [' + ", ".join(parts)
cut = (5 << 20)
while doc[cut - 1] != '"' and doc[cut] == ' ': cut += 1
doc = doc[:5 << 20]
# make sure we end inside a string
idx = doc.rfind('"name": "item')
doc = doc[:idx + 12]
open(os.path.join(work, "doc5mb.txt"), "w").write(doc)
# 1 MB single quotes, trailing commas
parts, size, i = [], 0, 0
while size < 1 << 20:
    s = "{'id': %d, 'name': 'item %d', 'tags': ['x', 'y',], 'ok': True,}," % (i, i); parts.append(s); size += len(s) + 1; i += 1
open(os.path.join(work, "quotes1mb.txt"), "w").write("{'items': [" + "\n".join(parts) + "],}")
# 10,000 small broken model turns
turns = []
for i in range(10000):
    t = {"kind": "tool_call", "thought": f"step {i}", "tool": "get_weather", "arguments": {"city": rnd.choice(["Tokyo", "Paris", "Oslo"]), "days": i % 7}}
    s = json.dumps(t)
    k = i % 5
    if k == 0: s = s[: rnd.randrange(10, len(s))]                 # truncated
    elif k == 1: s = "```json\n" + s + "\n```"                     # code fence
    elif k == 2: s = s.replace('"', "'")                           # single quotes
    elif k == 3: s = s[:-1] + ",}"                                 # trailing comma
    else: s = "Sure! " + s + " Hope this helps."                   # prose around
    turns.append(s.replace("\n", "\\n") if k != 1 else s.replace("\n", " "))
open(os.path.join(work, "turns10k.txt"), "w").write("\n".join(turns) + "\n")
PY

cat > "$work/peer.py" <<'PY'
import sys, time, json_repair
mode, src, dst = sys.argv[1:4]
data = open(src).read()
t = time.perf_counter()
if mode == "doc":
    out = json_repair.repair_json(data)
else:
    out = "\n".join(json_repair.repair_json(l) for l in data.splitlines()) + "\n"
secs = time.perf_counter() - t
open(dst, "w").write(out)
print(f"{secs:.6f}")
PY
cat > "$work/peer.mjs" <<'JS'
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(process.env.NPM_DIR + "/package.json");
const { jsonrepair } = require("jsonrepair");
const [mode, src, dst] = process.argv.slice(2);
const data = readFileSync(src, "utf8");
const t = process.hrtime.bigint();
let out;
if (mode === "doc") {
  try { out = jsonrepair(data); } catch (e) { out = "ERROR " + e.message; }
} else {
  out = data.split("\n").filter((l) => l.length).map((l) => { try { return jsonrepair(l); } catch (e) { return "ERROR " + e.message; } }).join("\n") + "\n";
}
const secs = Number(process.hrtime.bigint() - t) / 1e9;
writeFileSync(dst, out);
console.log(secs.toFixed(6));
JS

run() { # name mode file
  local tl py js
  tl=$(./target/release/examples/repair_files "$2" "$work/$3.txt" "$work/$3.toolloop")
  py=$("$venv/bin/python" "$work/peer.py" "$2" "$work/$3.txt" "$work/$3.python")
  js=$(NPM_DIR="$npm_dir" node "$work/peer.mjs" "$2" "$work/$3.txt" "$work/$3.js")
  echo "$1 $tl $py $js"
}
{
  run "doc5mb" doc doc5mb
  run "quotes1mb" doc quotes1mb
  run "turns10k" lines turns10k
} > "$work/times.txt"

python3 - "$work" <<'PY'
import json, sys, os
work = sys.argv[1]
def values(path, lines):
    text = open(path).read()
    chunks = text.splitlines() if lines else [text]
    out = []
    for c in chunks:
        try: out.append(json.loads(c))
        except Exception: out.append(("UNPARSEABLE", c[:80]))
    return out
print(f"Machine: {os.cpu_count()} cores; " + open('/proc/cpuinfo').read().split('model name')[1].split('\n')[0].split(':', 1)[1].strip())
print()
print("| corpus | toolloop | json_repair (Python) | jsonrepair (JS) | toolloop / Python | toolloop / JS |")
print("|---|---|---|---|---|---|")
for line in open(os.path.join(work, "times.txt")):
    name, tl, py, js = line.split(); tl, py, js = float(tl), float(py), float(js)
    print(f"| {name} | {tl*1000:.1f} ms | {py*1000:.1f} ms | {js*1000:.1f} ms | {tl/py:.5f} (x{py/tl:.0f} faster) | {tl/js:.5f} (x{js/tl:.0f} faster) |")
print()
for name, lines in (("doc5mb", False), ("quotes1mb", False), ("turns10k", True)):
    t = values(os.path.join(work, name + ".toolloop"), lines)
    for peer in ("python", "js"):
        p = values(os.path.join(work, f"{name}.{peer}"), lines)
        diff = [i for i, (a, b) in enumerate(zip(t, p)) if a != b]
        msg = f"{name} vs {peer}: {len(diff)} of {len(t)} outputs differ"
        if diff:
            i = diff[0]
            src = open(os.path.join(work, name + ".txt")).read()
            src = src.splitlines()[i] if lines else src[-60:]
            msg += f"; e.g. input {src[-70:]!r}: toolloop {json.dumps(t[i], ensure_ascii=False)[-90:]} / {peer} {json.dumps(p[i], ensure_ascii=False)[-90:]}"
        print("- " + msg)
PY
