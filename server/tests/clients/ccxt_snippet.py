"""Runs the README's ccxt pro snippet unchanged (its HOST already replaced) and prints the books ccxt returns.

The snippet uses top-level `await`, so it is compiled with PyCF_ALLOW_TOP_LEVEL_AWAIT and awaited in asyncio. Its
`book` is the first book; the harness then asks the snippet's own exchange `ex` for more of the same symbol, so
several blocks are compared, and closes it. Each book is written as one JSON line on stdout as soon as ccxt returns
it: ccxt keeps one book object per symbol and resets it in place on the next message. Exits 0 once `count` books
were printed, 2 if the snippet or ccxt raised, 3 if the books did not arrive within `seconds`.

    ccxt_snippet.py SNIPPET_FILE COUNT SECONDS
"""

import ast
import asyncio
import json
import sys

path, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])


def show(book):
    out = {k: book.get(k) for k in ("symbol", "timestamp", "nonce")}
    out["bids"] = [list(level) for level in book["bids"]]
    out["asks"] = [list(level) for level in book["asks"]]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


async def run():
    scope = {"__name__": "snippet"}
    code = compile(open(path).read(), "README.md snippet", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    try:
        ran = eval(code, scope)
        if ran is not None:  # a coroutine when the snippet awaits, as it does
            await ran
        ex, book = scope["ex"], scope["book"]
        show(book)
        for _ in range(count - 1):
            show(await ex.watch_order_book(book["symbol"]))
    finally:
        if "ex" in scope:  # ccxt warns about sessions left open, even after a failure
            await scope["ex"].close()


try:
    asyncio.run(asyncio.wait_for(run(), seconds))
except TimeoutError:
    sys.stderr.write(f"fewer than {count} books within {seconds} s\n")
    sys.exit(3)
except Exception as e:  # the snippet or ccxt failed: say how, for the test's message
    sys.stderr.write(f"snippet raised {type(e).__name__}: {e!r}\n")
    sys.exit(2)
