"""Virtual hosts: the Host header, lower-cased and with its port replaced by
the server's (unless -t), names a directory below the document root;
"default/" serves unknown hosts, then the root itself (unless -v); -H turns
virtual hosting off.  Unusable Host values are 400.

Directories named after the server's port are made once it listens (the
server finds a name's directory once a second, before it is asked: handlers/host.h)."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import (MUX, Client, assert_refused, build_request, fetch, h1_only, http_only,
                      raw_exchange, recv_to_eof)
from feature_helpers import assert_ok, assert_status, module_server

ROOT_F = b"from the document root\n"
DEFAULT_F = b"from default/\n"
EXAMPLE_F = b"from example.org:PORT/\n"
KEPT_F = b"from example.org:1234/\n"
V6_F = b"from [::1]:PORT/\n"

BASE_TREE = {"f.txt": ROOT_F, "rootonly.txt": b"only in the root\n",
             "example.org:1234": {"f.txt": KEPT_F}}
TREE = dict(BASE_TREE, default={"f.txt": DEFAULT_F, "defonly.txt": b"only in default\n"})


def add_port_dirs(srv):
    """example.org:PORT/ and [::1]:PORT/ for the server's actual port."""
    ex = os.path.join(srv.docroot, "example.org:%d" % srv.port)
    os.makedirs(os.path.join(ex, "sub"))
    with open(os.path.join(ex, "f.txt"), "wb") as f:
        f.write(EXAMPLE_F)
    with open(os.path.join(ex, "sub", "index.html"), "wb") as f:
        f.write(b"<p>example sub</p>\n")
    v6 = os.path.join(srv.docroot, "[::1]:%d" % srv.port)
    os.makedirs(v6)
    with open(os.path.join(v6, "f.txt"), "wb") as f:
        f.write(V6_F)
    shut = os.path.join(srv.docroot, "closed.test:%d" % srv.port)
    os.makedirs(shut, mode=0o700)  # others may not search it: nothing there is served
    with open(os.path.join(shut, "f.txt"), "wb") as f:
        f.write(b"from a closed vhost directory\n")
    os.symlink("closed.test:%d" % srv.port, os.path.join(srv.docroot, "alias.test:%d" % srv.port))


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    yield from module_server(build, tmp_path_factory, "vhost", TREE, started=add_port_dirs)


def own(gatling, tree, *flags):
    s = gatling(tree, args=("-T", "10") + flags)
    add_port_dirs(s)
    return s


def get(srv, host, target="/f.txt", version="HTTP/1.1"):
    return fetch(srv.port, target, host=host, version=version)


# (host, version) of a request without Host: HTTP/1.0 (HTTP/1.1 requires one);
# none over HTTP/2 (where libnghttp2 resets a stream without :authority or Host)
# and HTTP/3, which carry no HTTP/1.0
NO_HOST = [] if MUX else [(None, "HTTP/1.0")]


# --------------------------------------------------------------------------
# Choosing the directory

@pytest.mark.parametrize("host", ["example.org", "EXAMPLE.ORG:1234", "Example.Org:{port}",
                                  "example.org:80", "example.org:0"])
def test_host_names_vhost_directory(srv, host):
    # lower-cased, and the port replaced by the one the request arrived on
    assert_ok(get(srv, host.format(port=srv.port)), EXAMPLE_F, "Host: " + host)


@pytest.mark.parametrize("host", ["unknown.test", "localhost", "127.0.0.1", "127.0.0.1:{port}",
                                  "example.com", "www.example.org"])
def test_unknown_host_uses_default(srv, host):
    assert_ok(get(srv, host.format(port=srv.port)), DEFAULT_F, "Host: " + host)


@pytest.mark.parametrize("host", ["closed.test", "alias.test"])
def test_closed_vhost_directory_403(srv, host):
    """A vhost directory others may not search is the vhost's, and 403 (not
    default/'s): it is below the root, on the way to every file (issue 35)."""
    r = get(srv, host)
    assert_status(r, 403, "Host: " + host)
    assert b"closed" not in r.body, r


@h1_only("a request without Host (libnghttp2 resets one without :authority)")
def test_http10_without_host_uses_default(srv):
    assert_ok(get(srv, None, version="HTTP/1.0"), DEFAULT_F, "HTTP/1.0 without Host")


