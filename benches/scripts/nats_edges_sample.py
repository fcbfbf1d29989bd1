#!/usr/bin/env python3
"""The sampler of nats_edges.sh: one long-lived process polls every edge once a second, so watching 50 edges costs
less than what is watched (a curl and a python per edge and second did not). Keep-alive connections, one per edge.

Waits until every edge is live, then for SECS seconds records each edge's block lag (/health lag_ms.block) each
second, the nats-servers' CPU (/proc times) and outgoing bytes (/varz), with --leafz the bytes the hub sent each
leaf (one leaf per region: the WAN copy), and its own CPU. Prints one markdown row (--header: the header first).

  nats_edges_sample.py --edges N --secs S --server NAME=PID=MONITOR_URL [--server ...] [--leafz HUB_MONITOR_URL]
                       [--header] EDGE_BASE_URL...
"""
import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse


class Http:
    """GETs JSON from one base URL over one kept-alive connection, reconnecting after an error."""

    def __init__(self, base):
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.conn = u.hostname, u.port, None

    def get(self, path):
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=5)
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                body = r.read()
                return json.loads(body) if r.status == 200 else None
            except (OSError, http.client.HTTPException, ValueError):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
        return None


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    rest = s[s.rindex(")") + 2:].split()
    return int(rest[11]) + int(rest[12])


def leaf_bytes(hub):
    """Bytes the hub sent each leaf so far, by the leaf's name (nats-server 2.9 names none: its address)."""
    d = hub.get("/leafz") or {}
    out = {}
    for leaf in d.get("leafs") or []:
        out[leaf.get("name") or f"{leaf.get('ip', '?')}:{leaf.get('port', '?')}"] = leaf.get("out_bytes", 0)
    return out


def wait_live(edges, timeout=600):
    deadline = time.monotonic() + timeout
    for e in edges:
        while (e.get("/health") or {}).get("state") != "live":
            if time.monotonic() > deadline:
                sys.exit(f"nats_edges_sample: an edge was not live after {timeout} s")
            time.sleep(0.2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--edges", type=int, required=True)
    p.add_argument("--secs", type=int, required=True)
    p.add_argument("--server", action="append", default=[], help="NAME=PID=MONITOR_URL")
    p.add_argument("--leafz", help="the hub's monitoring URL: WAN bytes per leaf from /leafz")
    p.add_argument("--header", action="store_true")
    p.add_argument("bases", nargs="+")
    a = p.parse_args()
    servers = [(n, int(pid), Http(url)) for n, pid, url in (s.split("=", 2) for s in a.server)]
    edges = [Http(b) for b in a.bases]
    hub = Http(a.leafz) if a.leafz else None
    if a.header:
        cols = ["edges"] + [f"{n} CPU" for n, _, _ in servers] + [f"{n} out MB/s" for n, _, _ in servers]
        cols += ["WAN MB/s per region (hub→leaf)"] if hub else []
        cols += ["edge lag p50 / max (ms)", "lines from the subject", "sampler CPU"]
        print("| " + " | ".join(cols) + " |")
        print("| " + " | ".join("---:" for _ in cols) + " |")
    wait_live(edges)

    hz = os.sysconf("SC_CLK_TCK")
    t0, me0 = time.monotonic(), os.times()
    ticks0 = [cpu_ticks(pid) for _, pid, _ in servers]
    out0 = [(m.get("/varz") or {}).get("out_bytes", 0) for _, _, m in servers]
    wan0 = leaf_bytes(hub) if hub else {}
    lags = []
    for i in range(1, a.secs + 1):
        for e in edges:
            lag = ((e.get("/health") or {}).get("lag_ms") or {}).get("block")
            if lag is not None:
                lags.append(lag)
        time.sleep(max(0.0, t0 + i - time.monotonic()))
    secs = time.monotonic() - t0
    me1 = os.times()
    ticks1 = [cpu_ticks(pid) for _, pid, _ in servers]
    out1 = [(m.get("/varz") or {}).get("out_bytes", 0) for _, _, m in servers]
    wan1 = leaf_bytes(hub) if hub else {}

    live = total = 0
    for e in edges:
        c = (e.get("/health") or {}).get("counters") or {}
        live += c.get("nats_live_lines", 0)
        total += c.get("lines", 0)
    lags.sort()
    row = [str(a.edges)]
    row += [f"{(t1 - t0_) * 100 / hz / secs:.0f}%" for t0_, t1 in zip(ticks0, ticks1)]
    row += [f"{(o1 - o0) / secs / 1e6:.1f}" for o0, o1 in zip(out0, out1)]
    if hub:
        rates = {n: (b - wan0.get(n, 0)) / secs / 1e6 for n, b in sorted(wan1.items())}
        # One region: its figure alone; several: each leaf's by name.
        one = len(rates) == 1
        row.append(", ".join(f"{r:.2f}" if one else f"{n}: {r:.2f}" for n, r in rates.items()) or "-")
    row.append(f"{lags[len(lags) // 2]} / {lags[-1]}" if lags else "-")
    row.append(f"{live * 100 // max(total, 1)}%")
    mine = (me1.user + me1.system) - (me0.user + me0.system)
    row.append(f"{mine * 100 / secs:.1f}%")
    print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
