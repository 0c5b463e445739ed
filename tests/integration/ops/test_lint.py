"""make lint (tests/lint.sh, issue 55): a planted leak and NULL dereference
are found and fail the run, naming file and line; a line of tests/lint.supp
(tool, file, check, message, reason) lets one through, and only that one.
The tree itself is make check's lint job.  gcc -fanalyzer and cppcheck on
one small file: a few seconds."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLANTED = r"""
#include <stdlib.h>
#include <string.h>
char *planted_leak(const char *s)
{
    char *p = malloc(strlen(s) + 1);
    char *q = malloc(8);
    if (!q)
        return NULL;
    strcpy(p, s);
    q[0] = 0;
    return p;
}
"""


def lint(tmp_path, supp=""):
    src = tmp_path / "planted.c"
    src.write_text(PLANTED)
    (tmp_path / "lint.supp").write_text(supp)
    env = dict(os.environ, LINT_TOOLS="gcc cppcheck", LINT_OUT=str(tmp_path / "out"),
               LINT_SUPP=str(tmp_path / "lint.supp"))
    return subprocess.run(["sh", os.path.join(ROOT, "tests", "lint.sh"), "-Iio", str(src)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not shutil.which("cppcheck"), reason="cppcheck (tests/setup.sh) missing")
def test_planted_bugs_fail_the_run(tmp_path):
    r = lint(tmp_path)
    assert r.returncode == 1, r
    said = r.stderr
    assert "planted.c:" in said and "-Wanalyzer-malloc-leak" in said, said
    assert "-Wanalyzer-possible-null-argument" in said or "null" in said.lower(), said
    assert "0 suppressed" in r.stdout and "new" in r.stdout, r.stdout


@pytest.mark.skipif(not shutil.which("cppcheck"), reason="cppcheck (tests/setup.sh) missing")
def test_a_suppression_lets_its_finding_through_only(tmp_path):
    first = lint(tmp_path)
    findings = (tmp_path / "out" / "findings.txt").read_text().splitlines()
    assert len(findings) >= 2, findings
    # every finding but the leak of q suppressed: the run still fails on it
    keep = [f for f in findings if "leak of 'q'" in f]
    supp = "".join("%s|%s|%s|%s|planted\n" % tuple(f.split("|")[:4])
                   for f in findings if f not in keep)
    r = lint(tmp_path, "# a comment\n" + supp)
    if keep:
        assert r.returncode == 1 and "leak of 'q'" in r.stderr, (first, r)
    supp += "".join("%s|%s|%s|%s|planted\n" % tuple(f.split("|")[:4]) for f in keep)
    r = lint(tmp_path, supp)
    assert r.returncode == 0 and "0 new" in r.stdout, r
