"""Run the C unit-test programs (build/<name>/tests/t_*, TAP) of every build."""
import os
import subprocess

import pytest

from conftest import BUILDS, OTHER_BACKENDS, Build

# The programs that drive io/ (gio's loop, timers, batches, TLS and UDP, and
# what runs on them: the job pool's wake-up pipe, the file cache's timers,
# QUIC's socket steering, a streamed body): on every build.  The others test
# gatling/'s pure parts, compiled once in build/obj and linked the same into
# every backend's programs (only libgio differs, which they do not drive):
# on the first backend and its sanitizer build, not again on each backend.
DRIVE_IO = ("t_fcache", "t_jobs", "t_quic_steer", "t_stream_body")


def drives_io(path):
    name = os.path.basename(path)
    return name.startswith("t_gio_") or name in DRIVE_IO


def unit_cases():
    cases = []
    for name in BUILDS:
        for path in Build(name).unit_tests():
            cases.append(pytest.param(path, id="%s/%s" % (name, os.path.basename(path))))
    return cases


def test_builds_have_unit_tests():
    """Every build named in GATLING_BUILDS carries its unit-test programs."""
    if not os.environ.get("GATLING_BUILDS"):
        pytest.skip("GATLING_BUILDS unset: not checking that unit tests were built")
    missing = [n for n in BUILDS if not Build(n).unit_tests()]
    assert not missing, "no build/<name>/tests/t_* programs for: %s" % missing


@pytest.mark.parametrize("path", unit_cases() or [pytest.param(None, id="none")])
def test_unit_program(path):
    if path is None:
        pytest.skip("no build/*/tests/t_* programs found")
    if os.path.basename(os.path.dirname(os.path.dirname(path))) in OTHER_BACKENDS \
            and not drives_io(path):
        pytest.skip("gatling/'s pure parts, the same objects on every backend: "
                    "run on the first backend")
    try:
        p = subprocess.run([path], cwd=os.path.dirname(path), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode("utf-8", "replace")
        pytest.fail("%s did not finish within 60 s; output so far:\n%s" % (path, out[-3000:]))
    out = p.stdout.decode("utf-8", "replace")
    lines = out.splitlines()
    failing = [ln for ln in lines if ln.startswith("not ok")]
    alarming = [ln for ln in lines if "runtime error:" in ln or "AddressSanitizer" in ln
                or "LeakSanitizer" in ln]
    assert p.returncode == 0 and not failing and not alarming, (
        "%s: exit status %d\nfailing lines:\n%s\n%s\n--- last output ---\n%s"
        % (path, p.returncode, "\n".join(failing) or "(none)", "\n".join(alarming),
           "\n".join(lines[-40:])))
    assert any(ln.startswith("ok") for ln in lines) or any(
        ln.startswith("1..") for ln in lines), "%s printed no TAP output:\n%s" % (path, out)
