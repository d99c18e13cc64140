#!/usr/bin/env bash
# check-docs.sh SRC_DIR: the documents say nothing the tree contradicts.
#
#   - Every repository path a document or a source file names exists:
#     README.md, CONTRIBUTING.md, docs/*.md, the READMEs of programs/,
#     python/ and rust/, the man pages, and the text of every source file
#     (C, shell, Python, Rust, CMake).  A path is a word that starts with
#     a top-level directory of the tree (src/zone.c, docs/FORMAT.md,
#     tools/x.sh, programs/common/strbuf.h, ../src/*.c), with a
#     subdirectory of the file's own directory (tests/abi.rs in
#     rust/README.md), with tally/ (a header as #include names it), or a
#     bare *.md name.  It may be a glob (src/*.c) or a brace list
#     (test/{a,b}.c).  It exists if it names a file or directory from the
#     root, from the file's directory or, for tally/, from include/; a
#     bare *.md name may also be in docs/; a name X is also a program
#     built from X.c.  Words that follow a '/', '.', '$', '~' or a word
#     character (URLs, /dev/shm/..., $TALLY_DIR/..., ~/.cargo) are not
#     paths of the tree, and neither is a word under a directory the tree
#     does not have (build/bench-results/).
#   - docs/FORMAT.md and docs/VERSIONING.md give the segment format
#     version the library writes (TALLY__FMT_MAJOR and TALLY__FMT_MINOR,
#     wherever src/ or include/ defines them): FORMAT.md in its title, its
#     header table and the newest entry of its "Versions" list.
#   - No string literal of the library (src/: its error messages and the
#     reader's corrupt-segment messages) says "family" or "families" for
#     a metric record: a message says "metric record", and "family" only
#     as "label family" (the process-side cache of label sets,
#     tally/family.h) or inside a name (tally_family_remove).  Comments
#     and #include lines are not read; a literal split as "label "
#     "family" is reported, so keep the two words in one piece.
#
# Each failure names the file, the line and what is wrong.
#
# check-docs.sh --self-test: runs the check on small trees made for the
# purpose, one it must pass and one it must fail (naming each error).
set -euo pipefail
# The temporary files and directories of the checks, removed however the
# script ends (an error under set -e runs no RETURN trap).
tmps=()
trap 'rm -rf "${tmps[@]}"' EXIT

usage() { echo "usage: check-docs.sh SRC_DIR | --self-test" >&2; exit 2; }

# The files of the tree, relative to it: tracked and new files from git
# where the tree is a repository, else everything outside build output.
tree_files() {
	if git -C "$1" rev-parse --show-toplevel >/dev/null 2>&1 &&
		[ "$(cd "$1" && git rev-parse --show-prefix)" = "" ]; then
		(cd "$1" && git ls-files -co --exclude-standard |
			while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done)
	else
		(cd "$1" && find . -type d \( -name .git -o -name 'build*' -o \
			-name target -o -name __pycache__ -o -name '*.egg-info' \) \
			-prune -o -type f -print | sed 's#^\./##')
	fi
}

