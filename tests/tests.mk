# tests/: C unit tests (tests/unit/t_*.c, TAP) and the pytest integration
# suite (tests/integration), which runs once per IO backend built here.
UNIT_SRC := $(wildcard tests/unit/t_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

$(B)/tests/t_%: $(OB)/tests/unit/t_%.o $(GATLING_LIBOBJS) $(IO_LIB) | $(B)/tests
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

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
# The HTTP suite again over HTTPS (GATLING_SCHEME=https, see conftest.py):
# on the first backend and its sanitizer build, to keep make check short
# (test_tls.py runs on every backend in the first pass, and run-check runs
# test_cgi.py and test_proxy.py over HTTPS and h2 on the other backends);
# CHECK_TLS_BUILDS="epoll poll sigio uring epoll-san" runs it on all of them.
CHECK_TLS_BUILDS ?= $(firstword $(CHECK_BACKENDS)) $(firstword $(CHECK_BACKENDS))-san
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

# the include layering of gatling/ (each folder's README says what it may include),
# no call circle there nor in bench/lg, bench's drivers sharing code through
# bench/benchkit only, and no function in io/ or gatling/ over 80 lines
.PHONY: layers
layers:
	$(PYTHON) tests/layers.py
	sh tests/funclen.sh

# make lint: gcc -fanalyzer, clang-tidy-14 (.clang-tidy) and cppcheck over every
# C file of gatling/ and io/ (tests/lint.sh; what is not a bug is in
# tests/lint.supp with its reason); a job of make check.  LINT_DEEP=1 adds
# clang-tidy's clang-analyzer-* (~30 CPU-min)
.PHONY: lint
lint:
	LINT_JOBS=$(CHECK_JOBS) sh tests/lint.sh "$(CPPFLAGS) $(IO_CPPFLAGS)"

.PHONY: check check-build check-quick
# every build make check tests: each backend, the first with sanitizers too
check-build: setup layers
	@set -e; for io in $(CHECK_BACKENDS); do \
	    $(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$$io tests-build; done; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(firstword $(CHECK_BACKENDS)) SAN=1 tests-build; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) all

# The fuzz smoke (with its build), the cross build and make lint run beside the
# test passes.
check: check-build
	$(PYTHON) tests/run-check -j$(CHECK_PASSES) --shards $(CHECK_SHARDS) \
	    $(CHECK_WHOLE_BUILDS:%=--whole %) $(CHECK_TLS_BUILDS:%=--https %) \
	    $(CHECK_H2_BUILDS:%=--h2 %) $(CHECK_H3_BUILDS:%=--h3 %) \
	    --job "fuzz=$(MAKE) --no-print-directory fuzz-check" \
	    --job "cross=$(MAKE) --no-print-directory cross" \
	    --job "lint=$(MAKE) --no-print-directory lint" \
	    $(CHECK_BACKENDS) $(firstword $(CHECK_BACKENDS))-san -- $(PYTEST_ARGS)

# one pass split three ways by module: the two CPUs stay busy
check-quick: setup layers
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(QUICK_IO) tests-build
	$(PYTHON) tests/run-check -j$(CHECK_PASSES) --shards 3 $(QUICK_IO) -- $(PYTEST_ARGS)
