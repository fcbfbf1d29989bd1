# Shared by the bench scripts (sourced, not run): a work directory removed at exit with every process started in
# `pids` (KEEP_LOGS=1 copies their logs to $OUT/logs first), and `wait_line FILE PREFIX`, which waits up to 60 s for a line starting with PREFIX and prints the rest
# without spaces (the address a binary says it listens on).
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
