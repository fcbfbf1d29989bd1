"""Runs a README Python snippet unchanged (its HOST already replaced) and prints what its callback received.

The snippet passes `print` as the subscription callback; it runs with `print` bound to a collector instead, so each
message the SDK hands over is written as one JSON line on stdout. Exits 0 once `count` messages arrived, 3 if they
did not within `seconds`. The SDK's socket thread is not a daemon, so the process ends with `os._exit`.

    python_snippet.py SNIPPET_FILE COUNT SECONDS
"""

import json
import os
import sys
import threading

path, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
got = []
enough = threading.Event()


def collect(msg):
    got.append(msg)
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()
    if len(got) >= count:
        enough.set()


try:
    exec(compile(open(path).read(), "README.md snippet", "exec"), {"print": collect, "__name__": "snippet"})
except Exception as e:  # the snippet itself failed: say how, for the test's message
    sys.stderr.write(f"snippet raised {type(e).__name__}: {e}\n")
    sys.stderr.flush()
    os._exit(2)
os._exit(0 if enough.wait(seconds) else 3)
