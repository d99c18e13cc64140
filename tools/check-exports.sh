#!/usr/bin/env bash
# check-exports.sh LIBTALLY_SO INCLUDE_DIR: the shared library exports the
# public API and nothing else.  Every name it exports is a public tally_*
# name or one of the internal names the inline update path of a public
# header calls; every function a public header declares is there.
set -euo pipefail
lib=$1 inc=$2
inline_uses="tally__block_add_slow tally__block_add_slow_stub tally__cfg"

exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
# Every function a public header declares (not the static inline ones).
declared=$(grep -hv '^static\|^typedef\|^#' "$inc"/*.h |
	sed -n 's/^\(TALLY_API \)\{0,1\}[a-z][^(]*[ *(]\(tally_[a-z0-9_]*\)[) ]*(.*/\2/p' |
	sort -u)
bad=0
for name in $exported; do
	case " $inline_uses " in *" $name "*) continue ;; esac
	case $name in __odr_asan*) continue ;; esac # ASan's own markers
	# A here-string, not echo | grep -q: grep -q exits at the first
	# match, and echo's SIGPIPE would fail the pipeline (pipefail).
	if ! grep -qx "$name" <<<"$declared"; then
		echo "exported but not public: $name"; bad=1
	fi
done
for name in $declared; do
	if ! grep -qx "$name" <<<"$exported"; then
		echo "public but not exported: $name"; bad=1
	fi
done
[ "$bad" = 0 ] && echo "exports: $(echo "$exported" | wc -l) names, all public"
exit $bad
