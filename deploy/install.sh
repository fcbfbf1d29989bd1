#!/usr/bin/env bash
# Installs hlbook beside a node: builds, installs the binary, creates the `hlbook` user, installs the config and
# the systemd units, checks the config, and enables the services. Run from a checkout as a user with sudo.
# Re-running upgrades in place and keeps /etc/hlbook/hlbook.toml, relay.env and relay.toml (making them 0640
# root:hlbook: they may hold the token).
#
#   deploy/install.sh [--relay] [--binary FILE]
#     --relay        also install and enable hlbook-relay.service, the NATS publisher (/etc/hlbook/relay.env, relay.toml)
#     --binary FILE  install this hlbook binary instead of building one with `make build`
#   DESTDIR=DIR deploy/install.sh ...
#                    stage the same files under DIR (packaging, server/tests/deploy.rs): no user, no ownership,
#                    no systemctl
set -euo pipefail
cd "$(dirname "$0")/.."
relay=0
bin=""
while [ $# -gt 0 ]; do
	case "$1" in
	--relay) relay=1 ;;
	--binary)
		bin="${2:?--binary needs a file}"
		shift
		;;
	*)
		echo "install.sh: unknown argument '$1' (usage: deploy/install.sh [--relay] [--binary FILE])" >&2
		exit 2
		;;
	esac
	shift
done
dest="${DESTDIR:-}"
if [ -n "$dest" ]; then
	SUDO=""
else
	SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
fi
if [ -z "$bin" ]; then
	make build
	bin=target/release/hlbook
fi

# Ownership needs the user, which only a real install creates.
owner=()
settings_owner=""
if [ -z "$dest" ]; then
	id hlbook >/dev/null 2>&1 || $SUDO useradd --system --home-dir /var/lib/hlbook --shell /usr/sbin/nologin hlbook
	owner=(-o hlbook -g hlbook)
	settings_owner=root:hlbook
fi
$SUDO install -d -m 0755 "$dest/usr/local/bin" "$dest/etc/hlbook" "$dest/etc/systemd/system" \
	"$dest/usr/local/share/doc/hlbook"
$SUDO install -m 0755 "$bin" "$dest/usr/local/bin/hlbook"
# The node writes the snapshots we ask for into /var/lib/hlbook/snapshots: it must be able to write there (add
# the node's user to the hlbook group).
$SUDO install -d "${owner[@]}" -m 0775 "$dest/var/lib/hlbook" "$dest/var/lib/hlbook/snapshots"
# Settings (the token among them) are readable by root and the service's group only; an upgrade keeps the
# operator's file and only tightens its mode and owner.
settings() {
	[ -e "$dest/$2" ] || $SUDO install -m 0640 "$1" "$dest/$2"
	$SUDO chmod 0640 "$dest/$2"
	[ -z "$settings_owner" ] || $SUDO chown "$settings_owner" "$dest/$2"
}
settings config/hlbook.toml etc/hlbook/hlbook.toml
$SUDO install -m 0644 docs/operations.md "$dest/usr/local/share/doc/hlbook/operations.md"
$SUDO install -m 0644 deploy/systemd/hlbook.service "$dest/etc/systemd/system/hlbook.service"
if [ $relay = 1 ]; then
	settings deploy/relay.env etc/hlbook/relay.env
	settings deploy/relay.toml etc/hlbook/relay.toml
	$SUDO install -m 0644 deploy/systemd/hlbook-relay.service "$dest/etc/systemd/system/hlbook-relay.service"
fi

# Check the config before (re)starting, as the service's user (who must be able to read it): an invalid one is
# refused with the key named.
as_service=()
[ -n "$dest" ] || as_service=($SUDO runuser -u hlbook --)
"${as_service[@]}" "$dest/usr/local/bin/hlbook" serve --config "$dest/etc/hlbook/hlbook.toml" --check >/dev/null
if [ -n "$dest" ]; then
	echo "staged under $dest"
	exit 0
fi
if [ ! -d /run/systemd/system ]; then
	echo "installed; systemd is not running here, so nothing was enabled: run" \
		"/usr/local/bin/hlbook serve --config /etc/hlbook/hlbook.toml under your supervisor"
	exit 0
fi
$SUDO systemctl daemon-reload
# Enabled, not started: the shipped settings name no node yet. `systemctl restart` returns once books are live.
$SUDO systemctl enable hlbook.service
[ $relay = 0 ] || $SUDO systemctl enable hlbook-relay.service
echo "installed; edit /etc/hlbook/hlbook.toml (ingest.node_dir!), then: sudo systemctl restart hlbook;" \
	"curl -s localhost:8000/health"
[ $relay = 0 ] || echo "relay: edit /etc/hlbook/relay.env and relay.toml, then: sudo systemctl restart hlbook-relay"
