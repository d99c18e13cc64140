#!/usr/bin/env bash
# programs/tallystat/demo.sh BUILD_DIR: tallystat on the example service,
# run by `make demo` (tools/demo.sh) after its own steps, in under 30 s.
#
# queue-service runs in a private $TALLY_DIR; tallystat shows what it
# counted since it started, then rates per second with a column per CPU,
# then the same as JSON, and its segment with --list.  The per-connection
# series (hundreds, short-lived) are left out with a label matcher:
# '{conn=""}' keeps the series without a conn label.  Exits non-zero if a
# step fails.
set -eEuo pipefail
trap 'echo "tallystat demo: FAILED: line $LINENO: $BASH_COMMAND" >&2' ERR

build=${1:?usage: programs/tallystat/demo.sh BUILD_DIR}
ts=$build/programs/tallystat/tallystat
svc=$build/examples/queue-service
for b in "$ts" "$svc"; do
	[ -x "$b" ] || { echo "tallystat demo: $b is not built" >&2; exit 1; }
done

dir=$(mktemp -d /dev/shm/tallystat-demo.XXXXXX)
chmod 700 "$dir"
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export TALLY_DIR=$dir
unset TALLY_KEEP NO_COLOR S_COLORS

# Show a tallystat command line as one would type it, then run it.
tallystat() {
	local a line='$ tallystat'
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./-]+$ ]]; then line+=" $a"; else line+=" '$a'"; fi
	done
	printf '\n%s\n' "$line"
	timeout 10 "$ts" "$@"
}

"$svc" --threads 2 --seconds 15 --rate 50000 >"$dir/svc.out" 2>&1 &
pid=$!
for _ in $(seq 50); do
	ls "$dir"/queue-service."$pid".*.tally >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { cat "$dir/svc.out" >&2; exit 1; }
	sleep 0.1
done
ls "$dir"/queue-service."$pid".*.tally >/dev/null 2>&1 || { echo "tallystat demo: no segment" >&2; exit 1; }
sleep 1.5

echo "queue-service (pid $pid) runs: 2 workers, 50000 requests/s"
tallystat '{conn=""}'
tallystat -y -P ALL '{conn=""}' 1 2
printf '\n$ tallystat -o JSON requests_total request_duration_ns\n'
timeout 10 "$ts" -o JSON requests_total request_duration_ns >"$dir/out.json"
head -c 1500 "$dir/out.json"
[ "$(wc -c <"$dir/out.json")" -le 1500 ] || echo " ..."
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); s = d["sysstat"]["hosts"][0]["statistics"]; assert s[0]["series"], "no series"' "$dir/out.json"
tallystat --list
echo
echo "tallystat demo: all steps passed"
