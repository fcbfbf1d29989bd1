"""What the Python day-one bots (day_one_python_sdk.py, day_one_ccxt.py) share: run a list of read calls one after
another and print one JSON line per call, telling the library's own documented errors apart from crashes.

Each line is {"call": NAME, "types": [info types it asks], ...} and then either "ok": <result>, or "error": <class>,
"message": <text> for an exception the library documents, or additionally "crash": true and "traceback" for any
other exception (a failure inside the library, or in the bot). The last line is {"done": true, "uncovered": [...]}:
public read methods of the library that the bot's list does not call, so a new library version's additions show up.

The whole run is bounded: a watchdog ends the process with exit code 3 after the given seconds.
"""

import json
import os
import sys
import threading
import traceback


def watchdog(seconds):
    def expire():
        sys.stdout.write(json.dumps({"timeout": seconds}) + "\n")
        sys.stdout.flush()
        os._exit(3)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def show(line):
    sys.stdout.write(json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


def call(name, types, fn, documented, describe):
    """Runs one call; `documented` is the tuple of the library's own error classes, `describe` turns one of them
    into (message, extra fields)."""
    line = {"call": name, "types": types}
    try:
        line["ok"] = fn()
    except documented as e:
        message, extra = describe(e)
        line.update({"error": type(e).__name__, "message": message}, **extra)
    except Exception as e:  # noqa: BLE001 - anything else is exactly what this bot looks for
        line.update({"error": type(e).__name__, "message": str(e), "crash": True, "traceback": traceback.format_exc()})
    show(line)
    return line


def finish(uncovered):
    show({"done": True, "uncovered": sorted(uncovered)})
