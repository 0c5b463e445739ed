"""Streams in flight across a reload, a SIGTERM and -R's last request, on a
busy machine (issue 78, item 8): bench over HTTP/2 (TLS) and HTTP/3, ten
reloads each, with two busy loops taking the CPUs beside the server and the
client.  Not one request may be lost (sent and never answered), refused and
sent again, or fail.  Check-all only (tests/run-check's ALL_ONLY): a minute
and a half of load."""
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import (end_upgrades, gone, http_only, https_port, make_docroot, start_server,
                      wait_for)
from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
from test_h2 import reload_under_load, served

# the load is bench's own (h2 over TLS, h3); the status page it waits on is asked over plain HTTP
pytestmark = [http_only, pytest.mark.skipif(sys.platform != "linux", reason="Linux's reload")]

TREE = {"f.txt": "hello\n"}
PROTOS = {"h2": ["--h2", "-k"], "h3": ["--h3", "--insecure"]}
KEYS = ("requests", "responses", "retried", "lost", "errors_total")


class Busy:
    """Two loops that spin, one per CPU, for the test's length."""

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(2)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def bench(build, proto, port, secs, extra=()):
    exe = os.path.join(build.dir, "bench")
    if not os.access(exe, os.X_OK):
        pytest.skip("no bench built")
    return subprocess.Popen([exe, "-q", "-J", *PROTOS[proto], "-c", "10", "--streams", "4",
                             "-d", str(secs), *extra, "https://127.0.0.1:%d/f.txt" % port],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def counts(out):
    res = json.loads(out)
    return {k: res[k] for k in KEYS}


def server(build, tmp_path, *args):
    root = str(tmp_path / "www")
    make_docroot(root, TREE)
    srv = start_server(build, root, ("-T", "10", "-n", "-S", "-C",
                                     os.path.join(pki_dir(), "certs"), "-e", "0", *args))
    return srv, https_port(srv)


@pytest.mark.parametrize("proto", sorted(PROTOS))
def test_ten_reloads_lose_nothing_beside_busy_loops(build, tmp_path, proto):
    """Ten --reloads, each under 10 connections x 4 streams: every request
    answered in each (none lost, none refused by a GOAWAY and sent again,
    no error), the old process drained and gone before the next."""
    srv, tls = server(build, tmp_path, "-R", "0")
    pids = [srv.pid]
    got = []
    try:
        with Busy():
            for _ in range(10):
                # -d 8: beside make check-all's other jobs and the ledger's
                # callgrind, a reload took longer than -d 4 (inconclusive)
                load = bench(build, proto, tls, 8)
                out, err = reload_under_load(srv, build, pids, load, "bench")
                got.append(counts(out))
                wait_for(lambda: gone(pids[-2]), 30, "the old process draining and exiting")
        bad = [g for g in got if g["retried"] or g["lost"] or g["errors_total"] or
               g["requests"] != g["responses"] or g["requests"] < 1000]
        assert not bad, got
    finally:
        end_upgrades(srv, pids)


@pytest.mark.parametrize("proto", sorted(PROTOS))
def test_sigterm_answers_every_stream_in_flight(build, tmp_path, proto):
    """SIGTERM under load: the streams in flight are answered before the
    process ends (none lost); the new connections bench then opens are
    refused (its errors), as the server is gone."""
    srv, tls = server(build, tmp_path)
    try:
        with Busy():
            load = bench(build, proto, tls, 4)
            base = served(srv.port)
            wait_for(lambda: served(srv.port) > base + 2000, 20, "bench under way")
            os.kill(srv.pid, signal.SIGTERM)
            out, err = load.communicate(timeout=60)
        wait_for(lambda: gone(srv.pid), 20, "the server ending")
    finally:
        end_upgrades(srv, [srv.pid])
    got = counts(out)
    assert got["lost"] == 0 and got["requests"] == got["responses"] > 1000, (got, err[-500:])


@pytest.mark.parametrize("proto", sorted(PROTOS))
def test_R_closes_connections_without_losing_a_stream(build, tmp_path, proto):
    """-R 5: every connection's fifth request ends it, gracefully, hundreds
    of times in three seconds: no request lost, refused or failed."""
    srv, tls = server(build, tmp_path, "-R", "5")
    try:
        with Busy():
            out, err = bench(build, proto, tls, 3).communicate(timeout=60)
    finally:
        end_upgrades(srv, [srv.pid])
    got = counts(out)
    res = json.loads(out)
    assert res["connects"] > 100, res  # -R did end connections
    assert (got["lost"], got["retried"], got["errors_total"]) == (0, 0, 0), got
    assert got["requests"] == got["responses"] > 500, got
