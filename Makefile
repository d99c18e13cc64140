# tally: the two commands of the quick start, and a few more.
#
#   make demo    build, then run the example service and what a reader sees,
#                and the counter benchmark's quick mode
#   make check   the normal build's library and tool tests, in parallel
#                (not the timing ones, nor the sanitizer builds, Python's
#                package, Rust's crate or fuzzing)
#   make test    every test: normal, ASan+UBSan and TSan builds (+ fuzzing)
#   make bench   the full benchmarks: every scenario of `tally-bench all`,
#                charts and JSON in $(BENCH_DIR) (default build/bench-results)
#   make fuzz    fuzz the segment reader for longer
#   make bench-readers  each reader's memory per series and time at 10^6
#                series in 8 processes (bench/readers-memory.sh; N=...)
#   make bench-rust  the Rust crate against C's add and the Rust peers
#                (rust/bench/run.sh; needs cargo)
#   make wheel   the Python sdist and manylinux wheel in build-wheel/, the
#                package's tests in a fresh venv holding only the wheel
#   make crate   the Rust crate as cargo package makes it, in build-crate/,
#                with cargo test in it unpacked alone
#   make deb     the Debian packages of debian/ (libtally2, libtally-dev,
#                tally-tools) in build-deb/, lintian, and their install check
#   make deb-fresh  the packages installed with apt on a fresh Debian 12 made
#                by mmdebstrap (about 3 minutes, 500 MB from the Debian mirror)
#
# Both install what they need (Debian packages) when it is missing.

BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja
FUZZ_SECS  ?= 600
BENCH_DIR  ?= $(BUILD)/bench-results
PREFIX     ?= /usr/local
DESTDIR    ?=

DEB_PKGS := cmake ninja-build gcc g++ make pkg-config clang libclang-rt-14-dev \
	valgrind libmicrohttpd-dev libcrypt-dev prometheus python3-venv python3-dev zlib1g-dev \
	openssl curl gnuplot-nox debhelper lintian

.PHONY: all deps build demo check test test-normal test-asan test-tsan bench bench-rust fuzz \
	bench-readers \
	install clean deb deb-fresh wheel crate

all: build

deps:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# $(1): build dir, $(2): extra CMake arguments
define configure
	@[ -f $(1)/build.ninja ] || cmake -S . -B $(1) $(CMAKE_GEN) \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTALLY_WERROR=ON $(2) >/dev/null
	@cmake --build $(1) -j $(JOBS)
endef

build: deps
	$(call configure,$(BUILD),)

demo: build
	@tools/demo.sh $(BUILD)

check: build
	@cd $(BUILD) && ctest --output-on-failure -j $$(( 2 * $(JOBS) )) -LE timing

test: deps
	@tools/run-tests.sh

# The report goes to the terminal and to $(BENCH_DIR)/report.txt; the
# progress line (on a terminal) goes to stderr.
bench: build
	@mkdir -p $(BENCH_DIR)
	@{ $(BUILD)/bench/tally-bench all --sweep 1,2,4,8 --plot $(BENCH_DIR); \
		echo $$? >$(BENCH_DIR)/.status; } | tee $(BENCH_DIR)/report.txt; \
	rc=$$(cat $(BENCH_DIR)/.status); rm -f $(BENCH_DIR)/.status; \
	echo; echo "bench results (charts, .dat/.gp, JSON, report) in $(BENCH_DIR)/:"; \
	ls $(BENCH_DIR) | sed 's/^/  /'; exit $$rc

bench-readers: build
	@bench/readers-memory.sh $(or $(N),1000000) $(BUILD)

bench-rust:
	@rust/bench/run.sh

wheel: deps
	@tools/build-wheel.sh build-wheel

crate:
	@tools/package-crate.sh build-crate

deb: deps
	@tools/build-deb.sh build-deb && tools/check-deb.sh build-deb

deb-fresh: deb
	@command -v mmdebstrap >/dev/null || apt-get install -y -qq mmdebstrap
	@tools/check-deb-fresh.sh build-deb

fuzz: deps
	@tools/fuzz.sh $(FUZZ_SECS)

# make install [PREFIX=/usr/local] [DESTDIR=/staging]: PREFIX is where the
# files will live (and what tally.pc and the CMake package say), DESTDIR a
# staging root the files are copied under (packaging), as GNU conventions.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-deb build-wheel build-crate
