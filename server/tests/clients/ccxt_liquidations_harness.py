"""ccxt pro's watch_my_liquidations_for_symbols (every symbol) against hlbook, unchanged but for the URL and the
wallet address: ccxt reads a user's liquidations from its userFills, keeping the fills whose
`liquidation.liquidatedUser` is the user.

Prints one JSON line per result: {"items": [{symbol, side, price, contracts, timestamp, tid}]}. Exits 0 after
`count` results, 2 if ccxt raised, 3 on timeout.

    ccxt_liquidations_harness.py HOST:PORT USER COUNT SECONDS
"""

import json
import sys

from ccxt_common import exchange, main

addr, user, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


async def run():
    ex = exchange(addr, user)
    try:
        await ex.load_markets()
        for _ in range(count):
            items = await ex.watch_my_liquidations_for_symbols([])
            keep = ("symbol", "side", "price", "contracts", "timestamp")
            out = [dict({k: i.get(k) for k in keep}, tid=i["info"].get("tid")) for i in items]
            sys.stdout.write(json.dumps({"items": out}) + "\n")
            sys.stdout.flush()
    finally:
        await ex.close()


main(run, f"fewer than {count} results", seconds)
