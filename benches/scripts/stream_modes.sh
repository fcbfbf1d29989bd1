#!/usr/bin/env bash
# Streaming at line speed (issue #35): the node simulator in streaming and in by-block mode on one workload
# (seed 7, 80 ms blocks, node lag 0, lines spread over a processing span drawn from the mainnet capture), hlbook
# in front, and the C++ auditor on 4 connections x BTC/ETH/SOL/HYPE x l2Book/trades for DURATION seconds each.
#
#   benches/scripts/stream_modes.sh [OUT_DIR]
#   (DURATION=20; OLD_HLBOOK=path of another build to compare; RUNS="streaming-lines by-block" picks runs)
#
# Runs one after another, nothing else running: streaming with line publication (this build), streaming with
# `ingest.stream_lines=false` (the block-wait publication), streaming on OLD_HLBOOK when given, and by-block.
# Prints a table of latency_stats' `added: node write->recv` (receive - the node's local_time of the line the
# frame was built from) and `recv - time` per channel, p50/p99 in ms, and the server's CPU seconds per run.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-build/stream_modes}
DURATION=${DURATION:-20}
BIN=target/release
STATS=build/latency_client/latency_stats
. benches/scripts/lib.sh
[ -x "$STATS" ] || { echo "build latency_stats first (make cpp-build)" >&2; exit 1; }

RUNS=${RUNS:-streaming-lines streaming-blocks streaming-old by-block}
run() { # name mode hlbook stream_lines
  local name=$1 mode=$2 server=$3 lines=$4 dir="$OUT/$1"
  [[ " $RUNS " == *" $name "* ]] || return 0
  rm -rf "$dir" && mkdir -p "$dir/data" "$dir/snaps"
  # shellcheck disable=SC2086 # SIM_EXTRA is flags, split into words
  start_hlsim "$dir/sim.log" = --out "$dir/data" --mode "$mode" --coins 10 --block-ms 80 --node-lag-ms 0 --seed 7 \
    ${SIM_EXTRA:-} --info-listen 127.0.0.1:39301
  local sim=$started
  sleep 1
  local extra=()
  [ "$lines" = skip ] || extra=(--set "ingest.stream_lines=$lines")
  HLBOOK_BIN=$server start_hlbook "$dir/server.log" = \
    serve --node-dir "$dir/data" --mode "$mode" --info-url http://127.0.0.1:39301/info \
    --snapshot-dir "$dir/snaps" --listen 127.0.0.1:39300 --admin-listen 127.0.0.1:39302 --validate-interval 0 \
    "${extra[@]}"
  local srv=$started
  for _ in $(seq 1 100); do
    curl -sf http://127.0.0.1:39300/health 2>/dev/null | grep -q '"live"' && break
    sleep 0.2
  done
  local cpu0; cpu0=$(awk '{print $14+$15}' "/proc/$srv/stat")
  "$STATS" --url ws://127.0.0.1:39300/ws --coins BTC,ETH,SOL,HYPE --channels l2Book,trades --conns 4 \
    --duration "$DURATION" --warmup 3 --audit --allow-loss --json "$dir/stats.json" >"$dir/stats.txt" 2>&1 || true
  local cpu1; cpu1=$(awk '{print $14+$15}' "/proc/$srv/stat")
  echo "$(( (cpu1 - cpu0) ))" >"$dir/cpu_ticks"
  stop_started "$srv" "$sim"
}

run streaming-lines streaming "$BIN/hlbook" true
run streaming-blocks streaming "$BIN/hlbook" false
if [ -n "${OLD_HLBOOK:-}" ]; then run streaming-old streaming "$OLD_HLBOOK" skip; fi
run by-block by-block "$BIN/hlbook" true

python3 - "$OUT" "$(getconf CLK_TCK)" <<'PY'
import json, os, sys
out, tck = sys.argv[1], int(sys.argv[2])
print("| run | channel | added p50 | added p99 | recv-time p50 | recv-time p99 | samples | server CPU s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name in ["streaming-lines", "streaming-blocks", "streaming-old", "by-block"]:
    p = os.path.join(out, name, "stats.json")
    if not os.path.exists(p):
        continue
    j = json.load(open(p))
    cpu = int(open(os.path.join(out, name, "cpu_ticks")).read()) / tck
    for c in j["channels"]:
        a = c.get("added") or {}
        print(f"| {name} | {c['channel']} | {a.get('p50', float('nan')):.3f} | {a.get('p99', float('nan')):.3f} | "
              f"{c['p50']:.3f} | {c['p99']:.3f} | {c['count']} | {cpu:.2f} |")
PY
