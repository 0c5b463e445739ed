/*
 * A stored response of the response cache (cache_int.h): its key and Vary,
 * its freshness, answering a request from it (304/412, a range, the
 * whole), and what HTTP's caching rules (RFC 9111, W3C's Surrogate-Control)
 * make of a backend's head: its facts, its stored fields, a 304's update.
 * Calls nothing of the cache's other files.
 */
#include "cache_int.h"
#include "http/byterange.h"
#include "http/conditional.h"
#include "http/hbuf.h"
#include "http/owfat.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- keys and Vary ---- */

/* scheme, then the site the route chose (ex->route's name, decided once:
   one final dot dropped, case folded; without its port, so that --cluster's
   nodes on other ports share keys) and a space when -v chose one, then
   the Host lower-cased without a default port or a final dot (what a
   backend may write into its answer), then the target:
   "https\0example.org example.org\0/a?b".  Two sites never share an
   entry, whatever Host spelling led to them.  Length, or 0: not cached. */
size_t ce_key(const exchange_t *ex, char *k, size_t cap)
{
    const http_request_t *r = ex->req;
    const http_str_t *host = http_header(r, "Host");
    hbuf_t b = hb_init(k, cap);
    hb_put(&b, ex->secure ? "https" : "http", ex->secure ? 6 : 5);
    size_t hn = host ? host->n : 0;
    const char *hp = host ? host->p : "";
    const char *dflt = ex->secure ? ":443" : ":80";
    if (ex->route.state != EX_ROUTE_OK)
        return 0;
    if (hn > strlen(dflt) && !memcmp(hp + hn - strlen(dflt), dflt, strlen(dflt)))
        hn -= strlen(dflt);
    if (hn && hp[hn - 1] == '.')
        hn--;
    if (hn > 255 || !r->target.n || r->target.p[0] != '/')
        return 0;
    const char *rn = ex->route.name, *end = rn + ex->route.namelen;
    const char *from = rn[0] == '[' ? memchr(rn, ']', ex->route.namelen) : rn; /* IPv6's */
    const char *port = from ? memchr(from, ':', (size_t)(end - from)) : NULL;
    if (port) {
        hb_put(&b, rn, (size_t)(port - rn));
        hb_put(&b, " ", 1);
    }
    for (size_t i = 0; i < hn; i++) {
        char ch = hp[i] >= 'A' && hp[i] <= 'Z' ? (char)(hp[i] + 32) : hp[i];
        hb_put(&b, &ch, 1);
    }
    hb_put(&b, "", 1);
    hb_put(&b, r->target.p, r->target.n);
    return b.over ? 0 : hb_len(&b);
}

/* The request's fields named name[0..n) as one normalised value into out
   (cap): "\x01" when there is none.  Length, or (size_t)-1: too long. */
static size_t vary_value(const http_request_t *r, const char *name, size_t n, char *out, size_t cap)
{
    char joined[2048];
    size_t jl = 0;
    int any = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        const http_header_t *h = &r->headers[i];
        if (h->name.n != n || strncasecmp(h->name.p, name, n))
            continue;
        if (jl + 2 + h->value.n > sizeof joined)
            return (size_t)-1;
        if (any)
            memcpy(joined + jl, ", ", 2), jl += 2;
        memcpy(joined + jl, h->value.p, h->value.n), jl += h->value.n;
        any = 1;
    }
    if (!any) {
        if (cap < 1)
            return (size_t)-1;
        out[0] = 1;
        return 1;
    }
    return cc_vary_norm(joined, jl, out, cap);
}

/* Does r match the Vary values stored with e? */
int ce_vary_match(const rs_entry_t *e, const http_request_t *r)
{
    char v[2048];
    for (size_t i = 0; i < e->varylen;) {
        const char *name = e->vary + i;
        size_t nl = strlen(name);
        const char *val = name + nl + 1;
        size_t vl = strlen(val);
        size_t k = vary_value(r, name, nl, v, sizeof v);
        if (k != vl || memcmp(v, val, vl))
            return 0;
        i += nl + vl + 2;
    }
    return 1;
}

/* e's Vary block from the response's Vary value and the request r.  0, or -1:
   not storable (too many or too long). */
