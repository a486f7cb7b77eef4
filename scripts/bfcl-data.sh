#!/usr/bin/env bash
# Fetches the Berkeley Function Calling Leaderboard data toolloop's eval uses, from the
# `bfcl-eval` wheel on PyPI (version 2026.3.23, Apache-2.0), without its dependencies, and
# extracts five categories and their possible answers into a cache directory (default
# ~/.cache/toolloop/bfcl). Prints that directory. The data is not committed.
set -euo pipefail
CACHE="${TOOLLOOP_CACHE:-$HOME/.cache/toolloop}"
OUT="$CACHE/bfcl"
FILES=(BFCL_v4_simple_python.json BFCL_v4_multiple.json BFCL_v4_irrelevance.json BFCL_v4_parallel.json BFCL_v4_parallel_multiple.json)
done=1
for f in "${FILES[@]}"; do [ -s "$OUT/$f" ] || done=0; done
if [ "$done" = 1 ]; then echo "$OUT"; exit 0; fi
mkdir -p "$OUT/possible_answer"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary :all: -d "$tmp" "bfcl-eval==2026.3.23" >&2
wheel=$(ls "$tmp"/bfcl_eval-*.whl)
python3 - "$wheel" "$OUT" "${FILES[@]}" <<'PY'
import sys, zipfile, os
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    members = z.namelist()
    for name in names:
        for kind, dest in (("", out), ("possible_answer/", os.path.join(out, "possible_answer"))):
            hits = [m for m in members if m.endswith("/" + kind + name) and (kind or "possible_answer/" not in m)]
            if not hits:
                if kind and "irrelevance" in name:
                    continue  # irrelevance has no possible answers: no call is right
                sys.exit(f"{kind}{name} not found in {wheel}")
            with z.open(hits[0]) as src, open(os.path.join(dest, name), "wb") as dst:
                dst.write(src.read())
PY
echo "$OUT"
