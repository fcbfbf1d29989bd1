"""The official Python SDK's `Info.subscribe` against hlbook, unchanged but for the base URL: userFills of one user
and candle (BTC, 1m), each with a callback that prints the message it gets as one JSON line.

Exits 0 once `count` messages of each subscription arrived, 2 if the SDK raised, 3 on timeout. The SDK's socket
thread is not a daemon, so the process ends with `os._exit`.

    python_streams_harness.py HOST:PORT USER COUNT SECONDS
"""

import json
import os
import sys
import threading

from hyperliquid.info import Info

addr, user, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
got = {"userFills": 0, "candle": 0}
enough = threading.Event()
lock = threading.Lock()


def collect(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()
        got[msg["channel"]] = got.get(msg["channel"], 0) + 1
        if all(n >= count for n in got.values()):
            enough.set()


try:
    info = Info(f"http://{addr}", skip_ws=False)
    info.subscribe({"type": "userFills", "user": user}, collect)
    info.subscribe({"type": "candle", "coin": "BTC", "interval": "1m"}, collect)
except Exception as e:
    sys.stderr.write(f"the SDK raised {type(e).__name__}: {e}\n")
    sys.stderr.flush()
    os._exit(2)
os._exit(0 if enough.wait(seconds) else 3)
