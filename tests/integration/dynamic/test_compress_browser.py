"""A real browser decodes gatling's on-the-fly codings (issue 64): Debian's
Chromium, headless, loads a CGI page of 50 KiB over HTTP/2 (TLS, the test
CA's leaf accepted by its key as in http3/test_h3_browser.py), driven over
the DevTools protocol, which sets the request's Accept-Encoding to one
coding (Network.setExtraHTTPHeaders: Chromium itself offers "gzip, deflate,
br, zstd", where gatling's tie order picks zstd for an answer coded on the
fly).  The page's own Resource Timing must show it came over h2 coded (encodedBodySize a fraction of
decodedBodySize, which is the page's length) and the DOM must hold every row
and the last paragraph; /metrics must count one answer coded in that coding.
Once per build in the plain pass, on the first backend: the coding is above
io/, and a Chromium run costs seconds of CPU."""
import os
import urllib.request

import pytest

from conftest import Mode, first_backend_only, https_port, skip_without_h3
from conftest import test_pki as pki_dir

ROWS = 700
PAGE = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>report</title></head>"
        "<body><table>\n" + "".join(
            "<tr><td class=\"n\">%d</td><td>row %d of the report, %s</td></tr>\n"
            % (i, i * 7919 % 1000, ["alpha", "beta", "gamma"][i % 3]) for i in range(ROWS))
        + "</table><p id=\"end\">the end of the report</p></body></html>\n").encode()
CGI = ("#!/bin/sh\nprintf 'Content-Type: text/html; charset=utf-8\\r\\n\\r\\n'\n"
       "cat page.html\n")
LOOK = """(() => {
  const e = performance.getEntriesByType("navigation")[0];
  return {enc: e.encodedBodySize, dec: e.decodedBodySize, proto: e.nextHopProtocol,
          rows: document.querySelectorAll("tr").length,
          end: (document.getElementById("end") || {}).textContent};
})()"""


def chromium_load(url, spki, headers, timeout=45):
    """LOOK's value for url loaded by headless Chromium with the request fields
    headers (QUIC forced on a port of no one's: the page comes over HTTP/2)."""
    import test_h3_browser as hb
    return hb.chromium_evaluate(url, "127.0.0.1:9", spki, LOOK, lambda v: v, timeout,
                                headers=headers)


def coded(base, coding):
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('gatling_compressed_total{coding="%s"} ' % coding):
                return float(line.split()[-1])
    return 0


@pytest.mark.skipif(os.environ.get("GATLING_SCHEME", "http") != "http",
                    reason="its own HTTPS server: the same in every scheme (plain pass only)")
@pytest.mark.parametrize("coding", ["zstd", "br"])
def test_chromium_decodes_a_cgi_page(gatling, build, coding, request):
    import test_h3_browser as hb
    first_backend_only(request, ("test_chromium_decodes_a_cgi_page",),
                       "the coding is above io/: on the first backend")
    if not hb.CHROMIUM:
        pytest.skip("needs Debian's chromium (tests/setup.sh installs it)")
    try:
        skip_without_h3(build.binary)
        no_h3 = ("-3",)
    except pytest.skip.Exception:
        no_h3 = ()
    tree = {"cgi": {"page.sh": Mode(CGI, 0o755), "page.html": PAGE}}
    srv = gatling(tree, args=("-T", "10", "-S", "-w", r"\.sh$", "-C",
                              os.path.join(pki_dir(), "certs"), "-e", "0") + no_h3)
    base = "http://127.0.0.1:%d" % srv.listeners[0][1]
    before = coded(base, coding)
    spki = hb.leaf_spki_sha256(os.path.join(pki_dir(), "certs", "server.pem"))
    url = "https://127.0.0.1:%d/cgi/page.sh" % https_port(srv)
    got = chromium_load(url, spki, {"Accept-Encoding": coding})
    assert got["proto"] == "h2" and got["dec"] == len(PAGE), got
    assert 0 < got["enc"] < len(PAGE) / 4, ("not coded", got)
    assert got["rows"] == ROWS and got["end"] == "the end of the report", got
    assert coded(base, coding) == before + 1, "not in %s" % coding
