"""tests/layers.py, the include layering of gatling/: it passes on the tree,
and fails on a copy where a handler includes the connection's header or a
lower folder includes a higher one."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tests", "layers.py")


def layers(root):
    return subprocess.run([sys.executable, SCRIPT, root], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60, text=True)


def copy_tree(tmp_path):
    dst = tmp_path / "tree"
    for d in ("gatling", "io"):
        shutil.copytree(os.path.join(ROOT, d), dst / d,
                        ignore=shutil.ignore_patterns("gatling", "*.o", "*.d"))
    return dst


def add_include(path, inc):
    text = path.read_text()
    first = text.index("#include")
    path.write_text(text[:first] + '#include "%s"\n' % inc + text[first:])


def test_tree_passes():
    r = layers(ROOT)
    assert r.returncode == 0, r.stdout


def test_handler_including_conn_h_fails(tmp_path):
    tree = copy_tree(tmp_path)
    assert layers(str(tree)).returncode == 0
    for inc in ("conn.h", "conn/conn.h"):
        static = tree / "gatling" / "handlers" / "static.c"
        saved = static.read_text()
        add_include(static, inc)
        r = layers(str(tree))
        assert r.returncode == 1, r.stdout
        assert "handlers/static.c" in r.stdout and "connection's header" in r.stdout
        static.write_text(saved)


def test_upward_include_fails(tmp_path):
    tree = copy_tree(tmp_path)
    add_include(tree / "gatling" / "http" / "hbuf.c", "site/site.h")
    r = layers(str(tree))
    assert r.returncode == 1, r.stdout
    assert "http/hbuf.c" in r.stdout and "site/site.h" in r.stdout
