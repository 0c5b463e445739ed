# gatling/: the server, one folder per layer (README in each; tests/layers.py
# checks who includes whom).  The folders are gatling/LAYERS' (the one list,
# top to bottom), less gatling/ itself and io/; make layers checks that they
# are.  GATLING_LIBOBJS (everything but main) is also linked into the C unit
# tests.  Objects go to $(OB)/srv/ (shared by every backend's build: see the
# GNUmakefile), binaries to $(B).
GATLING_DIRS := $(filter-out gatling io,$(shell sed -e 's/\#.*//' gatling/LAYERS | \
                    awk 'NF { print $$1 }'))
GATLING_SRC := $(filter-out gatling/process/main.c,$(wildcard $(GATLING_DIRS:%=gatling/%/*.c)))
GATLING_LIBOBJS := $(GATLING_SRC:gatling/%.c=$(OB)/srv/%.o)

# headers are named from gatling/ ("site/fcache.h"); a folder's own by name alone
$(OB)/srv/%.o: CPPFLAGS += -Igatling
$(OB)/srv/%.o: gatling/%.c $(OB).flags
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/gatling: $(OB)/srv/process/main.o $(GATLING_LIBOBJS) $(IO_LIB)
	$(CC) $(LDFLAGS) $(COV_LDWRAP) -o $@ $^ $(LDLIBS)

all: gatling/gatling

# the copy for the user follows the last build asked for, whichever is newer
# (make H3=0 gatling/gatling after make check copied nothing: the HTTP/3
# binary there was newer than build/epoll-noh3/gatling)
gatling/gatling: $(B)/gatling FORCE
	@cmp -s $< $@ || { echo "cp --remove-destination $< $@"; cp --remove-destination $< $@; }
LDLIBS += -lcrypt
LDLIBS += -lz
LDLIBS += -lzstd
LDLIBS += -lbrotlienc
LDLIBS += -lssl -lcrypto
LDLIBS += -lnghttp2
LDLIBS += -lseccomp # --sandbox (process/sandbox.c)
# the ACME client (gatling/acme/): HTTPS to the CA, its JSON; DNS-01's RFC 2136
# updates signed with TSIG (libldns)
LDLIBS += -lcurl -ljson-c -lldns
LDLIBS += -pthread -lm
CFLAGS += -pthread

# /server-status's script and style sheet go into the binary by .incbin
# (route/status_assets.c): its object is as new as they are
$(OB)/srv/route/status_assets.o: gatling/route/status.js gatling/route/status.css
