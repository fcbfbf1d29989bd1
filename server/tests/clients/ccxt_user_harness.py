"""ccxt pro's per-user watches against hlbook: watch_orders and watch_my_trades for one user, unchanged but for the
URL (set as the README's ccxt pro snippet does) and the wallet address.

Prints one JSON line per result ccxt returns: {"kind": "orders"|"myTrades", "items": [{id, symbol, ...}]}. Exits 0
after `count` results of each kind, 2 if ccxt raised, 3 on timeout.

    ccxt_user_harness.py HOST:PORT USER COUNT SECONDS
"""

import json
import sys

from ccxt_common import exchange, main

addr, user, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


def show(kind, items):
    keep = ("id", "symbol", "side", "price", "amount", "filled", "status", "order", "takerOrMaker")
    out = [{k: i.get(k) for k in keep} for i in items]
    sys.stdout.write(json.dumps({"kind": kind, "items": out}) + "\n")
    sys.stdout.flush()


async def run():
    ex = exchange(addr, user)
    try:
        await ex.load_markets()
        for _ in range(count):
            show("orders", await ex.watch_orders())
        for _ in range(count):
            show("myTrades", await ex.watch_my_trades())
    finally:
        await ex.close()


main(run, f"fewer than {count} results", seconds)
