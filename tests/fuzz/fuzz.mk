# tests/fuzz: libFuzzer harnesses over the parsers (clang from Debian:
# packages clang and libclang-rt-14-dev, installed by tests/setup.sh).
#
#   make fuzz                          every harness, FUZZ_SECS (60) seconds each
#   make fuzz FUZZ_ONLY=fuzz_head FUZZ_SECS=1800
#   make fuzz-check                    every harness FUZZ_CHECK_SECS (2) s: part of make check
#   make fuzz-repro                    the crashes kept in tests/fuzz/repro/, once each
#
# Seeds come from tests/fuzz/corpus/<harness>/ (read-only); what the fuzzer
# finds goes to build/fuzz/corpus/<harness>/, crashes to
# build/fuzz/crashes/<harness>/, and a crash fails the target.  Crashes kept
# as regression inputs (where no unit test can reach the code: a whole site
# and its backend) are in tests/fuzz/repro/<harness>/, replayed with the seeds.

FUZZ_CC ?= $(shell command -v clang || command -v clang-14)
FUZZ_SECS ?= 60
# make check's smoke: each harness builds, replays its seeds (tests/fuzz/corpus,
# and t_fuzzcases the crashes found before) and fuzzes a moment; a harness
# took 5 s before (90 CPU-s of make check's phase 1 for 18), when each
# corpus replays in well under a second: the fuzzing is make fuzz's
FUZZ_CHECK_SECS ?= 2
FUZZ_NAMES := fuzz_head fuzz_te fuzz_chunked fuzz_target fuzz_range fuzz_accept fuzz_host \
              fuzz_htaccess fuzz_proxy fuzz_h2 fuzz_cgi_head fuzz_ftp fuzz_fcgi fuzz_resp \
              fuzz_cachectl fuzz_acme fuzz_dcz fuzz_options fuzz_h2b fuzz_h2bc fuzz_sitefiles \
              $(if $(filter 1,$(H3)),fuzz_quic)
FUZZ_ONLY ?= $(FUZZ_NAMES)
# Harnesses whose findings are known and not fixed yet: make fuzz-check only
# replays their seeds (it would fail at once on the known crash), and their
# repro inputs are left to make fuzz-repro.  None now: fuzz_h2bc's findings
# (issue 75, proxy_h2.c: a stream reset or ended before its HEADERS left for
# a backend still connecting, use after free; an empty last DATA frame, "out
# of memory"; a send failing outside the backend connection's event, never
# closed) are fixed, and its repro inputs replayed by make fuzz-check.
FUZZ_PENDING ?=
FUZZ_DIR := build/fuzz
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
               -DGIO_BACKEND_POLL -Iio -Igatling -Igatling/http -Igatling/site \
               -Igatling/handlers -Igatling/process -Itests/fuzz
FUZZ_LIBS := -lnghttp2 -lcurl -ljson-c -lldns -lssl -lcrypto -lowfat -lcrypt -lz -lzstd -lseccomp \
             -lbrotlienc
# with HTTP/3 where the top makefile found its libraries (H3=1): every object
# and harness alike, as the headers' structures depend on it
ifeq ($(H3),1)
  FUZZ_CFLAGS += -DHAVE_H3 $(shell pkg-config --cflags $(H3_PKGS))
  FUZZ_LIBS := $(shell pkg-config --libs $(H3_PKGS)) $(FUZZ_LIBS)
endif
# the gatling sources the parsers need (no event loop)
FUZZ_LIB := gatling/http/http_parse.c gatling/http/fcgi.c gatling/http/path.c gatling/http/byterange.c \
            gatling/site/encoding.c gatling/site/accept.c gatling/site/vhost.c gatling/site/fs.c \
            gatling/handlers/htaccess.c gatling/http/hbuf.c gatling/http/conditional.c \
            gatling/conn/proxyproto.c gatling/http/cgi_head.c gatling/ftp/ftp_parse.c \
            gatling/http/cachectl.c gatling/site/nets.c gatling/http/dcz.c \
            gatling/site/zcoder.c gatling/route/sitefiles_parse.c gatling/site/siphash.c

