# tests/: C unit tests (tests/unit/t_*.c, TAP) and the pytest integration
# suite (tests/integration), which runs once per IO backend built here.
UNIT_SRC := $(wildcard tests/unit/t_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

$(B)/tests/t_%: $(OB)/tests/unit/t_%.o $(GATLING_LIBOBJS) $(IO_LIB) | $(B)/tests
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# t_zcoder decodes what site/zcoder.c codes: brotli's decoder for it alone
$(B)/tests/t_zcoder: LDLIBS += -lbrotlidec

# tests/acme/acme_try: the ACME client alone, for tries against Pebble
$(B)/tests/acme_try: $(OB)/tests/acme/acme_try.o $(GATLING_LIBOBJS) $(IO_LIB) | $(B)/tests
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(OB)/tests/acme/%.o: CPPFLAGS += -Igatling

# the unit tests name gatling's headers without their folder
GATLING_INC := -Igatling $(GATLING_DIRS:%=-Igatling/%)
$(OB)/tests/unit/%.o: CPPFLAGS += $(GATLING_INC) -Itests/unit

.PHONY: tests-build
# keep the objects make would delete as intermediate (the unit tests', the
# bench tools'): without them the next make check compiled them again
.SECONDARY:
tests-build: $(B)/gatling $(UNIT_BIN) $(BENCH_BIN) $(B)/tests/acme_try

# Backends that build on this host; each runs the suite.
CHECK_BACKENDS ?= $(shell sh tests/backends.sh "$(CC)")
# ... every module of it on the first and its sanitizer build; the others
# leave out the modules whose subject sits above io/ (run-check's ABOVE_IO,
# with the reasons): the same objects (build/obj), linked with another
# libgio.  CHECK_WHOLE_BUILDS="epoll uring sigio poll epoll-san" runs every
# module on every build.
CHECK_WHOLE_BUILDS ?= $(firstword $(CHECK_BACKENDS)) $(firstword $(CHECK_BACKENDS))-san
# ... of which the plain first backend runs its lean HTTP pass (run-check's
# LEAN: the modules no other plain build runs, and the memory bounds the
# sanitizer build cannot hold); CHECK_LEAN_BUILDS= runs its whole pass
CHECK_LEAN_BUILDS ?= $(firstword $(CHECK_BACKENDS))
# The HTTP suite again over HTTPS (GATLING_SCHEME=https, see conftest.py):
# on the first backend's sanitizer build, to keep make check short (the plain
# build's pass ran the same lines unchecked: run-check's cut of issue 55 says
# what it kept of it; test_tls.py runs on every backend in the first pass, and
# run-check runs test_cgi.py and test_proxy.py over HTTPS on the other backends);
# CHECK_TLS_BUILDS="epoll poll sigio uring epoll-san" runs it on all of them.
CHECK_TLS_BUILDS ?= $(firstword $(CHECK_BACKENDS))-san
# ... and over HTTP/2 (GATLING_SCHEME=h2: ALPN h2 on the HTTPS port, Python's
# h2 as the raw client, curl --http2), on the same builds by default
CHECK_H2_BUILDS ?= $(CHECK_TLS_BUILDS)
# ... and the protocol-neutral modules over HTTP/3 (GATLING_SCHEME=h3: QUIC on
# the HTTPS port's number, aioquic as the raw client; run-check's H3_SKIP
# says what is left out and why), on the same builds by default
CHECK_H3_BUILDS ?= $(CHECK_TLS_BUILDS)
# make check-quick: this backend only, no sanitizer, no HTTPS, h2 or h3 pass
QUICK_IO ?= $(firstword $(CHECK_BACKENDS))

# the builds run a job per CPU
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# the test passes run CHECK_PASSES at a time (tests/run-check): most of the
# suite waits on deadlines and sockets, not on a CPU (six at a time, phase 1
# used 1049 CPU-s of its own in 1004 s on 2 CPUs, 52%: the rest of the busy
# CPUs were other work's); the tests that measure cost or time are marked
# serial and run after them, alone.  Three per CPU: four saved little here
# (phase 1 waits on the longest jobs) and put more load-sensitive tests at
# risk; CHECK_PASSES=8 make check tries it
CHECK_PASSES ?= $(shell echo $$((3 * $(CHECK_JOBS))))
# each backend's HTTP pass in two pytest runs (by module): its 300-420 s were
# the long poles of phase 1, which then waited on them with the CPUs 69% busy
CHECK_SHARDS ?= 2
# make check's one HTTP pass (epoll-san) in three: in two, its first shard
# (697 s) was phase 1's long pole, 11.6 min with the h2 pass at 490 s and the
# CPUs 74% busy (the site files' and front controllers' modules added)
CHECK_TIER_SHARDS ?= 3

# the include layering of gatling/ (the folders, top to bottom: gatling/LAYERS,
# which must name the folders gatling.mk compiles; each folder's README says
# what it may include),
# no call circle there nor in bench/lg, bench's drivers sharing code through
# bench/benchkit only, no function in io/ or gatling/ over 80 lines and no C
# file there over 900
.PHONY: layers
layers:
	$(PYTHON) tests/layers.py --make-dirs "$(GATLING_DIRS)"
	sh tests/funclen.sh
	sh tests/filelen.sh

# make lint: gcc -fanalyzer, clang-tidy-14 (.clang-tidy) and cppcheck over every
# C file of gatling/ and io/ (tests/lint.sh; what is not a bug is in
# tests/lint.supp with its reason); a job of make check.  LINT_DEEP=1 adds
# clang-tidy's clang-analyzer-* (~30 CPU-min)
.PHONY: lint
lint:
	LINT_JOBS=$(CHECK_JOBS) sh tests/lint.sh "$(CPPFLAGS) $(IO_CPPFLAGS)"

# make check-tsan: the first backend with ThreadSanitizer (TSAN=1: build/<backend>-tsan,
# build/obj-tsan; the server and the unit programs) and the modules that drive the
# worker threads (site/jobs.c): .htaccess logins (password checks), gzip on the fly,
# dictionary hashing and deltas, the response cache's fills in front of them, and
# the unit program that starts threads (t_jobs: TSAN_UNITS; the other unit
# programs run one thread, where TSan has nothing to check, and building and
# running all 50 of them took most of the job); a job of make check.  A race
# fails the test whose server printed it (harness/env.py's ALARMING).
# TSAN_PYTEST_ARGS leaves out
# test_gzip_miss_served_identity_while_threads_compress: it counts which of eight
# misses found the one -j 1 thread busy, a race of timings (not memory) that a
# thread TSan slows 5-15 times changes; its threads run in test_encoding's others
TSAN_IO ?= $(firstword $(CHECK_BACKENDS))
TSAN_MODULES ?= http/test_access.py http/test_encoding.py http/test_dictionary.py \
                cache/test_cache.py ops/test_unit.py
TSAN_UNITS ?= t_jobs
TSAN_PYTEST_ARGS ?= -k "not test_gzip_miss_served_identity_while_threads_compress"
.PHONY: check-tsan tsan-build
tsan-build: $(B)/gatling $(TSAN_UNITS:%=$(B)/tests/%)
check-tsan:
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(TSAN_IO) TSAN=1 tsan-build
	GATLING_BUILDS=$(TSAN_IO)-tsan $(PYTHON) -m pytest -q -p no:cacheprovider -m "not serial" \
	    --durations=10 $(TSAN_PYTEST_ARGS) $(TSAN_MODULES:%=tests/integration/%) $(PYTEST_ARGS)

# make check-valgrind: a client's stream ended or reset at every stage of an
# HTTP/2 backend connection's life (grpc/test_h2_backend_client_ends.py, three
# fresh servers a stage) and grpc-go's interop cases that end streams early
# (cancel_*, empty_stream, timeout_on_sleeping_server) on the first backend's
# plain build under valgrind (memcheck; issue 75: the use-after-free ASan and
# valgrind both saw).  build/<backend>-vg/gatling is a wrapper: an error makes
# the server exit 99 (its teardown fails the test), valgrind's report goes to
# build/<backend>-vg/vg.PID.log.  A job of make check-all.
VG_IO ?= $(firstword $(CHECK_BACKENDS))
VG_DIR := build/$(VG_IO)-vg
.PHONY: check-valgrind
check-valgrind:
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(VG_IO) build/$(VG_IO)/gatling
	@mkdir -p $(VG_DIR) && rm -f $(VG_DIR)/vg.*.log && \
	    printf '#!/bin/sh\nexec valgrind -q --error-exitcode=99 --log-file=%s/vg.%%p.log %s "$$@"\n' \
	    "$(CURDIR)/$(VG_DIR)" "$(CURDIR)/build/$(VG_IO)/gatling" > $(VG_DIR)/gatling && \
	    chmod 755 $(VG_DIR)/gatling
	GATLING_BUILDS=$(VG_IO)-vg H2B_ENDS_ROUNDS=3 $(PYTHON) -m pytest -q -p no:cacheprovider \
	    tests/integration/grpc/test_h2_backend_client_ends.py $(PYTEST_ARGS)
	GATLING_BUILDS=$(VG_IO)-vg $(PYTHON) -m pytest -q -p no:cacheprovider \
	    -k "test_through_gatling and (cancel or empty_stream or sleeping)" \
	    tests/integration/grpc/test_grpc_interop.py $(PYTEST_ARGS)

# make coverage: the first backend built with gcov's counters (COV=1:
# build/<backend>-cov, build/obj-cov), its unit programs and its HTTP, HTTPS,
# h2 and h3 passes (run-check without the once-only modules and the serial
# phase: COVERAGE_ARGS), but the ACME client's, the cluster's and privilege/'s
# (--acme-once: their code runs nowhere else; privilege/ as root on this
# build, GATLING_PRIV_BUILD), then gcovr's report: build/coverage/index.html (per
# file and line) and tests/covtable.py's table per folder (tests/README)
COV_IO ?= $(firstword $(CHECK_BACKENDS))
COVERAGE_ARGS ?= --https $(COV_IO)-cov --h2 $(COV_IO)-cov --h3 $(COV_IO)-cov
.PHONY: coverage
coverage: setup
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(COV_IO) COV=1 tests-build
	find build/obj-cov build/$(COV_IO)-cov -name '*.gcda' -delete
	-$(PYTHON) tests/run-check -j$(CHECK_PASSES) --shards $(CHECK_SHARDS) --no-once \
	    --acme-once --no-serial $(COVERAGE_ARGS) $(COV_IO)-cov -- $(PYTEST_ARGS)
	@mkdir -p build/coverage
	gcovr -r . -f gatling/ -f io/ -f bench/ --exclude-unreachable-branches -j $(CHECK_JOBS) \
	    --json-summary build/coverage/summary.json --html-details build/coverage/index.html \
	    build/obj-cov build/$(COV_IO)-cov
	$(PYTHON) tests/covtable.py build/coverage/summary.json | tee build/coverage/table.txt

# make coverage-parsers: the pure parsers' line and branch coverage by the
# unit programs that drive them (PARSER_UNITS: each parser's own, t_NAME for
# gatling/*/NAME.c, and t_upstream, t_fuzzcases and t_fuzz, which feed
# http_parse.c too), held to the floors in tests/coverage-floors
# (tests/covtable.py --floors); a job of make check, where a whole make
# coverage (~11 min of passes on 2 CPUs, and its own build) would not fit:
# ~10 CPU-s.  The parsers are compiled with gcov's counters into
# $(OB)-parsecov/ and linked with each unit program's object and an archive of
# the plain build's other objects: the linker takes no member of an archive
# whose symbols are already defined, so the counted copies are the ones that
# run.  A parser is found by its file's name in whichever folder of gatling/
# holds it (conn/proxyproto.c may move).
PARSERS ?= http_parse h2_hpack cachectl proxyproto ftp_parse acme_parse sitefiles_parse
PARSER_UNITS ?= $(PARSERS:%=t_%) t_upstream t_fuzzcases t_fuzz
PCOV := $(OB)-parsecov
pcov_src = $(firstword $(wildcard gatling/*/$(1).c gatling/$(1).c))
PCOV_OBJS := $(PARSERS:%=$(PCOV)/%.o)
$(PCOV)/libgatling.a: $(GATLING_LIBOBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
define PCOV_RULE
$(PCOV)/$(1).o: $(call pcov_src,$(1)) $(OB).flags
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) -Igatling $$(CFLAGS) --coverage -O0 -c -o $$@ $$<
endef
$(foreach p,$(PARSERS),$(eval $(call PCOV_RULE,$(p))))
$(PCOV)/t_%: $(OB)/tests/unit/t_%.o $(PCOV_OBJS) $(PCOV)/libgatling.a $(IO_LIB)
	$(CC) $(LDFLAGS) --coverage -o $@ $^ $(LDLIBS)
.PHONY: coverage-parsers
coverage-parsers:
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) $(PARSER_UNITS:%=$(PCOV)/%)
	rm -f $(PCOV)/*.gcda
	@set -e; for t in $(PARSER_UNITS); do (cd $(PCOV) && ./$$t >$$t.tap 2>&1) || \
	    { echo "coverage-parsers: $$t failed:"; grep -v '^ok' $(PCOV)/$$t.tap; exit 1; }; done
	gcovr -r . $(foreach p,$(PARSERS),-f '$(call pcov_src,$(p))') --exclude-unreachable-branches \
	    --json-summary $(PCOV)/summary.json --txt $(PCOV)/gcovr.txt $(PCOV)
	$(PYTHON) tests/covtable.py $(PCOV)/summary.json --floors tests/coverage-floors

.PHONY: check check-all check-build check-all-build check-quick bench-check io-build
# every build make check-all tests: each backend, the first with sanitizers too
check-all-build: setup layers
	@set -e; for io in $(CHECK_BACKENDS); do \
	    $(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$$io tests-build; done; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(firstword $(CHECK_BACKENDS)) SAN=1 tests-build; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) all

# make check-all: everything (what .ci/run calls).  The fuzz smoke (with its
# build), the cross build, make lint, the TSan modules and the parsers'
# coverage floor run beside the test passes; then phase 2, the tests that
# measure cost or time, one at a time; then the instruction ledger
# (ledger-check) on the machine left idle: callgrind's three minutes of a
# CPU beside the passes made their timing tests (reloads under load) late.
# Last, the pristine machine (tests/pristine.sh, issue 91; PRISTINE=0 leaves it
# out): the README's `make run` and `make check` on the submitted head (HEAD, not
# the work tree's changes) in a Debian tree nobody used (debootstrap, chroot; root
# only, ports 8000 and 4433 free).  20-26 minutes on the shared 2 cores here (the
# tree's set-up, builds and make check), so CI's check-all is ~33 + 4 + 26 min, within
# its 90; after the passes and the ledger, so that it slows none of their timing tests.
PRISTINE ?= 1
check-all: check-all-build
	$(PYTHON) tests/run-check -j$(CHECK_PASSES) --shards $(CHECK_SHARDS) \
	    $(CHECK_WHOLE_BUILDS:%=--whole %) $(CHECK_LEAN_BUILDS:%=--lean %) \
	    $(CHECK_TLS_BUILDS:%=--https %) \
	    $(CHECK_H2_BUILDS:%=--h2 %) $(CHECK_H3_BUILDS:%=--h3 %) \
	    --job "fuzz=$(MAKE) --no-print-directory fuzz-check" \
	    --job "cross=$(MAKE) --no-print-directory cross" \
	    --job "lint=$(MAKE) --no-print-directory lint" \
	    --job "tsan=$(MAKE) --no-print-directory check-tsan" \
	    --job "valgrind=$(MAKE) --no-print-directory check-valgrind" \
	    --job "parsecov=$(MAKE) --no-print-directory coverage-parsers" \
	    $(CHECK_BACKENDS) $(firstword $(CHECK_BACKENDS))-san -- $(PYTEST_ARGS)
	$(MAKE) --no-print-directory ledger-check
	$(if $(filter-out 0,$(PRISTINE)),sh tests/pristine.sh)

# make ledger-check: bench/ledger's rows (the server's instructions per request
# under callgrind, issue 85) on the epoll backend's plain build, against
# bench/ledger.tsv: a row more than 2% over the file, or a row of the file
# without a why, fails.  A commit that makes a row dearer on purpose updates
# the file (bench/ledger --update "why").  A job of make check-all; ~4 min of
# one CPU (bench/doc/ledger.md).
LEDGER_IO ?= epoll
.PHONY: ledger-check
ledger-check:
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(LEDGER_IO) build/$(LEDGER_IO)/gatling \
	    build/$(LEDGER_IO)/bench
	$(PYTHON) bench/ledger --gatling build/$(LEDGER_IO)/gatling --bench build/$(LEDGER_IO)/bench

# the server and the unit programs that drive io/ (ops/test_unit.py's
# t_gio_* and DRIVE_IO), for a backend whose integration passes are
# check-all's: gatling/'s objects are the first backend's (build/obj), only
# io/ is compiled again
IO_UNITS := $(filter $(B)/tests/t_gio_%,$(UNIT_BIN)) \
            $(addprefix $(B)/tests/,t_fcache t_jobs t_quic_steer t_stream_body)
io-build: $(B)/gatling $(IO_UNITS)

# make check: what a contributor runs before a commit (10 minutes here after
# make run; run-check's CHECK_ONCE says what it leaves to check-all and why):
# the first backend's sanitizer build (every unit program, the integration
# suite over HTTP, HTTP/2 and HTTP/3, the privilege suite), the other
# backends' io/ with their io/ unit programs, the fuzz smoke, make lint and
# the parsers' coverage floor.  No phase 2: cost and timing are
# make bench-check's (and check-all's).
CHECK_SAN := $(firstword $(CHECK_BACKENDS))-san
CHECK_OTHER := $(wordlist 2,99,$(CHECK_BACKENDS))
check-build: setup layers
	@set -e; $(MAKE) --no-print-directory -j$(CHECK_JOBS) \
	    IO=$(firstword $(CHECK_BACKENDS)) SAN=1 tests-build; \
	for io in $(CHECK_OTHER); do \
	    $(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$$io io-build; done; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) gatling/gatling
check: check-build
	$(PYTHON) tests/run-check --tier check -j$(CHECK_PASSES) --shards $(CHECK_TIER_SHARDS) \
	    --h2 $(CHECK_SAN) --h3 $(CHECK_SAN) \
	    --job "fuzz=$(MAKE) --no-print-directory fuzz-check" \
	    --job "lint=$(MAKE) --no-print-directory lint" \
	    --job "parsecov=$(MAKE) --no-print-directory coverage-parsers" \
	    $(if $(CHECK_OTHER),--job "io-units=GATLING_BUILDS='$(CHECK_OTHER)' $(PYTHON) -m pytest \
	        -q -p no:cacheprovider tests/integration/ops/test_unit.py $(PYTEST_ARGS)") \
	    $(CHECK_SAN) -- $(PYTEST_ARGS)

# make bench-check: phase 2 alone, the tests that measure cost or time
# (requests per CPU-second, page faults per request, latency bounds), on the
# first backend's plain and sanitizer builds; what they print is read as a
# benchmark's result on a shared machine (check-all runs them too)
bench-check: setup
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(firstword $(CHECK_BACKENDS)) tests-build
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(firstword $(CHECK_BACKENDS)) SAN=1 \
	    tests-build
	GATLING_BUILDS="$(firstword $(CHECK_BACKENDS)) $(CHECK_SAN)" $(PYTHON) -m pytest -q \
	    -p no:cacheprovider -m serial --durations=12 tests/integration $(PYTEST_ARGS)

# one pass split three ways by module: the two CPUs stay busy
check-quick: setup layers
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(QUICK_IO) tests-build
	$(PYTHON) tests/run-check -j$(CHECK_PASSES) --shards 3 $(QUICK_IO) -- $(PYTEST_ARGS)
