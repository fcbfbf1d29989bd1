"""ccxt pro's market watches against hlbook, unchanged but for the URL (set as the README's ccxt pro snippet does):
watch_ohlcv (BTC, 1m) and watch_trades (BTC).

Prints one JSON line per result ccxt returns: {"kind": "ohlcv", "rows": [[t, o, h, l, c, v], ...]} or
{"kind": "trades", "items": [{id, price, amount, timestamp}]}. Exits 0 after `count` results of each kind, 2 if
ccxt raised, 3 on timeout.

    ccxt_market_harness.py HOST:PORT COUNT SECONDS
"""

import asyncio
import json
import sys

import ccxt.pro

addr, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])


def show(line):
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def run():
    ex = ccxt.pro.hyperliquid()
    ex.urls["api"] = {"public": f"http://{addr}", "private": f"http://{addr}", "ws": {"public": f"ws://{addr}/ws"}}
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


try:
    asyncio.run(asyncio.wait_for(run(), seconds))
except TimeoutError:
    sys.stderr.write(f"fewer than {count} results within {seconds} s\n")
    sys.exit(3)
except Exception as e:
    sys.stderr.write(f"ccxt raised {type(e).__name__}: {e!r}\n")
    sys.exit(2)
