#!/usr/bin/env bash
# check-misuse.sh SRC_DIR: a call meant for another kind's handle does not
# compile, in C (a constraint violation: an error under -pedantic-errors,
# without -Werror) and in C++; the same calls on the right handles compile
# without a warning.  Each file of test/misuse/ but control.c is one
# misuse.
set -uo pipefail
src=$1
inc=$src/include
dir=$src/test/misuse
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
for lang in c c++; do
	if [ "$lang" = c ]; then
		cc=(cc -std=c11 -pedantic-errors)
	else
		cc=(c++ -std=c++17 -pedantic-errors)
	fi
	if ! "${cc[@]}" -Wall -Wextra -Werror -x "$lang" -I"$inc" -c \
		-o "$tmp/control.o" "$dir/control.c"; then
		echo "control.c ($lang): the right calls do not compile"; bad=1
	fi
	n=0
	for f in "$dir"/*.c; do
		[ "$(basename "$f")" = control.c ] && continue
		n=$((n + 1))
		if "${cc[@]}" -x "$lang" -I"$inc" -c -o "$tmp/m.o" "$f" \
			2>"$tmp/err"; then
			echo "$(basename "$f") ($lang): compiles, but must not"
			bad=1
		elif ! grep -qE 'incompatible|cannot convert|no matching' \
			"$tmp/err"; then
			echo "$(basename "$f") ($lang): fails for another reason:"
			cat "$tmp/err"; bad=1
		fi
	done
done
[ "$n" -ge 6 ] || { echo "expected the misuse files, found $n"; bad=1; }
[ "$bad" = 0 ] && echo "misuse: $n calls on the wrong handle refused in C and C++"
exit $bad
