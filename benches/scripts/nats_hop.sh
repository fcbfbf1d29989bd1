#!/usr/bin/env bash
# The NATS hop against the node's files, in one run on one box (issue #36, Benchmarks): the release hlsim at
# mainnet activity writes by-block files; `hlbook relay --nats` publishes them into a local nats-server; ONE
# `hlbook serve` races `--source file` against `--source nats://…` of the same node. For every line (fills, diffs,
# statuses) the race records which source delivered it first and by how much it led the other (`/status`
# `sources[].lead_ms`): with the files winning, that lead is what the NATS hop adds from the node's write to the
# line being in hlbook's hands. Also prints nats-server's and the publisher's CPU seconds and RSS.
#
#   benches/scripts/nats_hop.sh [SECS]   (default 60; BIN=dir of hlsim/hlbook, default target/release;
#                                         OUT=report dir, default build/bench-nats; RATE=hlsim --rate;
#                                         LIVE=false: the edge reads the stream only, not the live subjects)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-60}
BIN=${BIN:-target/release}
OUT=${OUT:-build/bench-nats}
RATE=${RATE:-1.0}
LIVE=${LIVE:-true}
. benches/scripts/lib.sh

printf 'host: 127.0.0.1\nport: -1\njetstream { store_dir: "%s/js" }\n' "$work" >"$work/nats.conf"
nats-server -c "$work/nats.conf" >"$work/nats.out" 2>"$work/nats.log" &
pids+=($!); nats_pid=$!
for _ in $(seq 300); do grep -q "Server is ready" "$work/nats.log" && break; sleep 0.1; done
port=$(grep -m1 "Listening for client connections on" "$work/nats.log" | sed 's/.*://')

start_hlsim "$work/sim.out" "$work/sim.log" --out "$work/a" --rate "$RATE" --info-listen 127.0.0.1:0
info=$(wait_line "$work/sim.out" "info listening on")
printf '[nats]\nmax_age_secs = 600\n' >"$work/relay.toml"
start_hlbook "$work/pub.out" "$work/pub.log" \
	relay --nats "nats://127.0.0.1:$port" --config "$work/relay.toml" --node-dir "$work/a"
pub_pid=$started
wait_line "$work/pub.out" "relay publishing to nats stream" >/dev/null
start_hlbook "$work/serve.out" "$work/serve.log" \
	serve --node-dir "$work/a" --source file --source "nats://127.0.0.1:$port/HL" \
	--info-url "http://$info/info" --snapshot-dir "$work/snapshots" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
	--set "nats.live_subjects=$LIVE"
serve_pid=$started
addr=$(wait_line "$work/serve.out" "hlbook listening on")
admin=$(wait_line "$work/serve.out" "hlbook admin listening on")
for _ in $(seq 900); do
	[ "$(curl -sf "http://$addr/health" | grep -o '"state":"live"')" ] && break
	sleep 0.1
done
sleep "$SECS"
curl -sf "http://$admin/status" >"$OUT/status.json"
echo "CPU seconds and RSS (KB) over the run:"
ps -o pid=,time=,rss=,args= -p "$nats_pid,$pub_pid,$serve_pid" | cut -c1-120
python3 - "$OUT/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for src in s.get("sources", []):
    print(src["name"], "wins", src.get("wins"), "lines", src.get("lines"))
    print("  lead_ms", json.dumps(src.get("lead_ms")))
PY
