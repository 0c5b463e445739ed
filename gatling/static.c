/*
 * Static files and directories below the document root.
 *
 * Only world-readable regular files are published (as in the original
 * gatling): a file that exists but lacks S_IROTH is 403, so a mistaken
 * chmod on the server never leaks a private file.
 */
#include "fs.h"
#include "handler.h"
#include "mime.h"
#include "path.h"
#include "response.h"
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Status for a failed open: missing, forbidden, or we are out of descriptors. */
static int open_status(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR: return 404;
    case ENAMETOOLONG: return 414;
    case EMFILE:
    case ENFILE:
    case ENOMEM: return 503;
    default: return 403; /* EACCES, EXDEV (leaves the root), ELOOP, ... */
    }
}

/* "/dir" names a directory: 301 to "/dir/", keeping the query. */
static int redirect_slash(conn_t *c, const path_t *p)
{
    char *loc = malloc(3 * p->len + p->query_len + 16), *q = loc;
    if (!loc)
        return -1;
    memcpy(q, "Location: ", 10), q += 10;
    q += path_encode(q, p->path, p->len);
    *q++ = '/';
    if (p->query) {
        *q++ = '?';
        memcpy(q, p->query, p->query_len), q += p->query_len;
    }
    memcpy(q, "\r\n", 3);
    int r = resp_error(c, 301, loc); /* copies loc into the response head */
    free(loc);
    return r;
}

/* Open "index.html" in the directory open on dirfd. */
static int open_index(int dirfd, const char *root_real)
{
    return fs_open_beneath(dirfd, "index.html", root_real);
}

int static_serve(conn_t *c, const http_request_t *req)
{
    server_t *s = c->srv;
    path_t p;
    int st = path_from_target(req->target.p, req->target.n, c->blk->path, CONN_PATH_CAP, &p);
    if (st)
        return resp_error(c, st, NULL);
    int fd = fs_open_beneath(s->rootfd, p.path + 1, s->root_real);
    if (fd < 0)
        return resp_error(c, open_status(errno), NULL);
    struct stat sb;
    const char *name = p.path;
    size_t namelen = p.len;
    if (fstat(fd, &sb) < 0)
        goto forbidden;
    if (S_ISDIR(sb.st_mode)) {
        if (p.path[p.len - 1] != '/') {
            close(fd);
            return redirect_slash(c, &p);
        }
        int ifd = open_index(fd, s->root_real);
        close(fd);
        if (ifd < 0) /* no index and no listings (yet): forbidden */
            return resp_error(c, errno == ENOENT ? 403 : open_status(errno), NULL);
        fd = ifd;
        name = "index.html", namelen = 10;
        if (fstat(fd, &sb) < 0)
            goto forbidden;
    }
    if (!S_ISREG(sb.st_mode) || !(sb.st_mode & S_IROTH))
        goto forbidden;
    const char *type = mime_lookup(s->mime, name, namelen);
    if (resp_head(c, 200, type, (uint64_t)sb.st_size, sb.st_mtime, NULL) < 0)
        goto fail;
    if (c->head_only || sb.st_size == 0) {
        close(fd);
        return 0;
    }
    if (gio_batch_add_file(&c->out, fd, 0, (uint64_t)sb.st_size, GIO_BATCH_CLOSE) < 0)
        goto fail;
    return 0;
forbidden:
    close(fd);
    return resp_error(c, 403, NULL);
fail:
    close(fd);
    return -1;
}
