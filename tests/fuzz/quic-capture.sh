#!/bin/sh
# tests/fuzz/quic-capture.sh: record fuzz_quic's seeds from real clients.
#
#   sh tests/fuzz/quic-capture.sh            (from the top of the tree; make builds the harness)
#
# build/fuzz/fuzz_quic with FUZZ_QUIC_CAPTURE=FILE serves on a free loopback port,
# running exactly what one fuzz input runs (the same randomness and clock), and
# writes every datagram it gets, and every 20 ms of silence, as fuzz_quic's
# records: so each seed replays a whole handshake and its requests.  The clients
# are Debian's gtlsclient (ngtcp2-client) and Python's aioquic; each run gives a
# whole seed and one of its first datagram alone (the client's Initial).  Seeds go
# to tests/fuzz/corpus/fuzz_quic/ (commit them); a client that is missing is skipped.
set -e
out=tests/fuzz/corpus/fuzz_quic
bin=build/fuzz/fuzz_quic
make --no-print-directory "$bin" >/dev/null
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# capture NAME CLIENT-COMMAND...: the server's port is in $PORT for the command
capture() {
    name=$1
    shift
    rm -f "$tmp/port"
    FUZZ_QUIC_CAPTURE="$tmp/$name" "$bin" >"$tmp/port" 2>"$tmp/log" &
    pid=$!
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        [ -s "$tmp/port" ] && break
        sleep 0.2
    done
    PORT=$(sed -n 's/^port //p' "$tmp/port")
    [ -n "$PORT" ] || { cat "$tmp/log"; kill "$pid"; exit 1; }
    export PORT
    if ! "$@" >"$tmp/client.log" 2>&1; then
        echo "quic-capture: $name: the client failed:" >&2
        tail -5 "$tmp/client.log" >&2
    fi
    [ -z "$QUIC_CAPTURE_VERBOSE" ] || cat "$tmp/client.log"
    sleep 0.3 # what the client's last datagrams bring
    kill -TERM "$pid"
    wait "$pid" || { cat "$tmp/log"; exit 1; }
    cp "$tmp/$name" "$out/$name"
    # the first record alone: the client's Initial
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); n = d[0] << 8 | d[1]
open(sys.argv[2], "wb").write(d[:2 + n])' "$out/$name" "$out/$name-initial"
    echo "quic-capture: $out/$name ($(wc -c <"$out/$name") bytes)"
}

if command -v gtlsclient >/dev/null; then
    capture gtls-get sh -c 'gtlsclient -q --exit-on-all-streams-close --timeout=5s 127.0.0.1 \
        $PORT https://localhost:$PORT/f.txt'
    capture gtls-many sh -c 'gtlsclient -q --exit-on-all-streams-close --timeout=5s 127.0.0.1 \
        $PORT https://localhost:$PORT/d/i.html https://localhost:$PORT/d/ \
        https://localhost:$PORT/big.bin https://localhost:$PORT/nothere'
else
    echo "quic-capture: no gtlsclient (apt-get install ngtcp2-client): skipped" >&2
fi

if python3 -c 'import aioquic' 2>/dev/null; then
    cat >"$tmp/aio.py" <<'EOF'
import asyncio, os, ssl
from aioquic.asyncio import connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration

class C(QuicConnectionProtocol):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.h3 = H3Connection(self._quic)
        self.done = {}

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            if isinstance(ev, (HeadersReceived, DataReceived)) and ev.stream_ended:
                self.done[ev.stream_id].set_result(None)

    async def get(self, path, extra=()):
        sid = self._quic.get_next_available_stream_id()
        self.done[sid] = asyncio.get_running_loop().create_future()
        self.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                   (b":authority", b"localhost"), (b":path", path)] + list(extra),
                             end_stream=True)
        self.transmit()
        await asyncio.wait_for(self.done[sid], 5)

async def main():
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    cfg.verify_mode = ssl.CERT_NONE
    async with connect("127.0.0.1", int(os.environ["PORT"]), configuration=cfg,
                       create_protocol=C) as c:
        await asyncio.gather(c.get(b"/f.txt"), c.get(b"/big.bin", [(b"range", b"bytes=5-99")]),
                             c.get(b"/d/i.html", [(b"if-none-match", b'"x"')]))
        c.close()

asyncio.run(main())
EOF
    capture aioquic-get python3 "$tmp/aio.py"
    # a handshake refused (ALPN nope), then small packets naming the closing connection
    cat >"$tmp/refused.py" <<'EOF'
import os, socket, ssl, time
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
cfg = QuicConfiguration(is_client=True, alpn_protocols=["nope"], server_name="localhost")
cfg.verify_mode = ssl.CERT_NONE
c = QuicConnection(configuration=cfg)
to = ("127.0.0.1", int(os.environ["PORT"]))
c.connect(to, now=time.time())
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for d, _ in c.datagrams_to_send(now=time.time()):
    s.sendto(d, to)
time.sleep(0.1)
cid = c.original_destination_connection_id
for _ in range(20):
    s.sendto(bytes([0xC0]) + b"\0\0\0\1" + bytes([len(cid)]) + cid + bytes(5), to)
    time.sleep(0.005)
EOF
    capture aioquic-refused python3 "$tmp/refused.py"
else
    echo "quic-capture: no aioquic (pip install aioquic): skipped" >&2
fi
