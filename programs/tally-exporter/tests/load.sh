#!/usr/bin/env bash
# exporter-load: 64 concurrent keep-alive connections for 4 s with zero
# errors, while malformed requests, oversized headers, huge bodies and a
# one-byte-a-second client hit the same server (load.py); then the
# exporter still answers.  Request timeout 3 s, so that the slow client is
# cut during the load; every client here comes from 127.0.0.1, which may
# hold half the connections.
. "$(dirname "$0")/lib.sh"
start_writer fixture 60
start_exporter --web.request-timeout 3 --web.max-connections-per-ip 128
timeout 60 python3 "$TESTS/load.py" "$port" "$exporter_pid" || fail "load and hostile clients"
kill -0 "$exporter_pid" || fail "the exporter died"
scrape "http://127.0.0.1:$port/metrics" | grep '^fixture_big_total' >/dev/null || fail "not served afterwards"
ok "64 connections x 4 s, hostile clients: no error, still serving"
stop "$exporter_pid"
