#!/usr/bin/env bash
# check-layers-fails.sh CC: tools/check-layers.sh fails, naming the symbol
# or header and both files, on a tree whose calls or includes go up: a
# process-layer file calling the core, a reader file including the core's
# header; and passes the same tree with calls that go down only.  The
# tree lies in a folder named like the lowest layer, "process", as a
# checkout may: only the path below src/ may decide a file's layer.
set -euo pipefail
cc=$1
check=$(cd "$(dirname "$0")/.." && pwd)/tools/check-layers.sh
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
t=$top/process
mkdir "$t"
mkdir -p "$t/src/process" "$t/src/core" "$t/src/reader" "$t/obj/src/process" \
	"$t/obj/src/core" "$t/obj/src/reader"
cat >"$t/src/core/core.h" <<'C'
int tally__high(void);
C
cat >"$t/src/core/high.c" <<'C'
int tally__low(void);
int tally__high(void) { return tally__low() + 1; }
C
cat >"$t/src/process/low.c" <<'C'
int tally__low(void) { return 1; }
C
cat >"$t/src/reader/read.c" <<'C'
int tally__low(void);
int tally__read(void) { return tally__low(); }
C
build() {
	for f in process/low core/high reader/read; do
		"$cc" -c -I"$t/src" "$t/src/$f.c" -o "$t/obj/src/$f.c.o"
	done
}
objs() { find "$t/obj" -name '*.o' | sort; }

build
"$check" "$t/src" $(objs) >"$t/out" || { cat "$t/out"; echo "FAIL: a tree that calls down only was refused"; exit 1; }

# Up: process calls the core, the reader includes the core's header.
cat >"$t/src/process/low.c" <<'C'
int tally__high(void);
int tally__low(void) { return 1; }
int tally__up(void) { return tally__high(); }
C
printf '#include "core/core.h"\n' | cat - "$t/src/reader/read.c" >"$t/x" &&
	mv "$t/x" "$t/src/reader/read.c"
build
if "$check" "$t/src" $(objs) >"$t/out"; then
	echo "FAIL: a call up the layers was not refused"; exit 1
fi
cat "$t/out"
s=src # (the files of the tree made above, not of this repository)
grep -q "$s/process/low.c calls tally__high of $s/core/high.c" "$t/out" ||
	{ echo "FAIL: the call up is not named"; exit 1; }
grep -q "$s/reader/read.c includes core/core.h" "$t/out" ||
	{ echo "FAIL: the include up is not named"; exit 1; }
echo "check-layers refuses calls and includes that go up"
