"""A day-one bot of the official Python SDK (hyperliquid-python-sdk): with only the base URL changed, it makes every
read call `hyperliquid.info.Info` offers (all of them POST /info), once each, for one user, one of that user's
resting orders and BTC, and prints one JSON line per call (day_one_common.py). server/tests/day_one.rs checks the
answers against the simulator and checks that every refusal is the SDK's own ClientError/ServerError with a reason,
never an exception from inside the SDK (before hlbook's refusals were plain text, a JSON string body made the SDK
raise AttributeError).

    day_one_python_sdk.py BASE_URL USER OID SECONDS
"""

import importlib.metadata
import os
import sys
import time

from day_one_common import call, finish, show, watchdog
from hyperliquid.info import Info
from hyperliquid.utils.error import ClientError, ServerError
from hyperliquid.utils.types import Cloid

base, user, oid, seconds = sys.argv[1], sys.argv[2].lower(), int(sys.argv[3]), float(sys.argv[4])
watchdog(seconds)
DOCUMENTED = (ClientError, ServerError)


def describe(e):
    if isinstance(e, ClientError):
        return str(e.error_message), {"status": e.status_code}
    return str(e.message), {"status": e.status_code}


# Construction asks spotMeta and meta; when that fails the remaining calls still run, with BTC named by hand.
built = {}
made = call("Info", ["spotMeta", "meta"], lambda: built.update(info=Info(base, skip_ws=True, timeout=10)), DOCUMENTED, describe)
if "ok" in made:
    info = built["info"]
else:
    fallback_meta = {"universe": [{"name": "BTC", "szDecimals": 5}]}
    info = Info(base, skip_ws=True, meta=fallback_meta, spot_meta={"universe": [], "tokens": []}, timeout=10)

now = int(time.time() * 1000)
day = 86_400_000
# From the user's first fill (the test says when): a time hlbook's store covers.
since = int(os.environ.get("DAY_ONE_SINCE_MS", "0"))
# A client order id no order of the simulator has: the node has nothing to say about it.
unknown_cloid = Cloid("0x" + "ab" * 16)

CALLS = [
    ("user_state", ["clearinghouseState"], lambda: info.user_state(user)),
    ("spot_user_state", ["spotClearinghouseState"], lambda: info.spot_user_state(user)),
    ("open_orders", ["openOrders"], lambda: info.open_orders(user)),
    ("frontend_open_orders", ["frontendOpenOrders"], lambda: info.frontend_open_orders(user)),
    ("all_mids", ["allMids"], lambda: info.all_mids()),
    ("user_fills", ["userFills"], lambda: info.user_fills(user)),
    ("user_fills_by_time", ["userFillsByTime"], lambda: info.user_fills_by_time(user, since)),
    (
        "user_fills_by_time(aggregate_by_time)",
        ["userFillsByTime"],
        lambda: info.user_fills_by_time(user, since, now + day, aggregate_by_time=True),
    ),
    ("meta", ["meta"], lambda: info.meta()),
    ("meta_and_asset_ctxs", ["metaAndAssetCtxs"], lambda: info.meta_and_asset_ctxs()),
    ("perp_dexs", ["perpDexs"], lambda: info.perp_dexs()),
    ("spot_meta", ["spotMeta"], lambda: info.spot_meta()),
    ("spot_meta_and_asset_ctxs", ["spotMetaAndAssetCtxs"], lambda: info.spot_meta_and_asset_ctxs()),
    ("funding_history", ["fundingHistory"], lambda: info.funding_history("BTC", now - day)),
    # From a day back: before what hlbook's store holds (its first misc_events block), so passed on, or refused.
    ("user_funding_history", ["userFunding:before"], lambda: info.user_funding_history(user, now - day)),
    # From the user's first fill: the store holds it all, so hlbook answers.
    ("user_funding_history(since)", ["userFunding:kept"], lambda: info.user_funding_history(user, since)),
    ("l2_snapshot", ["l2Book"], lambda: info.l2_snapshot("BTC")),
    ("candles_snapshot", ["candleSnapshot"], lambda: info.candles_snapshot("BTC", "1m", now - day, now + day)),
    ("user_fees", ["userFees"], lambda: info.user_fees(user)),
    ("user_staking_summary", ["delegatorSummary"], lambda: info.user_staking_summary(user)),
    ("user_staking_delegations", ["delegations"], lambda: info.user_staking_delegations(user)),
    ("user_staking_rewards", ["delegatorRewards"], lambda: info.user_staking_rewards(user)),
    ("delegator_history", ["delegatorHistory"], lambda: info.delegator_history(user)),
    ("query_order_by_oid", ["orderStatus"], lambda: info.query_order_by_oid(user, oid)),
    # Not an order resting in hlbook's books: passed upstream, or refused without one.
    ("query_order_by_cloid", ["orderStatus:unknown"], lambda: info.query_order_by_cloid(user, unknown_cloid)),
    ("query_referral_state", ["referral"], lambda: info.query_referral_state(user)),
    ("query_sub_accounts", ["subAccounts"], lambda: info.query_sub_accounts(user)),
    ("query_user_to_multi_sig_signers", ["userToMultiSigSigners"], lambda: info.query_user_to_multi_sig_signers(user)),
    ("query_perp_deploy_auction_status", ["perpDeployAuctionStatus"], lambda: info.query_perp_deploy_auction_status()),
    ("query_user_dex_abstraction_state", ["userDexAbstraction"], lambda: info.query_user_dex_abstraction_state(user)),
    ("query_user_abstraction_state", ["userAbstraction"], lambda: info.query_user_abstraction_state(user)),
    ("historical_orders", ["historicalOrders"], lambda: info.historical_orders(user)),
    (
        "user_non_funding_ledger_updates",
        ["userNonFundingLedgerUpdates:before"],
        lambda: info.user_non_funding_ledger_updates(user, now - day),
    ),
    (
        "user_non_funding_ledger_updates(since)",
        ["userNonFundingLedgerUpdates:kept"],
        lambda: info.user_non_funding_ledger_updates(user, since, now + day),
    ),
    ("portfolio", ["portfolio"], lambda: info.portfolio(user)),
    ("user_twap_slice_fills", ["userTwapSliceFills"], lambda: info.user_twap_slice_fills(user)),
    ("user_vault_equities", ["userVaultEquities"], lambda: info.user_vault_equities(user)),
    ("user_role", ["userRole"], lambda: info.user_role(user)),
    ("user_rate_limit", ["userRateLimit"], lambda: info.user_rate_limit(user)),
    ("query_spot_deploy_auction_status", ["spotDeployState"], lambda: info.query_spot_deploy_auction_status(user)),
    ("extra_agents", ["extraAgents"], lambda: info.extra_agents(user)),
]

for name, types, fn in CALLS:
    call(name, types, fn, DOCUMENTED, describe)

# Every public method of Info that is not a subscription, a helper or construction must be in CALLS.
NOT_READS = {"subscribe", "unsubscribe", "disconnect_websocket", "set_perp_meta", "name_to_asset", "post"}
called = {name.split("(")[0] for name, _, _ in CALLS}
public = {m for m in dir(Info) if not m.startswith("_") and callable(getattr(Info, m))}
show({"version": importlib.metadata.version("hyperliquid-python-sdk")})
finish(public - called - NOT_READS)
