#!/bin/sh
# callgrind.sh: instructions per operation of tally's update and
# allocation paths, counted by valgrind's callgrind (which is immune to a
# noisy machine, and disables rseq, so "add" is the fallback: an unlocked
# add to the fallback copy the thread owns).
#
# usage: bench/callgrind.sh [BUILD_DIR] [N]
#   BUILD_DIR  the CMake build directory (default: build next to bench/)
#   N          iterations per loop (default 1000000)
#
# Each operation runs N times inside its own function (tally-bench's
# hidden "_loop" mode); --toggle-collect counts only that function and
# what it calls, and the empty loop's count is subtracted, so the result
# is the instructions of one operation alone.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
n=${2:-1000000}
bin=$build/bench/tally-bench

if ! command -v valgrind >/dev/null 2>&1; then
	echo "callgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2
	exit 2
fi
if [ ! -x "$bin" ]; then
	echo "callgrind.sh: $bin not found: build with -DTALLY_BENCH=ON first" >&2
	exit 2
fi
case $n in
''|*[!0-9]*) echo "callgrind.sh: N must be a whole number" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ir OP: the instructions executed inside bench_loop_OP.
ir() {
	TALLY_NO_RSEQ=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" \
		--toggle-collect="bench_loop_$1" "$bin" _loop "$1" "$n" \
		>"$tmp/out.$1" 2>"$tmp/log.$1" || {
		echo "callgrind.sh: valgrind failed on $1:" >&2
		cat "$tmp/log.$1" >&2
		exit 1
	}
	awk '/^summary:/ { print $2; found = 1; exit }
	     END { if (!found) print "?" }' "$tmp/cg.$1"
}

empty=$(ir empty)
printf 'tally callgrind: instructions per operation (N = %s, empty loop subtracted)\n' "$n"
printf '%-34s %14s %10s\n' "operation" "Ir total" "Ir/op"
printf '%-34s %14s %10.2f\n' "empty loop (subtracted)" "$empty" \
	"$(echo "$empty $n" | awk '{ print $1 / $2 }')"
for op in tls atomic add shared adaptive pernode pair; do
	case $op in
	tls) what="thread-local add (baseline)" ;;
	atomic) what="shared atomic add (baseline)" ;;
	add) what="tally percpu add, fallback path" ;;
	shared) what="tally shared add" ;;
	adaptive) what="tally adaptive add, not promoted" ;;
	pernode) what="tally pernode add" ;;
	pair) what="tally alloc+free pair (2 slots)" ;;
	esac
	total=$(ir $op)
	per=$(echo "$total $empty $n" | awk '{ printf "%.2f", ($1 - $2) / $3 }')
	printf '%-34s %14s %10s\n' "$what" "$total" "$per"
	eval "ir_$op=\$per"
done
echo "SUMMARY callgrind n=$n fallback_add_ir=$ir_add shared_add_ir=$ir_shared adaptive_add_ir=$ir_adaptive pernode_add_ir=$ir_pernode pair_ir=$ir_pair tls_add_ir=$ir_tls atomic_add_ir=$ir_atomic"
