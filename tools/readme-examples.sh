#!/usr/bin/env bash
# Writes the README's build examples into OUT_DIR, word for word, so that
# the install checks (check-install.sh, check-deb.sh) build what a reader
# of the README builds:
#   prog.c          the C example with a main() (a counter family)
#   CMakeLists.txt  a project around the README's ```cmake block
#   pkg-config.sh   the README's `cc prog.c $(pkg-config ...)` line
# A README whose examples moved or changed shape fails here, by name.
set -eu
cd "$(dirname "$0")/.."
out=$1
mkdir -p "$out"

# The fenced block (```LANG) whose text contains MARK, printed without
# its fences.
block() { # lang mark
	awk -v lang="$1" -v mark="$2" '
		$0 == "```" lang { inb = 1; buf = ""; next }
		inb && $0 == "```" { inb = 0; if (index(buf, mark)) { printf "%s", buf; found = 1; exit } next }
		inb { buf = buf $0 "\n" }
		END { exit !found }' README.md
}

block c "tally_counter_family_register" >"$out/prog.c" ||
	{ echo "README: no C example with tally_counter_family_register"; exit 1; }
grep -q 'int main' "$out/prog.c" || { echo "README: its family example has no main()"; exit 1; }
cmake_lines=$(block cmake "find_package(tally") ||
	{ echo "README: no cmake block with find_package(tally ...)"; exit 1; }
{
	echo "cmake_minimum_required(VERSION 3.20)"
	echo "project(myservice C)"
	echo "add_executable(myservice prog.c)"
	echo "$cmake_lines"
} >"$out/CMakeLists.txt"
# "Build either against the installed library: `cc prog.c $(pkg-config
# --cflags --libs tally)`": the backquoted command, joined over its line.
pc=$(awk '/Build either against the installed library/ { p = 1 } p { printf "%s ", $0 } p && /`,/ { exit }' README.md |
	sed -n 's/.*`\(cc prog\.c [^`]*\)`.*/\1/p')
[ -n "$pc" ] || { echo "README: no \`cc prog.c \$(pkg-config ...)\` line"; exit 1; }
printf '%s -o myservice-pc\n' "$pc" | sed 's/--cflags  */--cflags /' >"$out/pkg-config.sh"
