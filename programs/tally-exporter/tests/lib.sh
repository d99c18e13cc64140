# lib.sh: what the exporter's shell tests share.  Sourced; expects
# EXPORTER, WRITER and TESTS in the environment (set by CMake).
#
# Every process a test starts is recorded and killed by PID at exit;
# every server binds 127.0.0.1 on a port the kernel chose; every wait is
# bounded.
set -euo pipefail
: "${EXPORTER:?}" "${WRITER:?}" "${TESTS:?}"
. "$TESTS/../../../tools/listen.sh"

pids=()
dir=$(mktemp -d /dev/shm/tally-exptest.XXXXXX)
chmod 700 "$dir"
export TALLY_DIR=$dir
unset TALLY_KEEP

cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# start_writer ARGS...: run the test writer, wait for its first line.
start_writer() {
	local out=$dir/writer.$RANDOM.out
	"$WRITER" "$@" >"$out" 2>&1 &
	pids+=($!)
	writer_pid=$!
	writer_out=$out
	for _ in $(seq 100); do
		[ -s "$out" ] && return 0
		sleep 0.05
	done
	cat "$out" >&2
	fail "the writer did not start"
}

# start_exporter ARGS...: run the exporter on 127.0.0.1:0; sets $port,
# $exporter_pid and $exporter_log.
start_exporter() {
	exporter_log=$dir/exporter.$RANDOM.log
	: >"$exporter_log"   # exists before the background job opens it
	"$EXPORTER" --listen 127.0.0.1:0 "$@" 2>"$exporter_log" &
	exporter_pid=$!
	pids+=($exporter_pid)
	port=$(listen_port "$exporter_log" "$exporter_pid") && return 0
	cat "$exporter_log" >&2
	fail "the exporter did not start"
}

# start_prometheus: a real Prometheus on 127.0.0.1 (a port the kernel
# chose, from its log) scraping the exporter at $port every second (job
# "tally"), stopped with the test; defines query PROMQL (the API's JSON)
# and value PROMQL (the first result's value, "" while there is none).
start_prometheus() {
	local pport prom_pid
	cat >"$dir/prom.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tally
    static_configs:
      - targets: ['127.0.0.1:$port']
YML
	: >"$dir/prom.log"
	prometheus --config.file="$dir/prom.yml" --storage.tsdb.path="$dir/tsdb" \
		--web.listen-address=127.0.0.1:0 >"$dir/prom.log" 2>&1 &
	prom_pid=$!
	pids+=($prom_pid)
	pport=$(prometheus_port "$dir/prom.log" "$prom_pid") ||
		{ cat "$dir/prom.log" >&2; fail "Prometheus did not start"; }
	api=http://127.0.0.1:$pport/api/v1
}
query() { curl -sS --max-time 5 --data-urlencode "query=$1" "$api/query" 2>/dev/null || true; }
value() { query "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true; }

# stop PID: SIGTERM, then wait for it; 30 s is a bound for a hang, not a
# judgement of speed (exporter-auth-timing times a stop).
stop() {
	local p=$1
	kill -TERM "$p" 2>/dev/null || return 0
	for _ in $(seq 600); do
		kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null; return $?; }
		sleep 0.05
	done
	kill -KILL "$p" 2>/dev/null
	fail "pid $p did not stop within 30 s of SIGTERM"
}

# login_floods HASH BOUND: floods of wrong passwords against an exporter
# whose one user, prom, has the bcrypt HASH of cost 12; exporter-auth
# judges what the exporter answers, exporter-auth-timing (AUTH_TIMING=1,
# with which auth.py judges the times too) how long it takes.  From
# 127.0.0.1: scrapes and a first login from another address are served
# (the flood lasts 2 s and 3 scrapes at least).  From 4 addresses, with
# 2 places each, the floods fill the queue of 8 between them, and a first
# login from a fifth address takes the place of the last login waiting
# from one of them (the flood ends with that login's answer).  SIGTERM 1 s
# into a flood: the exporter stops with status 0 within BOUND seconds (a
# bound for a hang), and $ms says how long it took; the flood's clients
# are stopped then.
login_floods() {
	local t0 t1 flood_pid
	printf 'basic_auth_users:\n  prom: %s\n' "$1" >"$dir/web12.yml"
	chmod 600 "$dir/web12.yml"
	start_exporter --web.config.file "$dir/web12.yml"
	timeout 60 python3 "$TESTS/auth.py" flood "$port" prom 'right pass' 2 ||
		fail "wrong passwords delay the right one"
	ok "a flood of wrong passwords (cost 12) delays neither scrapes nor a first login from another address"
	stop "$exporter_pid"
	start_exporter --web.config.file "$dir/web12.yml"
	timeout 60 python3 "$TESTS/auth.py" spread "$port" prom 'right pass' 30 ||
		fail "wrong passwords from 4 addresses refuse a first login from a fifth"
	ok "a flood of wrong passwords (cost 12) from 4 addresses: a first login from a fifth served"
	timeout 60 python3 "$TESTS/auth.py" flood "$port" prom 'right pass' 30 >/dev/null &
	flood_pid=$!
	pids+=($flood_pid)
	sleep 1
	t0=$(date +%s%N)
	kill -TERM "$exporter_pid"
	for _ in $(seq $(($2 * 20))); do
		kill -0 "$exporter_pid" 2>/dev/null || break
		sleep 0.05
	done
	t1=$(date +%s%N)
	kill -0 "$exporter_pid" 2>/dev/null && { kill -KILL "$exporter_pid"; fail "SIGTERM during a flood of logins: still running after $2 s"; }
	wait "$exporter_pid" || fail "exit status $? after SIGTERM"
	ms=$(( (t1 - t0) / 1000000 ))
	kill "$flood_pid" 2>/dev/null || true
	wait "$flood_pid" || true
}

# With pipefail, never "scrape ... | grep -q": grep -q stops reading at
# the first match, curl then fails writing (exit 23) and so does the test;
# write to a file, or "| grep ... >/dev/null".
scrape() { # curl args...
	curl -sS --max-time 10 "$@"
}

# The tests' Python venv (prometheus_client among its pinned packages):
# made once per build directory by tools/test-venv.sh, reused after.
venv() {
	"$TESTS/../../../tools/test-venv.sh" "${VENV:?}" ||
		fail "no test venv at $VENV (tools/test-venv.sh)"
}
