// A day-one bot of @nktkas/hyperliquid: an InfoClient over an HttpTransport whose apiUrl is hlbook (the only change
// from the exchange), calling every method of InfoClient once (they are all reads), for one user, one of that user's
// resting orders and BTC, printing one JSON line per call as day_one_common.py describes: "ok" with the answer, or
// the error's class and message when it is one of the library's own (every error it documents derives from
// HyperliquidError: HttpRequestError, TransportError, ValidationError, ...), or "crash": true with the stack for
// anything else. server/tests/day_one.rs checks the answers and the refusals' reasons.
//
// The library is loaded from the `make clients` folder given as CLIENTS (this file lives beside the tests, not
// beside node_modules). The run is bounded by SECONDS (exit 3).
//
//     node day_one_nktkas.mjs CLIENTS BASE_URL USER OID SECONDS

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [clients, base, userArg, oidArg, secondsArg] = process.argv.slice(2);
const user = userArg.toLowerCase();
const oid = Number(oidArg);
const show = (line) => process.stdout.write(JSON.stringify(line) + "\n");
setTimeout(() => {
  show({ timeout: Number(secondsArg) });
  process.exit(3);
}, Number(secondsArg) * 1000).unref();

const lib = await import(pathToFileURL(join(clients, "node/node_modules/@nktkas/hyperliquid/esm/mod.js")).href);
const { InfoClient, HttpTransport, HyperliquidError } = lib;
const info = new InfoClient({ transport: new HttpTransport({ apiUrl: base, timeout: 10_000 }) });

const now = Date.now();
const day = 86_400_000;
// From the user's first fill (the test says when): a time hlbook's store covers.
const since = Number(process.env.DAY_ONE_SINCE_MS ?? 0);
// Addresses and ids no simulated account has: the node has nothing to say about them.
const stranger = "0x" + "11".repeat(20);
const tokenId = "0x" + "00".repeat(16);

