"""bench/compare-wordpress, one round of 1 s runs (issue 77's Slashdotting row): the driver
starts its MariaDB, php-fpm and Debian's WordPress, installs it by its form, and every front
server answers the front page and the permalink under bench's flood with no error; the
micro-caches let about one request a second through to php-fpm (a fill and a refresh in a
1 s run: a handful, never the flood)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial

NEEDS = ("/usr/share/wordpress", "/usr/sbin/mariadbd", "/etc/php/8.2/mods-available/mysqli.ini")


@serial
@http_only  # the driver starts its own servers and backends; one pass is enough
def test_compare_wordpress_tiny(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    if not all(os.path.exists(p) for p in NEEDS) or not shutil.which("taskset"):
        pytest.skip("wordpress, mariadb-server, php-mysql or taskset missing: "
                    "sh tests/setup.sh bench")
    if os.geteuid() != 0 or os.path.exists("/etc/wordpress/config-127.0.0.1.php"):
        pytest.skip("the driver writes /etc/wordpress/config-127.0.0.1.php: root, and none there")
    servers = ["gatling"] + (["nginx"] if os.access("/usr/sbin/nginx", os.X_OK) else [])
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-wordpress"),
                        "--rounds", "1", "--duration", "1", "--permalink", "--servers",
                        ",".join(servers), "--gatling", build.binary,
                        "--bench", os.path.join(build.dir, "bench"), "-o", str(out)],
                       capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    rows = data["results"]
    assert sorted({r["server"] for r in rows}) == sorted(servers), rows
    for r in rows:
        assert r["responses"] > 100 and r["errors"] == 0, r
        assert r["fpm_requests"] <= 6, r  # a micro-cache: not the flood
    assert "| gatling | / |" in (out / "table.md").read_text()
    assert " -k -c 50 " in (out / "commands.txt").read_text()
    assert not os.path.exists("/etc/wordpress/config-127.0.0.1.php")
