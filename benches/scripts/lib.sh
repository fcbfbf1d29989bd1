# Shared by the bench scripts (sourced, not run): a work directory removed at exit with every process started in
# `pids` (KEEP_LOGS=1 copies their logs to $OUT/logs first); `start_hlsim` and `start_hlbook`, the one way a script
# starts the binaries under test; `stop_started`; and `wait_line FILE PREFIX`, which waits up to 60 s for a line
# starting with PREFIX and prints the rest without spaces (the address a binary says it listens on).
mkdir -p "$OUT"
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# KEEP_LOGS=1: the processes' logs stay in $OUT/logs for a look afterwards.
	if [ -n "${KEEP_LOGS:-}" ]; then mkdir -p "$OUT/logs" && cp "$work"/*.log "$work"/*.out "$OUT/logs/" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

wait_line() {
	for _ in $(seq 600); do
		if l=$(grep -m1 "^$2" "$1" 2>/dev/null); then echo "${l#"$2"}" | tr -d ' '; return 0; fi
		sleep 0.1
	done
	echo "$(basename "$0"): no '$2' in $1" >&2; return 1
}

# start_hlsim OUT LOG ARGS...: "$BIN/hlsim" ARGS in the background, stdout to OUT and stderr to LOG (LOG `=`: into
# OUT as well). Its pid goes into `pids` (stopped at exit) and into $started.
start_hlsim() {
	local out=$1 log=$2
	shift 2
	start_bg "$out" "$log" "$BIN/hlsim" "$@"
}

# start_hlbook OUT LOG ARGS...: `hlbook ARGS` likewise: "$BIN/hlbook", or $HLBOOK_BIN when set (another build), under
# `nice -n $HLBOOK_NICE` when that is set.
start_hlbook() {
	local out=$1 log=$2
	shift 2
	# shellcheck disable=SC2086 # the nice prefix is meant to split into words
	start_bg "$out" "$log" ${HLBOOK_NICE:+nice -n "$HLBOOK_NICE"} "${HLBOOK_BIN:-$BIN/hlbook}" "$@"
}

start_bg() {
	local out=$1 log=$2
	shift 2
	if [ "$log" = = ]; then "$@" >"$out" 2>&1 & else "$@" >"$out" 2>"$log" & fi
	started=$!
	pids+=("$started")
}

# stop_started PID...: SIGTERM, wait, and forget them (so the exit's clean-up never signals a reused pid).
stop_started() {
	kill "$@" 2>/dev/null || true
	wait "$@" 2>/dev/null || true
	local p q keep=()
	for p in "${pids[@]}"; do
		for q in "$@"; do [ "$p" = "$q" ] && continue 2; done
		keep+=("$p")
	done
	pids=("${keep[@]}")
}
