#!/usr/bin/env bash
# The soak (issue #31): the release hlsim at mainnet load (by-block), `hlbook serve` following it, and every channel
# type at once: latency_stats --audit with l2Book, trades and bbo on every coin (4 connections), and
# soak_client.py with the three user channels of the 15 busiest users and candles of every interval on every coin.
# Samples the server's RSS every 10 s into rss.csv; at the end prints latency_stats' report, soak_client's counts
# and the server's loss counters. Results: docs/benchmarks.md.
#
#   benches/scripts/soak.sh [SECS]     (default 3600; BIN=dir of hlsim/hlbook, default target/release;
#                                      PY=python with websocket-client, default build/clients/py/bin/python;
#                                      OUT=report dir, default build/bench-soak; ROLLOVER=hlsim --rollover-secs, default 60)
#
# The simulator rolls its hour files every 60 s and keeps two per stream, so a long run stays within ~5 GB.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-3600}
BIN=${BIN:-target/release}
STATS=${LATENCY_STATS:-build/latency_client/latency_stats}
PY=${PY:-build/clients/py/bin/python}
OUT=${OUT:-build/bench-soak}
. benches/scripts/lib.sh

start_hlsim "$work/sim.out" "$work/sim.log" \
	--out "$work/data" --info-listen 127.0.0.1:0 --rollover-secs "${ROLLOVER:-60}" --prune-keep 2
info=$(wait_line "$work/sim.out" "info listening on")
start_hlbook "$work/server.out" "$work/server.log" \
	serve --node-dir "$work/data" --info-url "http://$info/info" --snapshot-dir "$work/snapshots" \
	--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
server=$started
addr=$(wait_line "$work/server.out" "hlbook listening on")
admin=$(wait_line "$work/server.out" "hlbook admin listening on")
for _ in $(seq 900); do
	[ "$(curl -sf "http://$addr/health" | grep -o '"state":"live"')" ] && break
	sleep 0.1
done
start=$(date +%s)
echo "t_s,rss_kb" >"$OUT/rss.csv"
(
	while kill -0 "$server" 2>/dev/null; do
		echo "$(($(date +%s) - start)),$(ps -o rss= -p "$server" | tr -d ' ')" >>"$OUT/rss.csv"
		sleep 10
	done
) &
pids+=($!)
"$PY" benches/scripts/soak_client.py "ws://$addr/ws" "http://$addr/info" "$work/data" "$SECS" >"$OUT/client.json" &
client=$!
pids+=($client)
"$STATS" --url "ws://$addr/ws" --coins all --channels l2Book,trades,bbo --conns 4 --duration "$SECS" --warmup 10 \
	--audit --allow-loss --json "$OUT/stats.json" | tee "$OUT/stats.txt"
wait "$client" || true
echo "soak_client: $(cat "$OUT/client.json")"
curl -sf "http://$admin/health" >"$OUT/health.json"
echo "server ws counters: $(python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); print({k: h["ws"][k] for k in ("overflows","conflated","closed_budget","closed_slow")})' "$OUT/health.json")"
echo "rss (kB) first/last samples: $(sed -n 2p "$OUT/rss.csv") ... $(tail -1 "$OUT/rss.csv")"
