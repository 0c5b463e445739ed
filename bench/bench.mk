# bench/: the load generators (httpbench, bench) on io/; see bench/README.
# Included by the root GNUmakefile, which provides $(B) and $(IO_LIB).
# Objects go to $(B)/lg/, not $(B)/bench/: $(B)/bench is the binary (the
# same reason gatling.mk uses $(B)/srv/).

BENCH_COMMON := bench/lg.c bench/lg_hist.c bench/lg_http.c bench/lg_net.c bench/lg_tls.c
BENCH_COMMON_OBJ := $(BENCH_COMMON:bench/%.c=$(B)/lg/%.o)
BENCH_BIN := $(B)/httpbench $(B)/bench
# self-test of the parser and the histogram, run by tests/integration/test_loadgen.py
BENCH_TEST := $(B)/lg_selftest

$(B)/lg/%.o: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/httpbench: $(B)/lg/httpbench.o $(B)/lg/httpbench_run.o $(BENCH_COMMON_OBJ) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bench: $(B)/lg/bench.o $(B)/lg/bench_run.o $(BENCH_COMMON_OBJ) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/lg_selftest: $(B)/lg/lg_selftest.o $(BENCH_COMMON_OBJ) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# copies for the user, like gatling/gatling: the last plain build wins.
# cp + mv: a copy over a binary that is running fails with ETXTBSY, a rename does not.
bench/httpbench: $(B)/httpbench
	cp $< $@.tmp && mv -f $@.tmp $@
bench/bench: $(B)/bench
	cp $< $@.tmp && mv -f $@.tmp $@

all: $(BENCH_BIN) $(BENCH_TEST) bench/httpbench bench/bench
tests-build: $(BENCH_TEST)
CLEAN_EXTRA += bench/httpbench bench/bench bench/httpbench.tmp bench/bench.tmp

# gio_timers: the cost of deadlines as descriptors grow (Linux)
ifeq ($(shell uname -s),Linux)
$(B)/gio_timers: $(B)/lg/gio_timers.o $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
all: $(B)/gio_timers
endif

# The kernel micro-benchmarks (man/kbench.1): plain C on libc, no io/, so
# that they measure the kernel and nothing of ours.  kb-fork-static is
# kb-fork linked statically (not with the sanitizers, which cannot be).
ifeq ($(shell uname -s),Linux)
KB_TOOLS := socket bind accept fork thread mmap manymap
KB_BIN := $(KB_TOOLS:%=$(B)/kb-%)
$(B)/kb-%: $(B)/lg/kb_%.o $(B)/lg/kb.o
	$(CC) $(LDFLAGS) -o $@ $^ -pthread
ifeq ($(SAN),)
KB_BIN += $(B)/kb-fork-static
$(B)/lg/kb_fork_static.o: bench/kb_fork.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DKB_STATIC -c -o $@ $<
$(B)/kb-fork-static: $(B)/lg/kb_fork_static.o $(B)/lg/kb.o
	$(CC) $(LDFLAGS) -static -o $@ $^
endif
all: $(KB_BIN)
tests-build: $(KB_BIN)
endif

# trivial-server: the floor that bench/fastpath measures servers against
# (one read, one write per request; Linux: epoll)
ifeq ($(shell uname -s),Linux)
$(B)/trivial-server: $(B)/lg/trivial_server.o
	$(CC) $(LDFLAGS) -o $@ $^
all: $(B)/trivial-server
tests-build: $(B)/trivial-server
endif
