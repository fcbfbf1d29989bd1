#!/usr/bin/env bash
# Per-edge NATS users for hlbook (docs/scale-out.md, "Security"): each edge its own user and password, with
# permissions for exactly what `hlbook serve --source nats://…` does under `nats.name = NAME`: read the streams'
# line subjects live, its own consumers (named NAME), replies on its own inbox (_INBOX_NAME), snapshots asked for
# and read. It cannot read another edge's inbox, touch its consumers, publish a line or change a snapshot.
#
#   deploy/nats/edge.sh add NAME      writes edges/NAME.conf, prints the edge's [nats] settings and password once
#   deploy/nats/edge.sh revoke NAME   removes it: that edge is refused at once, the others go on
#   deploy/nats/edge.sh add-leaf NAME a region's leaf node (docs/scale-out.md, "Regions"): the link its mirrors and
#                                     its edges' live lines and snapshot requests cross, and nothing else
#   deploy/nats/edge.sh list
#   deploy/nats/edge.sh rebuild       only rebuilds users.conf and reloads (install.sh runs it)
# Each rebuilds users.conf (publisher.conf and every edge) and reloads nats-server.
#   NATS_DIR     where nats-server.conf, accounts.conf and publisher.conf are (default /etc/nats)
#   NATS_RELOAD  the reload command (default: systemctl reload nats-server, when systemd runs)
#   STREAMS      the streams an edge may read, STREAM:PREFIX (default "HL:hl HL2:hl2")
#   PASSWORD     the new edge's password (default: 24 random bytes, hex), for secrets kept elsewhere
#   DOMAIN       add: the JetStream domain the edge reads (its nats.domain; default none: its server's own): its
#                JetStream permissions are then on $JS.DOMAIN.API.… as well as $JS.API.… (a server checks a
#                request to its own domain's API after mapping it to $JS.API.…; another domain's goes out as is)
#   HUB_DOMAIN   add-leaf: the hub's JetStream domain, which the leaf's mirrors read (default hub)
set -euo pipefail
dir="${NATS_DIR:-/etc/nats}"
streams="${STREAMS:-HL:hl HL2:hl2}"
domain="${DOMAIN:-}"
hub_domain="${HUB_DOMAIN:-hub}"
for d in "$domain" "$hub_domain"; do
	[[ "$d" =~ ^[A-Za-z0-9_-]*$ ]] || { echo "edge.sh: DOMAIN, HUB_DOMAIN: letters, digits, _ and - only" >&2; exit 2; }
done
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

# One edge's user entry: name, password; its subjects for each STREAM:PREFIX of $streams, its JetStream API also in
# $domain (a domain's API is $JS.<domain>.API).
edge_conf() {
	local n="$1" pass="$2" pubs="" api
	local subs="\"_INBOX_$n.>\""
	for api in "\$JS.API" ${domain:+"\$JS.$domain.API"}; do
		pubs="$pubs
          \"$api.INFO\","
		for sp in $streams; do
			local s="${sp%%:*}" o="OBJ_${sp%%:*}_SNAPSHOTS"
			pubs="$pubs
          \"$api.STREAM.INFO.$s\", \"$api.STREAM.MSG.GET.$s\", \"$api.DIRECT.GET.$s\", \"$api.DIRECT.GET.$s.>\",
          \"$api.CONSUMER.CREATE.$s.$n\", \"$api.CONSUMER.CREATE.$s.$n.>\",
          \"$api.CONSUMER.INFO.$s.$n\", \"$api.CONSUMER.DELETE.$s.$n\", \"$api.CONSUMER.MSG.NEXT.$s.$n\",
          \"$api.STREAM.INFO.$o\", \"$api.STREAM.MSG.GET.$o\", \"$api.DIRECT.GET.$o\", \"$api.DIRECT.GET.$o.>\",
          \"$api.CONSUMER.CREATE.$o\","
		done
	done
	for sp in $streams; do
		local p="${sp#*:}" o="OBJ_${sp%%:*}_SNAPSHOTS"
		pubs="$pubs
          \"$p.snapshot.request\", \"\$JS.FC.$o.>\","
		subs="$subs, \"$p.by-block.*\", \"$p.streaming.*\""
	done
	cat <<CONF
  # Edge $n (deploy/nats/edge.sh add $n); revoke: deploy/nats/edge.sh revoke $n
  {
    user: "$n"
    password: "$pass"
    permissions: {
      publish: {
        allow: [$pubs
        ]
      }
      subscribe: { allow: [$subs] }
    }
  }
CONF
}

# A leaf node's user entry: name, password. A leaf user's permissions are the link's, seen from the hub: what it
# may publish goes from the leaf to the hub, what it may subscribe to from the hub to the leaf (docs.nats.io, "Leaf
# Nodes"). Leaf to hub: what the region's mirrors ask ($JS.<hub>.API.CONSUMER.CREATE of the stream and its
# snapshot store, their flow-control answers) and its edges' snapshot requests, as a trace of the link shows.
# Hub to leaf: everything the region reads anyway (lines, mirror deliveries, API and snapshot answers), but not the
# publisher's replies, other clients' acks and flow control, the snapshot store's raw subjects, or the requests
# only the publisher answers. It logs in only as a leaf node.
leaf_conf() {
	local n="$1" pass="$2" pubs="" deny="" api="\$JS.$hub_domain.API"
	for sp in $streams; do
		local s="${sp%%:*}" p="${sp#*:}" o="OBJ_${sp%%:*}_SNAPSHOTS"
		pubs="$pubs
          \"$p.snapshot.request\",
          \"$api.CONSUMER.CREATE.$s\", \"$api.CONSUMER.CREATE.$s.>\", \"\$JS.FC.$s.>\",
          \"$api.CONSUMER.CREATE.$o\", \"$api.CONSUMER.CREATE.$o.>\", \"\$JS.FC.$o.>\","
		deny="$deny, \"$p.snapshot.request\""
	done
	cat <<CONF
  # Leaf node $n (deploy/nats/edge.sh add-leaf $n); revoke: deploy/nats/edge.sh revoke $n
  {
    user: "$n"
    password: "$pass"
    allowed_connection_types: ["LEAFNODE"]
    permissions: {
      publish: {
        allow: [$pubs
        ]
      }
      subscribe: {
        deny: ["_INBOX_publisher.>", "\$JS.ACK.>", "\$JS.FC.>", "\$O.>", "\$JS.*.API.>"$deny]
      }
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
	(umask 0137 && leaf_conf "$name" "$pass" >"$dir/edges/$name.conf")
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
