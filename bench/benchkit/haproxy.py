"""haproxy: haproxy in front of gatling hosts as dist/haproxy.cfg configures it (its defaults
and backend, taken from the file, with a global section and one frontend around them), its
stats socket, and gatling's health check and grace (-k, -g) that the configuration assumes.
bench/lb measures through it; tests/integration/ops/test_lb.py drains and upgrades behind it.
"""
import csv
import io
import os
import socket
import time

from . import benchlib as bl

DIST = os.path.join(bl.REPO, "dist", "haproxy.cfg")
HEALTH, GRACE = "/healthz", 3  # gatling's -k and -g, as dist/haproxy.cfg's header says

# around dist's defaults and backend: a global section (a stats socket, the log to stdout
# only when asked) and one frontend on the lab address
GLOBAL = """\
global
    maxconn %(maxconn)d
    stats socket %(sock)s mode 600 level admin
%(log)s
"""

FRONTEND = """\
frontend www
    mode http
    bind %(addr)s:80
    default_backend gatling
"""


def dist_section(head, path=DIST):
    """The lines of dist/haproxy.cfg's section that starts with head ("defaults",
    "backend gatling"), comments and blank lines left out."""
    out, inside = [], False
    with open(path) as f:
        for line in f:
            if line.strip().startswith("#") or not line.strip():
                continue
            if not line[0].isspace():
                inside = line.split() == head.split()
            if inside:
                out.append(line.rstrip("\n"))
    if not out:
        raise bl.BenchError("no section %r in %s" % (head, path))
    return out


def dist_backend(addrs, path=DIST):
    """dist's `backend gatling` with its servers at addrs ({"g1": address, ...}); servers
    that addrs does not name are left out, so that g1 alone or g1 and g2 can be run."""
    out = []
    for line in dist_section("backend gatling", path):
        w = line.split()
        if w[0] == "server":
            if w[1] not in addrs:
                continue
            port = w[2].rsplit(":", 1)[1]
            line = line.replace(w[2], "%s:%s" % (addrs[w[1]], port))
        out.append(line)
    return "\n".join(out)


def haproxy_config(lb_addr, addrs, sock, log_stdout=False, maxconn=4000, extra="",
                   path=DIST):
    """A whole haproxy configuration: GLOBAL, the defaults of path (dist/haproxy.cfg),
    FRONTEND on lb_addr:80 and path's backend gatling with the servers addrs; extra (more
    sections) at the end."""
    log = "    log stdout format raw local0" if log_stdout else ""
    return "\n".join([GLOBAL % {"maxconn": maxconn, "sock": sock, "log": log},
                      "\n".join(dist_section("defaults", path)), "",
                      FRONTEND % {"addr": lb_addr}, dist_backend(addrs, path), "", extra])


def haproxy_command(sock, cmd):
    """The answer of haproxy's stats socket to one command (show stat, ...)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sock)
    s.sendall(cmd.encode() + b"\n")
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    return out.decode()


def haproxy_stat(sock):
    """{(proxy, server): row} from `show stat` (status, check_status, chkdown, hrsp_2xx,
    ...)."""
    text = haproxy_command(sock, "show stat").lstrip("# ")
    return {(r["pxname"], r["svname"]): r for r in csv.DictReader(io.StringIO(text))}


def haproxy_wait_up(sock, timeout=10):
    """Until every server is UP and has passed a check (a server is UP before its first
    check): L7OK, or L4OK for a TCP connect check; BenchError with the ones that are not
    after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            down = [k for k, r in haproxy_stat(sock).items()
                    if k[1] not in ("FRONTEND", "BACKEND")
                    and (r["status"] != "UP" or r["check_status"] not in ("L7OK", "L4OK"))]
        except OSError as e:
            down = ["no stats socket: %s" % e]
        if not down:
            return
        if time.monotonic() > deadline:
            raise bl.BenchError("haproxy's servers not UP: %s" % down)
        time.sleep(0.1)
