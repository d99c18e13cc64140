#!/bin/sh
# check-plot.sh TALLY_BENCH: a tiny run of every scenario that draws charts
# (and of wakeup, which keeps only its JSON) with --plot into a temporary
# directory; every chart must be a PNG (its 8-byte signature)
# next to its .dat and .gp, and the JSON must be there.  Exits 77 (skipped)
# when gnuplot is not installed, after checking that --plot then fails
# with a one-line error naming the package.
set -eu
bench=$1
dir=$(mktemp -d)
# sh runs the EXIT trap on exit only: a signal exits.
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if ! command -v gnuplot >/dev/null 2>&1; then
	if "$bench" counter --adds 1000 --repeat 1 --plot "$dir" 2>"$dir/err"; then
		echo "--plot without gnuplot succeeded"; exit 1
	fi
	grep -q "gnuplot-nox" "$dir/err" || { cat "$dir/err"; exit 1; }
	echo "gnuplot is not installed: skipped"
	exit 77
fi
"$bench" counter --adds 20000 --repeat 2 --sweep 1,3 --quiet --plot "$dir/out" >/dev/null
"$bench" alloc --blocks 2000 --batch 100 --repeat 2 --mem-counters 2048 \
	--quiet --plot "$dir/out" >/dev/null
"$bench" oversub --quick --threads 4 --adds 20000 --repeat 2 --quiet \
	--plot "$dir/out" >/dev/null
for s in pernode falseshare inflight wakeup; do
	"$bench" $s --quick --adds 10000 --repeat 2 --quiet --plot "$dir/out" \
		>/dev/null
done
png=$(printf '\211PNG\r\n\032\n' | od -An -tx1)
for chart in counter-throughput counter-ns alloc-rate-threads \
	alloc-rate-slabs alloc-memory-slabs alloc-memory-threads \
	oversub-throughput oversub-memory pernode-update pernode-read \
	pernode-flow-memory falseshare-ns inflight-rate-work50 \
	inflight-rate-work500; do
	for ext in png dat gp; do
		[ -s "$dir/out/$chart.$ext" ] || { echo "no $chart.$ext"; exit 1; }
	done
	sig=$(head -c 8 "$dir/out/$chart.png" | od -An -tx1)
	[ "$sig" = "$png" ] || { echo "$chart.png is not a PNG"; exit 1; }
done
for doc in counter alloc oversub pernode falseshare inflight wakeup; do
	[ -s "$dir/out/$doc.json" ] || { echo "no $doc.json"; exit 1; }
done
echo "charts ok: $(ls "$dir/out" | tr '\n' ' ')"
