#!/usr/bin/env python3
"""The soak's second client (issue #31): follows what latency_stats cannot, per-user channels for USERS users and
candles of every interval on every coin, and reports frames per channel, loss notices, errors and disconnects as
one JSON line. Loss is judged by the server's own notices (an ordered stream that fell behind names the lost
blocks), not by timing: this is a memory and loss soak, latency is latency_stats' job.

    soak_client.py WS_URL INFO_URL NODE_DIR SECS [USERS]

Needs websocket-client (the SDK venv `make clients` builds has it)."""
import glob
import json
import os
import sys
import threading
import time
import urllib.request
from collections import Counter

import websocket

INTERVALS = ["1m", "3m", "5m", "15m", "30m", "1h", "2h", "4h", "8h", "12h", "1d", "3d", "1w", "1M"]
PER_CONN = 400


def busiest_users(node_dir, n):
    counts = Counter()
    for path in glob.glob(os.path.join(node_dir, "node_fills*", "hourly", "*", "*")):
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    for ev in json.loads(line)["events"]:
                        counts[ev[0].lower()] += 1
                except (ValueError, KeyError):
                    pass
    return [u for u, _ in counts.most_common(n)]


def coins(info_url):
    req = urllib.request.Request(info_url, json.dumps({"type": "meta"}).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return [a["name"] for a in json.load(r)["universe"]]


class Conn(threading.Thread):
    def __init__(self, url, subs, stop, stats, lock):
        super().__init__(daemon=True)
        self.url, self.subs, self.stop, self.stats, self.lock = url, subs, stop, stats, lock

    def run(self):
        while not self.stop.is_set():
            try:
                ws = websocket.create_connection(self.url, timeout=30)
                for s in self.subs:
                    ws.send(json.dumps({"method": "subscribe", "subscription": s}))
                while not self.stop.is_set():
                    msg = json.loads(ws.recv())
                    ch = msg.get("channel", "")
                    with self.lock:
                        self.stats["frames"][ch] += 1
                        if ch == "hlbookNotice" and "lost blocks" in str(msg.get("data")):
                            self.stats["loss_notices"].append(str(msg["data"])[:300])
                        elif ch == "error":
                            self.stats["errors"].append(str(msg["data"])[:300])
                ws.close()
            except Exception as e:  # a dropped connection is counted and reopened
                if self.stop.is_set():
                    return
                with self.lock:
                    self.stats["disconnects"].append(f"{time.time():.0f} {e}"[:300])
                time.sleep(1)


def main():
    url, info_url, node_dir, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    n_users = int(sys.argv[5]) if len(sys.argv) > 5 else 15
    users = busiest_users(node_dir, n_users)
    subs = [{"type": "candle", "coin": c, "interval": i} for c in coins(info_url) for i in INTERVALS]
    for u in users:
        subs += [{"type": "orderUpdates", "user": u}, {"type": "userFills", "user": u}, {"type": "userEvents", "user": u}]
    stats = {"frames": Counter(), "loss_notices": [], "errors": [], "disconnects": []}
    stop, lock = threading.Event(), threading.Lock()
    conns = [Conn(url, subs[i : i + PER_CONN], stop, stats, lock) for i in range(0, len(subs), PER_CONN)]
    for c in conns:
        c.start()
    time.sleep(secs)
    stop.set()
    with lock:
        out = dict(stats, users=len(users), subscriptions=len(subs), connections=len(conns))
        print(json.dumps(out, default=dict))


if __name__ == "__main__":
    main()
