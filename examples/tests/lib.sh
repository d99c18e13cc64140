# examples/tests/lib.sh: what the shell checks of the examples share.
# Sourced first, with one argument, the name of the check's private
# directory under /dev/shm.  It sets the shell's mode (-u, pipefail;
# not -e, since a check goes on after a failure to report them all),
# $dir (mode 700, removed at exit, after the exporter the check started
# as $epid, if any, is stopped by its pid) and $bad; fail() records a
# failure and lets the check go on, so that one run reports every
# difference.  A check that starts an exporter learns its port with
# listen_port (tools/listen.sh).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../tools/listen.sh"
dir=$(mktemp -d "/dev/shm/$1.XXXXXX")
epid=
cleanup() {
	[ -n "$epid" ] && kill "$epid" 2>/dev/null && wait "$epid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
chmod 700 "$dir"
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# write_segment PROGRAM: runs the segment writer PROGRAM in $dir with
# TALLY_KEEP=1 and sets $path to the segment it prints that it left;
# ends the check when PROGRAM fails or the segment is not there.
write_segment() {
	path=$(TALLY_DIR=$dir TALLY_KEEP=1 "$1") || { echo "$(basename "$1") failed"; exit 1; }
	[ -e "$path" ] || { echo "no segment at $path"; exit 1; }
}
