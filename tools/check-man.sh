#!/usr/bin/env bash
# check-man.sh SRC_DIR: every function a public header declares is in the
# SYNOPSIS of tally(3) (which also gives each its own page, see
# CMakeLists.txt), and every C example of the README compiles without a
# warning and, where it has a main(), runs.
set -euo pipefail
src=$1
inc=$src/include/tally
bad=0
declared=$(grep -hv '^static\|^typedef\|^#' "$inc"/*.h |
	sed -n 's/^\(TALLY_API \)\{0,1\}[a-z][^(]*[ *(]\(tally_[a-z0-9_]*\)[) ]*(.*/\2/p' |
	grep -v '^tally__' | sort -u)
synopsis=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$src/man/tally.3")
for fn in $declared tally_counter_inc tally_gauge_inc tally_gauge_dec; do
	if ! grep -q "[ *]$fn(" <<<"$synopsis"; then
		echo "man tally: $fn is not in the SYNOPSIS"; bad=1
	fi
done

# The sections the headers point at exist ("tally(3), GUARANTEES", "SPACE
# in tally(3)"), and the page gives the sizes the headers define.
sections=$(sed -n 's/^\.S[HS] "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$src/man/tally.3")
pointers=$(for h in "$inc"/*.h; do
	sed -e 's#^ *\*\( \|$\)##' "$h" | tr '\n' ' ' | tr -s ' ' |
		grep -oE 'tally\(3\), [A-Z][A-Z]+( [A-Z][A-Z]+)*|[A-Z][A-Z]+( [A-Z][A-Z]+)* in tally\(3\)' |
		sed -e 's/^tally(3), //' -e 's/ in tally(3)$//' || true
done | sort -u)
while read -r sec; do
	[ -z "$sec" ] && continue
	grep -qxF "$sec" <<<"$sections" ||
		{ echo "a header points at tally(3), $sec: no such section"; bad=1; }
done <<<"$pointers"
for c in TALLY_BLOCK_MAX_SLOTS:"is 1 to" TALLY_CHUNK_SLOTS:"in chunks of"; do
	name=${c%%:*} text=${c#*:}
	v=$(cat "$inc"/*.h | sed -n "s/^#define $name \([0-9]*\)u\{0,1\}$/\1/p")
	grep -q "$text $v\b" "$src/man/tally.3" ||
		{ echo "man tally: \"$text $v\" ($name) not found"; bad=1; }
done

# The README's C examples, each on its own.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '/^```c$/ { n++; f = dir "/example" n ".c"; on = 1; next }
	/^```$/ { on = 0 } on { print > f }' "$src/README.md"
n=0
for f in "$tmp"/example*.c; do
	[ -e "$f" ] || break
	n=$((n + 1))
	if grep -q '^int main' "$f"; then
		# EXAMPLE_FLAGS: the sanitizer the library was built with.
		if ! cc -std=c11 -Wall -Wextra -Werror ${EXAMPLE_FLAGS:-} \
			-I"$inc/.." -o "$f.bin" "$f" "$LIBTALLY" -lpthread; then
			echo "README example $n does not build"; bad=1; continue
		fi
		mkdir -m 700 "$tmp/dir$n"
		TALLY_DIR=$tmp/dir$n "$f.bin" || { echo "README example $n failed"; bad=1; }
	elif ! cc -std=c11 -Wall -Wextra -Werror -I"$inc/.." -c -o "$f.o" "$f"; then
		echo "README example $n does not compile"; bad=1
	fi
done
[ "$n" -ge 2 ] || { echo "README: expected C examples, found $n"; bad=1; }
[ "$bad" = 0 ] && echo "man and README: $(wc -w <<<"$declared") functions documented, $n examples build"
exit $bad
