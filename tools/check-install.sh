#!/usr/bin/env bash
# Installs the build in BUILD_DIR into a temporary prefix, then builds and
# runs a consumer through pkg-config and through the CMake package.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d)
export TALLY_DIR
TALLY_DIR=$(mktemp -d /dev/shm/tally-install.XXXXXX)
trap 'rm -rf "$prefix" "$TALLY_DIR"' EXIT
chmod 700 "$TALLY_DIR"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/tally/tally.h lib/pkgconfig/tally.pc lib/cmake/tally/tallyConfig.cmake \
	share/man/man3/tally.3 share/man/man3/tally_block_add.3 \
	share/man/man3/tally_seg_open.3 share/man/man1/tally-bench.1; do
	[ -e "$prefix/$f" ] || { echo "install: $f is missing"; exit 1; }
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -o "$prefix/consumer-pc" test/install/consumer.c $(pkg-config --cflags --libs tally) \
	-Wl,-rpath,"$prefix/lib" -lpthread
"$prefix/consumer-pc"
cmake -S test/install -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cmake-build" >/dev/null
"$prefix/cmake-build/consumer"
echo "install: headers, library, pkg-config, CMake package and man pages work"
