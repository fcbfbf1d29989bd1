#!/usr/bin/env bash
# The unit's priority, measured (issue #31): does a client flood on hlbook take CPU from the node beside it?
# The release hlsim at mainnet load (by-block, --node-lag-ms 0, so a line's local_time - block_time is the node's own
# time to make and write the block), `hlbook serve` under `nice -n NICE`, and a flood: latency_stats with CONNS
# connections, each subscribed to l2Book, trades and bbo on every coin. One audited probe connection (also
# latency_stats) reports the node's write lag ("block_to_node_write") and hlbook's own stages.
#
#   benches/scripts/priority.sh NICE CONNS [SECS]     (SECS default 60; OUT=report dir, default build/bench-priority)
#
# Run with nothing else on the machine; compare NICE=-10 (the unit's old Nice) with 0 and 10, and CONNS=0 (quiet).
set -euo pipefail
cd "$(dirname "$0")/../.."
NICE=$1
CONNS=$2
SECS=${3:-60}
BIN=${BIN:-target/release}
STATS=${LATENCY_STATS:-build/latency_client/latency_stats}
OUT=${OUT:-build/bench-priority}
. benches/scripts/lib.sh

start_hlsim "$work/sim.out" "$work/sim.log" \
	--out "$work/data" --info-listen 127.0.0.1:0 --rollover-secs 60 --prune-keep 2 --node-lag-ms 0
info=$(wait_line "$work/sim.out" "info listening on")
HLBOOK_NICE=$NICE start_hlbook "$work/server.out" "$work/server.log" \
	serve --node-dir "$work/data" --info-url "http://$info/info" \
	--snapshot-dir "$work/snapshots" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --set server.max_connections_per_ip=100000 \
	--set server.max_http_connections_per_ip=100000 --set server.max_subscriptions_per_ip=100000000 \
	--set server.max_messages_per_minute_per_ip=100000000
addr=$(wait_line "$work/server.out" "hlbook listening on")
for _ in $(seq 900); do
	[ "$(curl -sf "http://$addr/health" | grep -o '"state":"live"')" ] && break
	sleep 0.1
done
if [ "$CONNS" -gt 0 ]; then
	"$STATS" --url "ws://$addr/ws" --coins all --channels l2Book,trades,bbo --conns "$CONNS" --duration "$((SECS + 20))" \
		--allow-loss >"$work/flood.txt" 2>&1 &
	pids+=($!)
	sleep 10
fi
"$STATS" --url "ws://$addr/ws" --coins all --channels l2Book,trades,bbo --conns 1 --duration "$SECS" --warmup 5 \
	--audit --allow-loss --json "$OUT/nice${NICE}-conns${CONNS}.json" >"$OUT/nice${NICE}-conns${CONNS}.txt" 2>&1
grep -E "^(channel|l2Book|  l2Book|    )" "$OUT/nice${NICE}-conns${CONNS}.txt" | head -9
