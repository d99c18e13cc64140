#!/usr/bin/env bash
# exporter-group: the group-readable mode, as root.  A writer started with
# TALLY_GROUP=<gid> creates its segment 0640 in a root-owned directory of
# that group (0750); the exporter runs as another uid (65534) whose only
# group is <gid> (setpriv) and serves the writer's exact value with
# --allow-group.  Without the flag the directory, another user's, is
# refused at start, naming its owner; with the flag, a group-writable file
# is skipped (reason "foreign") and a group-writable directory is not read,
# and the log says why.  Skipped (77) unless root.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (setpriv to another uid)"; exit 77; }
command -v setpriv >/dev/null || fail "setpriv (util-linux) not installed"
# A group number nobody uses: TALLY_GROUP takes a name or a number, and
# root may give files to any gid.
gid=
for g in $(seq 61200 61299); do getent group "$g" >/dev/null || { gid=$g; break; }; done
[ -n "$gid" ] || fail "no free gid in 61200-61299"
chgrp "$gid" "$dir"
chmod 0750 "$dir"
# The exporter's binary and the directories above it must be reachable by
# uid 65534; the build tree normally is (0755).
as_monitor() { setpriv --reuid=65534 --regid="$gid" --clear-groups -- "$@"; }
as_monitor test -x "$EXPORTER" ||
	{ echo "skipped: uid 65534 cannot reach $EXPORTER (a build tree under a 0700 directory?)"; exit 77; }

TALLY_GROUP=$gid start_writer fixture 60
seg=$(ls "$dir"/*.tally)
[ "$(stat -c '%a %g' "$seg")" = "640 $gid" ] || fail "segment is $(stat -c '%a %g' "$seg"), want 640 $gid"
ok "writer with TALLY_GROUP=$gid: $seg is 0640, group $gid"

# start_monitor ARGS...: the exporter as uid 65534 in group $gid.
start_monitor() {
	exporter_log=$dir/exporter.$RANDOM.log
	: >"$exporter_log"   # exists before the background job opens it
	setpriv --reuid=65534 --regid="$gid" --clear-groups -- \
		"$EXPORTER" --listen 127.0.0.1:0 --dir "$dir" "$@" 2>"$exporter_log" &
	exporter_pid=$!
	pids+=($exporter_pid)
	port=$(listen_port "$exporter_log" "$exporter_pid") ||
		{ cat "$exporter_log" >&2; fail "the exporter (uid 65534) did not start"; }
	[ "$(stat -c %u /proc/$exporter_pid)" = 65534 ] || fail "the exporter does not run as uid 65534"
}
t=$dir/out.txt

out=$(as_monitor timeout 10 "$EXPORTER" --listen 127.0.0.1:0 --dir "$dir" 2>&1 >/dev/null) && fail "started on another user's directory without --allow-group"
echo "$out" | grep -q "owned by uid 0.*--allow-group" || fail "refusal does not name the owner and the way: $out"
ok "without --allow-group: another user's directory refused at start ($out)"

start_monitor --allow-group
grep -q 'group-shared segments allowed' "$exporter_log" || fail "start-up line does not name the mode"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -qx 'fixture_big_total{pid="'"$writer_pid"'",process="exporter-testwr"} 9007199254740993' "$t" || fail "exact value not served with --allow-group: $(grep -c . "$t") lines"
grep -qx 'tally_exporter_segments_read 1' "$t" || fail "segments_read with --allow-group"
grep -qx 'tally_exporter_scrape_segments_skipped{reason="foreign"} 0' "$t" || fail "still refused"
ok "with --allow-group, as uid 65534: fixture_big_total = 9007199254740993 exactly"
scrape "http://127.0.0.1:$port/metrics" >"$t"
[ "$(grep -c 'not removing the dead segments of '"$dir"'.*only the directory.s owner' "$exporter_log")" = 1 ] ||
	fail "the exporter does not say once why it cannot clean up: $(cat "$exporter_log")"
ok "another user's directory: the exporter says once that its writers clean up"

# A writer started without TALLY_GROUP: its file is 0600, which the
# exporter cannot read: it says so once, naming the variable.
start_writer worker 5 60; forgot=$writer_pid
scrape "http://127.0.0.1:$port/metrics" >"$t"
scrape "http://127.0.0.1:$port/metrics" >"$t"
[ "$(grep -c "skipping $dir/[^ ]*\.$forgot\..*started with TALLY_GROUP" "$exporter_log")" = 1 ] ||
	fail "a writer without TALLY_GROUP is not logged once: $(cat "$exporter_log")"
grep -qx 'tally_exporter_scrape_segments_skipped{reason="unreadable"} 1' "$t" || fail "not counted as unreadable"
stop "$forgot"
ok "a writer without TALLY_GROUP: logged once, naming the variable"

# What the reader must still refuse: a file the group could write, and a
# directory the group could write (another member could have put it there).
chmod 0660 "$seg"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -qx 'tally_exporter_scrape_segments_skipped{reason="foreign"} 1' "$t" || fail "group-writable file accepted"
chmod 0640 "$seg"
chmod 0770 "$dir"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q '^fixture_big_total' "$t" && fail "file in a group-writable directory accepted"
grep -q "writable by its group" "$exporter_log" || fail "the log does not say why the directory is not read"
chmod 0750 "$dir"
scrape "http://127.0.0.1:$port/metrics" >"$t"
grep -q '^fixture_big_total{.*} 9007199254740993$' "$t" || fail "not served again"
ok "group-writable file or directory: refused"
stop "$exporter_pid" || fail "exporter exit status after SIGTERM"

# --allow-uid for a directory this user may not list (0700): the reason
# and the way (a group), not just "Permission denied".
chmod 0700 "$dir"
out=$(as_monitor timeout 10 "$EXPORTER" --listen 127.0.0.1:0 --dir "$dir" --allow-uid 0 2>&1 >/dev/null) &&
	fail "started on a directory it cannot list"
echo "$out" | grep -q "permission denied: uid 0's directory, mode 0700.*TALLY_GROUP.*--allow-group" ||
	fail "--allow-uid without group access: $out"
chmod 0750 "$dir"
ok "--allow-uid on a directory it cannot list: says how to share it ($out)"