@pytest.mark.parametrize("host", ["[::1]:{port}", "[::1]", "[::1]:9"])
def test_ipv6_literal_host(srv, host):
    assert_ok(get(srv, host.format(port=srv.port)), V6_F, "Host: " + host)


def test_ipv6_other_spelling_is_another_name(srv):
    # the directory name is the Host as written (lower-cased): another spelling, default/
    assert_ok(get(srv, "[0:0:0:0:0:0:0:1]"), DEFAULT_F)


def test_vhost_is_isolated(srv):
    # a file that exists only in the root or in default/ is not reachable through a vhost
    assert_status(get(srv, "example.org", "/rootonly.txt"), 404, "root file via vhost")
    assert_status(get(srv, "example.org", "/defonly.txt"), 404, "default file via vhost")
    assert_status(get(srv, "unknown.test", "/rootonly.txt"), 404, "root file via default")
    # dot segments cannot climb out of the vhost directory into a sibling
    for target in ("/../default/f.txt", "/%2e%2e/default/f.txt", "/../../default/f.txt"):
        r = get(srv, "example.org", target)
        assert_status(r, (400, 404), target)
    for target in ("/../f.txt", "/%2e%2e/%2E%2E/f.txt"):
        assert_ok(get(srv, "example.org", target), EXAMPLE_F, target)


def test_vhost_directory_redirect_and_index(srv):
    r = get(srv, "example.org", "/sub")
    assert_status(r, 301)
    assert r.header("Location") in ("/sub/", "http://example.org/sub/"), r
    assert_ok(get(srv, "example.org", "/sub/"), b"<p>example sub</p>\n")


def test_vhosts_on_one_connection(srv):
    # the directory is chosen per request, not per connection
    with Client(srv.port) as c:
        for host, body in [("example.org", EXAMPLE_F), ("other.test", DEFAULT_F),
                           ("[::1]", V6_F), ("EXAMPLE.org", EXAMPLE_F)]:
            assert_ok(c.request("/f.txt", host=host), body, host)


def test_absolute_form_target_host_wins(srv):
    # RFC 9112 3.2.2: with an absolute-form target the server MUST ignore the
    # Host header and use the target's authority
    r = raw_exchange(srv.port, b"GET http://example.org/f.txt HTTP/1.1\r\n"
                               b"Host: other.test\r\n\r\n")
    assert_ok(r, EXAMPLE_F, "absolute-form http://example.org/ with Host: other.test")


# --------------------------------------------------------------------------
# Unusable Host values

@pytest.mark.parametrize("host", ["..", "a/b", ".hidden", "a..b", "", "example.org:12x",
                                  "[::1", "[zz]", "[::1]x", "exa mple.org", "a\\b", "a%2fb",
                                  ".", "x" * 256])
def test_bad_host_400(srv, host):
    r = raw_exchange(srv.port, build_request("/f.txt", host=host))
    assert_refused(r, 400, "Host: %r" % host)  # over HTTP/2 libnghttp2 resets some
    assert r is None or (ROOT_F not in r.body and DEFAULT_F not in r.body), r


# --------------------------------------------------------------------------
# Flags: no default/, -v, -H, -t

def test_no_default_falls_back_to_root(gatling):
    s = own(gatling, BASE_TREE)
    assert_ok(get(s, "unknown.test"), ROOT_F, "unknown host, no default/")
    for host, version in NO_HOST:
        assert_ok(get(s, host, version=version), ROOT_F, "HTTP/1.0 without Host, no default/")
    assert_ok(get(s, "example.org"), EXAMPLE_F)


def test_v_never_serves_the_root(gatling):
    s = own(gatling, BASE_TREE, "-v")
    for host, version in [("unknown.test", "HTTP/1.1")] + NO_HOST:
        r = get(s, host, version=version)
        assert_status(r, 404, "-v without default/: Host %r" % host)
        assert ROOT_F not in r.body, r
    assert_status(get(s, "unknown.test", "/rootonly.txt"), 404)
    assert_ok(get(s, "example.org"), EXAMPLE_F, "-v, matching directory")


def test_v_with_default(gatling):
    s = own(gatling, TREE, "-v")
    assert_ok(get(s, "unknown.test"), DEFAULT_F, "-v with default/")


def test_H_serves_root_always(gatling):
    s = own(gatling, TREE, "-H")
    for host in ("example.org", "unknown.test", "[::1]", "EXAMPLE.ORG:1234"):
        assert_ok(get(s, host), ROOT_F, "-H, Host: " + host)
    assert_ok(get(s, "example.org", "/default/f.txt"), DEFAULT_F, "-H: default/ is a plain dir")


