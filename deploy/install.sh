#!/usr/bin/env bash
# Installs hlbook beside a node: builds, installs the binary, creates the `hlbook` user, installs the config and
# the systemd unit, and enables it. Run from a checkout as a user with sudo. Re-running upgrades in place.
#   deploy/install.sh [--relay]     (--relay also installs hlbook-relay.service)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
make build
$SUDO install -m 0755 target/release/hlbook /usr/local/bin/hlbook
id hlbook >/dev/null 2>&1 || $SUDO useradd --system --home-dir /var/lib/hlbook --shell /usr/sbin/nologin hlbook
$SUDO install -d -m 0755 /etc/hlbook /usr/local/share/doc/hlbook
# The node writes the snapshots we ask for into /var/lib/hlbook/snapshots: it must be able to write there.
$SUDO install -d -o hlbook -g hlbook -m 0775 /var/lib/hlbook /var/lib/hlbook/snapshots
[ -e /etc/hlbook/hlbook.toml ] || $SUDO install -m 0644 config/hlbook.toml /etc/hlbook/hlbook.toml
$SUDO install -m 0644 docs/operations.md /usr/local/share/doc/hlbook/operations.md
$SUDO install -m 0644 deploy/systemd/hlbook.service /etc/systemd/system/hlbook.service
if [ "${1:-}" = --relay ]; then
	[ -e /etc/hlbook/relay.env ] || $SUDO install -m 0644 deploy/relay.env /etc/hlbook/relay.env
	$SUDO install -m 0644 deploy/systemd/hlbook-relay.service /etc/systemd/system/hlbook-relay.service
fi
# Check the config before (re)starting: an invalid one is refused with the key named.
/usr/local/bin/hlbook serve --config /etc/hlbook/hlbook.toml --check
$SUDO systemctl daemon-reload
$SUDO systemctl enable --now hlbook.service
[ "${1:-}" = --relay ] && $SUDO systemctl enable --now hlbook-relay.service
echo "installed; edit /etc/hlbook/hlbook.toml (node_dir!), then: sudo systemctl restart hlbook; curl localhost:8000/health"
