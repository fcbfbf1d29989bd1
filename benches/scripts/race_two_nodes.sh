#!/usr/bin/env bash
# Racing two nodes (issue #20, Benchmark): the release hlsim as two nodes, A (--out) and B (--node), writing the
# same blocks, each block after its own independent draw from the mainnet capture's node lag (324-578 ms,
# --node-lag-ms 0 so that draw is the whole exchange -> node write time); then TWO `hlbook serve` side by side in
# the same run, one reading only node A, one racing A and B; and one latency_stats --audit per server on l2Book
# for every coin. Prints both reports, then a side-by-side table of l2Book exchange -> received p50/p99/p99.9 and
# hlbook's own added latency (node write -> first socket write, from each server's /status, per block of the
# diffs line that l2Book frames come from). Results: docs/benchmarks.md.
#
#   benches/scripts/race_two_nodes.sh [SECS]   (default 120; BIN=dir of hlsim/hlbook, default target/release;
#                                               OUT=report dir, default build/bench-race; RATE=hlsim --rate, activity relative to mainnet;
#                                               ROLLOVER=seconds per simulated hour file, default 600)
#
# The simulator's hour-file rollover (with pruning) stalls both nodes' writers at the same moment, which no second
# node can hide, so by default no rollover falls inside a run shorter than ~9 minutes: the data dirs grow with the
# run (both nodes together up to ~80 MB/s at RATE=1) and are deleted at the end. ROLLOVER=30 keeps them small
# (two files per stream) and shows those stalls in both tails (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-120}
BIN=${BIN:-target/release}
STATS=${LATENCY_STATS:-build/latency_client/latency_stats}
OUT=${OUT:-build/bench-race}
RATE=${RATE:-1.0}
ROLLOVER=${ROLLOVER:-600}
. benches/scripts/lib.sh

start_hlsim "$work/sim.out" "$work/sim.log" \
	--out "$work/a" --write-delay capture --node "$work/b,delay=capture" --node-lag-ms 0 \
	--rate "$RATE" --info-listen 127.0.0.1:0 --rollover-secs "$ROLLOVER" --prune-keep 2
info=$(wait_line "$work/sim.out" "info listening on")

# serve NAME SOURCES...: an hlbook server; its address and admin address go to $work/NAME.addr / NAME.admin.
serve() {
	local name=$1; shift
	local args=()
	for s in "$@"; do args+=(--source "$s"); done
	start_hlbook "$work/$name.out" "$work/$name.log" \
		serve --node-dir "$work/a" "${args[@]}" --info-url "http://$info/info" \
		--snapshot-dir "$work/snapshots-$name" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
	wait_line "$work/$name.out" "hlbook listening on" >"$work/$name.addr"
	wait_line "$work/$name.out" "hlbook admin listening on" >"$work/$name.admin"
}
serve one file
serve race file "file:$work/b"
for name in one race; do
	addr=$(cat "$work/$name.addr")
	for _ in $(seq 900); do
		[ "$(curl -sf "http://$addr/health" | grep -o '"state":"live"')" ] && break
		sleep 0.1
	done
done

# Every block's own stages, polled from /status more often than its one-minute window turns over.
poll_status() {
	local admin=$1 to=$2
	while true; do
		curl -sf "http://$admin/status?blocks=4096" >>"$to" && echo >>"$to"
		sleep 20
	done
}
for name in one race; do
	: >"$OUT/$name-status.jsonl"
	poll_status "$(cat "$work/$name.admin")" "$OUT/$name-status.jsonl" &
	pids+=($!)
done

for name in one race; do
	"$STATS" --url "ws://$(cat "$work/$name.addr")/ws" --coins all --channels l2Book --conns 1 \
		--duration "$SECS" --warmup 10 --audit --allow-loss --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1 &
	pids+=($!)
	eval "stats_$name=$!"
done
wait "$stats_one" "$stats_race" || true
for name in one race; do
	curl -sf "http://$(cat "$work/$name.admin")/status?blocks=4096" >>"$OUT/$name-status.jsonl" && echo >>"$OUT/$name-status.jsonl"
done
curl -sf "http://$(cat "$work/race.admin")/status" >"$OUT/race-sources.json" || true
cp "$work/one.log" "$work/race.log" "$work/sim.log" "$OUT/"
echo "CPU seconds used (run + start-up):"
ps -o pid=,time=,args= -p "$(IFS=,; echo "${pids[*]}")" | grep -v curl | cut -c1-110 || true
echo "== one node (A) =="; cat "$OUT/one.txt"
echo "== racing A+B =="; cat "$OUT/race.txt"
python3 benches/scripts/race_report.py "$OUT"
