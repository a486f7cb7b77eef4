#!/usr/bin/env bash
# search_docs at scale: builds a folder of about 22 MiB of English-like text (1,100 files
# of 20 KiB), starts `toolloop serve-tools --docs` on it, and reports the server's memory
# after indexing and the time of 20 searches. Usage: scripts/bench-search-docs.sh [BIN]
set -euo pipefail
bin=${1:-target/release/toolloop}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import random, sys, os
random.seed(7)
words = ("return refund order shipping parcel customer invoice payment account delivery "
         "warranty product price discount store policy days week label address courier "
         "exchange damaged missing support contact email phone hours open closed holiday").split()
for f in range(1100):
    with open(os.path.join(sys.argv[1], f"doc{f:04}.md"), "w") as out:
        size = 0
        while size < 20 * 1024:
            para = " ".join(random.choice(words) + random.choice(["", "s", "ed", "ing"])
                            for _ in range(random.randint(20, 80))) + ".\n\n"
            out.write(para)
            size += len(para)
PY
du -sh "$dir" | awk '{print "documents:", $1}'
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
"$bin" serve-tools --addr 127.0.0.1:$port --docs "$dir" 2>/dev/null &
pid=$!
until curl -sf 127.0.0.1:$port/health >/dev/null; do sleep 0.05; done
echo "indexed in $(echo "$(date +%s.%N) - $start" | bc) s"
echo "server memory (RSS): $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$pid/status)"
start=$(date +%s.%N)
for q in "return policy" "damaged parcel refund" "store opening hours" "warranty" "contact support by email"; do
  for _ in 1 2 3 4; do
    curl -sf -X POST 127.0.0.1:$port/tools/search_docs -d "{\"query\": \"$q\"}" >/dev/null
  done
done
echo "20 searches: $(echo "($(date +%s.%N) - $start) / 20 * 1000" | bc -l | cut -c1-6) ms each"
