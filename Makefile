# hlbook: `make demo` and `make test` do everything on a fresh Debian 12 / Ubuntu 24.04 box with git and sudo.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages the build and the tests need (Boost is added in `setup`: Debian 12 ships 1.81, Ubuntu 24.04 newer).
# python3-websockets and chromium are third-party WebSocket clients for server/tests/ws_compression.rs and
# ws_chromium.rs; haproxy runs in server/tests/scale_out.rs, balancing two edge servers with deploy/haproxy/hlbook.cfg;
# systemd brings systemd-analyze, which server/tests/deploy.rs verifies the units with; nats-server (2.9 on Debian 12,
# JetStream included) is the real NATS that server/tests/nats_*.rs start (hlbook relay --nats, --source nats://), and
# openssl makes the self-signed CA of nats_auth.rs's TLS test.
APT_PACKAGES := build-essential pkg-config ca-certificates curl git cmake libsimdjson-dev libgtest-dev libssl-dev \
	python3 python3-websockets python3-venv haproxy systemd nats-server openssl prometheus
# Installed when the distribution has a real package: Debian's chromium is one, Ubuntu 24.04 only has a snap
# stub under another name, and the Chromium tests say so and skip there.
OPTIONAL_APT_PACKAGES := chromium
CPP_BUILD := build/latency_client
# The client libraries whose README snippets server/tests/sdk_clients.rs runs, pinned; installed from the package
# registries into build/clients by `make clients` (Node 22, which @nktkas/hyperliquid needs, comes from npm too).
CLIENTS := build/clients
PY_CLIENTS := hyperliquid-python-sdk==0.24.0 ccxt==4.5.90
NPM_CLIENTS := @nktkas/hyperliquid@0.33.3 node@22.23.3
# hyperliquid_rust_sdk is pinned in this crate (and its Cargo.lock), which builds README's Rust snippet into a
# program; outside the workspace so hlbook's own builds never compile the SDK. Cargo rebuilds it when README changes.
RUST_SDK_CRATE := server/tests/clients/rust_sdk
RUST_SDK_TARGET := build/rust-sdk-target
HL_FIXTURES ?= $(abspath ../shared/fixtures/hl-mainnet-btc)
export HL_FIXTURES

.PHONY: all setup build test lint rust-test cpp-build cpp-test clients smoke bench demo clean

all: build

