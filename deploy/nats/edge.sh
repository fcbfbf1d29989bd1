#!/usr/bin/env bash
# Per-edge NATS users for hlbook (docs/scale-out.md, "Security"): each edge its own user and password, with
# permissions for exactly what `hlbook serve --source nats://…` does under `nats.name = NAME`: read the streams'
# line subjects live, its own consumers (named NAME), replies on its own inbox (_INBOX_NAME), snapshots asked for
# and read. It cannot read another edge's inbox, touch its consumers, publish a line or change a snapshot.
#
#   deploy/nats/edge.sh add NAME      writes edges/NAME.conf, prints the edge's [nats] settings and password once
#   deploy/nats/edge.sh revoke NAME   removes it: that edge is refused at once, the others go on
#   deploy/nats/edge.sh add-leaf NAME a region's leaf node (docs/scale-out.md, "Regions"): the link its mirrors and
#                                     its edges' live lines and snapshot requests cross; trusted like the publisher
#   deploy/nats/edge.sh list
#   deploy/nats/edge.sh rebuild       only rebuilds users.conf and reloads (install.sh runs it)
# Each rebuilds users.conf (publisher.conf and every edge) and reloads nats-server.
#   NATS_DIR     where nats-server.conf, accounts.conf and publisher.conf are (default /etc/nats)
#   NATS_RELOAD  the reload command (default: systemctl reload nats-server, when systemd runs)
#   STREAMS      the streams an edge may read, STREAM:PREFIX (default "HL:hl HL2:hl2")
#   PASSWORD     the new edge's password (default: 24 random bytes, hex), for secrets kept elsewhere
set -euo pipefail
dir="${NATS_DIR:-/etc/nats}"
streams="${STREAMS:-HL:hl HL2:hl2}"
usage() {
	echo "usage: edge.sh add NAME | revoke NAME | list" >&2
	exit 2
}
[ $# -ge 1 ] || usage
cmd="$1"
name="${2:-}"
if [ "$cmd" = add ] || [ "$cmd" = add-leaf ] || [ "$cmd" = revoke ]; then
	# The name is a NATS subject token and a consumer name.
	[[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "edge.sh: NAME: letters, digits, _ and - only" >&2; exit 2; }
fi

# One edge's user entry: name, password; its subjects for each STREAM:PREFIX of $streams.
edge_conf() {
	local n="$1" pass="$2" pubs=""
	local subs="\"_INBOX_$n.>\""
	for sp in $streams; do
		local s="${sp%%:*}" p="${sp#*:}" o="OBJ_${sp%%:*}_SNAPSHOTS"
		pubs="$pubs
          \"$p.snapshot.request\",
          \"\$JS.API.STREAM.INFO.$s\", \"\$JS.API.STREAM.MSG.GET.$s\", \"\$JS.API.DIRECT.GET.$s\", \"\$JS.API.DIRECT.GET.$s.>\",
          \"\$JS.API.CONSUMER.CREATE.$s.$n\", \"\$JS.API.CONSUMER.CREATE.$s.$n.>\",
          \"\$JS.API.CONSUMER.INFO.$s.$n\", \"\$JS.API.CONSUMER.DELETE.$s.$n\", \"\$JS.API.CONSUMER.MSG.NEXT.$s.$n\",
          \"\$JS.API.STREAM.INFO.$o\", \"\$JS.API.STREAM.MSG.GET.$o\", \"\$JS.API.DIRECT.GET.$o\", \"\$JS.API.DIRECT.GET.$o.>\",
          \"\$JS.API.CONSUMER.CREATE.$o\", \"\$JS.FC.$o.>\","
		subs="$subs, \"$p.by-block.*\", \"$p.streaming.*\""
	done
	cat <<CONF
  # Edge $n (deploy/nats/edge.sh add $n); revoke: deploy/nats/edge.sh revoke $n
  {
    user: "$n"
    password: "$pass"
    permissions: {
      publish: {
        allow: [
          "\$JS.API.INFO",$pubs
        ]
      }
      subscribe: { allow: [$subs] }
    }
  }
CONF
}

rebuild() {
	local tmp="$dir/users.conf.new"
	{
		echo "# Written by deploy/nats/edge.sh from publisher.conf and edges/*.conf: edit those, not this."
		echo "users: ["
		cat "$dir/publisher.conf"
		for f in "$dir"/edges/*.conf; do
			[ -e "$f" ] && cat "$f"
		done
		echo "]"
	} >"$tmp"
	chmod 0640 "$tmp"
	mv "$tmp" "$dir/users.conf"
	if [ -n "${NATS_RELOAD:-}" ]; then
		sh -c "$NATS_RELOAD"
	elif [ -d /run/systemd/system ] && systemctl is-active --quiet nats-server; then
		systemctl reload nats-server
	fi
}

mkdir -p "$dir/edges"
case "$cmd" in
add)
	[ ! -e "$dir/edges/$name.conf" ] || { echo "edge.sh: edge $name exists (revoke it first)" >&2; exit 1; }
	pass="${PASSWORD:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
	[[ "$pass" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "edge.sh: PASSWORD: letters, digits, _ . - only" >&2; exit 2; }
	(umask 0137 && edge_conf "$name" "$pass" >"$dir/edges/$name.conf")
	rebuild
	echo "# edge $name: its password (mode 0600 on the edge, e.g. /etc/hlbook/nats-edge.pw), shown only now:"
	echo "$pass"
	echo "# and in the edge's /etc/hlbook/hlbook.toml: [nats] user = \"$name\", name = \"$name\","
	echo "#   password_file = \"/etc/hlbook/nats-edge.pw\", tls_ca_file = \"/etc/hlbook/nats-ca.pem\""
	;;
add-leaf)
	[ ! -e "$dir/edges/$name.conf" ] || { echo "edge.sh: $name exists (revoke it first)" >&2; exit 1; }
	pass="${PASSWORD:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
	[[ "$pass" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "edge.sh: PASSWORD: letters, digits, _ . - only" >&2; exit 2; }
	(umask 0137 && printf '  # Leaf node %s (deploy/nats/edge.sh add-leaf %s)\n  { user: "%s", password: "%s" }\n' \
		"$name" "$name" "$name" "$pass" >"$dir/edges/$name.conf")
	rebuild
	echo "# leaf $name: its password, shown only now (the leaf's leafnodes.remotes url):"
	echo "$pass"
	;;
revoke)
	[ -e "$dir/edges/$name.conf" ] || { echo "edge.sh: no edge $name" >&2; exit 1; }
	rm "$dir/edges/$name.conf"
	rebuild
	echo "edge $name revoked"
	;;
rebuild) rebuild ;;
list)
	for f in "$dir"/edges/*.conf; do
		[ -e "$f" ] && basename "$f" .conf
	done
	;;
*) usage ;;
esac
