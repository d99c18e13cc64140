#!/usr/bin/env bash
# Checks the Debian packages that tools/build-deb.sh made in DEB_DIR
# (default build-deb), unpacked into a scratch root (dpkg -x: nothing is
# installed on this machine, no user is made): the README's C example
# builds against libtally-dev with the README's pkg-config line and with
# its CMake lines, and runs on libtally2; tally-exporter's unit passes
# systemd-analyze verify, and its command line, with the options of
# /etc/default/tally-exporter, run as an unprivileged user in another
# group as the unit does, starts and serves its metrics.
set -eu
cd "$(dirname "$0")/.."
. tools/listen.sh
debs=$(cd "${1:-build-deb}" && pwd)
root=$(mktemp -d)
work=$(mktemp -d)
pid=
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$root" "$work"; }
trap cleanup EXIT
for p in libtally2 libtally-dev tally-tools; do
	deb=$(ls "$debs"/${p}_*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || { echo "deb: no $p package in $debs (make deb)"; exit 1; }
	dpkg -x "$deb" "$root"
done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=$root/usr/lib/$multiarch
for f in usr/include/tally/tally.h "usr/lib/$multiarch/libtally.so.2" \
	"usr/lib/$multiarch/libtally.a" "usr/lib/$multiarch/pkgconfig/tally.pc" \
	"usr/lib/$multiarch/cmake/tally/tallyConfig.cmake" usr/share/man/man3/tally.3.gz \
	usr/bin/tallystat usr/bin/tally-exporter usr/bin/tally-dump \
	usr/share/man/man1/tallystat.1.gz usr/share/man/man1/tally-exporter.1.gz \
	usr/share/man/man1/tally-dump.1.gz lib/systemd/system/tally-exporter.service \
	etc/default/tally-exporter usr/share/tally/monitoring/tally.rules.yml \
	usr/share/tally/monitoring/dashboard.json; do
	[ -e "$root/$f" ] || { echo "deb: /$f is missing"; exit 1; }
done

# The README's example, as the README builds it.
tools/readme-examples.sh "$work"
export TALLY_DIR=$work/zones
mkdir -m 700 "$TALLY_DIR"
fail() { echo "deb: $*"; exit 1; }
cd "$work"
PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_LIBDIR=$libdir/pkgconfig sh pkg-config.sh ||
	fail "the README's pkg-config line fails against libtally-dev"
LD_LIBRARY_PATH=$libdir ./myservice-pc || fail "the README's example (pkg-config) fails"
cmake -S . -B cmake-build -DCMAKE_PREFIX_PATH="$root/usr" >cmake.log 2>&1 &&
	cmake --build cmake-build >>cmake.log 2>&1 ||
	{ cat cmake.log; fail "the README's CMake lines fail against libtally-dev"; }
LD_LIBRARY_PATH=$libdir ./cmake-build/myservice || fail "the README's example (CMake) fails"
cd - >/dev/null
# It linked libtally.so.2 of the package, not a static copy.
readelf -d "$work/myservice-pc" | grep -q 'NEEDED.*libtally\.so\.2' ||
	{ echo "deb: the example is not linked with libtally.so.2"; exit 1; }

# The unit: systemd's own check (unknown keys, bad values, a command that
# is not there), on a copy whose command is the unpacked one; any
# complaint fails.
if command -v systemd-analyze >/dev/null; then
	mkdir "$work/unit"
	sed "s|/usr/bin/tally-exporter|$root/usr/bin/tally-exporter|" \
		"$root/lib/systemd/system/tally-exporter.service" >"$work/unit/tally-exporter.service"
	if ! systemd-analyze verify --man=no "$work/unit/tally-exporter.service" \
		>"$work/verify.log" 2>&1 || [ -s "$work/verify.log" ]; then
		cat "$work/verify.log"; echo "deb: systemd-analyze verify fails on the unit"; exit 1
	fi
fi
grep -q '^User=tally-exporter$' "$root/lib/systemd/system/tally-exporter.service" &&
	grep -q '^Group=tally-ro$' "$root/lib/systemd/system/tally-exporter.service" ||
	{ echo "deb: the unit does not run as tally-exporter in group tally-ro"; exit 1; }
# Its command line with the default options, as the unit runs it: an
# unprivileged uid and gid (nobody, nogroup stand in for tally-exporter,
# tally-ro), its runtime directory its own; on port 0 instead of 9477.
opts=$(. "$root/etc/default/tally-exporter" && echo "$TALLY_EXPORTER_OPTS")
exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/tally-exporter.service")
run=$work/run-tally-exporter
chmod 755 "$work"
mkdir -m 755 "$run" && chown 65534:65534 "$run"
cmd=$(echo "$exec_start" | sed "s|\$TALLY_EXPORTER_OPTS|$opts|; s|/usr/bin/|$root/usr/bin/|; s|/run/tally-exporter|$run|; s|127.0.0.1:9477|127.0.0.1:0|")
# shellcheck disable=SC2086
timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups env -u TALLY_DIR $cmd \
	2>"$work/exporter.log" &
pid=$!
port=$(listen_port "$work/exporter.log" "$pid") ||
	{ cat "$work/exporter.log"; echo "deb: the unit's command does not start"; exit 1; }
url=http://127.0.0.1:$port/metrics
curl -sf "$url" | grep -q '^tally_exporter_build_info{version=' ||
	{ echo "deb: the exporter does not serve its metrics"; exit 1; }
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
echo "deb: the README's C example builds with pkg-config and CMake against the packages and runs;" \
	"the exporter's unit verifies, and its command starts and serves as an unprivileged user"
