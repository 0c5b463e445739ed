# io/: the event layer and output batches, as a static library.
IO_SRC := io/gio.c io/gio_batch.c io/gio_os.c
IO_LIB := $(B)/libgio.a

$(IO_LIB): $(IO_SRC:%.c=$(B)/%.o)
	$(AR) rcs $@ $^

# gio.c includes exactly one backend file
$(B)/io/gio.o: io/gio_$(IO).c