# fuzz_h2 and fuzz_quic run a whole site: every gatling source but main.c, on the poll loop
FUZZ_H2_LIB := $(filter-out gatling/process/main.c,$(wildcard gatling/*/*.c)) \
               io/gio.c io/gio_batch.c io/gio_os.c io/gio_tls.c io/gio_udp.c

# Each source compiled once under the sanitizers, for every harness that
# links it (each harness's clang line compiled them all again: ~500 compiles
# for 16 harnesses, a minute of the CPU make check's first phase waits on)
# (H3=0 and H3=1 apart: their flags differ)
FUZZ_OBJ := $(FUZZ_DIR)/obj$(if $(filter 1,$(H3)),-h3)
fuzz_objs = $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(1))
$(FUZZ_OBJ)/%.o: %.c
	@test -n "$(FUZZ_CC)" || { echo "fuzz: clang not found: run sh tests/setup.sh as root"; exit 1; }
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<
-include $(wildcard $(FUZZ_OBJ)/*/*.d $(FUZZ_OBJ)/*/*/*.d $(FUZZ_OBJ)/*/*/*/*.d)

# fuzz_options: the command line and the options file (gatling/process/options.c) with
# the checks of the modules it calls (acme_setup.c, proxy's rules and pools):
# linked as fuzz_h2, with every source but main.c
$(FUZZ_DIR)/fuzz_h2 $(FUZZ_DIR)/fuzz_quic $(FUZZ_DIR)/fuzz_options $(FUZZ_DIR)/fuzz_h2b \
$(FUZZ_DIR)/fuzz_h2bc: \
                                          $(FUZZ_DIR)/%: \
                                          $(FUZZ_OBJ)/tests/fuzz/%.o \
                                          $(call fuzz_objs,$(FUZZ_H2_LIB))
	$(FUZZ_CC) $(FUZZ_CFLAGS) -pthread -o $@ $^ $(FUZZ_LIBS)

# fuzz_acme: the ACME client's parsers (json-c, and curl_getdate for Retry-After)
# and DNS-01's key file parser (OPENSSL_cleanse; its loader opens the file by
# site/privfs.c's rule for secrets), and the schedule the parsed times feed
$(FUZZ_DIR)/fuzz_acme: $(FUZZ_OBJ)/tests/fuzz/fuzz_acme.o \
                       $(call fuzz_objs,gatling/acme/acme_parse.c gatling/acme/acme_sched.c \
                                        gatling/acme/acme_dnskey.c gatling/site/privfs.c)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -ljson-c -lcurl -lcrypto

$(FUZZ_DIR)/%: $(FUZZ_OBJ)/tests/fuzz/%.o $(call fuzz_objs,$(FUZZ_LIB))
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -lowfat -lcrypt -lz -lzstd -lbrotlienc

.PHONY: fuzz fuzz-build fuzz-check fuzz-repro
fuzz-build: $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)

fuzz_repro = $(if $(filter $(1),$(FUZZ_PENDING)),,$(wildcard tests/fuzz/repro/$(1)))

# run-fuzz: one harness for $(2) seconds over its seeds (and kept crashes); a crash fails
define run-fuzz
	@mkdir -p $(FUZZ_DIR)/corpus/$(1) $(FUZZ_DIR)/crashes/$(1)
	@echo "fuzz: $(1) for $(2) s"
	@$(FUZZ_DIR)/$(1) -max_total_time=$(2) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_DIR)/crashes/$(1)/ \
	    $(if $(wildcard tests/fuzz/$(1).dict),-dict=tests/fuzz/$(1).dict) \
	    $(FUZZ_DIR)/corpus/$(1) tests/fuzz/corpus/$(1) $(call fuzz_repro,$(1)) \
	    >$(FUZZ_DIR)/$(1).log 2>&1 || \
	    { tail -40 $(FUZZ_DIR)/$(1).log; echo "fuzz: $(1) FAILED: see $(FUZZ_DIR)/crashes/$(1)/"; exit 1; }
	@grep -E "stat::number_of_executed_units|stat::peak_rss_mb" $(FUZZ_DIR)/$(1).log | \
	    sed 's/^/    /'

endef

fuzz: fuzz-build
	$(foreach f,$(FUZZ_ONLY),$(call run-fuzz,$(f),$(FUZZ_SECS)))

# run-inputs: one harness over the files $(2), each once; a crash fails
define run-inputs
	@echo "fuzz: $(1) over its $(words $(2)) seeds"
	@$(FUZZ_DIR)/$(1) -timeout=10 -rss_limit_mb=2048 $(2) >$(FUZZ_DIR)/$(1).log 2>&1 || \
	    { tail -40 $(FUZZ_DIR)/$(1).log; echo "fuzz: $(1) FAILED"; exit 1; }

endef

fuzz-check: fuzz-build
	$(foreach f,$(filter-out $(FUZZ_PENDING),$(FUZZ_NAMES)),$(call run-fuzz,$(f),$(FUZZ_CHECK_SECS)))
	$(foreach f,$(filter $(FUZZ_PENDING),$(FUZZ_NAMES)),\
	    $(if $(wildcard tests/fuzz/corpus/$(f)/*),\
	        $(call run-inputs,$(f),$(wildcard tests/fuzz/corpus/$(f)/*))))

# every kept crash once, each on its own: which pass, which still fail
fuzz-repro: fuzz-build
	@fail=0; for f in $(wildcard tests/fuzz/repro/*/*); do \
	    h=$$(basename $$(dirname $$f)); \
	    if $(FUZZ_DIR)/$$h -timeout=10 -rss_limit_mb=2048 $$f >$(FUZZ_DIR)/repro.log 2>&1; then \
	        echo "fuzz-repro: $$f: passes"; \
	    else \
	        echo "fuzz-repro: $$f: FAILS: \
	            $$(grep -m1 -E 'ERROR: Addr|invariant broken|ERROR: libFuzzer' \
	            $(FUZZ_DIR)/repro.log)"; fail=1; \
	    fi; \
	done; exit $$fail
