#!/usr/bin/env bash
# Fan-out with real edges (issue #44): hlsim at mainnet rate → `hlbook relay --nats` → nats-server → N `hlbook
# serve` edges reading the stream with the live path on (each line reaches each edge twice: subject and stream).
# For each N, over SECS seconds once every edge is live: nats-server's CPU (its /proc times) and outgoing MB/s (its
# /varz), the edges' block lag (now − the last applied block's time, sampled each second: p50 and max over all
# edges) and the share of lines they took from the subject.
#
#   cargo build --release -p hlbook --bins && EDGES="1 10 50" SECS=30 benches/scripts/nats_edges.sh
#   BIN=target/debug EDGES="1 2" SECS=10 benches/scripts/nats_edges.sh     # a smoke run, not a measurement
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
OUT=${OUT:-build/bench}
SECS=${SECS:-30}
EDGES=${EDGES:-"1 10 50"}
# shellcheck source=benches/scripts/lib.sh
source benches/scripts/lib.sh

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "| edges | nats-server CPU | out MB/s | edge lag p50 / max (ms) | lines from the subject |"
echo "| ---: | ---: | ---: | --- | ---: |"
for n in $EDGES; do
	d="$work/n$n"
	mkdir -p "$d"
	printf 'host: 127.0.0.1\nport: -1\nhttp: 127.0.0.1:-1\njetstream { store_dir: "%s/js" }\n' "$d" >"$d/nats.conf"
	start_bg "$d/nats.out" = nats-server -c "$d/nats.conf"
	nats_pid=$started
	until grep -q "Server is ready" "$d/nats.out"; do sleep 0.1; done
	port=$(grep -m1 -o 'client connections on 127.0.0.1:[0-9]*' "$d/nats.out" | grep -o '[0-9]*$')
	mon=$(grep -m1 -o 'http monitor on 127.0.0.1:[0-9]*' "$d/nats.out" | grep -o '[0-9]*$')
	start_hlsim "$d/sim.out" "$d/sim.log" --out "$d/data" --rate 1.0 --info-listen 127.0.0.1:0
	info=$(wait_line "$d/sim.out" "info listening on")
	start_hlbook "$d/relay.out" "$d/relay.log" relay --nats "nats://127.0.0.1:$port" --node-dir "$d/data" \
		--info-url "http://$info/info" --snapshot-dir "$d/relay-snaps"
	wait_line "$d/relay.out" "relay publishing" >/dev/null
	bases=() admins=()
	for i in $(seq "$n"); do
		start_hlbook "$d/edge$i.out" "$d/edge$i.log" serve --source "nats://127.0.0.1:$port/HL" --mode by-block \
			--info-url "" --snapshot-dir "$d/snaps$i" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
			--validate-interval 0
		bases+=("http://$(wait_line "$d/edge$i.out" "hlbook listening on")")
		# The counters are on the admin listener's /health.
		admins+=("http://$(wait_line "$d/edge$i.out" "hlbook admin listening on")")
	done
	for b in "${bases[@]}"; do
		# 503 (no books yet) is an empty answer here.
		until curl -sf "$b/health" 2>/dev/null | json 'd["state"]' 2>/dev/null | grep -q live; do sleep 0.2; done
	done
	t0=$(cpu_ticks "$nats_pid")
	o0=$(curl -s "http://127.0.0.1:$mon/varz" | json 'd["out_bytes"]')
	lags=()
	for _ in $(seq "$SECS"); do
		for b in "${bases[@]}"; do lags+=("$(curl -s "$b/health" | json 'd["lag_ms"]["block"]')"); done
		sleep 1
	done
	t1=$(cpu_ticks "$nats_pid")
	o1=$(curl -s "http://127.0.0.1:$mon/varz" | json 'd["out_bytes"]')
	live=0 all=0
	for a in "${admins[@]}"; do
		h=$(curl -s "$a/health")
		live=$((live + $(echo "$h" | json 'd["counters"]["nats_live_lines"]')))
		all=$((all + $(echo "$h" | json 'd["counters"]["lines"]')))
	done
	hz=$(getconf CLK_TCK)
	printf '%s\n' "${lags[@]}" | sort -n | awk -v n="$n" -v cpu="$(((t1 - t0) * 100 / hz / SECS))" \
		-v mb="$(((o1 - o0) / SECS / 1000000))" -v live="$((live * 100 / (all > 0 ? all : 1)))" \
		'{a[NR]=$1} END {printf "| %d | %d%% | %d | %d / %d | %d%% |\n", n, cpu, mb, a[int(NR/2)+1], a[NR], live}'
	stop_started "${pids[@]}"
done
