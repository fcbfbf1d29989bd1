"""What ccxt pro does with an error frame while a watch_order_book is pending on the same connection.

Runs the README's ccxt pro snippet (its HOST already replaced) for its exchange `ex` and first `book`, then, up to
five times: starts a watch_order_book for the next book, subscribes on the same connection to an official type
hlbook does not serve (`webData2`), and records how the pending book call ended. An attempt whose book arrived before
the error frame is retried. Afterwards it asks for one more book. Prints one JSON object with the outcomes.

    ccxt_error_harness.py SNIPPET_FILE SECONDS
"""

import ast
import asyncio
import json
import sys

from ccxt_common import main

path, seconds = sys.argv[1], float(sys.argv[2])


async def run():
    scope = {"__name__": "snippet"}
    code = compile(open(path).read(), "README.md snippet", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = {"attempts": []}
    try:
        ran = eval(code, scope)
        if ran is not None:
            await ran
        ex, book = scope["ex"], scope["book"]
        symbol, url = book["symbol"], ex.urls["api"]["ws"]["public"]
        for i in range(5):
            pending = asyncio.ensure_future(ex.watch_order_book(symbol))
            await asyncio.sleep(0)
            sub = {"type": "webData2", "user": "0x" + f"{i:02x}" * 20}
            bad = asyncio.ensure_future(ex.watch(url, f"unserved:{i}", {"method": "subscribe", "subscription": sub}, f"unserved:{i}"))
            try:
                await pending
                out["attempts"].append({"book": "arrived first"})
            except Exception as e:
                out["attempts"].append({"book": f"{type(e).__name__}: {e}"})
            try:
                await asyncio.wait_for(bad, 5)
                out["attempts"][-1]["unserved"] = "resolved"
            except Exception as e:
                out["attempts"][-1]["unserved"] = f"{type(e).__name__}: {e}"
            if out["attempts"][-1]["book"] != "arrived first":
                break
        after = await ex.watch_order_book(symbol)
        out["after"] = {"symbol": after["symbol"], "bids": len(after["bids"]), "asks": len(after["asks"])}
    finally:
        if "ex" in scope:
            await scope["ex"].close()
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


main(run, "no outcome", seconds)
