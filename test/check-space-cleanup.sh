#!/usr/bin/env bash
# check-space-cleanup.sh TEST_SPACE: a test-space that fails right after
# mounting its private tmpfs (a failed CHECK, then SIGKILL) leaves nothing
# mounted and nothing behind: the harness, the forked parent of each test,
# unmounts and removes what the test could not.  Skips (77) where a tmpfs
# cannot be mounted.
set -uo pipefail
prog=$1
dir=$(mktemp -d /dev/shm/tally-cleanup-test.XXXXXX)
chmod 700 "$dir"
bad=0

# Our own, in case this script itself is interrupted: nothing is left.
cleanup() {
	grep -F " $dir/" /proc/self/mountinfo | awk '{print $5}' |
		while read -r mp; do umount -l "$mp"; done
	rm -rf "$dir"
}
trap cleanup EXIT

for how in fail kill; do
	out=$(TALLY_DIR=$dir TALLY_TEST_FAIL_ON_TMPFS=$how "$prog" \
		a_full_file_system_never_kills_a_writer 2>&1)
	rc=$?
	if grep -q "SKIP: cannot mount" <<<"$out"; then
		echo "skip: cannot mount a tmpfs here"
		exit 77
	fi
	if [ $rc -eq 0 ]; then
		echo "$how: the forced failure did not fail the test:"
		echo "$out"
		bad=1
	fi
	if grep -F " $dir/" /proc/self/mountinfo; then
		echo "$how: left mounted (above)"
		bad=1
	fi
	left=$(ls -A "$dir")
	if [ -n "$left" ]; then
		echo "$how: left in $dir: $left"
		bad=1
	fi
	grep -q "harness: unmounted $dir/theft\." <<<"$out" || {
		echo "$how: the harness did not say it unmounted:"
		echo "$out"
		bad=1
	}
done
[ $bad -eq 0 ] && echo "a failed test-space leaves nothing mounted"
exit $bad
