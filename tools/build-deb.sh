#!/usr/bin/env bash
# make deb: builds the Debian packages of debian/ (libtally2, libtally-dev,
# tally-tools) from a copy of this tree in OUT (default build-deb), so that
# dpkg-buildpackage writes its .deb files into OUT and not beside the
# tree, then runs lintian on them: an error fails.  Needs debhelper and
# lintian (make deb installs them).
set -eu
cd "$(dirname "$0")/.."
out=${1:-build-deb}
version=$(sed -n 's/^project(tally VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
deb_version=$(sed -n '1s/^tally (\([^)]*\)).*/\1/p' debian/changelog)
[ "${deb_version%-*}" = "$version" ] ||
	{ echo "deb: debian/changelog says $deb_version, CMakeLists.txt $version"; exit 1; }
rm -rf "$out"
src=$out/tally-$version
mkdir -p "$src"
# What git knows of, committed or not, without build trees.
git ls-files -z --cached --others --exclude-standard |
	grep -zv '^rust/\|^python/\|^fuzz/' |
	xargs -0 cp --parents -t "$src"
(cd "$src" && nice -n 10 dpkg-buildpackage -us -uc -b -j"$(nproc)") >"$out/build.log" 2>&1 ||
	{ tail -15 "$out/build.log"; echo "deb: dpkg-buildpackage failed ($out/build.log)"; exit 1; }
changes=$(ls "$out"/tally_*.changes)
lintian --fail-on error "$changes" >"$out/lintian.log" 2>&1 ||
	{ cat "$out/lintian.log"; echo "deb: lintian reports errors"; exit 1; }
echo "deb: $(cd "$out" && ls ./*.deb | tr '\n' ' ')built; lintian: no errors" \
	"($(grep -c '^W:' "$out/lintian.log" || true) warnings, $out/lintian.log)"
