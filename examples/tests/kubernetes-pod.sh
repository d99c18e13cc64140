#!/usr/bin/env bash
# kubernetes-pod: the pod of examples/kubernetes/pod.yaml, emulated with
# namespaces as Kubernetes would run it, its commands, environment, users
# and volume read from the manifest itself.
#
#   - The pod: a private mount namespace holding the volume (a 64 MiB
#     tmpfs, root's, mode 2777, group fsGroup, as an in-memory emptyDir
#     with an fsGroup is) and a network namespace of its own.
#   - Each container: pid 1 of a PID namespace (unshare --pid --fork
#     --mount-proc), as its runAsUser with runAsGroup and fsGroup (setpriv),
#     with the manifest's environment only.  Paths below the volume's
#     mountPath are the tmpfs's.
#   - The exporter starts first (the application creates TALLY_DIR), then
#     the application is started and SIGKILLed RESTARTS times (40, or
#     40 / TALLY_TEST_SCALE, at least 4).  Every
#     scrape parses with promtool and has no two samples alike, the live
#     pid 1 speaks for its labels, and the directory never holds more than
#     the live segment and one dead one.  tallystat tells two dead pid 1s
#     apart.  At the end both containers stop on SIGTERM as pid 1.
#
# Needs root, unshare, setpriv, ip, curl, promtool and python3-yaml: skipped
# (77) with the reason otherwise.  Every process it starts dies with it
# (unshare --kill-child), and the volume with the pod's mount namespace.
#   EXPORTER=... SERVICE=... TALLYSTAT=... kubernetes-pod.sh
set -euo pipefail
: "${EXPORTER:?}" "${SERVICE:?}" "${TALLYSTAT:?}"
here=$(cd "$(dirname "$0")" && pwd)
manifest=${MANIFEST:-$here/../kubernetes/pod.yaml}
readme=${README:-$here/../../README.md}
# 40, or 40 / TALLY_TEST_SCALE (the sanitizer builds' runs: 10).
scale=${TALLY_TEST_SCALE:-1}
case $scale in '' | *[!0-9]* | 0) scale=1 ;; esac
restarts=${RESTARTS:-$((40 / scale > 3 ? 40 / scale : 4))}

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
skip() { echo "skipped: $*"; exit 77; }

if [ -z "${POD_VOLUME:-}" ]; then
	[ "$(id -u)" = 0 ] || skip "needs root (namespaces, a tmpfs, other users)"
	for c in unshare setpriv ip curl promtool python3; do
		command -v "$c" >/dev/null || skip "$c not installed"
	done
	python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed"
	for b in "$EXPORTER" "$SERVICE" "$TALLYSTAT"; do
		setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$b" ||
			skip "uid 65534 cannot reach $b (a build tree under a 0700 directory?)"
	done
	# The README shows the manifest that is tested.
	python3 - "$manifest" "$readme" <<'PY' || fail "README.md does not hold $manifest as it is"
import sys
m, r = (open(p).read() for p in sys.argv[1:3])
sys.exit(0 if m in r else 1)
PY
	vol=$(mktemp -d /tmp/tally-pod.XXXXXX)
	rc=0
	POD_VOLUME=$vol unshare --mount --net --propagation private -- \
		bash ${POD_TRACE:+-x} "$0" "$@" || rc=$?
	rmdir "$vol"
	exit "$rc"
fi

