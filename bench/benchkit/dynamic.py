"""dynamic: what the drivers of dynamic content share (compare-dynamic, compare-cache):
Debian's php-fpm binary, and one GET to a local server with its status and body.
"""
import glob
import http.client
import shutil

from .servers import HOST


def php_fpm_binary():
    """Debian's php-fpm (php-fpm8.2 ...), or None."""
    found = shutil.which("php-fpm") or sorted(glob.glob("/usr/sbin/php-fpm*"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def fetch(port, path):
    """(status, body) of one GET, or (None, the error)."""
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return None, str(e)
    finally:
        c.close()