int ce_vary_store(cache_t *c, rs_entry_t *e, const char *v, const http_request_t *r)
{
    char blk[4096], val[2048];
    hbuf_t b = hb_init(blk, sizeof blk);
    size_t pos = 0, nl;
    const char *name;
    int n = 0;
    while ((nl = cc_vary_next(v, strlen(v), &pos, &name)) > 0) {
        size_t vl = vary_value(r, name, nl, val, sizeof val);
        if (vl == (size_t)-1 || ++n > 16 || ce_fetch_drops(&(http_str_t){name, nl}))
            return -1; /* a field the fetch does not send: its value is not what the backend saw */
        for (size_t i = 0; i < nl; i++) {
            char ch = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] + 32) : name[i];
            hb_put(&b, &ch, 1);
        }
        hb_put(&b, "", 1), hb_put(&b, val, vl), hb_put(&b, "", 1);
    }
    if (b.over || (hb_len(&b) && !(e->vary = malloc(hb_len(&b)))) ||
        rs_charge(&c->store, e, hb_len(&b)) < 0)
        return -1;
    if (hb_len(&b))
        memcpy(e->vary, blk, hb_len(&b));
    e->varylen = hb_len(&b);
    return 0;
}

/* ---- serving a stored response ---- */

/* e's age in ms at now_ms (the loop's monotonic clock): its age when it
   came, and the time since.  Milliseconds, not seconds: a one-second
   micro-cache must last a second, not from 0 to 1 s by where a second
   boundary falls. */
int64_t ce_age(const rs_entry_t *e, int64_t now_ms)
{
    int64_t a = e->initial_age * 1000 + (now_ms - e->stored_ms);
    return a < 0 ? 0 : a;
}

int ce_fresh(const rs_entry_t *e, int64_t now_ms)
{
    return ce_age(e, now_ms) < e->lifetime * 1000;
}

/* Within a window of secs past its freshness (not for must-revalidate). */
int ce_stale_within(const rs_entry_t *e, int64_t now, int64_t secs)
{
    return !e->must_revalidate && secs > 0 && ce_age(e, now) < (e->lifetime + secs) * 1000;
}

/* The stored fields onto ex, with Age and Cache-Status (age and cs live in
   the caller until its ex_head).  notmod: only those a 304 carries. */
void ce_put_fields(exchange_t *ex, const rs_entry_t *e, const char *age, const char *cs,
                   int notmod)
{
    static const char *const keep304[] = {"etag", "cache-control",    "expires",
                                          "vary", "content-location", "last-modified"};
    const char *p = e->head;
    for (unsigned i = 0; i < e->nfields; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        int ok = !notmod;
        for (size_t k = 0; !ok && k < sizeof keep304 / sizeof keep304[0]; k++)
            ok = !strcasecmp(name, keep304[k]);
        if (ok)
            ex_field(ex, name, value);
    }
    ex_field(ex, "Age", age);
    ex_field(ex, "Cache-Status", cs);
    ex_log_note(ex->log_cache, cs);
    ex->date = e->date[0] ? e->date : NULL;
}

/* The body parts of e from off, len bytes, onto ex (by reference: the
   caller holds e until ex ends).  0 or -1. */
static int put_body(exchange_t *ex, const rs_entry_t *e, uint64_t off, uint64_t len)
{
    for (unsigned i = 0; i < e->nparts && len; i++) {
        const rs_part_t *pt = &e->parts[i];
        if (off >= pt->n) {
            off -= pt->n;
            continue;
        }
        size_t k = pt->n - (size_t)off < len ? pt->n - (size_t)off : (size_t)len;
        if (ex_body_buf(ex, pt->p + off, k, 0) < 0)
            return -1;
        off = 0, len -= k;
    }
    return 0;
}

/* A 206 of one range, or 416, when Range asks for it and If-Range lets it:
   0 if the whole response is to go, else the result of the answer. */
static int serve_range(exchange_t *ex, const rs_entry_t *e, char *age, const char *cs, int *done)
{
    const http_str_t *rg = http_header(ex->req, "Range");
    *done = 0;
    if (!rg || e->status != 200 || ex->head_only ||
        !cond_if_range(ex->req, e->etag ? e->etag : "", e->mtime, gio_wallclock(ex->site->loop)))
        return 0;
    byterange_t r[1];
    int n = byterange_parse(rg->p, rg->n, e->body_len, r, 1);
    if (n == 0)
        return 0;
    char cr[80];
    hbuf_t b = hb_init(cr, sizeof cr);
    *done = 1;
    if (n < 0) {
        hb_puts(&b, "bytes */"), hb_num(&b, e->body_len);
        return ex_error(ex, 416, "Content-Range", hb_str(&b));
    }
    hb_puts(&b, "bytes "), hb_num(&b, r[0].first), hb_puts(&b, "-"), hb_num(&b, r[0].last);
    hb_puts(&b, "/"), hb_num(&b, e->body_len);
    ce_put_fields(ex, e, age, cs, 0);
    ex_field(ex, "Content-Range", hb_str(&b));
    int h = ex_head(ex, 206, e->ctype, r[0].last - r[0].first + 1, -1);
    if (h)
        return h < 0 ? -1 : 0;
    return put_body(ex, e, r[0].first, r[0].last - r[0].first + 1);
}