# --- Inside the pod's mount and network namespaces ---------------------
vol=$POD_VOLUME
work=$(mktemp -d /tmp/tally-podwork.XXXXXX)
# unshare's pids, and the containers' pid 1s: killing a pid 1 ends its
# PID namespace.  A pid 1 also dies with its unshare (setpriv --pdeathsig:
# unshare's --kill-child does not survive the change of user).
pids=() pid1s=()
cleanup() {
	local p
	for p in "${pid1s[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	umount "$vol" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
ip link set lo up

# The manifest, as shell arrays: the pod's users and volume, and each
# container's command (its program mapped to the build's), environment
# and ports, paths below mountPath moved to the tmpfs.
python3 - "$manifest" "$vol" "$EXPORTER" "$SERVICE" >"$work/pod.sh" <<'PY'
import shlex, sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
vol, binaries = sys.argv[2], {"tally-exporter": sys.argv[3],
                              "queue-service": sys.argv[4]}
spec = pod["spec"]
psc = spec.get("securityContext", {})
(v,) = spec["volumes"]
assert v["emptyDir"]["medium"] == "Memory"
size = v["emptyDir"]["sizeLimit"]
assert size.endswith("Mi")
print(f"fsgroup={psc['fsGroup']} size_mib={size[:-2]}")
for c in spec["containers"]:
    sc = c.get("securityContext", {})
    (m,) = c["volumeMounts"]
    root = m["mountPath"].rstrip("/")
    def path(s):
        s = str(s)
        return vol + s[len(root):] if s == root or s.startswith(root + "/") else s
    cmd = [binaries[c["command"][0]]] + [path(a) for a in c["command"][1:]]
    env = [f"{e['name']}={path(e['value'])}" for e in c.get("env", [])]
    n = c["name"].replace("-", "_")
    print(f"{n}_uid={sc.get('runAsUser', psc['runAsUser'])}")
    print(f"{n}_gid={sc.get('runAsGroup', psc['runAsGroup'])}")
    print(f"{n}_cmd=({' '.join(shlex.quote(a) for a in cmd)})")
    print(f"{n}_env=({' '.join(shlex.quote(e) for e in env)})")
    for p in c.get("ports", []):
        print(f"{n}_port={p['containerPort']}")
PY
. "$work/pod.sh"
: "${app_uid:?}" "${tally_exporter_uid:?}" "${tally_exporter_port:?}"
appdir=
for e in "${app_env[@]}"; do
	case $e in TALLY_DIR=*) appdir=${e#TALLY_DIR=} ;; esac
done
[ -n "$appdir" ] || fail "the app container sets no TALLY_DIR"

# The volume, as the kubelet makes an in-memory emptyDir with fsGroup.
mount -t tmpfs -o "size=${size_mib}m,mode=2777,uid=0,gid=$fsgroup" tally-pod "$vol"
[ "$(stat -c '%a %u %g' "$vol")" = "2777 0 $fsgroup" ] || fail "volume is $(stat -c '%a %u %g' "$vol")"

# container NAME: start container NAME (its _uid, _gid, _env, _cmd) as
# pid 1 of a new PID namespace; sets $ns (unshare's pid) and $pid1 (the
# container's pid 1, as this namespace sees it).
container() {
	local n=$1 uid gid
	local -n cmd=${n}_cmd env=${n}_env
	uid=${n}_uid gid=${n}_gid
	unshare --pid --fork --mount-proc --kill-child -- \
		setpriv --reuid="${!uid}" --regid="${!gid}" --groups="$fsgroup" \
		--pdeathsig KILL -- env -i PATH=/usr/bin:/bin "${env[@]}" "${cmd[@]}" \
		>>"$work/$n.log" 2>&1 &
	ns=$!
	pids+=("$ns")
	pid1=
	for _ in $(seq 200); do
		pid1=$(cat /proc/"$ns"/task/"$ns"/children 2>/dev/null || true)
		pid1=${pid1%% *}
		# Past setpriv and env: the program itself runs.
		[ -n "$pid1" ] && [ "$(readlink /proc/"$pid1"/exe 2>/dev/null)" = "${cmd[0]}" ] &&
			{ pid1s+=("$pid1"); return 0; }
		sleep 0.01
	done
	cat "$work/$n.log" >&2
	fail "container $n did not start"
}

# forget PID: no longer ours to kill at exit (it was reaped: its number
# may go to another process).
forget() {
	local p keep=() keep1=()
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	for p in "${pid1s[@]}"; do [ "$p" = "$1" ] || keep1+=("$p"); done
	pids=("${keep[@]}") pid1s=("${keep1[@]}")
}

# stop_pid1 SIGNAL: signal $pid1 and wait at most 5 s for its namespace.
stop_pid1() {
	kill -"$1" "$pid1"
	for _ in $(seq 100); do
		if ! kill -0 "$ns" 2>/dev/null; then
			wait "$ns" 2>/dev/null || true
			forget "$pid1"
			forget "$ns"
			return 0
		fi
		sleep 0.05
	done
	fail "pid 1 did not stop within 5 s of SIG$1"
}

url=http://127.0.0.1:$tally_exporter_port/metrics
scrape() { curl -sS --max-time 10 "$url"; }

# check_scrape FILE: no two samples alike, and promtool parses it.
check_scrape() {
	local d rc=0 out
	d=$(grep -v '^#' "$1" | sed 's/ [^ ]*$//' | sort | uniq -d)
	[ -z "$d" ] || fail "samples with the same labels: $(echo "$d" | head -3)"
	out=$(timeout 30 promtool check metrics <"$1" 2>&1) || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "promtool check metrics: status $rc: $out"
	if echo "$out" | grep -qi 'error'; then fail "promtool: $out"; fi
}

# --- The exporter first: the application's directory does not exist yet.
container tally_exporter; exp_ns=$ns exp_pid1=$pid1
for _ in $(seq 100); do
	grep -q 'listening on' "$work/tally_exporter.log" && break
	kill -0 "$exp_ns" 2>/dev/null || break
	sleep 0.05
done
grep -q 'listening on' "$work/tally_exporter.log" ||
	{ cat "$work/tally_exporter.log" >&2; fail "the exporter did not start before the application"; }
grep -q "$appdir does not exist yet" "$work/tally_exporter.log" || fail "the exporter does not say that it waits"
scrape >"$work/m.txt"
check_scrape "$work/m.txt"
ok "exporter first, as uid $tally_exporter_uid: it waits for $appdir"

# --- The application, restarted as pid 1 and SIGKILLed.
seen=" "
for i in $(seq "$restarts"); do
	container app
	# Its segment, and the exporter's view of it.
	for _ in $(seq 200); do
		new=$(cd "$appdir" 2>/dev/null && ls -- *.tally 2>/dev/null | while read -r f; do
			case $seen in *" $f "*) ;; *) echo "$f" ;; esac; done || true)
		[ -n "$new" ] && break
		sleep 0.01
	done
	[ -n "$new" ] || { cat "$work/app.log" >&2; fail "restart $i: no segment"; }
	seen="$seen$new "
	if [ "$i" = 1 ]; then
		[ "$(stat -c '%a %U %g' "$appdir")" = "2750 #$app_uid $fsgroup" ] ||
		[ "$(stat -c '%a %u %g' "$appdir")" = "2750 $app_uid $fsgroup" ] ||
			fail "TALLY_DIR is $(stat -c '%a %u %g' "$appdir"), want 2750 $app_uid $fsgroup"
		ok "the application (uid $app_uid) made $appdir: 2750, group $fsgroup"
	fi
	# The segment can appear before the application defined its
	# metric: scrape until it has (bounded, not timed).
	for _ in $(seq 200); do
		scrape >"$work/m.txt"
		grep -q '^requests_total{.*pid="1"' "$work/m.txt" && break
		sleep 0.05
	done
	check_scrape "$work/m.txt"
	alive=$(grep '^tally_segment_alive{pid="1",' "$work/m.txt" || true)
	[ "$(echo "$alive" | grep -c .)" = 1 ] && [ "${alive##* }" = 1 ] ||
		fail "restart $i: want one tally_segment_alive of pid 1, live: $alive"
	grep -q '^requests_total{.*pid="1"' "$work/m.txt" || fail "restart $i: requests_total of pid 1 missing"
	# The application removes the earlier incarnations just after it
	# published its own file: give it that moment.
	for _ in $(seq 500); do
		n=$(ls "$appdir" | grep -c '\.tally$' || true)
		[ "$n" -le 2 ] && break
		sleep 0.01
	done
	[ "$n" -le 2 ] || fail "restart $i: $n segments in $appdir: $(ls "$appdir")"
	stop_pid1 KILL
	if [ "$i" = 3 ]; then
		# Two dead incarnations of pid 1: tallystat tells them apart.
		setpriv --reuid="$tally_exporter_uid" --regid="$tally_exporter_gid" --groups="$fsgroup" -- \
			"$TALLYSTAT" --allow-group --dir "$appdir" >"$work/ts.txt" 2>&1 ||
			{ cat "$work/ts.txt" >&2; fail "tallystat --allow-group"; }
		grep -q 'Started' "$work/ts.txt" || fail "tallystat has no Started column: $(head -5 "$work/ts.txt")"
		starts=$(awk '$2 == 1 && $4 == "dead" { print $5 }' "$work/ts.txt" | sort -u | grep -c . || true)
		[ "$starts" = 2 ] || fail "tallystat: want two start times of dead pid 1s: $(cat "$work/ts.txt")"
		ok "tallystat: two dead pid 1s told apart by their Started column"
	fi
done
n=$(ls "$appdir" | grep -c '\.tally$' || true)
[ "$n" -le 2 ] || fail "after $restarts kills: $n segments"
used=$(df -k --output=used "$vol" | tail -1)
ok "$restarts restarts as pid 1, each SIGKILLed: every scrape parsed, no two samples alike, $n segments left (${used} KiB of the volume)"
[ "$(grep -c 'not removing the dead segments' "$work/tally_exporter.log")" -le 1 ] ||
	fail "the exporter repeats why it cannot clean up"

# --- Stopping: pid 1 stops on SIGTERM (its own handler), the segment goes.
container app
for _ in $(seq 200); do
	[ "$(ls "$appdir" | grep -c '\.tally$')" -gt "$n" ] && break
	sleep 0.01
done
stop_pid1 TERM
[ "$(ls "$appdir" | grep -c '\.tally$')" -le "$n" ] || fail "the application left its segment after SIGTERM"
ns=$exp_ns pid1=$exp_pid1
stop_pid1 TERM
grep -q 'stopping' "$work/tally_exporter.log" || fail "the exporter did not stop on SIGTERM"
ok "SIGTERM: both pid 1s stop by themselves, the application's segment removed"
