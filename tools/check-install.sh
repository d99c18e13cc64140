#!/usr/bin/env bash
# Installs the build in BUILD_DIR into a temporary prefix, then builds and
# runs a consumer through pkg-config and through the CMake package; checks
# that `make install` honours PREFIX and DESTDIR, that the programs (and
# tally-dump with its man page) are installed and run from the prefix, and
# that the shared library carries the ABI number of docs/VERSIONING.md, and
# that the README's C example builds with the README's pkg-config and CMake
# lines.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d)
stage=$(mktemp -d)
export TALLY_DIR
TALLY_DIR=$(mktemp -d /dev/shm/tally-install.XXXXXX)
trap 'rm -rf "$prefix" "$stage" "$TALLY_DIR"' EXIT
chmod 700 "$TALLY_DIR"
unset LD_LIBRARY_PATH
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/tally/tally.h lib/pkgconfig/tally.pc lib/cmake/tally/tallyConfig.cmake \
	share/man/man3/tally.3 share/man/man3/tally_block_add.3 \
	share/man/man3/tally_seg_open.3 share/man/man1/tally-bench.1 \
	bin/tally-dump share/man/man1/tally-dump.1; do
	[ -e "$prefix/$f" ] || { echo "install: $f is missing"; exit 1; }
done
for p in tallystat tally-exporter; do
	if [ -e "$build/programs/$p/$p" ] && [ ! -x "$prefix/bin/$p" ]; then
		echo "install: bin/$p is missing"; exit 1
	fi
done
# The programs run from the prefix, with nothing in LD_LIBRARY_PATH.
"$prefix/bin/tally-dump" --help | grep -q "^usage: tally-dump" ||
	{ echo "install: bin/tally-dump --help fails"; exit 1; }
if [ -x "$prefix/bin/tallystat" ]; then
	"$prefix/bin/tallystat" --version | grep -q "^tallystat " ||
		{ echo "install: bin/tallystat --version fails"; exit 1; }
fi

# The ABI number: SONAME libtally.so.N, the file libtally.so.N.MINOR.PATCH.
lib=$(readlink -f "$prefix/lib/libtally.so")
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
abi=$(sed -n 's/^set(TALLY_ABI_VERSION \([0-9]*\))/\1/p' CMakeLists.txt)
version=$(sed -n 's/^project(tally VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$soname" = "libtally.so.$abi" ] ||
	{ echo "install: SONAME $soname, expected libtally.so.$abi"; exit 1; }
[ "$(basename "$lib")" = "libtally.so.$abi.${version#*.}" ] ||
	{ echo "install: $(basename "$lib"), expected libtally.so.$abi.${version#*.}"; exit 1; }
[ -e "$prefix/lib/$soname" ] || { echo "install: lib/$soname is missing"; exit 1; }

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion tally)" = "$version" ] ||
	{ echo "install: tally.pc says $(pkg-config --modversion tally)"; exit 1; }
# As the README says: the rpath of the prefix's libdir, from pkg-config.
# shellcheck disable=SC2046
cc -o "$prefix/consumer-pc" test/install/consumer.c $(pkg-config --cflags --libs tally) \
	-Wl,-rpath,"$(pkg-config --variable=libdir tally)" -lpthread
"$prefix/consumer-pc"
cmake -S test/install -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cmake-build" >/dev/null
"$prefix/cmake-build/consumer"

# The README's own example and build lines (tools/readme-examples.sh):
# its pkg-config line, and its CMake lines with the version they ask for.
readme=$prefix/readme
tools/readme-examples.sh "$readme"
(cd "$readme" && sh pkg-config.sh) || { echo "install: the README's pkg-config line fails"; exit 1; }
LD_LIBRARY_PATH=$prefix/lib "$readme/myservice-pc" ||
	{ echo "install: the README's example (pkg-config) fails"; exit 1; }
cmake -S "$readme" -B "$readme/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >"$readme/cmake.log" 2>&1 &&
	cmake --build "$readme/cmake-build" >>"$readme/cmake.log" 2>&1 ||
	{ cat "$readme/cmake.log"; echo "install: the README's CMake lines fail"; exit 1; }
"$readme/cmake-build/myservice" || { echo "install: the README's example (CMake) fails"; exit 1; }

# make install PREFIX=... DESTDIR=...: the files under DESTDIR/PREFIX, and
# nothing in /usr/local.  BUILD names this build, already configured.
# -o build -o deps: install what is built, without checking the host's
# packages or building again.
touch "$stage/.stamp"
make -s -o build -o deps install BUILD="$build" PREFIX=/opt/tally-check \
	DESTDIR="$stage" >/dev/null
for f in bin/tally-dump lib/pkgconfig/tally.pc include/tally/tally.h \
	share/man/man1/tally-dump.1; do
	[ -e "$stage/opt/tally-check/$f" ] ||
		{ echo "make install: DESTDIR/PREFIX/$f is missing"; exit 1; }
done
[ -z "$(find /usr/local -newer "$stage/.stamp" -path '*tally*' 2>/dev/null)" ] ||
	{ echo "make install PREFIX=... wrote into /usr/local"; exit 1; }
echo "install: headers, library (ABI $abi), pkg-config, CMake package, programs," \
	"man pages, the README's build lines and make install PREFIX/DESTDIR work"