/* Answer ex from the complete entry e: 304/412 for its preconditions, a
   range, or the whole.  The caller holds e until ex ends.  0 or -1. */
int ce_serve(exchange_t *ex, rs_entry_t *e, const char *cs, int64_t now)
{
    char age[24];
    hbuf_t ab = hb_init(age, sizeof age);
    hb_num(&ab, (uint64_t)ce_age(e, now) / 1000);
    hb_str(&ab);
    /* no Last-Modified: the stored Date stands for it (RFC 9111 4.3.2) */
    time_t lm = e->mtime >= 0 ? e->mtime : (time_t)(e->response_time - e->initial_age);
    int pre = cond_preconditions(ex->req, e->etag ? e->etag : "\"\x7f\"", lm,
                                 gio_wallclock(ex->site->loop));
    if (pre == 412)
        return ex_error(ex, 412, NULL, NULL);
    if (pre == 304 && e->status == 200) {
        ce_put_fields(ex, e, age, cs, 1);
        return ex_head(ex, 304, NULL, 0, -1) < 0 ? -1 : 0;
    }
    int done, r = serve_range(ex, e, age, cs, &done);
    if (done)
        return r;
    ce_put_fields(ex, e, age, cs, 0);
    char coded[160]; /* the Cache-Status of a coded body */
    int v = cv_serve(hstate(ex->site, HSTATE_CACHE), ex, e, cs, coded, sizeof coded);
    if (v <= 0)
        return v;
    int h = ex_head(ex, e->status, e->ctype, e->body_len, -1);
    if (h)
        return h < 0 ? -1 : 0;
    return put_body(ex, e, 0, e->body_len);
}

/* Request fields a fetch does not send: the cache answers conditionals and
   ranges itself; nothing unkeyed may change what the backend answers. */
int ce_fetch_drops(const http_str_t *name)
{
    /* clang-format off */
    static const char *const drop[] = {
        "range", "if-range", "if-none-match", "if-modified-since", "if-match",
        "if-unmodified-since", "cache-control", "pragma", "cookie", "content-length",
        "transfer-encoding", "expect", "x-http-method-override", "x-http-method",
        "x-method-override", "x-original-url", "x-rewrite-url", "x-forwarded-server",
        "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-scheme", "x-host",
        "surrogate-capability", "forwarded", "x-forwarded-for"};
    /* clang-format on */
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (name->n == strlen(drop[i]) && !strncasecmp(name->p, drop[i], name->n))
            return 1;
    return 0;
}

static int64_t field_date(const char *v, int64_t now)
{
    return cc_http_date(v, strlen(v), now);
}

/* Fields the cache keeps to itself: Age (it makes its own), Surrogate-Control
   (meant for it, W3C Edge Architecture). */
static int unstored(const char *name)
{
    return !strcasecmp(name, "Age") || !strcasecmp(name, "Surrogate-Control");
}

/* Surrogate-Control v into cc: a directive targeted at a device (";name")
   counts only when the name is ours, which each fetch's
   Surrogate-Capability announces (W3C Edge Architecture 1.0). */
static int surrogate_parse(cc_resp_t *cc, const char *v)
{
    char clean[512];
    hbuf_t b = hb_init(clean, sizeof clean);
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ','), *semi;
        size_t n = end ? (size_t)(end - p) : strlen(p);
        semi = memchr(p, ';', n);
        int ours = !semi || ((size_t)(p + n - semi - 1) == 7 && !strncmp(semi + 1, "gatling", 7));
        if (ours)
            hb_put(&b, p, semi ? (size_t)(semi - p) : n), hb_puts(&b, ",");
        p += n + (end != NULL);
    }
    if (b.over || !hb_len(&b))
        return 0; /* nothing in it for us: Cache-Control speaks */
    cc_parse_resp(cc, clean, hb_len(&b));
    return 1;
}

/* CDN-Cache-Control (RFC 9213) v into cc: the field's lines, joined with ", ", are one
   Dictionary; a line that does not fit in the buffer makes the whole field unusable. */
static void cdn_add(hbuf_t *b, int *lines, const char *v)
{
    if ((*lines)++)
        hb_puts(b, ", ");
    hb_puts(b, v);
}

