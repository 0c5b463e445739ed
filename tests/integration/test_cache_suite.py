"""The HTTP caching test suite (http-tests/cache-tests, npm http-cache-tests,
https://cache-tests.fyi) against gatling's shared cache: tests/cache-tests/run
starts the suite's origin, gatling in front of it (-P to the origin, .proxy,
and an empty .cache file: RFC mode, no micro-cache), runs the suite's 350 tests
through gatling and writes the raw results and a summary to
build/cache-tests/results/ (summary.txt: required passed / failed, per group,
the failed ids).

Two tests on one run: test_cache_suite_ran checks the harness (every test ran,
over 100 required ones counted, the proxy path works, gatling's log is clean);
test_cache_suite_targets holds the cache to its targets (TARGET_* below).

Once per make check: on the first build that is not a sanitizer build, over
plain HTTP (the suite speaks HTTP/1.1 to gatling), beside the other passes: the
suite's tests are timed (3 s pauses against max-age=2, Age values), but with a
second of slack, which a loaded machine does not take; the unexercised cap
below has a margin of two for a chance hiccup.  Needs node and the package in
build/cache-tests/node_modules (tests/setup.sh installs both); without them
it skips, saying why.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import ALARMING, BUILD_DIR, BUILDS, ROOT, http_only

RUNNER = os.path.join(ROOT, "tests", "cache-tests", "run")
# where tests/setup.sh installs the package, and the results: the tree's build/, also
# when GATLING_BUILD_DIR points the suite at other builds
MODULES = os.path.join(ROOT, "build", "cache-tests", "node_modules")
OUT = os.path.join(ROOT, "build", "cache-tests", "results")

# The targets.  Apache httpd's mod_cache fails 12 of the suite's required tests
# (cache-tests.fyi): gatling's cache is to fail fewer.  A "failure" is what
# the suite reports as one (its red mark): a required test whose assertion
# failed; setup and dependency failures are listed in summary.txt, not counted
# here (but see the groups below).
HTTPD_REQUIRED_FAILURES = 12
TARGET_MAX_REQUIRED_FAILURES = HTTPD_REQUIRED_FAILURES - 1
# ... and in these groups (the files of the package's tests/: authorization.mjs,
# age-parse.mjs, ...) every required test passes: not one failure, and no setup
# or dependency failure either (the Age tests all depend on
# freshness-max-age-age: a cache that fails it would pass them by default)
TARGET_CLEAN_GROUPS = ("authorization", "age-parse", "invalidation", "vary", "vary-parse")
# ... but for a test that contradicts itself: age-parse-prefix is named "should
# consider a response with `Age: 0, old` to be stale" and expects it to be served
# from the cache.  gatling reads any Age that is not one delta-seconds as stale
# (RFC 9111 5.1, and the names of all twelve tests), so that one fails.
SELF_CONTRADICTORY = {"age-parse-prefix"}
# ... and the cache must really cache: a proxy that stores nothing fails only 7
# required tests and passes every invalidation, Vary and Authorization test
# (nothing is ever reused), because its 109 others are setup or dependency
# failures -- tests never exercised.  At most this many may be, each by design:
# 4xx and 5xx responses are not stored (status-*-fresh are optimal tests, so the
# ten status-*-stale that depend on them go unexercised; a stored error is what
# cache-poisoning DoS attacks plant), and a response with Set-Cookie is never
# stored (headers-store-Set-Cookie, 304-etag-update-response-Set-Cookie)
TARGET_MAX_REQUIRED_UNEXERCISED = 12 + 2  # the twelve, and two for a loaded machine

# Sanity of the harness: the suite has 165 required tests in 0.4.5; gatling
# proxying without any cache passes 49 of them (nginx with proxy_cache 86).
MIN_REQUIRED = 100
MIN_REQUIRED_PASSED = 40


def suite_build():
    """The build the suite runs on, the same whichever pass asks (make check
    runs a pass per build at once, each naming only its own): epoll where it
    is built, else the first built that is not a sanitizer build."""
    built = BUILDS
    if os.path.isdir(BUILD_DIR):
        built = sorted(n for n in os.listdir(BUILD_DIR)
                       if os.access(os.path.join(BUILD_DIR, n, "gatling"), os.X_OK)) or BUILDS
    plain = [b for b in built if not b.endswith("-san")]
    return "epoll" if "epoll" in plain else (plain[0] if plain else None)


@pytest.fixture(scope="module")
def suite(build):
    if build.name != suite_build():
        pytest.skip("the caching suite runs once, on the %s build" % suite_build())
    p = subprocess.run([sys.executable, RUNNER, build.binary, OUT, "--modules", MODULES],
                       capture_output=True, text=True, timeout=900)
    if p.returncode == 77:
        pytest.skip("HTTP caching suite: " + p.stderr.strip().replace("cache-tests: skipped: ", ""))
    assert p.returncode == 0, "tests/cache-tests/run failed (status %d):\n%s\n%s" % (
        p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    with open(os.path.join(OUT, "summary.json")) as f:
        s = json.load(f)
    with open(os.path.join(OUT, "summary.txt")) as f:
        s["text"] = f.read()
    with open(os.path.join(OUT, "gatling.log"), errors="replace") as f:
        s["gatling_log"] = f.read()
    return s


@http_only
def test_cache_suite_ran(suite, record_property):
    s = suite
    for k in ("required", "required_passed", "required_failed", "required_setup_failed",
              "required_dependency_failed", "seconds"):
        record_property("cache_" + k, s[k])
    print("\n" + s["text"])  # pytest -s (or -rA) shows the numbers
    assert s["ran"] == s["tests"] and s["tests"] > 300, (
        "the suite did not run all its tests (%d of %d)\n%s" % (s["ran"], s["tests"], s["text"]))
    assert s["required"] > MIN_REQUIRED, "only %d required tests counted\n%s" % (
        s["required"], s["text"])
    assert s["required_passed"] >= MIN_REQUIRED_PASSED, (
        "%d required tests passed: gatling does not pass the suite's requests and responses "
        "through (even without a cache %d pass); see %s/gatling.log and origin.log\n%s"
        % (s["required_passed"], MIN_REQUIRED_PASSED, OUT, s["text"]))
    assert s["front_exit_status"] == 0, "gatling's exit status after SIGTERM: %s (%s/gatling.log)" % (
        s["front_exit_status"], OUT)
    bad = [a for a in ALARMING if a in s["gatling_log"]]
    assert not bad, "alarming output in gatling's log (%s): %s/gatling.log" % (bad, OUT)


@http_only
def test_cache_suite_targets(suite):
    """All three TARGET_* at once; the message says which are missed and why."""
    s = suite
    missed = []
    if s["required_failed"] > TARGET_MAX_REQUIRED_FAILURES:
        missed.append("%d required tests fail; the target is fewer than httpd's %d:\n    %s" % (
            s["required_failed"], HTTPD_REQUIRED_FAILURES,
            "\n    ".join("%s %s: %s" % (f["group"], f["id"], f["why"])
                          for f in s["failed_required"])))
    not_clean = {}
    for g in TARGET_CLEAN_GROUPS:
        c = s["groups"].get(g)
        assert c and c["total"], "the suite has no required tests in group %s" % g
        excused = sum(1 for t in s["not_passed_required"]
                      if t["group"] == g and t["id"] in SELF_CONTRADICTORY)
        if c.get("pass", 0) + excused != c["total"]:
            not_clean[g] = {k: v for k, v in c.items() if k not in ("total", "pass")}
    if not_clean:
        missed.append("required tests that do not pass in the groups where all must (%s): "
                      "%s\n    %s" % (", ".join(TARGET_CLEAN_GROUPS), not_clean, "\n    ".join(
                          "%s %s: %s" % (t["group"], t["id"], t["outcome"])
                          for t in s["not_passed_required"] if t["group"] in not_clean)))
    unexercised = s["required_setup_failed"] + s["required_dependency_failed"]
    if unexercised > TARGET_MAX_REQUIRED_UNEXERCISED:
        missed.append("%d required tests were not exercised (%d setup failures, %d dependency "
                      "failures: the cache did not store or revalidate what the test needed "
                      "first); at most %d may be" % (
                          unexercised, s["required_setup_failed"],
                          s["required_dependency_failed"], TARGET_MAX_REQUIRED_UNEXERCISED))
    assert not missed, "gatling's cache misses its HTTP caching suite targets:\n- %s\n(%s/summary.txt)" % (
        "\n- ".join(missed), OUT)
