#!/usr/bin/env bash
# exporter-flood: wrong passwords from a hundred addresses (addresses are
# cheap: a loopback range, an IPv6 /48) do not keep out the first login
# of a configured user whose password failed nowhere lately: each such
# login is checked before the flood's and never dropped for them
# (server.c).
. "$(dirname "$0")/lib.sh"
start_writer fixture 120

hash=$("$WRITER" hash 'right pass' 12) || fail "bcrypt hash"
{
	echo 'basic_auth_users:'
	for u in alice prom1 prom2 prom3 prom4 prom5 prom6; do
		echo "  $u: $hash"
	done
} >"$dir/web.yml"
chmod 600 "$dir/web.yml"
start_exporter --web.config.file "$dir/web.yml"
timeout 100 python3 "$TESTS/flood.py" addresses "$port" 12 \
	prom1 prom2 prom3 prom4 prom5 prom6 ||
	fail "a first login with the right password was refused during the flood"
ok "wrong passwords from 100 addresses: every first login of a clean user got 200"
stop "$exporter_pid"