/* The fields that set the freshness rules: Cache-Control and Expires, unless a
   targeted field aimed at us speaks (RFC 9213 2.1: the cache "MUST ignore the
   Cache-Control and Expires header fields in that response"), CDN-Cache-Control first,
   then Surrogate-Control with our name; a private in Cache-Control stays for the latter. */
static void facts_rules(resp_facts_t *rf, const hbuf_t *cdn, int cdn_lines, cc_resp_t *sc,
                        int has_sc)
{
    cc_resp_t t;
    if (cdn_lines && !cdn->over && cc_parse_targeted(&t, cdn->start, hb_len(cdn))) {
        rf->cc = t;
        rf->has_expires = 0;
        rf->expires = CC_NONE;
    } else if (has_sc) { /* it speaks to the cache in Cache-Control's place; private stays */
        sc->private_ |= rf->cc.private_;
        rf->cc = *sc;
    }
}

void ce_facts(const exchange_t *ex, resp_facts_t *rf, int64_t now)
{
    cc_resp_t sc;
    int has_sc = 0, ages = 0, cdn_lines = 0;
    char cdn_buf[1024];
    hbuf_t cdn = hb_init(cdn_buf, sizeof cdn_buf);
    memset(rf, 0, sizeof *rf);
    cc_resp_init(&rf->cc);
    cc_resp_init(&sc);
    rf->expires = rf->age = CC_NONE;
    rf->mtime = -1;
    rf->date = ex->resp_date ? ex->resp_date : CC_NONE;
    for (unsigned i = 0; i < ex->nfields; i++) {
        const char *n = ex->fields[i].name, *v = ex->fields[i].value;
        if (!strcasecmp(n, "Age") && !ages++) /* the first member of the first line (5.1) */
            rf->age = cc_age_value(v, strlen(v));
        else if (!strcasecmp(n, "Surrogate-Control"))
            has_sc |= surrogate_parse(&sc, v);
        if (unstored(n))
            continue;
        rf->headlen += strlen(n) + strlen(v) + 2;
        rf->nfields++;
        if (!strcasecmp(n, "Cache-Control"))
            cc_parse_resp(&rf->cc, v, strlen(v));
        else if (!strcasecmp(n, "CDN-Cache-Control"))
            cdn_add(&cdn, &cdn_lines, v);
        else if (!strcasecmp(n, "Set-Cookie"))
            rf->set_cookie = 1;
        else if (!strcasecmp(n, "Vary"))
            rf->vary = rf->vary ? "*" : v; /* two Vary lines: not worth it */
        else if (!strcasecmp(n, "ETag"))
            rf->etag = v;
        else if (!strcasecmp(n, "Expires")) {
            int64_t t = rf->has_expires ? -1 : field_date(v, now); /* two: invalid */
            rf->has_expires = 1;
            rf->expires = t < 0 ? 0 : t; /* an invalid Expires is in the past (5.3) */
        } else if (!strcasecmp(n, "Last-Modified")) {
            int64_t t = field_date(v, now);
            rf->has_lm = t >= 0;
            rf->mtime = (time_t)t;
        }
    }
    facts_rules(rf, &cdn, cdn_lines, &sc, has_sc);
}

/* Copy ex's fields (less Age) into e's head block. */
int ce_store_head(cache_t *c, rs_entry_t *e, const exchange_t *ex, const resp_facts_t *rf,
                  const char *ctype)
{
    size_t n = rf->headlen + (ctype ? strlen(ctype) + 1 : 0);
    if (n > CACHE_HEAD_MAX || rs_charge(&c->store, e, n) < 0 || !(e->head = malloc(n + 1)))
        return -1;
    char *p = e->head;
    for (unsigned i = 0; i < ex->nfields; i++) {
        const char *name = ex->fields[i].name, *v = ex->fields[i].value;
        if (unstored(name))
            continue;
        size_t nl = strlen(name) + 1, vl = strlen(v) + 1;
        memcpy(p, name, nl);
        memcpy(p + nl, v, vl);
        if (!strcasecmp(name, "ETag"))
            e->etag = p + nl;
        p += nl + vl;
        e->nfields++;
    }
    if (ctype)
        memcpy(p, ctype, strlen(ctype) + 1), e->ctype = p;
    e->headlen = n;
    return 0;
}

/* May this response be shared with other clients at all? */
int ce_shareable(const resp_facts_t *rf, int status)
{
    return !rf->set_cookie && !rf->cc.private_ && !rf->cc.no_store &&
           !(rf->vary && cc_vary_star(rf->vary, strlen(rf->vary))) && status >= 200 &&
           status != 206;
}

