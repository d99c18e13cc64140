#!/usr/bin/env bash
# exporter-auth-timing: how long the authentication takes, under the CTest
# label "timing" (tools/run-tests.sh reports it and does not fail on it:
# times depend on the machine and its load).  exporter-auth checks the
# same scenarios by what the exporter answers; exporter-unit counts the
# bcrypt checks of a failed login.
#   - A failed login with a known user (cost 8) and with an unknown one:
#     medians within 10% of each other.
#   - A flood of wrong passwords (cost 12) from one address: every scrape
#     with the right password from another within 2.5 s, its first login
#     within 5 s; from 4 addresses, a first login from a fifth within 5 s.
#   - SIGTERM during the flood: gone within 5 s.
. "$(dirname "$0")/lib.sh"
export AUTH_TIMING=1
start_writer fixture 120
hash12=$("$WRITER" hash 'right pass' 12) || fail "bcrypt hash"
hash8=$("$WRITER" hash 'right pass' 8) || fail "bcrypt hash"

printf 'basic_auth_users:\n  prom: %s\n' "$hash8" >"$dir/web8.yml"
chmod 600 "$dir/web8.yml"
start_exporter --web.config.file "$dir/web8.yml"
timeout 60 python3 "$TESTS/auth.py" timing "$port" prom 'right pass' ||
	fail "a failed login of a known user and of an unknown one take different times"
ok "failed logins: known and unknown users take the same time"
stop "$exporter_pid"

login_floods "$hash12" 5
[ "$ms" -lt 5000 ] || fail "SIGTERM during a flood of logins took $ms ms"
ok "in time: scrapes within 2.5 s and a first login from another address within 5 s of a flood (cost 12), from one address and from 4; SIGTERM during a flood stopped it in $ms ms"
