"""A day-one bot of ccxt (Python, the REST half, `ccxt.hyperliquid`): with only the URLs changed (as README's ccxt
snippet sets them) and no credentials, it makes every fetch_* read ccxt's hyperliquid class lists in `has` that works
without a key given the user's address in params ({'user': ...}), once each, for one user, one of that user's resting
orders and BTC/USDC:USDC, and prints one JSON line per call (day_one_common.py), with the info types ccxt actually
asked for (recorded under `request`). server/tests/day_one.rs checks the answers and that every refusal is a
ccxt.BaseError subclass carrying hlbook's reason.

ccxt loads markets first (metaAndAssetCtxs, spotMetaAndAssetCtxs, perpDexs: types only an upstream info server
answers), so mode `load_markets` makes only that call, for the run without `server.upstream_info_url`.

    day_one_ccxt.py BASE_URL USER OID SECONDS [all|load_markets]
"""

import os
import sys
import time
import traceback

import ccxt
from day_one_common import finish, show, watchdog

base, user, oid, seconds = sys.argv[1], sys.argv[2].lower(), sys.argv[3], float(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else "all"
# From the user's first fill (the test says when): a time hlbook's store covers.
since = int(os.environ.get("DAY_ONE_SINCE_MS", "0"))
watchdog(seconds)
SYMBOL = "BTC/USDC:USDC"


class Recording(ccxt.hyperliquid):
    """ccxt's hyperliquid, noting the `type` of each info request it sends."""

    asked = []

    def request(self, path, api="public", method="GET", params=None, config=None):
        if isinstance(params, dict) and "type" in params:
            self.asked.append(params["type"])
        return super().request(path, api, method, params or {}, config=config or {})


ex = Recording({"timeout": 10_000})
ex.urls["api"] = {"public": base, "private": base}


def markets():
    loaded = ex.load_markets()
    return {"symbols": sorted(loaded), "count": len(loaded)}


def sweep(calls):
    """Each call is (name, fn) or (name, fn, kept): info types of `kept` it asks are labelled `:kept` (asked from a
    time hlbook's store holds, so answered by hlbook itself)."""
    for name, fn, *kept in calls:
        Recording.asked = []
        line = {"call": name}
        try:
            line["ok"] = fn()
        except ccxt.BaseError as e:
            line.update({"error": type(e).__name__, "message": str(e)})
        except Exception as e:  # noqa: BLE001 - anything else is exactly what this bot looks for
            line.update({"error": type(e).__name__, "message": str(e), "crash": True, "traceback": traceback.format_exc()})
        line["types"] = [t + ":kept" if kept and t in kept[0] else t for t in Recording.asked]
        show(line)


if mode == "load_markets":
    sweep([("load_markets", markets)])
    finish([])
    sys.exit(0)

p = {"user": user}
now = int(time.time() * 1000)
day = 86_400_000
CALLS = [
    ("load_markets", markets),
    ("fetch_markets", lambda: len(ex.fetch_markets())),
    ("fetch_status", lambda: ex.fetch_status()),
    ("fetch_time", lambda: ex.fetch_time()),
    ("fetch_currencies", lambda: ex.fetch_currencies()),
    ("fetch_deposit_withdraw_fee", lambda: ex.fetch_deposit_withdraw_fee("USDC")),
    ("fetch_balance", lambda: ex.fetch_balance(dict(p))),
    ("fetch_balance(spot)", lambda: ex.fetch_balance({**p, "type": "spot"})),
    ("fetch_order_book", lambda: ex.fetch_order_book(SYMBOL)),
    ("fetch_l2_order_book", lambda: ex.fetch_l2_order_book(SYMBOL)),
    ("fetch_ticker", lambda: ex.fetch_ticker(SYMBOL)),
    ("fetch_tickers", lambda: ex.fetch_tickers()),
    ("fetch_funding_rate", lambda: ex.fetch_funding_rate(SYMBOL)),
    ("fetch_funding_rates", lambda: ex.fetch_funding_rates()),
    ("fetch_funding_rate_history", lambda: ex.fetch_funding_rate_history(SYMBOL, now - day)),
    ("fetch_ohlcv", lambda: ex.fetch_ohlcv(SYMBOL, "1m", now - day)),
    ("fetch_trades", lambda: ex.fetch_trades(SYMBOL, None, None, dict(p))),
    ("fetch_open_orders", lambda: ex.fetch_open_orders(None, None, None, dict(p))),
    ("fetch_open_orders(openOrders)", lambda: ex.fetch_open_orders(None, None, None, {**p, "method": "openOrders"})),
    ("fetch_orders", lambda: ex.fetch_orders(None, None, None, dict(p))),
    ("fetch_closed_orders", lambda: ex.fetch_closed_orders(None, None, None, dict(p))),
    ("fetch_canceled_orders", lambda: ex.fetch_canceled_orders(None, None, None, dict(p))),
    ("fetch_canceled_and_closed_orders", lambda: ex.fetch_canceled_and_closed_orders(None, None, None, dict(p))),
    ("fetch_order", lambda: ex.fetch_order(oid, SYMBOL, dict(p))),
    ("fetch_my_trades", lambda: ex.fetch_my_trades(None, None, None, dict(p))),
    ("fetch_my_trades(since)", lambda: ex.fetch_my_trades(None, since, None, dict(p))),
    ("fetch_my_liquidations", lambda: ex.fetch_my_liquidations(None, None, None, dict(p))),
    ("fetch_position", lambda: ex.fetch_position(SYMBOL, dict(p))),
    ("fetch_positions", lambda: ex.fetch_positions(None, dict(p))),
    ("fetch_trading_fee", lambda: ex.fetch_trading_fee(SYMBOL, dict(p))),
    ("fetch_ledger", lambda: ex.fetch_ledger(None, now - day, None, dict(p))),
    ("fetch_deposits", lambda: ex.fetch_deposits(None, now - day, None, dict(p))),
    ("fetch_withdrawals", lambda: ex.fetch_withdrawals(None, now - day, None, dict(p))),
    ("fetch_open_interest", lambda: ex.fetch_open_interest(SYMBOL)),
    ("fetch_open_interests", lambda: ex.fetch_open_interests()),
    ("fetch_funding_history", lambda: ex.fetch_funding_history(SYMBOL, now - day, None, dict(p))),
    # From the user's first fill: hlbook's store holds every funding and ledger update since.
    ("fetch_funding_history(since)", lambda: ex.fetch_funding_history(SYMBOL, since, None, dict(p)), {"userFunding"}),
    ("fetch_ledger(since)", lambda: ex.fetch_ledger(None, since, None, dict(p)), {"userNonFundingLedgerUpdates"}),
]
sweep(CALLS)


def snake(camel):
    return "".join("_" + c.lower() if c.isupper() else c for c in camel).replace("o_h_l_c_v", "ohlcv")


# Every REST fetch ccxt says it has (natively or emulated) must be in CALLS (the *_ws ones are ccxt pro's).
called = {c[0].split("(")[0] for c in CALLS}
offered = {snake(k) for k, v in ex.has.items() if k.startswith("fetch") and v in (True, "emulated")}
offered = {m for m in offered if not m.endswith("_ws")}
show({"version": ccxt.__version__})
finish(offered - called)