/* The Date every answer from e carries: its origin's. */
void ce_entry_date(rs_entry_t *e, int64_t t)
{
    hbuf_t b = hb_init(e->date, sizeof e->date);
    hb_date(&b, (time_t)t);
    if (!hb_str(&b))
        e->date[0] = 0;
}

/* Fields a 304 does not change in the stored response (RFC 9111 3.2): its
   framing and coding, and what the cache keeps to itself or never shares. */
static int kept_on_update(const char *name)
{
    static const char *const keep[] = {"content-length", "content-encoding", "transfer-encoding",
                                       "content-range",  "set-cookie",       "etag",
                                       "content-md5"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (!strcasecmp(name, keep[i]))
            return 1;
    return unstored(name);
}

/* Append name: value to the head block at *p; count it in e. */
static void head_put(rs_entry_t *e, char **p, const char *name, const char *value)
{
    size_t nl = strlen(name) + 1, vl = strlen(value) + 1;
    memcpy(*p, name, nl);
    memcpy(*p + nl, value, vl);
    if (!strcasecmp(name, "ETag"))
        e->etag = *p + nl;
    *p += nl + vl;
    e->nfields++;
}

/* s's stored fields with the 304's in place of those of the same names
   (RFC 9111 3.2), and its Content-Type if it sent one.  0, or -1: s is
   left as it was. */
int ce_head_update(cache_t *c, rs_entry_t *s, const exchange_t *ex, const char *ctype)
{
    size_t n = 0;
    const char *p = s->head;
    for (unsigned i = 0; i < s->nfields; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        if (kept_on_update(name) || ex_field_at(ex, name) < 0)
            n += (size_t)(p - name);
    }
    for (unsigned i = 0; i < ex->nfields; i++)
        if (!kept_on_update(ex->fields[i].name))
            n += strlen(ex->fields[i].name) + strlen(ex->fields[i].value) + 2;
    const char *ct = ctype ? ctype : s->ctype;
    n += ct ? strlen(ct) + 1 : 0;
    char *h;
    if (n > CACHE_HEAD_MAX || (n > s->headlen && rs_charge(&c->store, s, n - s->headlen) < 0) ||
        !(h = malloc(n + 1)))
        return -1;
    char *q = h, *old = s->head;
    unsigned nf = s->nfields;
    s->nfields = 0, s->etag = NULL;
    for (p = old; nf--;) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        if (kept_on_update(name) || ex_field_at(ex, name) < 0)
            head_put(s, &q, name, value);
    }
    for (unsigned i = 0; i < ex->nfields; i++)
        if (!kept_on_update(ex->fields[i].name))
            head_put(s, &q, ex->fields[i].name, ex->fields[i].value);
    s->ctype = NULL;
    if (ct) {
        memmove(q, ct, strlen(ct) + 1); /* ct may be in old: still there */
        s->ctype = q;
    }
    free(old);
    s->head = h;
    s->headlen = n > s->headlen ? n : s->headlen; /* what is counted */
    return 0;
}

static void ban_one(rstore_t *s, rs_entry_t *e, void *arg)
{
    (void)arg;
    if (e->state != RS_FILLING)
        rs_unlink(s, e);
}

size_t ce_invalidate(cache_t *c, const char *key, size_t n)
{
    size_t k = 0;
    uint32_t h = rs_hash(key, n);
    for (rs_entry_t *e = rs_first(&c->store, h, key, n), *next; e; e = next) {
        next = rs_next(e);
        if (e->state != RS_FILLING)
            rs_unlink(&c->store, e), k++;
    }
    return k;
}

size_t ce_purge(cache_t *c, const char *key, size_t n)
{
    size_t purged = 0, skip = n > 5 && !memcmp(key, "https", 6) ? 6 : 5;
    if (n < skip || memcmp(key, "http", 4))
        return 0;
    for (int scheme = 0; scheme < 2; scheme++) {
        size_t off = scheme ? 5 : 6; /* "https\0" or "http\0" */
        char alt[RS_KEY_MAX + 8];
        if (n - skip > RS_KEY_MAX)
            return purged;
        memcpy(alt, scheme ? "http" : "https", off);
        memcpy(alt + off, key + skip, n - skip);
        size_t an = off + n - skip;
        if (an && alt[an - 1] == '*')
            purged += rs_each_prefix(&c->store, alt, an - 1, ban_one, NULL);
        else
            purged += ce_invalidate(c, alt, an);
    }
    return purged;
}
