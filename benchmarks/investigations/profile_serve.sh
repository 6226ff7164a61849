#!/usr/bin/env bash
# An investigation of 2026-12-03: where `whitevec serve`'s CPU goes under 32 clients (docs/results/serve.md,
# "Where the server's time goes"): py-spy samples the server for 15 s while benchmarks/common/loadgen.py (its own
# process) drives it, then the raw stacks are summed per thread and per innermost frame. Needs py-spy (pip install
# py-spy), the index that maintained/bench_serve.py builds, and its queries file.
# Usage: bash benchmarks/investigations/profile_serve.sh [INDEX] [QUERIES]
set -euo pipefail
cd "$(dirname "$0")/../.."
INDEX="${1:-/tmp/whitevec-bench/cranfield-minilm-w256}"
QUERIES="${2:-/tmp/whitevec-bench-serve-queries.json}"
OUT="$(mktemp -d)"
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 TOKENIZERS_PARALLELISM=false
.venv/bin/python -c "from whitevec.cli import main; main()" serve "$INDEX" --port 8765 > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do sleep 1; curl -s localhost:8765/health > /dev/null && break; done
.venv/bin/python benchmarks/common/loadgen.py --url http://127.0.0.1:8765/search --kind search --queries "$QUERIES" \
  --clients 32 --requests 6000 > "$OUT/load.log" 2>&1 &
LOAD=$!
sleep 6
.venv/bin/py-spy record -p "$SERVER" -d 15 -r 200 -f raw -o "$OUT/stacks.txt" --threads > "$OUT/py-spy.log" 2>&1
wait $LOAD
tail -1 "$OUT/load.log"
.venv/bin/python - "$OUT/stacks.txt" <<'PY'
import collections
import sys

threads, leaves = collections.Counter(), collections.Counter()
for line in open(sys.argv[1]):
    stack, _, count = line.rstrip().rpartition(" ")
    frames = stack.split(";")
    threads[frames[0]] += int(count)
    leaves[(frames[0][:30], frames[-1][:110])] += int(count)
print("samples per thread:", threads.most_common())
for (thread, frame), count in leaves.most_common(25):
    print(count, thread, frame)
PY