check_paths() {
	local src=$1 list docs sources
	list=$(mktemp)
	tmps+=("$list")
	tree_files "$src" | sort >"$list"
	docs=$(grep -E '^(README\.md|CONTRIBUTING\.md|docs/[^/]*\.md|programs/[^/]*/README\.md|python/README\.md|rust/README\.md|man/[^/]*\.[0-9])$' "$list" || true)
	sources=$(grep -E '(\.(c|h|sh|py|pyi|rs|in|toml)|CMakeLists\.txt|Makefile)$' "$list" |
		grep -v '^tools/check-docs\.sh$' || true)
	# Word characters of a path; a path ends on one of them (not on the
	# '.' or ',' of a sentence).
	local w='A-Za-z0-9_' p='[^A-Za-z0-9_./$~-]'
	local re="(^|$p)((\.\./)*[$w][$w-]*/[$w.*?{},/-]*[$w*}]|[$w][$w-]*\.md\b)"
	local rc=0
	# Man pages: roff's \- and \& are a '-' and nothing.
	(cd "$src" && for f in $docs $sources; do
		case $f in
		man/*) sed -e 's/\\-/-/g' -e 's/\\&//g' -e 's/\\f[BIRP]//g' "$f" |
			grep -noE "$re" | sed "s#^#$f:#" ;;
		*) grep -HnoE "$re" "$f" ;;
		esac || true # a file that names no path
	done) | awk -F: -v listfile="$list" '
	BEGIN {
		while ((getline f < listfile) > 0) {
			exists[f] = 1
			n = split(f, c, "/")
			d = ""
			for (i = 1; i < n; i++) {
				d = d (i > 1 ? "/" : "") c[i]
				exists[d] = 1; isdir[d] = 1
				if (i == 1)
					top[c[1]] = 1
			}
		}
	}
	function dirname(f) { return f ~ /\// ? substr(f, 1, match(f, /\/[^\/]*$/) - 1) : "" }
	function join(d, t) { return d == "" ? t : d "/" t }
	# Does path t (a glob or not) name something of the tree?
	function found(t,   re, k) {
		if (t !~ /[*?]/)
			return (t in exists) || ((t ".c") in exists)
		re = t
		gsub(/\./, "\\.", re); gsub(/\*/, "[^/]*", re); gsub(/\?/, "[^/]", re)
		re = "^" re "$"
		for (k in exists)
			if (k ~ re)
				return 1
		return 0
	}
	function resolves(t, dir,   b) {
		if (t ~ /^\.\.\//) {
			b = dir
			while (t ~ /^\.\.\//) {
				if (b == "")
					return 0 # out of the tree
				t = substr(t, 4)
				b = dirname(b)
			}
			return found(join(b, t))
		}
		for (b = dir; b != ""; b = dirname(b))
			if (found(b "/" t))
				return 1
		if (found(t) || (t ~ /^tally\// && found("include/" t)))
			return 1
		return t !~ /\// && found("docs/" t)
	}
	# Is t a word of the tree: does it start with a directory of the root,
	# of dir or of a directory above it (after its ../), or is it a
	# header (tally/x.h) or a *.md name?
	function of_tree(t, dir,   first, b) {
		if (t !~ /\//)
			return 1
		b = dir
		while (t ~ /^\.\.\//) {
			if (b == "")
				return 1 # out of the tree: never there
			t = substr(t, 4)
			b = dirname(b)
		}
		first = t; sub(/\/.*/, "", first)
		if (first in top)
			return 1
		if (first == "tally" && t ~ /\.h$/)
			return 1
		for (; b != ""; b = dirname(b))
			if ((b "/" first) in isdir)
				return 1
		return 0
	}
	# One brace list {a,b,c} expanded; the result is tested as a whole.
	function each_resolves(t, dir,   pre, post, body, n, alt, i) {
		if (!match(t, /\{[^{}]*\}/))
			return resolves(t, dir)
		pre = substr(t, 1, RSTART - 1)
		body = substr(t, RSTART + 1, RLENGTH - 2)
		post = substr(t, RSTART + RLENGTH)
		n = split(body, alt, ",")
		for (i = 1; i <= n; i++)
			if (!each_resolves(pre alt[i] post, dir))
				return 0
		return 1
	}
	{
		file = $1; line = $2
		t = substr($0, length(file) + length(line) + 3)
		sub(/^[^A-Za-z0-9_.]/, "", t)
		dir = dirname(file)
		if (of_tree(t, dir) && !each_resolves(t, dir)) {
			printf "%s:%s: %s: no such file in the tree\n", file, line, t
			bad = 1
		}
	}
	END { exit bad }' || rc=1
	rm -f "$list"
	return $rc
}

# The string literals of src/*.c and src/*.h (comments and #include
# lines skipped) that say "family" for anything but a label family.
check_words() {
	local src=$1 files
	[ -d "$src/src" ] || return 0
	files=$(cd "$src" && find src -type f \( -name '*.c' -o -name '*.h' \) | sort)
	[ -n "$files" ] || return 0
	(cd "$src" && awk '
	FNR == 1 { incomment = 0 }
	# One literal: "family" but for "label family" and names (a_family).
	function judge(lit,   t) {
		t = tolower(lit)
		gsub(/label famil(y|ies)/, "", t)
		if (t ~ /(^|[^a-z0-9_])famil(y|ies)/) {
			printf "%s:%d: \"%s\": say \"metric record\" (or \"label family\"), not family\n", FILENAME, FNR, lit
			bad = 1
		}
	}
	{
		line = $0
		if (!incomment && line ~ /^[ \t]*#[ \t]*include/)
			next
		n = length(line); i = 1
		while (i <= n) {
			c = substr(line, i, 1); d = substr(line, i, 2)
			if (incomment) {
				if (d == "*/") { incomment = 0; i += 2 } else i++
			} else if (d == "/*") {
				incomment = 1; i += 2
			} else if (d == "//") {
				break
			} else if (c == "\x27") {
				# A character constant: skip it, escapes included.
				i++
				while (i <= n && substr(line, i, 1) != "\x27")
					i += substr(line, i, 1) == "\\" ? 2 : 1
				i++
			} else if (c == "\"") {
				lit = ""; i++
				while (i <= n && substr(line, i, 1) != "\"") {
					if (substr(line, i, 1) == "\\") {
						lit = lit substr(line, i, 2); i += 2
					} else {
						lit = lit substr(line, i, 1); i++
					}
				}
				i++
				judge(lit)
			} else
				i++
		}
	}
	END { exit bad }' $files)
}

# The value of "#define NAME value" in src/ or include/, wherever it is.
define_of() {
	grep -rhE "^#define $2[[:space:]]+[0-9]+" "$1/src" "$1/include" 2>/dev/null |
		head -n 1 | awk '{print $3}'
}

check_version() {
	local src=$1 major minor v fmt=$1/docs/FORMAT.md ver=$1/docs/VERSIONING.md rc=0
	major=$(define_of "$src" TALLY__FMT_MAJOR)
	minor=$(define_of "$src" TALLY__FMT_MINOR)
	if [ -z "$major" ] || [ -z "$minor" ]; then
		echo "check-docs: no TALLY__FMT_MAJOR/TALLY__FMT_MINOR in src/ or include/"
		return 1
	fi
	v=$major.$minor
	[ -e "$fmt" ] || { echo "docs/FORMAT.md: missing"; return 1; }
	awk -v v="$v" -v major="$major" -v minor="$minor" '
	function bad(what) { printf "docs/FORMAT.md:%d: %s (the library writes %s)\n", FNR, what, v; rc = 1 }
	FNR == 1 && !/^# / { bad("no title") }
	FNR == 1 && /^# / {
		if (!match($0, /version [0-9]+\.[0-9]+/))
			bad("the title gives no version")
		else if (substr($0, RSTART + 8, RLENGTH - 8) != v)
			bad("the title says version " substr($0, RSTART + 8, RLENGTH - 8))
	}
	/^\| *8 *\| *2 *\| *major *\|/ {
		seen_major = 1
		if ($0 !~ "\\| *major *\\| *" major "\\.")
			bad("the header table gives another major version")
	}
	/^\| *10 *\| *2 *\| *minor *\|/ {
		seen_minor = 1
		if ($0 !~ "\\| *minor *\\| *" minor "\\.")
			bad("the header table gives another minor version")
	}
	/^## Versions/ { in_list = 1; next }
	in_list && /^- [0-9]+\.[0-9]+:/ {
		split($0, a, /[ :]/)
		if (a[2] != v)
			bad("the newest entry of \"Versions\" is " a[2])
		in_list = 0
	}
	END {
		if (!seen_major || !seen_minor)
			{ FNR = 0; bad("no major/minor row in the header table") }
		exit rc
	}' "$fmt" || rc=1
	if [ -e "$ver" ]; then
		awk -v v="$v" '/^## The segment format/ {
			if (!match($0, /\([0-9]+\.[0-9]+\)/) || substr($0, RSTART + 1, RLENGTH - 2) != v) {
				printf "docs/VERSIONING.md:%d: the segment format section does not say (%s)\n", FNR, v
				exit 1
			}
		}' "$ver" || rc=1
	fi
	return $rc
}

# A tree whose documents are right, and the same tree with each kind of
# error the check must name.
self_test() {
	local tmp out rc=0
	tmp=$(mktemp -d)
	tmps+=("$tmp")
	mkdir -p "$tmp/good/src" "$tmp/good/docs" "$tmp/good/tools" \
		"$tmp/good/rust/tests" "$tmp/good/include/tally" "$tmp/good/examples" \
		"$tmp/good/test" "$tmp/good/programs/tallystat"
	(cd "$tmp/good"
	printf '#define TALLY__FMT_MAJOR   2\n#define TALLY__FMT_MINOR   5\n' >src/layout.h
	: >src/zone.c; : >src/other.c; : >tools/x.sh; : >rust/tests/abi.rs
	: >include/tally/block.h; : >include/tally/family.h
	: >examples/demo.c; : >test/harness.h
	: >programs/tallystat/main.c
	cat >README.md <<-'EOF'
	See src/zone.c, docs/FORMAT.md and `tools/x.sh`; src/*.h and
	src/{zone.c,layout.h} are globs; <tally/block.h> is a header.
	Not paths: https://example.org/src/gone.c, /dev/shm/tally-1000/src/x,
	$TALLY_DIR/src/y, build/bench-results/, and/or. The program
	examples/demo is built from its .c.
	EOF
	cat >rust/README.md <<-'EOF'
	`tests/abi.rs` and `../src/*.c`.
	EOF
	cat >docs/FORMAT.md <<-'EOF'
	# The format, version 2.5

	| 8 | 2 | major | 2. Refused when unknown. |
	| 10 | 2 | minor | 5. Adds only. |

	## Versions

	- 2.5: the newest.
	- 2.4: older.
	EOF
	printf '/* Described in FORMAT.md. */\n' >src/zone.c
	cat >src/other.c <<-'EOF'
	#include "tally/family.h" /* a "family" here is no message */
	static const char q = '"';
	int f(void) { return g("tally_family_remove: no label family", 'x'); }
	EOF
	)
	if ! out=$(check_paths "$tmp/good" && check_version "$tmp/good" &&
		check_words "$tmp/good"); then
		echo "self-test: a correct tree fails:"; echo "$out"; rc=1
	fi
	# ...does not bring the error back: one of each.
	cp -r "$tmp/good" "$tmp/bad"
	(cd "$tmp/bad"
	rm src/zone.c
	printf 'Also docs/GONE.md, see STYLE.md; test/{harness,util}.h.\n' >>README.md
	printf '`tests/gone.rs`, ../../seeds/004\n' >>rust/README.md
	sed -i -e '1s/2\.5/2.0/' -e 's/| minor | 5\./| minor | 4./' \
		-e 's/^- 2\.5:/- 2.6:/' docs/FORMAT.md
	printf '# see programs/common/strbuf.h\n' >tools/x.sh
	printf 'int h(void) { return g("family %%u: bad unit"); }\n' >>src/other.c)
	out=$( (check_paths "$tmp/bad"; check_version "$tmp/bad"; check_words "$tmp/bad") || true)
	for want in \
		'README.md:1: src/zone.c: no such file' \
		'README.md:2: src/{zone.c,layout.h}: no such file' \
		'README.md:6: docs/GONE.md: no such file' \
		'README.md:6: STYLE.md: no such file' \
		'README.md:6: test/{harness,util}.h: no such file' \
		'rust/README.md:2: tests/gone.rs: no such file' \
		'rust/README.md:2: ../../seeds/004: no such file' \
		'tools/x.sh:1: programs/common/strbuf.h: no such file' \
		'docs/FORMAT.md:1: the title says version 2.0 (the library writes 2.5)' \
		'docs/FORMAT.md:4: the header table gives another minor version' \
		'docs/FORMAT.md:8: the newest entry of "Versions" is 2.6' \
		'src/other.c:4: "family %u: bad unit": say "metric record"'; do
		grep -qF "$want" <<<"$out" ||
			{ echo "self-test: not reported: $want"; rc=1; }
	done
	n=$(grep -c . <<<"$out")
	if [ "$n" != 12 ]; then
		echo "self-test: expected 12 errors, got $n:"; echo "$out"; rc=1
	fi
	[ "$rc" = 0 ] && echo "check-docs self-test: a correct tree passes, 12 errors of a broken one are named"
	return $rc
}

[ $# = 1 ] || usage
if [ "$1" = --self-test ]; then
	self_test
	exit
fi
src=$1
[ -d "$src" ] || usage
rc=0
check_paths "$src" || rc=1
check_version "$src" || rc=1
check_words "$src" || rc=1
[ "$rc" = 0 ] && echo "docs: every path named exists, no message of src/ says family for a metric record, FORMAT.md gives format $(define_of "$src" TALLY__FMT_MAJOR).$(define_of "$src" TALLY__FMT_MINOR)"
exit $rc
