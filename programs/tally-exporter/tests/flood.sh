#!/usr/bin/env bash
# exporter-flood: floods from many addresses (addresses are cheap: a
# loopback range, an IPv6 /48).  Wrong passwords from a hundred addresses
# do not keep out the first login of a configured user whose password
# failed nowhere lately: each such login is checked before the flood's
# and never dropped for them (auth.c); the flood lasts until those logins
# are answered.  Cost 10: the queue is full all the same (the flood's
# logins are answered 429), and each login waits for fewer
# CPU seconds of bcrypt (exporter-auth floods at the largest cost, 12).
# Requests sent a byte a second on every place of the connection table do
# not keep out a scrape (4 s, 3 scrapes at least): the oldest incomplete
# connection is closed to make room, and counted.
. "$(dirname "$0")/lib.sh"
start_writer fixture 120

hash=$("$WRITER" hash 'right pass' 10) || fail "bcrypt hash"
{
	echo 'basic_auth_users:'
	for u in alice prom1 prom2 prom3 prom4 prom5 prom6; do
		echo "  $u: $hash"
	done
} >"$dir/web.yml"
chmod 600 "$dir/web.yml"
start_exporter --web.config.file "$dir/web.yml"
timeout 100 python3 "$TESTS/flood.py" addresses "$port" 60 \
	prom1 prom2 prom3 prom4 prom5 prom6 ||
	fail "a first login with the right password was refused during the flood"
ok "wrong passwords from 100 addresses: every first login of a clean user got 200"
stop "$exporter_pid"

# Slow requests from 16 addresses, 8 connections each (the per-address
# limit), on a table of 64 places.
start_exporter --web.max-connections 64
timeout 100 python3 "$TESTS/flood.py" slow "$port" 4 16 8 ||
	fail "a scrape was kept out by slow connections"
m=$(curl -s --max-time 10 "http://127.0.0.1:$port/metrics" |
	sed -n 's/^tally_exporter_connections_evicted_total \([0-9]*\)$/\1/p')
[ -n "$m" ] && [ "$m" -gt 0 ] || fail "no connection counted as evicted: '$m'"
ok "slow requests on every place: every scrape got 200, $m connections evicted"
stop "$exporter_pid"
