#!/usr/bin/env bash
# make deb-fresh: the Debian packages of DEB_DIR (default build-deb,
# make deb) installed with apt on a fresh Debian 12 (a minimal bookworm
# made by mmdebstrap from the Debian mirror, about 3 minutes and 500 MB;
# or the bookworm root ROOT given, which is then left as it is), as root
# with the system's tools only.  In it: the readers' group and the
# exporter's user exist, the unit is enabled; the README's C example
# builds with pkg-config and CMake against the installed packages and
# runs; the exporter runs as its unit says (User, Group, EnvironmentFile,
# RuntimeDirectory, ExecStart; systemd itself does not run in a chroot)
# and serves; systemd-analyze verify accepts the unit.  Mounts live in a
# private mount namespace and end with it; a root made here is removed.
set -eu
cd "$(dirname "$0")/.."
debs=$(cd "${1:-build-deb}" && pwd)
root=${2:-}
made=
if [ -z "$root" ]; then
	command -v mmdebstrap >/dev/null || { echo "deb-fresh: no mmdebstrap (apt install mmdebstrap)"; exit 1; }
	root=$(mktemp -d /var/tmp/tally-fresh.XXXXXX)
	made=1
fi
trap '[ -z "$made" ] || rm -rf --one-file-system "$root"' EXIT
if [ -n "$made" ]; then
	mmdebstrap --variant=minbase --include=adduser,curl,pkgconf,cmake,gcc,libc6-dev,make,systemd \
		bookworm "$root" http://deb.debian.org/debian >"$debs/fresh-root.log" 2>&1 ||
		{ tail -20 "$debs/fresh-root.log"; echo "deb-fresh: mmdebstrap failed"; exit 1; }
fi
rm -rf "$root/tmp/tally"
mkdir -p "$root/tmp/tally/debs"
cp "$debs"/libtally2_*.deb "$debs"/libtally-dev_*.deb "$debs"/tally-tools_*.deb "$root/tmp/tally/debs/"
tools/readme-examples.sh "$root/tmp/tally/readme"

cat >"$root/tmp/tally/check.sh" <<'EOF'
set -eu
fail() { echo "deb-fresh: $*"; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/tally/debs/*.deb >/tmp/tally/apt.log 2>&1 ||
	{ tail -20 /tmp/tally/apt.log; fail "apt install of the packages failed"; }
id -nG tally-exporter | grep -qw tally-ro || fail "the user tally-exporter is not in the group tally-ro"
[ -L /etc/systemd/system/multi-user.target.wants/tally-exporter.service ] ||
	fail "the unit is not enabled"
systemd-analyze verify --man=no /lib/systemd/system/tally-exporter.service >/tmp/tally/verify.log 2>&1 &&
	! [ -s /tmp/tally/verify.log ] ||
	{ cat /tmp/tally/verify.log; fail "systemd-analyze verify fails on the unit"; }

cd /tmp/tally/readme
sh pkg-config.sh || fail "the README's pkg-config line fails"
./myservice-pc || fail "the README's example (pkg-config) fails"
cmake -S . -B cmake-build >cmake.log 2>&1 && cmake --build cmake-build >>cmake.log 2>&1 ||
	{ cat cmake.log; fail "the README's CMake lines fail"; }
./cmake-build/myservice || fail "the README's example (CMake) fails"

# The unit, as systemd would run it.
unit=/lib/systemd/system/tally-exporter.service
key() { sed -n "s/^$1=//p" "$unit"; }
user=$(key User) group=$(key Group) rundir=$(key RuntimeDirectory)
envfile=$(key EnvironmentFile | sed 's/^-//')
install -d -o "$user" -g "$group" -m "$(key RuntimeDirectoryMode)" "/run/$rundir"
set -a; . "$envfile"; set +a
cmd=$(eval "echo $(key ExecStart)" | sed 's/127\.0\.0\.1:9477/127.0.0.1:0/')
# shellcheck disable=SC2086
timeout 20 setpriv --reuid="$user" --regid="$group" --init-groups $cmd 2>/tmp/tally/exporter.log &
pid=$!
url=
for _ in $(seq 100); do
	url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' /tmp/tally/exporter.log)
	[ -n "$url" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
[ -n "$url" ] || { cat /tmp/tally/exporter.log; fail "the exporter does not start as its unit says"; }
curl -sf "$url" | grep -q '^tally_exporter_build_info{version=' || fail "the exporter does not serve"
kill "$pid"; wait "$pid" 2>/dev/null || true
echo "deb-fresh: installed with apt on a fresh bookworm; user tally-exporter in tally-ro, unit enabled and verified;" \
	"the README's C example builds with pkg-config and CMake; the exporter runs as $user:$group and serves"
EOF
unshare --mount --pid --fork sh -c "
	mount -t proc proc '$root/proc' && mount --bind /dev '$root/dev' && mount -t tmpfs tmpfs '$root/run' &&
	mkdir -p '$root/dev/shm' && chroot '$root' sh /tmp/tally/check.sh"