// [method, info types it asks, parameters (none: called without)]
const CALLS = [
  ["activeAssetData", ["activeAssetData"], { user, coin: "BTC" }],
  ["allBorrowLendReserveStates", ["allBorrowLendReserveStates"]],
  ["allMids", ["allMids"]],
  ["allPerpMetas", ["allPerpMetas"]],
  ["approvedBuilders", ["approvedBuilders"], { user }],
  ["borrowLendReserveState", ["borrowLendReserveState"], { token: 0 }],
  ["borrowLendUserState", ["borrowLendUserState"], { user }],
  ["candleSnapshot", ["candleSnapshot"], { coin: "BTC", interval: "1m", startTime: now - day, endTime: now + day }],
  ["clearinghouseState", ["clearinghouseState"], { user }],
  ["delegations", ["delegations"], { user }],
  ["delegatorHistory", ["delegatorHistory"], { user }],
  ["delegatorRewards", ["delegatorRewards"], { user }],
  ["delegatorSummary", ["delegatorSummary"], { user }],
  ["exchangeStatus", ["exchangeStatus"]],
  ["extraAgents", ["extraAgents"], { user }],
  ["frontendOpenOrders", ["frontendOpenOrders"], { user }],
  ["fundingHistory", ["fundingHistory"], { coin: "BTC", startTime: now - day }],
  ["gossipPriorityAuctionStatus", ["gossipPriorityAuctionStatus"]],
  ["gossipRootIps", ["gossipRootIps"]],
  ["historicalOrders", ["historicalOrders"], { user }],
  ["isVip", ["isVip"], { user }],
  ["l2Book", ["l2Book"], { coin: "BTC" }],
  ["leadingVaults", ["leadingVaults"], { user }],
  ["legalCheck", ["legalCheck"], { user }],
  ["liquidatable", ["liquidatable"]],
  ["marginTable", ["marginTable"], { id: 1 }],
  ["maxBuilderFee", ["maxBuilderFee"], { user, builder: stranger }],
  ["maxMarketOrderNtls", ["maxMarketOrderNtls"]],
  ["meta", ["meta"]],
  ["metaAndAssetCtxs", ["metaAndAssetCtxs"]],
  ["openOrders", ["openOrders"], { user }],
  ["orderStatus", ["orderStatus"], { user, oid }],
  ["outcomeMeta", ["outcomeMeta"]],
  ["outcomeTemplates", ["outcomeTemplates"]],
  ["perpAnnotation", ["perpAnnotation"], { coin: "BTC" }],
  ["perpCategories", ["perpCategories"]],
  ["perpConciseAnnotations", ["perpConciseAnnotations"]],
  ["perpDeployAuctionStatus", ["perpDeployAuctionStatus"]],
  ["perpDexLimits", ["perpDexLimits"], { dex: "test" }],
  ["perpDexStatus", ["perpDexStatus"], { dex: "test" }],
  ["perpDexs", ["perpDexs"]],
  ["perpsAtOpenInterestCap", ["perpsAtOpenInterestCap"]],
  ["portfolio", ["portfolio"], { user }],
  ["preTransferCheck", ["preTransferCheck"], { user, source: stranger }],
  ["predictedFundings", ["predictedFundings"]],
  ["recentTrades", ["recentTrades"], { coin: "BTC" }],
  ["referral", ["referral"], { user }],
  ["settledOutcome", ["settledOutcome"], { outcome: 0 }],
  ["spotClearinghouseState", ["spotClearinghouseState"], { user }],
  ["spotDeployState", ["spotDeployState"], { user }],
  ["spotMeta", ["spotMeta"]],
  ["spotMetaAndAssetCtxs", ["spotMetaAndAssetCtxs"]],
  ["spotPairDeployAuctionStatus", ["spotPairDeployAuctionStatus"]],
  ["subAccounts", ["subAccounts"], { user }],
  ["subAccounts2", ["subAccounts2"], { user }],
  ["tokenDetails", ["tokenDetails"], { tokenId }],
  ["twapHistory", ["twapHistory"], { user }],
  ["usdcRouting", ["usdcRouting"]],
  ["userAbstraction", ["userAbstraction"], { user }],
  ["userBorrowLendInterest", ["userBorrowLendInterest"], { user, startTime: now - day }],
  ["userDexAbstraction", ["userDexAbstraction"], { user }],
  ["userFees", ["userFees"], { user }],
  ["userFills", ["userFills"], { user }],
  ["userFillsByTime", ["userFillsByTime"], { user, startTime: since, aggregateByTime: true }],
  ["userFunding", ["userFunding"], { user, startTime: now - day }],
  ["userNonFundingLedgerUpdates", ["userNonFundingLedgerUpdates"], { user, startTime: now - day }],
  ["userRateLimit", ["userRateLimit"], { user }],
  ["userRole", ["userRole"], { user }],
  ["userToMultiSigSigners", ["userToMultiSigSigners"], { user }],
  ["userTwapSliceFills", ["userTwapSliceFills"], { user }],
  ["userTwapSliceFillsByTime", ["userTwapSliceFillsByTime"], { user, startTime: now - day }],
  ["userVaultEquities", ["userVaultEquities"], { user }],
  ["validatorL1Votes", ["validatorL1Votes"]],
  ["validatorSummaries", ["validatorSummaries"]],
  ["vaultDetails", ["vaultDetails"], { vaultAddress: stranger }],
  ["vaultSummaries", ["vaultSummaries"]],
  ["webData2", ["webData2"], { user }],
];

for (const [method, types, params] of CALLS) {
  const line = { call: method, types };
  try {
    line.ok = await (params === undefined ? info[method]() : info[method](params));
  } catch (e) {
    line.error = e?.constructor?.name ?? typeof e;
    line.message = String(e?.message ?? e);
    if (!(e instanceof HyperliquidError)) {
      line.crash = true;
      line.traceback = String(e?.stack ?? e);
    } else if (e.cause !== undefined) {
      line.cause = String(e.cause?.message ?? e.cause);
    }
  }
  show(line);
}

// Every method of InfoClient must be in CALLS, so a new version's additions are called too.
const offered = Object.getOwnPropertyNames(InfoClient.prototype).filter((m) => m !== "constructor");
const called = new Set(CALLS.map((c) => c[0]));
show({ version: JSON.parse(await (await import("node:fs/promises")).readFile(
  join(clients, "node/node_modules/@nktkas/hyperliquid/package.json"), "utf8")).version });
show({ done: true, uncovered: offered.filter((m) => !called.has(m)).sort() });
process.exit(0);
