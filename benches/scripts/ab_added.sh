#!/bin/bash
# One side of an A/B: hlsim (defaults) + hlbook serve from $BIN (default target/release) with extra serve args $2,
# then latency_stats --audit for 15 s; prints the added latency (node write -> receive) p50/p99 per channel.
# Usage: BIN=/other/target/release benches/scripts/ab_added.sh LABEL "[serve args]"; SIM_ARGS adds hlsim args (e.g.
# "--mode streaming", with "--mode streaming" as serve args too).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release}; S=$ROOT/build/latency_client/latency_stats; d=/tmp/ab/$1
rm -rf $d; mkdir -p $d
OUT=$d
. "$ROOT/benches/scripts/lib.sh"
# $SIM_ARGS unquoted: words.
start_hlsim $d/sim.out $d/sim.log --out $d/data --info-listen 127.0.0.1:3911 $SIM_ARGS; sp=$started
sleep 2
# $2 unquoted: the extra serve args, split into words.
start_hlbook $d/srv.out $d/srv.log serve --node-dir $d/data --info-url http://127.0.0.1:3911/info --snapshot-dir $d/snaps --listen 127.0.0.1:8911 --admin-listen none $2; vp=$started
for i in $(seq 100); do curl -sf 127.0.0.1:8911/health >/dev/null && break; sleep 0.2; done
$S --url ws://127.0.0.1:8911/ws --coins all --channels l2Book,trades --duration 15 --warmup 3 --audit --json $d/r.json >/dev/null 2>&1
stop_started $vp $sp
python3 -c "
import json;r=json.load(open('$d/r.json'))
print('$1', ' '.join('%s added p50 %.3f p99 %.3f'%(c['channel'],c['added']['p50'],c['added']['p99']) for c in r['channels']))"