## setup: install missing apt packages and a Rust toolchain (rustup) with rustfmt and clippy.
setup:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	optional=""; for p in $(OPTIONAL_APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || optional="$$optional $$p"; done; \
	boost=0; for b in libboost1.81-dev libboost-dev; do dpkg -s $$b >/dev/null 2>&1 && boost=1; done; \
	if [ -n "$$missing$$optional" ] || [ $$boost = 0 ]; then \
		$(SUDO) apt-get update -qq || exit 1; \
		if [ $$boost = 0 ]; then \
			if apt-cache show libboost1.81-dev >/dev/null 2>&1; then missing="$$missing libboost1.81-dev"; \
			else missing="$$missing libboost-dev"; fi; \
		fi; \
		for p in $$optional; do apt-cache show $$p >/dev/null 2>&1 && missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then \
			echo "installing apt packages:$$missing"; \
			DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing || exit 1; \
		fi; \
	fi
	@if ! command -v cargo >/dev/null 2>&1; then \
		echo "installing Rust with rustup"; \
		curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy; \
	fi
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	@$(CARGO) --version

## build: release binaries (hlbook).
build: setup
	$(CARGO) build --release --workspace --bins

## lint: formatting and clippy, warnings are errors; for the workspace, the Rust snippet crate (whose clippy run
## checks the SDK's ~430 dependencies too, about a minute more) and the fuzz crate (outside the workspace, linted on
## stable: clippy checks, it does not link libFuzzer).
lint: setup
	$(CARGO) fmt --all -- --check
	rustfmt --check --edition 2024 $(RUST_SDK_CRATE)/build.rs $(RUST_SDK_CRATE)/src/main.rs
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets $(TEST_FEATURES) -- -D warnings
	$(CARGO) clippy --locked --manifest-path $(RUST_SDK_CRATE)/Cargo.toml --target-dir $(RUST_SDK_TARGET) -- -D warnings
	$(CARGO) fmt --manifest-path server/fuzz/Cargo.toml -- --check
	$(CARGO) clippy --manifest-path server/fuzz/Cargo.toml --target-dir build/fuzz-target -- -D warnings

## rust-test: unit and end-to-end tests; latency_stats is built first, the end-to-end audit test runs it, and the
## SDK snippet tests must find their libraries. A test that cannot run here says why in $(SKIP_LOG), listed with a
## count at the end (cargo hides a skipped test's output: it passes); under HLBOOK_NO_SKIPS=1 (.ci/run) it fails.
## The tests inject faults through the server's test hooks (HLBOOK_TEST_*), which only the `test-hooks` feature
## compiles in (release builds leave them out); a test that needs one skips without it (docs/testing.md).
SKIP_LOG := $(abspath build/test-skips.txt)
TEST_FEATURES := --features hlbook/test-hooks
SKIP_REPORT = if [ -s $(SKIP_LOG) ]; then echo "$@: $$(wc -l < $(SKIP_LOG)) tests skipped so far:"; \
	sed 's/^/  /' $(SKIP_LOG); else echo "$@: no test skipped"; fi
rust-test: setup cpp-build clients
	@mkdir -p build && rm -f $(SKIP_LOG)
	LATENCY_STATS=$(abspath $(CPP_BUILD))/latency_stats HLBOOK_CLIENTS=$(abspath $(CLIENTS)) HLBOOK_REQUIRE_CLIENTS=1 \
		HLBOOK_SKIP_LOG=$(SKIP_LOG) $(CARGO) test --workspace $(TEST_FEATURES)
	@$(SKIP_REPORT)

## clients: the Python SDK and ccxt (a venv), @nktkas/hyperliquid (an npm folder) and the Rust snippet program for
## the README snippet tests, with the Rust SDK's day-one bot (server/tests/day_one.rs) built beside it.
clients: setup
	@command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq npm
	@if [ "$$(cat $(CLIENTS)/.installed 2>/dev/null)" != "$(PY_CLIENTS) $(NPM_CLIENTS)" ]; then \
		rm -rf $(CLIENTS) && mkdir -p $(CLIENTS)/node && \
		/usr/bin/python3 -m venv $(CLIENTS)/py && \
		$(CLIENTS)/py/bin/pip install -q --disable-pip-version-check $(PY_CLIENTS) && \
		npm install --prefix $(CLIENTS)/node --no-audit --no-fund --silent $(NPM_CLIENTS) && \
		echo "$(PY_CLIENTS) $(NPM_CLIENTS)" > $(CLIENTS)/.installed; \
	fi
	$(CARGO) build --locked --manifest-path $(RUST_SDK_CRATE)/Cargo.toml --target-dir $(RUST_SDK_TARGET)
	mkdir -p $(CLIENTS) && cp $(RUST_SDK_TARGET)/debug/rust_sdk_snippet $(RUST_SDK_TARGET)/debug/rust_sdk_day_one $(CLIENTS)/

## cpp-build, cpp-test: the C++ latency_stats tool and its GoogleTest suite (ctest).
## A test that cannot run here (the wss:// one in a -DLATENCY_TLS=OFF build) skips as the Rust ones do: listed in
## $(SKIP_LOG), a failure under HLBOOK_NO_SKIPS=1.
cpp-build: setup
	cmake -S latency_client -B $(CPP_BUILD) -DCMAKE_BUILD_TYPE=Release -DLATENCY_WERROR=ON
	cmake --build $(CPP_BUILD) -j2

cpp-test: cpp-build
	@mkdir -p build
	HLBOOK_SKIP_LOG=$(SKIP_LOG) ctest --test-dir $(CPP_BUILD) --output-on-failure --no-tests=error
	@$(SKIP_REPORT)

## test: everything CI runs.
test: lint rust-test cpp-test smoke
	@echo "make test: all checks passed"

## bench: benchmarks (results are written up in docs/benchmarks.md); ingest_latency runs the release hlsim.
## smoke: what README and docs/ show that cargo test cannot run itself, run briefly: the demo (5 s) and every
## benchmark (criterion's --test mode: each benchmark once; the end-to-end benchmarks 2 s per case). Checks that
## they work, not how fast: speed is `make bench`'s, reported in docs/benchmarks.md. So they run the test build's
## binaries (target/debug, optimised enough for the simulator's rates), which `rust-test` has built already: a
## release build of every dependency again would add ~5 minutes to CI for nothing the smoke can see. It keeps the
## test hooks too (one build, not two): they only act when a HLBOOK_TEST_* variable is set, which nothing here does.
smoke: setup cpp-build
	$(CARGO) build --workspace --bins $(TEST_FEATURES)
	HLBOOK_BIN_DIR=target/debug DEMO_SECS=5 ./deploy/demo.sh
	HLBOOK_SKIP_LOG=$(SKIP_LOG) HLBOOK_BENCH_SECS=2 $(CARGO) test --workspace $(TEST_FEATURES) --bench '*' -- --bench --test
	@$(SKIP_REPORT)

bench: setup
	$(CARGO) build --release -p hlbook --bins
	$(CARGO) bench -p hlbook-benches

## demo: simulator + server + latency_stats for ~20 s; prints the latency table, the per-stage breakdown and the
## verdict, writes build/demo/latency*.svg and latency.hlog, leaves nothing running (deploy/demo.sh).
demo: build cpp-build
	./deploy/demo.sh

clean:
	$(CARGO) clean
	rm -rf build
