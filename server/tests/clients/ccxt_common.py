"""What the ccxt pro harnesses (ccxt_market_harness.py, ccxt_user_harness.py, ccxt_liquidations_harness.py,
ccxt_error_harness.py) share: an exchange pointed at hlbook the way the README's ccxt pro snippet does it, and one
bounded run whose exit code tells a timeout (3) from the run raising (2).
"""

import asyncio
import sys

import ccxt.pro


def exchange(addr, user=None):
    """ccxt pro's hyperliquid with every URL on hlbook at HOST:PORT `addr` (and `user`'s wallet address)."""
    ex = ccxt.pro.hyperliquid({"walletAddress": user} if user else {})
    ex.urls["api"] = {"public": f"http://{addr}", "private": f"http://{addr}", "ws": {"public": f"ws://{addr}/ws"}}
    return ex


def main(run, missing, seconds):
    """Runs coroutine function `run` for at most `seconds`; exits 3 on timeout (saying `missing` did not come within
    them), 2 if it raised."""
    try:
        asyncio.run(asyncio.wait_for(run(), seconds))
    except TimeoutError:
        sys.stderr.write(f"{missing} within {seconds} s\n")
        sys.exit(3)
    except Exception as e:
        sys.stderr.write(f"raised {type(e).__name__}: {e!r}\n")
        sys.exit(2)
