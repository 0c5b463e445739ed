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

/*
 * Open the file for path p, following a directory to its index.html, and
 * check that it may be published.  Returns the fd with *sb filled and *name
 * set to the name whose extension gives the type, or -1 with *status set.
 */
static int open_file(conn_t *c, const path_t *p, struct stat *sb, const char **name,
                     size_t *namelen, int *status)
{
    server_t *s = c->srv;
    int fd = fs_open_beneath(s->rootfd, p->path + 1, s->root_real);
    if (fd < 0) {
        *status = open_status(errno);
        return -1;
    }
    *name = p->path, *namelen = p->len;
    *status = 403;
    if (fstat(fd, sb) < 0)
        goto fail;
    if (S_ISDIR(sb->st_mode)) {
        if (p->path[p->len - 1] != '/') {
            *status = 301;
            goto fail;
        }
        int ifd = fs_open_beneath(fd, "index.html", s->root_real);
        close(fd);
        if ((fd = ifd) < 0) { /* no index and no listings (yet): forbidden */
            *status = errno == ENOENT ? 403 : open_status(errno);
            return -1;
        }
        *name = "index.html", *namelen = 10;
        if (fstat(fd, sb) < 0)
            goto fail;
    }
    if (S_ISREG(sb->st_mode) && (sb->st_mode & S_IROTH))
        return fd;
fail:
    close(fd);
    return -1;
}

int static_serve(conn_t *c, const http_request_t *req)
{
    server_t *s = c->srv;
    path_t p;
    int64_t now = gio_now(s->loop);
    int st = path_from_target(req->target.p, req->target.n, c->blk->path, CONN_PATH_CAP, &p);
    if (st)
        return resp_error(c, st, NULL);
    fcache_entry_t *f = fcache_get(s->fcache, p.path, p.len, now);
    if (!f) {
        struct stat sb;
        const char *name;
        size_t namelen;
        int fd = open_file(c, &p, &sb, &name, &namelen, &st);
        if (fd < 0)
            return st == 301 ? redirect_slash(c, &p) : resp_error(c, st, NULL);
        f = fcache_put(s->fcache, p.path, p.len, fd, &sb, mime_lookup(s->mime, name, namelen),
                       now);
        if (!f) {
            close(fd);
            return -1;
        }
    }
    c->file = f; /* released when the response is done */
    uint64_t size = (uint64_t)f->st.st_size;
    if (resp_head(c, 200, f->type, size, f->st.st_mtime, NULL) < 0)
        return -1;
    if (c->head_only || size == 0)
        return 0;
    return gio_batch_add_file(&c->out, f->fd, 0, size, 0);
}
