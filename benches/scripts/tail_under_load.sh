#!/usr/bin/env bash
# The tail under load (issue #16): the release hlsim at mainnet load (by-block), `hlbook serve` following it, and
# latency_stats --audit with 10 connections x every coin x l2Book + trades + bbo, all on this machine's cores.
# Prints latency_stats' report, whose audit split gives node write -> read and the time inside the server per
# percentile. Results: docs/benchmarks.md.
#
#   benches/scripts/tail_under_load.sh [SECS]     (default 240; BIN=dir of hlsim/hlbook, default target/release;
#                                                 NICE=-10 runs the server as deploy/systemd/hlbook.service does)
#
# The simulator rolls its hour files every 60 s and keeps two per stream, so a long run stays within ~5 GB.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-240}
BIN=${BIN:-target/release}
STATS=${LATENCY_STATS:-build/latency_client/latency_stats}
OUT=${OUT:-build/bench-tail}
. benches/scripts/lib.sh

start_hlsim "$work/sim.out" "$work/sim.log" \
	--out "$work/data" --info-listen 127.0.0.1:0 --rollover-secs 60 --prune-keep 2
info=$(wait_line "$work/sim.out" "info listening on")
HLBOOK_NICE=${NICE:-0} start_hlbook "$work/server.out" "$work/server.log" \
	serve --node-dir "$work/data" --info-url "http://$info/info" --snapshot-dir "$work/snapshots" \
	--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
addr=$(wait_line "$work/server.out" "hlbook listening on")
for _ in $(seq 900); do
	[ "$(curl -sf "http://$addr/health" | grep -o '"state":"live"')" ] && break
	sleep 0.1
done
"$STATS" --url "ws://$addr/ws" --coins all --channels l2Book,trades,bbo --conns 10 --duration "$SECS" --warmup 10 \
	--audit --allow-loss --json "$OUT/tail.json"
