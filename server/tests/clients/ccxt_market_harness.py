"""ccxt pro's market watches against hlbook, unchanged but for the URL (set as the README's ccxt pro snippet does):
watch_ohlcv (BTC, 1m) and watch_trades (BTC).

Prints one JSON line per result ccxt returns: {"kind": "ohlcv", "rows": [[t, o, h, l, c, v], ...]} or
{"kind": "trades", "items": [{id, price, amount, timestamp}]}. Exits 0 after `count` results of each kind, 2 if
ccxt raised, 3 on timeout.

    ccxt_market_harness.py HOST:PORT COUNT SECONDS
"""

import json
import sys

from ccxt_common import exchange, main

addr, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])


def show(line):
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def run():
    ex = exchange(addr)
    try:
        await ex.load_markets()
        for _ in range(count):
            show({"kind": "ohlcv", "rows": await ex.watch_ohlcv("BTC/USDC:USDC", "1m")})
        for _ in range(count):
            trades = await ex.watch_trades("BTC/USDC:USDC")
            keep = ("id", "price", "amount", "timestamp", "symbol")
            show({"kind": "trades", "items": [{k: t.get(k) for k in keep} for t in trades]})
    finally:
        await ex.close()


main(run, f"fewer than {count} results", seconds)