def test_t_keeps_host_port(gatling):
    s = own(gatling, TREE, "-t")
    assert_ok(get(s, "example.org:1234"), KEPT_F, "-t, Host: example.org:1234")
    assert_ok(get(s, "EXAMPLE.ORG:1234"), KEPT_F, "-t, Host: EXAMPLE.ORG:1234")
    assert_ok(get(s, "example.org"), EXAMPLE_F, "-t, Host without port: the local port")
    assert_ok(get(s, "example.org:%d" % s.port), EXAMPLE_F)
    assert_ok(get(s, "example.org:4321"), DEFAULT_F, "-t, no such directory")
    assert_status(raw_exchange(s.port, build_request("/f.txt", host="example.org:123456")),
                  400, "-t, a port of six digits")


# --------------------------------------------------------------------------
# A real IPv6 connection

def ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


@http_only
@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
def test_ipv6_connection(gatling):
    s = gatling(TREE, args=("-T", "10", "-i", "::1"))
    add_port_dirs(s)
    assert s.listeners and s.listeners[0][0] == "::1", s.errlog
    with socket.create_connection(("::1", s.port), timeout=5) as sock:
        sock.sendall(b"GET /f.txt HTTP/1.1\r\nHost: [::1]:%d\r\nConnection: close\r\n\r\n"
                     % s.port)
        data = recv_to_eof(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), data
    assert body == V6_F, data


def test_name_without_port_serves_every_port(gatling):
    """A directory named for the host alone (bare.test) serves its requests on
    any port where bare.test:PORT is absent, before default/ (issue 55:
    --acme takes a certificate's name from such a directory, which no
    request ever reached); bare.test:PORT, where it exists, comes first."""
    srv = gatling(dict(TREE, **{"bare.test": {"f.txt": b"from bare.test/\n"},
                                "bare.test:1": {"f.txt": b"from bare.test:1/\n"}}),
                  args=("-T", "10"))
    for host in ("bare.test", "BARE.test:%d" % srv.port, "bare.test:1"):
        assert_ok(get(srv, host), b"from bare.test/\n", "Host: " + host)
    # g.txt: a name the file cache has not seen (it keeps f.txt's answer a while)
    for d, text in (("bare.test", b"g from bare.test/\n"),
                    ("bare.test:%d" % srv.port, b"g from bare.test:PORT/\n")):
        os.makedirs(os.path.join(srv.docroot, d), exist_ok=True)
        with open(os.path.join(srv.docroot, d, "g.txt"), "wb") as f:
            f.write(text)
    time.sleep(1.1)  # which directory serves a name is found once a second (gatling.8)
    assert_ok(get(srv, "bare.test", "/g.txt"), b"g from bare.test:PORT/\n", "Host: bare.test")
    assert_ok(get(srv, "other.test"), DEFAULT_F, "Host: other.test")


@http_only
@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_site_directory_opened_once_a_second(gatling):
    """A name's site directory is opened once a second at most, whatever the
    requests ask (handlers/host.h: found once, held by the route; producers
    and pages open below it): 40 requests for files the open-file cache has
    not seen open example.org:PORT a few times, not once or more each (as
    every producer's vhost_open and the site files' own lookup did)."""
    srv = own(gatling, TREE)
    name = "example.org:%d" % srv.port
    out = os.path.join("/tmp", "gatling-vhost-strace-%d" % os.getpid())
    tracer = subprocess.Popen(["strace", "-f", "-q", "-e", "trace=open,openat,openat2", "-o", out,
                               "-p", str(srv.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # attached
        start = time.monotonic()
        for i in range(40):
            assert_status(get(srv, name, "/missing-%d.txt" % i), 404)
        assert_ok(get(srv, name, "/f.txt"), EXAMPLE_F, "Host: " + name)
        took = time.monotonic() - start
        time.sleep(0.2)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=10)
    with open(out) as f:
        lines = f.read().splitlines()
    os.unlink(out)
    opens = [ln for ln in lines if '"%s"' % name in ln]
    assert lines, "strace saw no open at all"
    assert len(opens) <= int(took) + 2, "%d opens of %s in %.1f s:\n%s" % (
        len(opens), name, took, "\n".join(opens[:10]))
