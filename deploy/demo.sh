#!/usr/bin/env bash
# `make demo`: the node simulator writes a mainnet-like market, hlbook serves it, latency_stats measures it for
# about 20 s; prints the client's latency table with its per-stage split and health verdict, the server's own
# stage breakdown, and writes the charts as SVG (and where they are). Everything started here is stopped on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
# The binaries: the release build (`make demo`), or the test build for `make smoke`, which checks that it runs.
BIN=${HLBOOK_BIN_DIR:-target/release}
STATS=build/latency_client/latency_stats
OUT=build/demo
SECS=${DEMO_SECS:-20}
mkdir -p "$OUT"
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The first line starting with $2 in file $1 (a process prints its bound address there), waiting up to 30 s.
wait_line() {
	for _ in $(seq 300); do
		if l=$(grep -m1 "^$2" "$1" 2>/dev/null); then echo "${l#"$2"}" | tr -d ' '; return 0; fi
		sleep 0.1
	done
	echo "demo: no '$2' in $1" >&2; cat "${1%.out}.log" >&2 || true; return 1
}

echo "== starting the node simulator (mainnet-like: 8 coins, 50k BTC orders, 80 ms blocks, ~150 ms node lag)"
"$BIN/hlsim" --out "$work/data" --info-listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.log" &
pids+=($!)
info=$(wait_line "$work/sim.out" "info listening on")

echo "== starting hlbook serve"
"$BIN/hlbook" serve --node-dir "$work/data" --info-url "http://$info/info" --snapshot-dir "$work/snapshots" \
	--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$work/server.out" 2>"$work/server.log" &
pids+=($!)
addr=$(wait_line "$work/server.out" "hlbook listening on")
admin=$(wait_line "$work/server.out" "hlbook admin listening on")
for _ in $(seq 600); do
	curl -sf "http://$addr/health" >/dev/null && break
	sleep 0.1
done
curl -sf "http://$addr/health" >/dev/null || { echo "demo: the server never became live" >&2; tail "$work/server.log" >&2; exit 1; }

echo "== latency_stats for ${SECS} s (all coins, l2Book + trades + bbo, with the server's audit split)"
# Exit code 3 means a channel was silent or lost data (the table's verdict line says which); the demo goes on to
# show the server's side either way and reports it at the end.
verdict=0
"$STATS" --url "ws://$addr/ws" --coins all --channels l2Book,trades,bbo --duration "$SECS" --warmup 2 --audit \
	--json "$OUT/latency.json" --svg "$OUT/latency.svg" --hlog "$OUT/latency.hlog" || verdict=$?


echo
echo "== the server's own stages over the last minute (GET /status), per line of a block, and latency_stats' beside them"
python3 - "http://$admin/status" "$OUT/latency.json" <<'PY'
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1]))
report = json.load(open(sys.argv[2]))
print("state %s  height %s  blocks/s %s  connections %s" % (s["state"], s["height"], s["blocks_per_sec"], s["connections"]))
# Each line of a block feeds its own channels; a stage means the same on both sides: the line's own times.
feeds = {"fills": ["trades"], "diffs": ["l2Book", "bbo"], "statuses": ["l4Book"]}
client = {c["channel"]: {st["stage"]: st for st in c.get("stages", [])} for c in report["channels"]}
print("%-26s %-9s %7s %10s %10s   %s" % ("stage", "line", "blocks", "p50 ms", "p99 ms", "latency_stats p50 ms (same stage, same line)"))
for line, channels in feeds.items():
    for st in s["stages_by_line"][line]:
        if not st["count"]:
            continue
        theirs = ["%s %.3f" % (ch, client[ch][st["stage"]]["p50"]) for ch in channels
                  if ch in client and st["stage"] in client[ch] and client[ch][st["stage"]]["count"]]
        print("%-26s %-9s %7d %10.3f %10.3f   %s" % (st["stage"], line, st["count"], st["p50_us"] / 1e3,
                                                   st["p99_us"] / 1e3, ", ".join(theirs)))
PY
echo
echo "charts: $OUT/latency.svg (latency by percentile, per channel)"
echo "        $OUT/latency-stages.svg (where the time goes: median and p99 per stage)"
echo "        $OUT/latency-added.svg (added latency, node write -> client, 0-10 ms)"
echo "report: $OUT/latency.json   HdrHistogram log: $OUT/latency.hlog"
echo
echo "== headline: what hlbook and the network add to the node (its file write -> this client's receive)"
python3 - "$OUT/latency.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["channels"]:
    a = c.get("added") or {}
    if a.get("count"):
        print("  %-7s p50 %7.3f ms   p99 %7.3f ms   (%d frames)" % (c["channel"], a["p50"], a["p99"], a["count"]))
PY
if [ "$verdict" -ne 0 ]; then echo "demo: latency_stats exited $verdict (see its verdict line)" >&2; exit "$verdict"; fi
