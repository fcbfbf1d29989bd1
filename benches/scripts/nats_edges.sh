#!/usr/bin/env bash
# Fan-out with real edges (issue #44): hlsim at mainnet rate → `hlbook relay --nats` → nats-server → N `hlbook
# serve` edges reading the stream with the live path on (each line reaches each edge twice: subject and stream).
# For each N, over SECS seconds once every edge is live: nats-server's CPU (its /proc times) and outgoing MB/s (its
# /varz), the edges' block lag (now − the last applied block's time, sampled each second: p50 and max over all
# edges), the share of lines they took from the subject, and the sampler's own CPU. One python process samples
# every edge (nats_edges_sample.py), so watching 50 edges costs less than what is watched.
#
# LEAF=1: the regional layout of docs/scale-out.md, "Regions": the relay publishes into a hub (JetStream domain
# hub), a leaf node (domain tokyo) mirrors the stream and the snapshot store (`hlbook relay --mirror-from hub`), and
# the edges read the leaf. Adds the hub's CPU and the WAN bytes per region: what the hub sent the leaf (/leafz).
#
#   cargo build --release -p hlbook --bins && EDGES="1 10 50" SECS=30 benches/scripts/nats_edges.sh
#   cargo build --release -p hlbook --bins && LEAF=1 EDGES="1 10 50" SECS=30 benches/scripts/nats_edges.sh
#   BIN=target/debug EDGES="1 2" SECS=5 benches/scripts/nats_edges.sh     # a smoke run, not a measurement
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
OUT=${OUT:-build/bench}
SECS=${SECS:-30}
EDGES=${EDGES:-"1 10 50"}
LEAF=${LEAF:-}
# shellcheck source=benches/scripts/lib.sh
source benches/scripts/lib.sh

# start_nats DIR NAME CONF_LINES: a nats-server on ports it picks, JetStream under DIR/NAME; sets $nats_pid,
# $nats_port, $nats_mon (its monitoring URL) and $nats_out (its log).
start_nats() {
	local d=$1 name=$2 extra=$3
	printf 'server_name: %s\nhost: 127.0.0.1\nport: -1\nhttp: 127.0.0.1:-1\n%s\n' "$name" "$extra" >"$d/$name.conf"
	nats_out="$d/$name.out"
	start_bg "$nats_out" = nats-server -c "$d/$name.conf"
	nats_pid=$started
	until grep -q "Server is ready" "$nats_out"; do sleep 0.1; done
	nats_port=$(grep -m1 -o 'client connections on 127.0.0.1:[0-9]*' "$nats_out" | grep -o '[0-9]*$')
	nats_mon="http://127.0.0.1:$(grep -m1 -o 'http monitor on 127.0.0.1:[0-9]*' "$nats_out" | grep -o '[0-9]*$')"
}

header=1
for n in $EDGES; do
	d="$work/n$n"
	mkdir -p "$d"
	if [ -n "$LEAF" ]; then
		start_nats "$d" hub "jetstream { store_dir: \"$d/hub-js\", domain: hub }
leafnodes { listen: 127.0.0.1:-1 }"
		hub=("$nats_pid" "$nats_port" "$nats_mon")
		leaf_port=$(grep -m1 -o 'leafnode connections on 127.0.0.1:[0-9]*' "$nats_out" | grep -o '[0-9]*$')
		start_nats "$d" tokyo "jetstream { store_dir: \"$d/leaf-js\", domain: tokyo }
leafnodes { remotes: [ { url: \"nats-leaf://127.0.0.1:$leaf_port\" } ] }"
		until grep -q "Leafnode connection created" "$nats_out"; do sleep 0.1; done
		servers=(--server "hub=${hub[0]}=${hub[2]}" --server "tokyo=$nats_pid=$nats_mon" --leafz "${hub[2]}")
		publish_to=${hub[1]}
	else
		start_nats "$d" nats "jetstream { store_dir: \"$d/js\" }"
		servers=(--server "nats=$nats_pid=$nats_mon")
		publish_to=$nats_port
	fi
	# The edges read the server started last: the only one, or the leaf.
	read_from=$nats_port
	start_hlsim "$d/sim.out" "$d/sim.log" --out "$d/data" --rate 1.0 --info-listen 127.0.0.1:0
	info=$(wait_line "$d/sim.out" "info listening on")
	start_hlbook "$d/relay.out" "$d/relay.log" relay --nats "nats://127.0.0.1:$publish_to" --node-dir "$d/data" \
		--info-url "http://$info/info" --snapshot-dir "$d/relay-snaps"
	wait_line "$d/relay.out" "relay publishing" >/dev/null
	if [ -n "$LEAF" ]; then
		"${HLBOOK_BIN:-$BIN/hlbook}" relay --nats "nats://127.0.0.1:$read_from" --mirror-from hub >"$d/mirror.out" \
			2>"$d/mirror.log"
	fi
	bases=()
	for i in $(seq "$n"); do
		start_hlbook "$d/edge$i.out" "$d/edge$i.log" serve --source "nats://127.0.0.1:$read_from/HL" \
			--mode by-block --info-url "" --snapshot-dir "$d/snaps$i" --listen 127.0.0.1:0 \
			--admin-listen 127.0.0.1:0 --validate-interval 0
		wait_line "$d/edge$i.out" "hlbook listening on" >/dev/null
		# The sampler reads the admin listener's /health: the public one has no counters.
		bases+=("http://$(wait_line "$d/edge$i.out" "hlbook admin listening on")")
	done
	python3 benches/scripts/nats_edges_sample.py ${header:+--header} --edges "$n" --secs "$SECS" "${servers[@]}" "${bases[@]}"
	header=
	stop_started "${pids[@]}"
done
