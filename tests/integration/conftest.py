"""Shared harness for gatling's integration tests.

Every server test runs once per build: GATLING_BUILDS names directories under
build/ (e.g. "epoll poll epoll-san"); without it, every build/*/ holding a
gatling binary is used.  GATLING_BUILD_DIR replaces build/ (handy for testing
a snapshot of the builds while make rewrites build/).  The `build` fixture is parametrized over them, so
the test ids carry the build name, e.g. test_get[epoll].

Here: the fixtures (build, gatling, server, srv) and pytest's hooks.  The helpers,
by theme, in harness/ (every one re-exported here):
  env.py      ROOT, BUILD_DIR, LISTEN_RE, SCHEME, TLS, H2, H3, MUX, HTTP_VERSION,
              LOG_VERSION, test_pki, client_pki, http_only, OTHER_BACKENDS, first_backend_only,
              h1_only, no_h3_client, h2_bug, h3_bug, url, curl_version_args,
              client_tls_context, import_h2, ALARMING, START_TIMEOUT, STOP_TIMEOUT,
              IO_TIMEOUT, FILE_CACHE_WAIT, SOCKET_CLOSE_WAIT, serial
  waits.py    sockstat, settle, fresh_source_address, free_port, best_of, recv_to_eof,
              read_slowly_until_closed, wait_for, tcp_listening, gone, end_upgrades,
              fd_count, fd_list
  servers.py  Build, build_names, BUILDS, gatling_version, skip_without_h3, Symlink, Mode,
              make_docroot, Server, start_server, running_server, https_port
  clients.py  close_all_clients, ServerHang, Response, no_body_status, H1Client, NotH2,
              NotH3, H2_DROP, REQUEST_LINE, H2Client, import_aioquic, H3_NO_ERROR,
              H3_INTERNAL_ERROR, H3Client, Client, build_request, fetch, raw_exchange
  checks.py   random_bytes, MTIME, SECRET, BIG, TEXT, standard_tree, make_standard_root,
              IMF_FIXDATE, norm_ctype, assert_status, assert_refused,
              assert_ends_connection, serve_then_check
  figures.py  figure, COUNT, MARGIN, BENCH: a serial test's measured figure, recorded
              for phase 2's table and judged by its kind
The `server`-style fixtures check at teardown: SIGTERM -> exit 0 within 5 s,
nothing alarming on stderr, and no descriptors leaked.
"""

import contextlib
import os
import sys

import pytest

# The modules sit in one folder per subject (http/, http2/, http3/, tls/, cache/,
# dynamic/, ftp/, ops/, privilege/, bench/; tests/README) and import this file (`from conftest
# import X`), the helpers beside it (feature_helpers, acmelab, ...) and, here and there, one
# another across folders (test_h3_defences borrows test_tls's pki fixture): each
# folder goes on the path, as pytest's default import mode (no __init__.py) puts only
# a module's own folder there.  No folder may share its name with a package the tests
# import: this folder is on the path too, and a folder h2/ here shadowed the h2
# library that import_h2() finds in Debian's dist-packages.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _d in sorted(os.listdir(_HERE)):
    _p = os.path.join(_HERE, _d)
    if os.path.isdir(_p) and not _d.startswith((".", "_")) and _d != "harness" \
            and _p not in sys.path:
        sys.path.append(_p)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
# pip's packages for the tests (aioquic), which tests/setup.sh puts in build/python, never
# in the system's python3 (issue 91), go first: aioquic needs a newer cryptography than
# Debian 12's, which this process alone then takes from there
_PIP = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "python")
if os.path.isdir(_PIP) and _PIP not in sys.path:
    sys.path.insert(0, _PIP)

# The sanitized servers' leak check skips the libraries' own known leaks (tests/lsan.supp says
# which and why); every process the tests start inherits it.
os.environ.setdefault("LSAN_OPTIONS", "suppressions=%s:print_suppressions=0"
                      % os.path.join(os.path.dirname(os.path.dirname(_HERE)), "tests", "lsan.supp"))

# The helpers live in harness/ by theme; pytest rewrites their asserts as it does
# this file's, and every one is re-exported here so that a module says
# `from conftest import X` whatever X's file.
pytest.register_assert_rewrite("harness")

