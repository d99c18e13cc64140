#!/usr/bin/env bash
# exporter-tls: TLS and basic auth from a web config: the right password
# works, a wrong one and none get 401, plain HTTP to the TLS port fails
# cleanly and the server goes on serving.  The certificate is made now.
. "$(dirname "$0")/lib.sh"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$dir/key.pem" \
	-out "$dir/cert.pem" >/dev/null 2>&1 || fail "openssl"
hash=$("$WRITER" hash 's3cret pass') || fail "bcrypt hash"
cat >"$dir/web.yml" <<YML
# test web config
tls_server_config:
  cert_file: $dir/cert.pem
  key_file: $dir/key.pem
basic_auth_users:
  prom: '$hash'
YML
start_writer fixture 60
start_exporter --web.config.file "$dir/web.yml"
grep -q 'https://.*(basic auth)' "$exporter_log" || fail "no https/basic auth in the log"
url=https://127.0.0.1:$port/metrics
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$dir/cert.pem" "$@" || true; }
[ "$(code -u 'prom:s3cret pass' "$url")" = 200 ] || fail "right password"
curl -sS --max-time 10 --cacert "$dir/cert.pem" -u 'prom:s3cret pass' "$url" | grep '^fixture_big_total{.*} 9007199254740993$' >/dev/null || fail "body over TLS"
[ "$(code -u 'prom:wrong' "$url")" = 401 ] || fail "wrong password not 401"
[ "$(code -u 'nobody:s3cret pass' "$url")" = 401 ] || fail "unknown user not 401"
[ "$(code "$url")" = 401 ] || fail "no credentials not 401"
curl -s -D - -o /dev/null --max-time 10 --cacert "$dir/cert.pem" "$url" | grep -i '^WWW-Authenticate: Basic' >/dev/null || fail "no WWW-Authenticate"
ok "basic auth: right 200, wrong/unknown/none 401"
rc=0
curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$port/metrics" || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 28 ] || fail "plain HTTP to the TLS port: curl status $rc"
kill -0 "$exporter_pid" || fail "the exporter died"
[ "$(code -u 'prom:s3cret pass' "$url")" = 200 ] || fail "served after plain HTTP"
ok "plain HTTP to the TLS port fails (curl status $rc), server still serves"
# A bad certificate is a one-line start-up error.
echo junk >"$dir/cert.pem"
rc=0; out=$(timeout 10 "$EXPORTER" --listen 127.0.0.1:0 --web.config.file "$dir/web.yml" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "bad certificate: status $rc ($out)"
ok "bad certificate: $(echo "$out" | tail -1)"
stop "$exporter_pid"
