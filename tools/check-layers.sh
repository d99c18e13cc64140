#!/usr/bin/env bash
# check-layers.sh SRC_DIR OBJECT...: libtally's calls and includes go down
# its layers only (README, "How it works").  The layers, bottom first, are
# the folders of src/: process, format, reader, core, metrics.  A file may
# call (nm of the objects: an undefined symbol another object defines) and
# include ("<layer>/<header>.h") its own layer and the layers below it;
# so the reader never calls the writer's core or the metrics.  Each
# object's layer is the folder in its path (CMake keeps src/<layer>/ in
# the object's path).  Names the symbol or header and both files.
set -euo pipefail
src=$1
shift
layers="process format reader core metrics"

rank() { # the layer's place, bottom 0, of a path below src/ ("core/x.c");
	# "" when it names none.  Only the path below src/ counts: a
	# checkout under a folder named like a layer must not move a file.
	local i=0 l
	for l in $layers; do
		case $1 in "$l"/*) echo $i; return ;; esac
		i=$((i + 1))
	done
}
name() { # <layer>/<file>.c of an object or a source path: what follows
	# the last "/src/" (CMake keeps src/<layer>/ in the object's path)
	sed 's|.*/src/||; s|\.o$||' <<<"$1"
}

bad=0
defs=$(mktemp)
trap 'rm -f "$defs"' EXIT
for o in "$@"; do
	nm --defined-only "$o" | awk -v o="$o" '$2 ~ /^[TDBRVWC]$/ { print $3, o }'
done | sort -k1,1 >"$defs"
for o in "$@"; do
	r=$(rank "$(name "$o")")
	[ -n "$r" ] || { echo "check-layers: $o is in no layer"; bad=1; continue; }
	for sym in $(nm -u "$o" | awk '{ print $2 }' | sort -u); do
		while read -r _ d; do
			[ "$d" = "$o" ] && continue
			rd=$(rank "$(name "$d")")
			if [ -n "$rd" ] && [ "$rd" -gt "$r" ]; then
				echo "layer: src/$(name "$o") calls $sym of" \
				     "src/$(name "$d"), a higher layer"
				bad=1
			fi
		done < <(awk -v s="$sym" '$1 == s' "$defs")
	done
done
# Includes: the layer of each "<layer>/<file>.h" a file includes.
while IFS= read -r f; do
	r=$(rank "${f#"$src"/}")
	[ -n "$r" ] || continue
	while IFS= read -r h; do
		rh=$(rank "$h")
		if [ -n "$rh" ] && [ "$rh" -gt "$r" ]; then
			echo "layer: src/${f#"$src"/} includes $h, a higher layer"
			bad=1
		fi
	done < <(sed -n 's/^#include "\([a-z]*\/[^"]*\)".*/\1/p' "$f")
done < <(find "$src" -name '*.[ch]' | sort)
[ "$bad" = 0 ] && echo "layers: $# objects, calls and includes go down"
exit $bad
