#!/usr/bin/env bash
# How soon the answer starts to appear: runs `toolloop ask` against a real model server
# with a question that asks for a long answer, and reports when the first character of the
# answer reached stdout and when the run ended. Usage:
#   scripts/first-char.sh BASE_URL [RUNS] [BIN]     (BASE_URL like http://127.0.0.1:8091/v1)
set -euo pipefail
url=${1:?base URL of an OpenAI-compatible server}
runs=${2:-3}
bin=${3:-target/release/toolloop}
python3 - "$bin" "$url" "$runs" <<'PY'
import subprocess, sys, time
bin, url, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
questions = [
    "Write a short story of about 150 words about a lighthouse keeper.",
    "Explain in about 150 words how a bicycle gear system works.",
    "Describe in about 150 words a walk through an autumn forest.",
]
for i in range(runs):
    q = questions[i % len(questions)]
    started = time.monotonic()
    p = subprocess.Popen([bin, "ask", q, "--backend", "openai", "--base-url", url,
                          "--model", "m", "--no-tools", "--num-predict", "400", "--timeout", "180"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = None
    size = 0
    while True:
        chunk = p.stdout.read1(4096)
        if not chunk:
            break
        if first is None:
            first = time.monotonic() - started
        size += len(chunk)
    p.wait()
    total = time.monotonic() - started
    print(f"run {i+1}: first character at {first:.2f} s, whole answer at {total:.2f} s "
          f"({size} bytes, first/whole = {first/total:.2f})" if first else f"run {i+1}: no answer")
PY
