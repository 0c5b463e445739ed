/* The coded bodies of stored responses (--compress with --cache): a hit that
   asks for zstd, br or gzip is sent a body coded once per stored response
   and coding, kept beside the identity body in the entry and counted in the
   store's bytes (cache_int.h: cv_serve). */
#include "cache_int.h"
#include "compress.h"
#include "http/hbuf.h"
#include "site/encoding.h"
#include "site/zcoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing buffer: the coder's output, whole. */
typedef struct cbuf {
    char *p;
    size_t n, cap;
} cbuf_t;

/* zc_run's sink: the block appended to b (and freed). */
static int cv_sink(void *arg, char *p, size_t n)
{
    cbuf_t *b = arg;
    char *q = hb_grow(b->p, &b->cap, b->n + n, 1, 1024);
    if (!q) {
        free(p);
        return -1;
    }
    b->p = q;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    free(p);
    return 0;
}

/* e's body coded whole in enc (one coder, freed at once): a malloc'd
   buffer of *n bytes, or NULL (the caps reached, ENOMEM, the library). */
static char *code_whole(exchange_t *ex, const rs_entry_t *e, int enc, size_t *n)
{
    zc_t *z = compress_coder(ex, enc, e->body_len);
    if (!z)
        return NULL;
    /* a quarter of the body: what a text page codes to, or less */
    cbuf_t b = {malloc(e->body_len / 4 + 1024), 0, e->body_len / 4 + 1024};
    int r = b.p ? 0 : -1;
    for (unsigned i = 0; i < e->nparts && r == 0; i++)
        r = zc_run(z, e->parts[i].p, e->parts[i].n, ZC_MORE, cv_sink, &b);
    if (r == 0)
        r = zc_run(z, NULL, 0, ZC_END, cv_sink, &b);
    zc_free(z);
    if (r < 0 || !b.n) {
        free(b.p);
        return NULL;
    }
    char *q = realloc(b.p, b.n); /* what the store counts is what it holds */
    status_counters_t *st = &ex->site->stats;
    st->compress_in += e->body_len;
    st->compress_out += b.n;
    st->cache_coded_made++;
    *n = b.n;
    return q ? q : b.p;
}

/* compress_keep's callback: the coded body the owner's stage made of the
   fill, kept in the entry (the reader holds it) unless it has one. */
static void cv_kept(void *arg, int enc, char *p, size_t n)
{
    reader_t *r = arg;
    rs_entry_t *e = r->e;
    rs_part_t *v = &e->coded[compress_index(enc)];
    if ((e->state != RS_READY && e->state != RS_FILLING) || v->p ||
        rs_charge(&r->c->store, e, n) < 0) {
        free(p);
        return;
    }
    *v = (rs_part_t){p, n};
    r->c->site->stats.cache_coded_made++;
}

int cv_fill_reader(reader_t *r, rs_entry_t *e)
{
    exchange_t *ex = r->ex;
    if (!compress_wanted(ex, e->status, e->ctype, e->len))
        return 0;
    if (!r->owner)
        return 1;
    compress_keep(ex, r->c->store.max_object, cv_kept, r);
    return 0;
}

/* cs with the coding as its detail: "gatling; hit; detail=zstd", or with
   the detail it had: "gatling; hit; detail=\"stale zstd\"". */
static void cs_coded(char *out, size_t cap, const char *cs, const char *name)
{
    const char *d = strstr(cs, "; detail=");
    if (!d)
        snprintf(out, cap, "%s; detail=%s", cs, name);
    else
        snprintf(out, cap, "%.*s; detail=\"%s %s\"", (int)(d - cs), cs, d + 9, name);
}

int cv_serve(cache_t *c, exchange_t *ex, rs_entry_t *e, const char *cs, char *buf, size_t cap)
{
    int enc = compress_wanted(ex, e->status, e->ctype, e->body_len);
    if (!enc || (e->state != RS_READY && e->state != RS_GONE))
        return 1;
    int i = compress_index(enc);
    rs_part_t *v = &e->coded[i];
    char *own = NULL;
    size_t n = v->n;
    if (!v->p) {
        if (!(own = code_whole(ex, e, enc, &n)))
            return 1; /* the stage decides again: identity past the caps */
        if (e->state == RS_READY && rs_charge(&c->store, e, n) == 0)
            *v = (rs_part_t){own, n}, own = NULL;
    }
    if (!own)
        c->site->stats.cache_coded[i]++;
    cs_coded(buf, cap, cs, enc_name(enc));
    int at = ex_field_at(ex, "Cache-Status");
    if (at >= 0)
        ex->fields[at].value = buf;
    ex_log_note(ex->log_cache, buf);
    compress_precoded(ex);
    int h = ex_head(ex, e->status, e->ctype, n, -1);
    if (h) {
        free(own);
        return h < 0 ? -1 : 0;
    }
    return ex_body_buf(ex, own ? own : v->p, n, own ? EX_FREE : 0) < 0 ? -1 : 0;
}
