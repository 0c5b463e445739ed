"""compare-cache's Python backend: sleeps, answers a page, logs the request."""
import os
import time

LOG, PAGE, WORK, FILL = '/tmp/ccache-pfjp203w/hits-py.log', 1536, 0.02, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. '
_fd = []


def app(environ, start_response):
    t0 = time.time()
    time.sleep(WORK)
    key = environ.get("RAW_URI") or (environ.get("PATH_INFO", "") +
                                     ("?" + environ["QUERY_STRING"]
                                      if environ.get("QUERY_STRING") else ""))
    head = "<!doctype html><title>%s</title><p>%s %.6f %d</p>\n" % (key, key, t0, os.getpid())
    body = (head + FILL[:PAGE - len(head)]).encode()
    if not _fd:
        _fd.append(os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    os.write(_fd[0], ("%s %.6f %.6f %d\n" % (key, t0, time.time(), os.getpid())).encode())
    start_response("200 OK", [("Content-Type", "text/html"),
                              ("Content-Length", str(len(body)))])
    return [body]
