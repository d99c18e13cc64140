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

printf 'basic_auth_users:\n  prom: %s\n' "$hash12" >"$dir/web12.yml"
chmod 600 "$dir/web12.yml"
start_exporter --web.config.file "$dir/web12.yml"
timeout 60 python3 "$TESTS/auth.py" flood "$port" prom 'right pass' 5 ||
	fail "wrong passwords delay the right one"
ok "a flood of wrong passwords (cost 12): scrapes within 2.5 s, a first login from another address within 5 s"
stop "$exporter_pid"
start_exporter --web.config.file "$dir/web12.yml"
timeout 60 python3 "$TESTS/auth.py" spread "$port" prom 'right pass' 7 ||
	fail "wrong passwords from 4 addresses delay a first login from a fifth"
ok "a flood from 4 addresses: a first login from a fifth within 5 s"
timeout 60 python3 "$TESTS/auth.py" flood "$port" prom 'right pass' 6 >/dev/null &
flood_pid=$!
pids+=($flood_pid)
sleep 2
t0=$(date +%s%N)
kill -TERM "$exporter_pid"
for _ in $(seq 100); do
	kill -0 "$exporter_pid" 2>/dev/null || break
	sleep 0.05
done
t1=$(date +%s%N)
kill -0 "$exporter_pid" 2>/dev/null && { kill -KILL "$exporter_pid"; fail "SIGTERM during a flood of logins: still running after 5 s"; }
wait "$exporter_pid" || fail "exit status $? after SIGTERM"
ms=$(( (t1 - t0) / 1000000 ))
[ "$ms" -lt 5000 ] || fail "SIGTERM during a flood of logins took $ms ms"
wait "$flood_pid" || true
ok "SIGTERM during a flood of logins: stopped in $ms ms"
