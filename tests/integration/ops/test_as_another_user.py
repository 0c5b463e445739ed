"""A test that runs a program or reads a file as another user (nobody,
gatling) hands that user a copy (harness/servers.py's copy_for_others), never
a path into the clone: the clone may sit where only its owner gets in (root's
home is 0700), and `make check` there failed with PermissionError (issue 79,
7).  A static check over tests/integration: no call that switches user (a
preexec_fn=as_nobody or os.setuid, setpriv --reuid) names a path of the tree
(a build's binary or directory, ROOT, bench/netlab).  It reads calls, not
what a helper does with its arguments (bench/test_kbench's kb() is given its
copy by path=): a review still looks at a new helper."""
import ast
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TESTS = os.path.join(ROOT, "tests", "integration")
TREE = re.compile(r"build(\(\))?\.(binary|dir)\b|\bBDIR\b|\bROOT\b|\bNETLAB\b")


def switches(call):
    """Does call run something as another user: a preexec_fn that becomes
    nobody (as_nobody, os.setuid), or setpriv --reuid among its words?"""
    for k in call.keywords:
        if k.arg == "preexec_fn" and re.search(r"as_nobody|setuid", ast.unparse(k.value)):
            return True
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "--reuid" in n.value
               for a in call.args for n in ast.walk(a))


def offenders(text):
    """The calls of text that hand a path of the tree to another user: (line,
    call) for each call that switches user and names a build's binary or
    directory, ROOT or a tool's path in the tree."""
    return [(n.lineno, ast.unparse(n)) for n in ast.walk(ast.parse(text))
            if isinstance(n, ast.Call) and switches(n) and TREE.search(ast.unparse(n))]


def test_the_check_sees_the_old_way():
    """What test_reload did before: nobody started the build's binary itself."""
    old = ('    srv = subprocess.Popen([build().binary, "-n", "-i", "127.0.0.1"], cwd=www,\n'
           '                           preexec_fn=as_nobody, env=env)\n')
    assert [line for line, _ in offenders("if 1:\n" + old)] == [2]
    new = ('    binary = copy_for_others(build().binary, open_dir(tmp_path, "built"))\n'
           '    srv = subprocess.Popen([binary, "-n"], cwd=www, preexec_fn=as_nobody)\n')
    assert offenders("if 1:\n" + new) == []
    assert offenders('subprocess.run(["setpriv", "--reuid=nobody", BDIR + "/kb-fork"])')


def test_no_test_hands_the_tree_to_another_user():
    found = {}
    for d, _, files in os.walk(TESTS):
        for f in files:
            if f.endswith(".py") and f != os.path.basename(__file__):
                path = os.path.join(d, f)
                with open(path) as fh:
                    bad = offenders(fh.read())
                if bad:
                    found[os.path.relpath(path, ROOT)] = bad
    assert not found, "run as another user from the clone (copy_for_others): %r" % found
