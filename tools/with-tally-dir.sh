#!/bin/sh
# tools/with-tally-dir.sh CMD [ARG...]: runs CMD with TALLY_DIR set to a
# directory of its own under /dev/shm, made for it and removed after it
# (with whatever CMD left there); exits with CMD's status.
#
# For the tests of programs that make zones where TALLY_DIR says, or else
# in the user's default directory /dev/shm/tally-<uid>: a test must not
# leave that directory behind, and two test runs at once (two clones on
# one machine) must not share it.
set -u
d=$(mktemp -d /dev/shm/tally-run.XXXXXX) || exit 1
# Removed however this ends: sh runs the EXIT trap on exit only, so a
# signal exits (after CMD, which gets it too).
trap 'rm -rf "$d"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
TALLY_DIR=$d "$@"
exit $?
