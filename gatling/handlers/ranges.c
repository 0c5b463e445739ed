/* The body of a file response: see ranges.h. */
#include "ranges.h"
#include "http/byterange.h"
#include "http/conditional.h"
#include "http/hbuf.h"
#include "site/site.h"

#include <stdlib.h>
#include <string.h>

static int add_part(exchange_t *ex, const body_t *b, uint64_t off, uint64_t len)
{
    if (b->fd >= 0)
        return ex_body_file(ex, b->fd, off, len);
    return ex_body_buf(ex, b->buf + off, len, 0);
}

/* "bytes first-last/size" (or "bytes * /size" without a range) into buf. */
static const char *content_range(char *buf, size_t cap, const byterange_t *r, uint64_t size)
{
    hbuf_t h = hb_init(buf, cap);
    hb_puts(&h, "bytes ");
    if (r) {
        hb_num(&h, r->first);
        hb_puts(&h, "-");
        hb_num(&h, r->last);
    } else {
        hb_puts(&h, "*");
    }
    hb_puts(&h, "/");
    hb_num(&h, size);
    return hb_str(&h); /* 6 + 3 * 20 + 3 bytes always fit 80 */
}

/* The heads of the parts and the closing delimiter, in order, into h;
   off[i] is where part i's head starts, off[n] the closing delimiter. */
static uint64_t part_heads(hbuf_t *h, const char *boundary, const char *type,
                           const byterange_t *r, int n, uint64_t size, size_t *off)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        char cr[80];
        off[i] = hb_len(h);
        hb_puts(h, i ? "\r\n--" : "--");
        hb_puts(h, boundary);
        hb_puts(h, "\r\nContent-Type: ");
        hb_puts(h, type);
        hb_puts(h, "\r\nContent-Range: ");
        hb_puts(h, content_range(cr, sizeof cr, &r[i], size));
        hb_puts(h, "\r\n\r\n");
        total += r[i].last - r[i].first + 1;
    }
    off[n] = hb_len(h);
    hb_puts(h, "\r\n--");
    hb_puts(h, boundary);
    hb_puts(h, "--\r\n");
    return total + hb_len(h);
}

/* 206 with several ranges: multipart/byteranges.  The parts' heads are in
   one buffer that the exchange frees when it ends. */
static int serve_multipart(exchange_t *ex, const body_t *b, const char *type, time_t mtime,
                           const byterange_t *r, int n)
{
    char boundary[40], ctype[96];
    hbuf_t bb = hb_init(boundary, sizeof boundary);
    hb_puts(&bb, "gatling-");
    hb_num(&bb, b->size);
    hb_puts(&bb, "-");
    hb_num(&bb, (uint64_t)gio_now(ex->site->loop));
    hbuf_t cb = hb_init(ctype, sizeof ctype);
    hb_puts(&cb, "multipart/byteranges; boundary=");
    hb_puts(&cb, hb_str(&bb) ? boundary : "");
    /* each part's head: delimiter, two fields, three numbers of 20 digits */
    size_t per = 128 + strlen(type) + 3 * 20 + sizeof boundary, cap = per * (size_t)(n + 1);
    char *heads = malloc(cap);
    if (!heads || !hb_str(&cb) || ex_own(ex, heads) < 0) {
        free(heads);
        return heads ? ex_error(ex, 500, NULL, NULL) : -1;
    }
    hbuf_t h = hb_init(heads, cap);
    size_t off[BYTERANGE_MAX + 1];
    uint64_t total = part_heads(&h, boundary, type, r, n, b->size, off);
    if (h.over)
        return ex_error(ex, 500, NULL, NULL);
    int rc = ex_head(ex, 206, ctype, total, mtime);
    for (int i = 0; rc == 0 && i < n; i++) {
        rc = ex_body_buf(ex, heads + off[i], off[i + 1] - off[i], 0);
        if (rc == 0)
            rc = add_part(ex, b, r[i].first, r[i].last - r[i].first + 1);
    }
    if (rc == 0)
        rc = ex_body_buf(ex, heads + off[n], hb_len(&h) - off[n], 0);
    return rc < 0 ? -1 : 0;
}

int ranges_serve(exchange_t *ex, const body_t *b, const char *type, time_t mtime,
                 const char *etag)
{
    const http_request_t *req = ex->req;
    const http_str_t *rh = http_header(req, "Range");
    byterange_t r[BYTERANGE_MAX];
    char cr[80];
    int n = 0;
    /* Range applies to GET only (RFC 9110 14.2); a repeated Range field is
       not a list we could combine, so it is ignored like an invalid one */
    if (rh && !ex->head_only && http_header_count(req, "Range") == 1 &&
        cond_if_range(req, etag, mtime, gio_wallclock(ex->site->loop)))
        n = byterange_parse(rh->p, rh->n, b->size, r, BYTERANGE_MAX);
    if (n == BYTERANGE_UNSATISFIABLE) /* an error: none of the file's metadata */
        return ex_error(ex, 416, "Content-Range", content_range(cr, sizeof cr, NULL, b->size));
    if (n > 1)
        return serve_multipart(ex, b, type, mtime, r, n);
    uint64_t off = 0, len = b->size;
    int status = 200;
    if (n == 1) {
        off = r[0].first, len = r[0].last - r[0].first + 1, status = 206;
        ex_field(ex, "Content-Range", content_range(cr, sizeof cr, &r[0], b->size));
    }
    int rc = ex_head(ex, status, type, len, mtime);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    return add_part(ex, b, off, len);
}
