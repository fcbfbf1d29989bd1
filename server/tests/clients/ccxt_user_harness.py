"""ccxt pro's per-user watches against hlbook: watch_orders and watch_my_trades for one user, unchanged but for the
URL (set as the README's ccxt pro snippet does) and the wallet address.

Prints one JSON line per result ccxt returns: {"kind": "orders"|"myTrades", "items": [{id, symbol, ...}]}. Exits 0
after `count` results of each kind, 2 if ccxt raised, 3 on timeout.

    ccxt_user_harness.py HOST:PORT USER COUNT SECONDS
"""

import asyncio
import json
import sys

import ccxt.pro

addr, user, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


def show(kind, items):
    keep = ("id", "symbol", "side", "price", "amount", "filled", "status", "order", "takerOrMaker")
    out = [{k: i.get(k) for k in keep} for i in items]
    sys.stdout.write(json.dumps({"kind": kind, "items": out}) + "\n")
    sys.stdout.flush()


async def run():
    ex = ccxt.pro.hyperliquid({"walletAddress": user})
    ex.urls["api"] = {"public": f"http://{addr}", "private": f"http://{addr}", "ws": {"public": f"ws://{addr}/ws"}}
    try:
        await ex.load_markets()
        for _ in range(count):
            show("orders", await ex.watch_orders())
        for _ in range(count):
            show("myTrades", await ex.watch_my_trades())
    finally:
        await ex.close()


try:
    asyncio.run(asyncio.wait_for(run(), seconds))
except TimeoutError:
    sys.stderr.write(f"fewer than {count} results within {seconds} s\n")
    sys.exit(3)
except Exception as e:
    sys.stderr.write(f"ccxt raised {type(e).__name__}: {e!r}\n")
    sys.exit(2)
