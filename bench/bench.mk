# bench/: the benchmark tools; see bench/README for the map.  Included by the
# root GNUmakefile, which provides $(B) and $(IO_LIB).
#
#   bench/lg/   load generators (httpbench, bench, lg_selftest) on io/
#   bench/kb/   kernel micro-benchmarks (kb-*), libc only
#   bench/gio/  micro-benchmark of io/ itself (gio_timers)
#   bench/ref/  reference servers (trivial-server)
#
# The binaries stay where the drivers, the tests and make install look for
# them: $(B)/httpbench, $(B)/bench, $(B)/kb-*, ... and the copies
# bench/httpbench, bench/bench.  Objects go to $(BO)/<folder>/, shared by
# every backend's build (see the GNUmakefile).
BO := $(OB)/bench-obj

$(BO)/%.o: bench/%.c $(OB).flags
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# --- bench/lg: the load generators --------------------------------------
LG_LIB := lg lg_ftp lg_h2 lg_hist lg_http lg_net lg_tls
LG_OBJ := $(LG_LIB:%=$(BO)/lg/%.o)
BENCH_BIN := $(B)/httpbench $(B)/bench
# self-test of the parser and the histogram, run by tests/integration/bench/test_loadgen.py
BENCH_TEST := $(B)/lg_selftest

$(B)/httpbench: $(BO)/lg/httpbench.o $(BO)/lg/httpbench_run.o $(LG_OBJ) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bench: $(BO)/lg/bench.o $(BO)/lg/bench_common.o $(BO)/lg/bench_run.o \
            $(BO)/lg/bench_surge.o $(BO)/lg/bench_h3.o $(BO)/lg/bench_h3_cb.o \
            $(BO)/lg/bench_conn.o $(BO)/lg/bench_report.o $(LG_OBJ) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/lg_selftest: $(BO)/lg/lg_selftest.o $(LG_OBJ) $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the HTTP/2 flood attacker that reconnects after each GOAWAY (bench/floodmem):
# libc, pthreads and OpenSSL only
$(B)/h2flood: $(BO)/lg/h2flood.o | $(B)
	$(CC) $(LDFLAGS) -o $@ $^ -lssl -lcrypto -pthread

# copies for the user, like gatling/gatling: the last build asked for wins.
# cp + mv: a copy over a binary that is running fails with ETXTBSY, a rename does not.
bench/httpbench: $(B)/httpbench FORCE
	@cmp -s $< $@ || { echo "cp $< $@"; cp $< $@.tmp && mv -f $@.tmp $@; }
bench/bench: $(B)/bench FORCE
	@cmp -s $< $@ || { echo "cp $< $@"; cp $< $@.tmp && mv -f $@.tmp $@; }

all: $(BENCH_BIN) $(BENCH_TEST) $(B)/h2flood bench/httpbench bench/bench
tests-build: $(BENCH_TEST) $(B)/h2flood
CLEAN_EXTRA += bench/httpbench bench/bench bench/httpbench.tmp bench/bench.tmp

ifeq ($(shell uname -s),Linux)
# --- bench/gio: the cost of deadlines as descriptors grow -----------------
$(B)/gio_timers: $(BO)/gio/gio_timers.o $(IO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
all: $(B)/gio_timers

# --- bench/kb: the kernel micro-benchmarks (man/kbench.1) -----------------
# Plain C on libc, no io/, so that they measure the kernel and nothing of
# ours.  kb-fork-static is kb-fork linked statically (not with the
# sanitizers, which cannot be).
KB_TOOLS := socket bind accept fork thread mmap manymap
KB_BIN := $(KB_TOOLS:%=$(B)/kb-%)
$(B)/kb-%: $(BO)/kb/kb_%.o $(BO)/kb/kb.o | $(B)
	$(CC) $(LDFLAGS) -o $@ $^ -pthread
# made through a pattern, so make would delete them as intermediates, and
# their .d files would then have the next make rebuild every kb-*
.SECONDARY: $(KB_TOOLS:%=$(BO)/kb/kb_%.o)
ifeq ($(SAN),)
KB_BIN += $(B)/kb-fork-static
$(BO)/kb/kb_fork_static.o: bench/kb/kb_fork.c $(OB).flags
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DKB_STATIC -c -o $@ $<
$(B)/kb-fork-static: $(BO)/kb/kb_fork_static.o $(BO)/kb/kb.o | $(B)
	$(CC) $(LDFLAGS) -static -o $@ $^
endif
# kb-stream: bulk throughput (man/kb-stream.1), five files
KB_BIN += $(B)/kb-stream
KB_STREAM_OBJ := $(addprefix $(BO)/kb/,kb_stream.o kb_stream_tcp.o kb_stream_udp.o kb_stream_relay.o \
                                         kb_stream_util.o)
$(B)/kb-stream: $(KB_STREAM_OBJ) | $(B)
	$(CC) $(LDFLAGS) -o $@ $^ -pthread
all: $(KB_BIN)
tests-build: $(KB_BIN)

# --- bench/ref: trivial-server, the floor bench/fastpath measures against -
# (one read, one write per request; epoll)
$(B)/trivial-server: $(BO)/ref/trivial_server.o | $(B)
	$(CC) $(LDFLAGS) -o $@ $^
all: $(B)/trivial-server
tests-build: $(B)/trivial-server
endif
