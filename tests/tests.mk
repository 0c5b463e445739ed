# tests/: C unit tests (tests/unit/t_*.c, TAP) and the pytest integration
# suite (tests/integration), which runs once per IO backend built here.
UNIT_SRC := $(wildcard tests/unit/t_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

$(B)/tests/t_%: $(B)/tests/unit/t_%.o $(GATLING_LIBOBJS) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the unit tests name gatling's headers without their folder
GATLING_INC := -Igatling $(GATLING_DIRS:%=-Igatling/%)
$(B)/tests/unit/%.o: CPPFLAGS += $(GATLING_INC) -Itests/unit

.PHONY: tests-build
tests-build: $(B)/gatling $(UNIT_BIN) $(BENCH_BIN)

# Backends that build on this host; each runs the whole suite.
CHECK_BACKENDS ?= $(shell sh tests/backends.sh "$(CC)")
# The HTTP suite again over HTTPS (GATLING_SCHEME=https, see conftest.py):
# on the first backend and its sanitizer build, to keep make check short
# (test_tls.py runs on every backend in the first pass);
# CHECK_TLS_BUILDS="epoll poll sigio uring epoll-san" runs it on all of them.
CHECK_TLS_BUILDS ?= $(firstword $(CHECK_BACKENDS)) $(firstword $(CHECK_BACKENDS))-san
# what the second pass leaves out: not HTTP tests, or run once already
TLS_SKIP = --ignore=tests/integration/test_unit.py --ignore=tests/integration/test_package.py \
           --ignore=tests/integration/test_kbench.py --ignore=tests/integration/test_tls.py \
           --ignore=tests/integration/test_loadgen.py --ignore=tests/integration/test_layers.py

# the builds run a job per CPU; the tests one at a time (some compare costs)
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# the include layering of gatling/ (each folder's README says what it may include),
# and no function in io/ or gatling/ over 80 lines
.PHONY: layers
layers:
	$(PYTHON) tests/layers.py
	sh tests/funclen.sh

check: setup layers
	@set -e; for io in $(CHECK_BACKENDS); do \
	    $(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$$io tests-build; done; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) IO=$(firstword $(CHECK_BACKENDS)) SAN=1 tests-build; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) all; \
	$(MAKE) --no-print-directory cross; \
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) fuzz-build; \
	$(MAKE) --no-print-directory fuzz-check; \
	GATLING_BUILDS="$(CHECK_BACKENDS) $(firstword $(CHECK_BACKENDS))-san" \
	    $(PYTHON) -m pytest tests/integration -q -p no:cacheprovider $(PYTEST_ARGS); \
	GATLING_SCHEME=https GATLING_BUILDS="$(CHECK_TLS_BUILDS)" \
	    $(PYTHON) -m pytest tests/integration -q -p no:cacheprovider $(TLS_SKIP) $(PYTEST_ARGS)
