#!/usr/bin/env bash
# Installs hlbook beside a node: builds, installs the binary, creates the `hlbook` user, installs the config and
# the systemd units, checks the config, and enables the services. Run from a checkout as a user with sudo.
# Re-running upgrades in place and keeps /etc/hlbook/hlbook.toml, relay.env and relay.toml (making them 0640
# root:hlbook: they may hold the token).
#
#   deploy/install.sh [--relay] [--binary FILE]
#     --relay        also install and enable hlbook-relay.service, the NATS publisher (/etc/hlbook/relay.env, relay.toml),
#                    and nats-server's set-up (deploy/nats: /etc/nats, the drop-in, the publisher's password,
#                    /usr/local/sbin/hlbook-nats-edge to add and revoke edges)
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
$SUDO install -d -m 0755 "$dest/usr/local/bin" "$dest/usr/local/sbin" "$dest/etc/hlbook" "$dest/etc/systemd/system" \
	"$dest/usr/local/share/doc/hlbook"
$SUDO install -m 0755 "$bin" "$dest/usr/local/bin/hlbook"
# The node writes the snapshots we ask for into /var/lib/hlbook/snapshots: it must be able to write there (add
# the node's user to the hlbook group; setgid, so its files are the group's and the relay can read them).
$SUDO install -d "${owner[@]}" -m 0775 "$dest/var/lib/hlbook"
$SUDO install -d "${owner[@]}" -m 2775 "$dest/var/lib/hlbook/snapshots"
# Settings (the token among them) are readable by root and the service's group only; an upgrade keeps the
# operator's file and only tightens its mode and owner.
settings() {
	[ -e "$dest/$2" ] || $SUDO install -m 0640 "$1" "$dest/$2"
	$SUDO chmod 0640 "$dest/$2"
	[ -z "$settings_owner" ] || $SUDO chown "$settings_owner" "$dest/$2"
}
# nats-server beside the relay (docs/scale-out.md): its config under /etc/nats (the operator's files kept on an
# upgrade), the drop-in that points Debian's unit there, the publisher's password (random, once) in nats-server's
# environment and in the relay's password file, and the edge command. TLS files are the operator's (the docs
# show the openssl commands): /etc/nats/tls/{server,server-key,ca}.pem and /etc/hlbook/nats-ca.pem.
nats_setup() {
	local group="" pw
	[ -z "$dest" ] && id nats >/dev/null 2>&1 && group=nats
	$SUDO install -d -m 0750 "$dest/etc/nats" "$dest/etc/nats/edges" "$dest/etc/nats/tls" \
		"$dest/etc/systemd/system/nats-server.service.d"
	[ -z "$group" ] || $SUDO chgrp "$group" "$dest/etc/nats" "$dest/etc/nats/edges" "$dest/etc/nats/tls"
	for f in nats-server.conf accounts.conf publisher.conf; do
		[ -e "$dest/etc/nats/$f" ] || $SUDO install -m 0640 "deploy/nats/$f" "$dest/etc/nats/$f"
		[ -z "$group" ] || $SUDO chgrp "$group" "$dest/etc/nats/$f"
	done
	$SUDO install -m 0644 deploy/nats/nats-server.service.d/hlbook.conf \
		"$dest/etc/systemd/system/nats-server.service.d/hlbook.conf"
	$SUDO install -m 0755 deploy/nats/edge.sh "$dest/usr/local/sbin/hlbook-nats-edge"
	$SUDO env NATS_DIR="$dest/etc/nats" NATS_RELOAD=true "$dest/usr/local/sbin/hlbook-nats-edge" rebuild
	[ -z "$group" ] || $SUDO chgrp "$group" "$dest/etc/nats/users.conf"
	if [ ! -e "$dest/etc/default/nats-server" ]; then
		# nats-server parses an environment variable's value as a config value: hex that starts with a digit
		# (or reads as a number, like 1e5…) does not parse, so the password starts with letters.
		pw="hl$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
		$SUDO install -d -m 0755 "$dest/etc/default"
		echo "HLBOOK_PUBLISHER_PASSWORD=$pw" | $SUDO tee "$dest/etc/default/nats-server" >/dev/null
		$SUDO chmod 0600 "$dest/etc/default/nats-server"
		echo "$pw" | $SUDO tee "$dest/etc/hlbook/nats-publisher.pw" >/dev/null
		$SUDO chmod 0640 "$dest/etc/hlbook/nats-publisher.pw"
		[ -z "$settings_owner" ] || $SUDO chown "$settings_owner" "$dest/etc/hlbook/nats-publisher.pw"
	fi
}
settings config/hlbook.toml etc/hlbook/hlbook.toml
$SUDO install -m 0644 docs/operations.md "$dest/usr/local/share/doc/hlbook/operations.md"
$SUDO install -m 0644 deploy/systemd/hlbook.service "$dest/etc/systemd/system/hlbook.service"
if [ $relay = 1 ]; then
	settings deploy/relay.env etc/hlbook/relay.env
	settings deploy/relay.toml etc/hlbook/relay.toml
	$SUDO install -m 0644 deploy/systemd/hlbook-relay.service "$dest/etc/systemd/system/hlbook-relay.service"
	nats_setup
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
[ $relay = 0 ] || $SUDO systemctl enable nats-server.service hlbook-relay.service
echo "installed; edit /etc/hlbook/hlbook.toml (ingest.node_dir!), then: sudo systemctl restart hlbook;" \
	"curl -s localhost:8000/health"
[ $relay = 0 ] || echo "relay: put the TLS files in /etc/nats/tls and /etc/hlbook/nats-ca.pem (docs/scale-out.md)," \
	"edit /etc/hlbook/relay.env and relay.toml, then: sudo systemctl restart nats-server hlbook-relay;" \
	"an edge's user: sudo hlbook-nats-edge add NAME"
