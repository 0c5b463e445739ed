# io/: the event layer and output batches, as a static library.
IO_SRC := io/gio.c io/gio_batch.c io/gio_os.c io/gio_udp.c
IO_LIB := $(B)/libgio.a
# gio_tls (OpenSSL) is in the archive too, but only programs that call it link
# it; it stays out of IO_SRC, which make cross compiles for the BSDs
IO_TLS_SRC := io/gio_tls.c

$(IO_LIB): $(IO_SRC:%.c=$(B)/%.o) $(IO_TLS_SRC:%.c=$(B)/%.o)
	$(AR) rcs $@ $^

# gio.c includes exactly one backend file
$(B)/io/gio.o: io/gio_$(IO).c

# make cross: compile io/ with IO=kqueue and link the io unit tests for the
# BSDs and macOS with zig cc (python3 -m pip install ziglang; tests/setup.sh
# puts it in build/python).  There is no
# BSD host here, so this is a compile-and-link check against the real system
# headers and libc, not a run.  Skipped, with the reason, when zig is absent.
CROSS_TARGETS ?= x86_64-freebsd x86_64-openbsd x86_64-macos
CROSS_TESTS   := t_gio_loop t_gio_timer t_gio_batch t_gio_sigio t_gio_udp
ZIGCC         ?= PYTHONPATH=$(CURDIR)/build/python$${PYTHONPATH:+:$$PYTHONPATH} \
                 $(PYTHON) -m ziglang cc
CROSS_FLAGS   := -std=gnu11 -O2 -Wall -Wextra -Werror -DGIO_BACKEND_KQUEUE -Iio -Itests/unit

cross:
	@if ! $(ZIGCC) --version >/dev/null 2>&1; then \
	    echo "cross: skipped: zig not available (python3 -m pip install ziglang)"; exit 0; fi; \
	set -e; for t in $(CROSS_TARGETS); do \
	    mkdir -p build/cross/$$t; \
	    for p in $(CROSS_TESTS); do \
	        $(ZIGCC) -target $$t $(CROSS_FLAGS) -o build/cross/$$t/$$p \
	            tests/unit/$$p.c $(IO_SRC) || { echo "cross: $$t: FAILED ($$p)"; exit 1; }; \
	    done; \
	    echo "cross: $$t: ok (IO=kqueue; linked $(CROSS_TESTS))"; \
	done
