#!/usr/bin/env bash
# exporter-auth: the web config fails closed and the authentication cannot
# be exhausted.  At start: a directory, an empty file, an unreadable file,
# a FIFO as certificate, a bcrypt cost of 31 are one-line errors (status
# 1, at once); a world-readable file of hashes starts with a warning.
# Served: a flood of wrong passwords from one address neither refuses a
# scrape with the right password nor a first login from another address,
# and one from 4 addresses does not refuse a first login from a fifth;
# SIGTERM stops the exporter during the flood; slow connections cycling
# from one address leave room for a scraper at another.  Each flood lasts
# until what it checks has happened (lib.sh, auth.py): a few seconds.
# Statuses only: the time bounds of the same scenarios are
# exporter-auth-timing's (auth-timing.sh, CTest label "timing").
. "$(dirname "$0")/lib.sh"
start_writer fixture 120

# startup_error PATTERN ARGS...: status 1 within 10 s, message matching.
startup_error() {
	local pat=$1 rc=0 out t0=$SECONDS
	shift
	out=$(timeout 10 "$EXPORTER" --listen 127.0.0.1:0 "$@" 2>&1 >/dev/null) || rc=$?
	[ "$rc" = 1 ] || fail "'$*': status $rc, want 1 ($out)"
	echo "$out" | head -1 | grep -q -- "$pat" || fail "'$*': message '$out'"
	[ "$(echo "$out" | wc -l)" = 1 ] || fail "'$*': more than one line: $out"
	echo "  $out"
}

hash12=$("$WRITER" hash 'right pass' 12) || fail "bcrypt hash"
hash8=$("$WRITER" hash 'right pass' 8) || fail "bcrypt hash"
mkdir "$dir/web.d"
startup_error 'bad web config: web config .*/web.d: not a regular file (a directory)' --web.config.file "$dir/web.d"
: >"$dir/empty.yml"
startup_error 'sets neither tls_server_config nor basic_auth_users' --web.config.file "$dir/empty.yml"
printf 'basic_auth_users:\n# nobody yet\n' >"$dir/nousers.yml"
startup_error 'basic_auth_users lists no user' --web.config.file "$dir/nousers.yml"
mkfifo "$dir/cert.fifo"
printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\n' "$dir/cert.fifo" "$dir/cert.fifo" >"$dir/fifo.yml"
startup_error 'cert_file .*cert.fifo: not a regular file (a FIFO)' --web.config.file "$dir/fifo.yml"
printf 'tls_server_config:\n  cert_file: /dev/zero\n  key_file: /dev/zero\n' >"$dir/zero.yml"
startup_error 'cert_file /dev/zero: not a regular file (a device)' --web.config.file "$dir/zero.yml"
printf 'basic_auth_users:\n  mallory: $2y$31$%s\n' "${hash8:7}" >"$dir/cost31.yml"
startup_error "cost31.yml:2: user 'mallory': bcrypt cost 31 is outside 4..12" --web.config.file "$dir/cost31.yml"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	# Another user (nobody) cannot read root's 0600 file: an error, not
	# a server without authentication.
	printf 'basic_auth_users:\n  prom: %s\n' "$hash8" >"$dir/private.yml"
	chmod 600 "$dir/private.yml"
	chmod 755 "$dir"
	# A segment directory of nobody's own: readers refuse another user's.
	mkdir -m 0700 "$dir/nobody.d"
	chown 65534 "$dir/nobody.d"
	rc=0; out=$(timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$EXPORTER" --listen 127.0.0.1:0 --dir "$dir/nobody.d" --web.config.file "$dir/private.yml" 2>&1) || rc=$?
	chmod 700 "$dir"
	[ "$rc" = 1 ] && echo "$out" | grep -q 'private.yml: Permission denied' ||
		fail "unreadable web config: status $rc ($out)"
	echo "  $out"
fi
ok "start-up: directory, empty, no users, FIFO, device, cost 31, unreadable: one-line errors"

# A world-readable file of hashes: one warning line, and it serves.
printf 'basic_auth_users:\n  prom: %s\n' "$hash8" >"$dir/web8.yml"
chmod 644 "$dir/web8.yml"
start_exporter --web.config.file "$dir/web8.yml"
[ "$(grep -c 'warning: .*web8.yml holds password hashes and its mode lets every user read it' "$exporter_log")" = 1 ] ||
	fail "no warning about a world-readable web config: $(cat "$exporter_log")"
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" || true; }
[ "$(code -u 'prom:right pass' "http://127.0.0.1:$port/metrics")" = 200 ] || fail "right password"
[ "$(code -u 'prom:wrong' "http://127.0.0.1:$port/metrics")" = 401 ] || fail "wrong password"
# A NUL byte after the right password is not the right password.
nul=$(printf 'prom:right pass\0junk' | base64 -w0)
[ "$(code -H "Authorization: Basic $nul" "http://127.0.0.1:$port/metrics")" = 401 ] || fail "password<NUL>junk"
[ "$(code -H "Authorization: Basic $(printf 'prom:right pass' | base64 -w0)" "http://127.0.0.1:$port/metrics")" = 200 ] || fail "header made by hand"
ok "world-readable web config: $(grep warning "$exporter_log")"
# That a failed login costs one bcrypt of the same cost for a known and an
# unknown user is counted by exporter-unit (webconfig_login_cost); how
# long each takes is measured by exporter-auth-timing.
stop "$exporter_pid"

# The largest cost, floods from one address and from 4, and SIGTERM
# during a flood (lib.sh).  How long the stop takes (a clean stop waits
# for the one bcrypt in progress, and STOP_SECONDS bounds the rest) is
# exporter-auth-timing's; here 30 s is a bound for a hang.
login_floods "$hash12" 30
ok "SIGTERM during a flood of logins: stopped, status 0 (in $ms ms, not judged here)"

# Slow connections from one address: with 64 connections in all, the
# attacker's 100 cycling connections get 8 of them (an eighth) and never
# more, and a scraper at 127.0.0.2 is served every time (how fast: timing
# only); 4 s, and 3 scrapes at least while the attacker holds its 8.
start_exporter --web.max-connections 64 --web.request-timeout 5
timeout 60 python3 "$TESTS/auth.py" slow "$port" 4 100 8 || fail "slow connections from one address starve another"
ok "100 slow connections from 127.0.0.1 (limit 64): scrapes from 127.0.0.2 served"
stop "$exporter_pid"
# The defaults (256, per address 32), 300 slow connections.
start_exporter --web.request-timeout 5
timeout 60 python3 "$TESTS/auth.py" slow "$port" 4 300 32 || fail "300 slow connections from one address starve another"
ok "300 slow connections from 127.0.0.1 (defaults): scrapes from 127.0.0.2 served"
stop "$exporter_pid"
# A bad per-address limit is refused.
rc=0; out=$("$EXPORTER" --listen 127.0.0.1:0 --web.max-connections 64 --web.max-connections-per-ip 33 2>&1) || rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q 'at most half of --web.max-connections (64)' || fail "per-ip > half: status $rc ($out)"
ok "a per-address limit above half of the connections is refused"
