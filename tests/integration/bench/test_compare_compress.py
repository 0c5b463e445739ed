"""bench/compare-compress (issue 64): a short run proves the driver end to end: php-fpm
starts, every server present (gatling, gatling with its cache, nginx's gzip, nginx's brotli
module, Caddy's encode) answers the page from PHP and from the static file in each coding it
offers, decoded to the page by a real decoder, and each row has its bytes on the wire and a
server CPU per response.  A peer that is not installed is skipped by the driver, with its
reason."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial

sys.path.append("/usr/lib/python3/dist-packages")  # Debian's, which the driver decodes with
pytest.importorskip("zstandard")
pytest.importorskip("brotli")

CODINGS = {"gatling": {"zstd", "br", "gzip"}, "gatling-cache": {"zstd", "br", "gzip"},
           "nginx": {"gzip"}, "nginx-brotli": {"br", "gzip"}, "caddy": {"zstd", "gzip"}}


def php_fpm():
    return any(f.startswith("php-fpm") for f in os.listdir("/usr/sbin"))


@serial
@http_only  # the driver starts its own servers; one pass is enough
def test_compare_compress_tiny(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    if not php_fpm():
        pytest.skip("php-fpm missing: sh tests/setup.sh installs it")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-compress"),
                        "--requests", "3", "--gatling", build.binary, "-o", str(out)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert "bytes on the wire per response" in (out / "table.md").read_text()
    ran = {r["server"] for r in data["rows"]}
    assert ran | set(data["skipped"]) == set(CODINGS), data["skipped"]
    assert {"gatling", "gatling-cache"} <= ran, data["skipped"]
    for name in ran:
        for source in ("php", "static"):
            rows = {r["coding"]: r for r in data["rows"]
                    if r["server"] == name and r["source"] == source}
            assert set(rows) == CODINGS[name] | {"identity"}, (name, source, rows)
            ident = rows["identity"]["wire"]
            assert ident > data["page"], rows
            for coding in CODINGS[name]:
                assert 0 < rows[coding]["wire"] < ident / 4, (name, source, coding, rows)
            assert all(r["cpu_us"] >= 0 for r in rows.values()), rows
    if "nginx" in ran:
        assert "gzip on;" in (out / "nginx-nginx.conf").read_text()
    if "caddy" in ran:
        assert "encode zstd gzip" in (out / "caddy-Caddyfile").read_text()