from harness.env import (ALARMING, BUILD_DIR, client_pki, client_tls_context, curl_version_args,
                         FILE_CACHE_WAIT, first_backend_only, h1_only, H2, h2_bug, H3, h3_bug,
                         http_only, HTTP_VERSION, import_h2, IO_TIMEOUT, LISTEN_RE, LOG_VERSION,
                         MUX, no_h3_client, OTHER_BACKENDS, own_user, _pki, plain_bound, ROOT,
                         SCHEME, serial,
                         skip_if_idle_class_starved, SOCKET_CLOSE_WAIT, START_TIMEOUT,
                         STOP_TIMEOUT, test_pki, TLS,
                         url)  # noqa: E402,F401
from harness.figures import BENCH, COUNT, figure, MARGIN  # noqa: E402,F401
from harness.waits import (best_of, end_upgrades, fd_count, fd_list, free_port,
                           fresh_source_address, gone, read_slowly_until_closed, recv_to_eof,
                           settle, sockstat, tcp_listening, wait_for)  # noqa: E402,F401
from harness.clients import (build_request, Client, close_all_clients, fetch, H1Client, H2_DROP,
                             H2Client, H3_INTERNAL_ERROR, H3_NO_ERROR, H3Client, import_aioquic,
                             _MuxClient, no_body_status, NotH2, NotH3, _open_clients, raw_exchange,
                             REQUEST_LINE, Response, ServerHang, _SocketClient,
                             _Stream)  # noqa: E402,F401
from harness.servers import (Build, build_names, BUILDS, copies_for_others, copy_for_others,
                             gatling_version, https_port, make_docroot, once_build,
                             Mode, _NO_BUILD, _reader, running_server, Server, skip_without_h3,
                             _start_server, start_server, Symlink)  # noqa: E402,F401
from harness.checks import (assert_ends_connection, assert_refused, assert_status, BIG, cut_short,
                            IMF_FIXDATE,
                            make_standard_root, MTIME, norm_ctype, random_bytes, SECRET,
                            serve_then_check, standard_tree, TEXT)  # noqa: E402,F401


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: measures cost or time: tests/run-check runs these after the "
        "parallel passes, one build at a time")
    config.addinivalue_line(
        "markers", "plain_bound: asserts a bound (memory) only the plain build holds: "
        "run-check's lean pass (GATLING_LEAN) runs it")


def pytest_collection_modifyitems(config, items):
    """GATLING_LEAN (run-check --lean): a plain build whose sanitizer twin
    runs the whole suite on the same sources runs only the modules it names
    (SUITE-relative, space-separated) and the tests marked plain_bound."""
    lean = os.environ.get("GATLING_LEAN")
    if lean is None:
        return
    whole = set(lean.split())
    here = os.path.dirname(os.path.abspath(__file__))
    keep, drop = [], []
    for it in items:
        mod = os.path.relpath(str(it.fspath), here)
        (keep if mod in whole or it.get_closest_marker("plain_bound") else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session", params=BUILDS or [_NO_BUILD], ids=BUILDS or [_NO_BUILD])
def build(request):
    if request.param == _NO_BUILD:
        pytest.skip("no build/*/gatling binary found (run make, or set GATLING_BUILDS)")
    b = Build(request.param)
    # A build named in GATLING_BUILDS must exist: make check built it.
    assert os.access(b.binary, os.X_OK), "%s: no executable %s" % (b.name, b.binary)
    if H3:
        skip_without_h3(b.binary, "GATLING_SCHEME=h3: ")
    return b


@pytest.fixture
def gatling(build, tmp_path):
    """Factory for tests that need their own server (own flags / docroot):
        srv = gatling(tree, args=("-T", "1"))
    Each is checked at teardown like any server fixture."""
    stack = contextlib.ExitStack()
    count = [0]

    def start(tree=None, args=("-T", "10"), docroot=None, env=None, check_fds=True):
        count[0] += 1
        if docroot is None:
            docroot = str(tmp_path / ("root%d" % count[0]))
            make_docroot(docroot, tree if tree is not None else {"f.txt": "hello\n"})
        return stack.enter_context(running_server(build, docroot, args, env, check_fds))

    with stack:
        yield start


@pytest.fixture(scope="module")
def server(build, tmp_path_factory):
    """One gatling per (module, build) on the standard docroot, -T 10."""
    base = tmp_path_factory.mktemp("std-" + build.name)
    root = make_standard_root(base)
    yield from serve_then_check(start_server(build, root, ("-T", "10")))


@pytest.fixture
def srv(server):
    """The module's server, checked after each test: still alive, and no
    socket leaked once the test's connections are closed (all descriptors,
    files included, are checked when the module is done)."""
    server.check_alive()
    yield server
    close_all_clients()
    server.check_alive()
    server.check_fds("the test's connections closed")
