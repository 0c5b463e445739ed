"""Real clients against gatling: curl, ab, wrk (skipped when not installed).
In the h2 pass curl speaks HTTP/2 (and each test checks it did); ab and wrk
speak only HTTP/1.1, and run in the other passes."""
import hashlib
import re
import shutil
import subprocess

import pytest

from conftest import H2, url, BIG, TEXT, curl_version_args, h1_only


def tool(name):
    exe = shutil.which(name)
    if not exe:
        pytest.skip("%s not installed" % name)
    return exe


def run(cmd, timeout=30):
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("%s hung for %d s" % (" ".join(cmd), timeout))


def curl(srv, tmp_path, path, *opts):
    out = tmp_path / "curl.out"
    p = run([tool("curl"), "-sS", "--max-time", "10", "-o", str(out),
             "-w", "%{http_code} %{http_version}"] + curl_version_args()
            + list(opts) + [url(srv.port, path)])
    assert p.returncode == 0, "curl failed: %s" % p.stderr.decode(errors="replace")
    code, version = p.stdout.decode().split()
    assert version == "2" or not H2, "curl spoke HTTP/%s in the h2 pass" % version
    return int(code), out.read_bytes() if out.exists() else b""


def test_curl_get(srv, tmp_path):
    code, body = curl(srv, tmp_path, "/f.txt")
    assert code == 200 and body == TEXT


def test_curl_big(srv, tmp_path):
    code, body = curl(srv, tmp_path, "/big.bin")
    assert code == 200 and hashlib.sha256(body).digest() == hashlib.sha256(BIG).digest()


def test_curl_head(srv, tmp_path):
    code, body = curl(srv, tmp_path, "/big.bin", "-I")
    assert code == 200
    assert re.search(rb"(?im)^content-length: %d\r?$" % len(BIG), body), body


def test_curl_404(srv, tmp_path):
    code, _ = curl(srv, tmp_path, "/nope")
    assert code == 404


def test_curl_follows_301(srv, tmp_path):
    code, body = curl(srv, tmp_path, "/dir", "-L")
    assert code == 200 and body == b"<html>dir index</html>\n"
    code, _ = curl(srv, tmp_path, "/dir")
    assert code == 301


@h1_only("HTTP/1.0")
def test_curl_http10(srv, tmp_path):
    code, body = curl(srv, tmp_path, "/f.txt", "--http1.0")
    assert code == 200 and body == TEXT


def test_curl_several_urls_one_connection(srv, tmp_path):
    p = run([tool("curl"), "-sS", "--max-time", "10", "-o", "/dev/null", "-o", "/dev/null",
             "-w", "%{http_code} %{num_connects}\n"] + curl_version_args() + [
             url(srv.port, "/f.txt"), url(srv.port, "/data.json")])
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().split("\n")[:2] == ["200 1", "200 0"], (
        "curl did not reuse the connection: %r" % p.stdout)


@h1_only("the tool speaks HTTP/1.1 only")
def test_ab_keepalive(srv):
    p = run([tool("ab"), "-n", "200", "-c", "10", "-k", "-s", "10",
             url(srv.port, "/f.txt")])
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out + p.stderr.decode(errors="replace")
    assert re.search(r"Complete requests:\s+200\b", out), out
    assert re.search(r"Failed requests:\s+0\b", out), out
    assert re.search(r"Keep-Alive requests:\s+200\b", out), "ab -k: HTTP/1.0 keep-alive not " \
                                                            "honoured:\n" + out
    assert not re.search(r"Non-2xx responses", out), out


@h1_only("the tool speaks HTTP/1.1 only")
def test_ab_no_keepalive(srv):
    p = run([tool("ab"), "-n", "200", "-c", "10", "-s", "10",
             url(srv.port, "/f.txt")])
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out + p.stderr.decode(errors="replace")
    assert re.search(r"Complete requests:\s+200\b", out), out
    assert re.search(r"Failed requests:\s+0\b", out), out


@h1_only("the tool speaks HTTP/1.1 only")
def test_wrk(srv):
    p = run([tool("wrk"), "-t1", "-c10", "-d1s", url(srv.port, "/f.txt")])
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out + p.stderr.decode(errors="replace")
    assert "Non-2xx" not in out, out
    assert "Socket errors" not in out, out
    m = re.search(r"(\d+) requests in", out)
    assert m and int(m.group(1)) > 0, out
