/* stream_body: what an HTTP/2 and an HTTP/3 stream do alike, against a codec
   of our own (its sb_ops record what they were asked). */
#include "site.h"
#include "stream_body.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct tstream {
    exchange_t ex;
    sbody_t sb;
    int submits, status, resets, why, resumes, wakes, drained, inputs, ready_inside;
    uint64_t len, consumed;
    size_t take; /* what the producer's input() takes of each offer */
    int last;
} tstream_t;
SB_CHECK_LAYOUT(tstream_t);

static tstream_t *ts(exchange_t *ex)
{
    return (tstream_t *)ex;
}

static int t_submit(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    (void)ctype, (void)mtime;
    ts(ex)->submits++, ts(ex)->status = status, ts(ex)->len = len;
    sb_of(ex)->streamed = len == EX_LEN_STREAM;
    return 0;
}

static void t_reset(exchange_t *ex, int why)
{
    ts(ex)->resets++, ts(ex)->why = why;
    sb_of(ex)->closed = 1;
}

static void t_consume(exchange_t *ex, size_t n)
{
    ts(ex)->consumed += n;
}

static void t_resume(exchange_t *ex)
{
    ts(ex)->resumes++;
}

static const sb_ops_t ops = {
    .submit = t_submit, .reset = t_reset, .consume = t_consume, .resume = t_resume};

static sb_conn_t sc;

static void t_wake(void *conn)
{
    ((tstream_t *)conn)->wakes++;
}

static size_t p_input(exchange_t *ex, const char *p, size_t n, int last)
{
    (void)p;
    tstream_t *t = ts(ex);
    t->inputs++;
    t->last |= last;
    if (t->ready_inside && t->ready_inside--) /* ready again within its own call */
        sb_codec_input_ready(ex);
    return n < t->take ? n : t->take;
}

static void p_drained(exchange_t *ex)
{
    ts(ex)->drained++;
}

static void p_end(exchange_t *ex)
{
    (void)ex;
}

static const ex_producer_t producer = {.input = p_input, .drained = p_drained, .end = p_end};
static const ex_codec_t codec = {SB_CODEC_OPS};
static proc_t proc; /* nothing made: no TLS store, no ACME, no cluster */
static site_t site = {.proc = &proc};

static void begin(tstream_t *t)
{
    memset(t, 0, sizeof *t);
    t->ex.site = &site;
    t->ex.codec = &codec;
    t->sb.ops = &ops;
    sc = (sb_conn_t){.wake = t_wake, .conn = t};
    t->sb.c = &sc;
}

static void end(tstream_t *t)
{
    sb_release(&t->sb);
    free(t->sb.parts);
}

static void test_head(void)
{
    tstream_t t;
    begin(&t);
    t.ex.nfields = 2;
    is_int(sb_codec_head(&t.ex, 101, NULL, 5, -1), 0, "101: a head");
    ok(t.status == 502 && t.len == 0 && t.ex.nfields == 0, "101 is 502 without a body or fields");
    t.sb.closed = 1;
    t.submits = 0;
    is_int(sb_codec_head(&t.ex, 200, NULL, 5, -1), 0, "a closed stream's head ...");
    is_int(t.submits, 0, "... is not sent");
    end(&t);

    begin(&t);
    t.ex.fields_over = 1;
    uint64_t before = site.stats.head_overflows;
    is_int(sb_codec_head(&t.ex, 200, "text/plain", 5, -1), EX_REPLACED, "fields over: replaced");
    ok(t.status == 500 && t.len > 0 && t.len == t.sb.given, "... by a 500 page, counted given");
    ok(t.sb.nparts == 1 && t.sb.parts[0].owned && t.sb.parts[0].len == t.len, "... as an owned part");
    is_int(site.stats.head_overflows, before + 1, "... and counted");
    end(&t);
}

static void test_body(void)
{
    tstream_t t;
    begin(&t);
    t.ex.producer = &producer;
    sb_codec_head(&t.ex, 200, NULL, EX_LEN_STREAM, -1);
    size_t n = EX_STREAM_HIGH / 2 + 1;
    is_int(sb_codec_body_buf(&t.ex, malloc(n), n, EX_FREE), 0, "a buffer");
    ok(!t.sb.want_drain && sc.drainers == 0, "below the high mark: no drain wanted");
    t.sb.waits = 1;
    is_int(sb_codec_body_buf(&t.ex, malloc(n), n, EX_FREE), 0, "another");
    ok(t.sb.want_drain && sc.drainers == 1, "past the high mark: a drainer");
    is_int(t.resumes, 1, "the reader that waited resumes");
    is_int(t.ex.body_len, 2 * n, "a streamed body counts its length as it comes");
    is_int(sb_codec_queued(&t.ex), 2 * n, "queued: given, not sent");
    sb_drained(&t.sb);
    is_int(t.drained, 0, "not drained while above the low mark");
    t.sb.body_sent = 2 * n - EX_STREAM_LOW;
    sb_drained(&t.sb);
    is_int(t.drained, 0, "not at the low mark");
    t.sb.body_sent++;
    sb_drained(&t.sb);
    ok(t.drained == 1 && !t.sb.want_drain && sc.drainers == 0, "drained below it, once");
    sb_drained(&t.sb);
    is_int(t.drained, 1, "only once");
    is_int(sb_codec_body_file(&t.ex, 0, 10, 20), 0, "a file range");
    ok(t.sb.nparts == 3 && t.sb.parts[2].fd == 0 && t.sb.parts[2].off == 10, "... queued");
    is_int(t.sb.given, 2 * n + 20, "... and given");
    int w = t.wakes;
    sb_codec_body_end(&t.ex);
    ok(t.sb.ended && t.wakes == w + 1, "the end: ended, the connection woken");
    t.sb.closed = 1;
    is_int(sb_codec_body_buf(&t.ex, malloc(8), 8, EX_FREE), 0, "a closed stream's buffer ...");
    ok(t.sb.nparts == 3, "... is dropped (freed: ASan)");
    ok(sb_codec_queued(&t.ex) == UINT64_MAX, "a closed stream says all is queued");
    sb_codec_body_abort(&t.ex);
    is_int(t.resets, 0, "abort: a closed stream is not reset again");
    t.sb.want_drain = 1, sc.drainers = 1;
    end(&t);
    is_int(sc.drainers, 0, "released: no more a drainer");
}

static void test_input(void)
{
    tstream_t t;
    begin(&t);
    t.ex.producer = &producer;
    t.sb.early = 1;
    t.take = 3;
    sb_body_to_producer(&t.sb, (const uint8_t *)"0123456789", 10);
    ok(t.consumed == 3 && t.sb.held_len == 7 && sc.held_bytes == 7, "taken 3, held 7");
    ok(t.sb.input_held, "the producer is not ready");
    sb_body_to_producer(&t.sb, (const uint8_t *)"ab", 2);
    ok(t.inputs == 1 && t.sb.held_len == 9, "while held, more is held, not offered");
    t.take = 4;
    t.ready_inside = 1;
    sb_codec_input_ready(&t.ex);
    ok(t.consumed == 3 + 8 && t.sb.held_len == 1, "ready: offered again while ready within");
    t.take = 100;
    t.sb.input_last = 1;
    sb_codec_input_ready(&t.ex);
    ok(t.sb.held_len == 0 && sc.held_bytes == 0 && t.consumed == 12, "all taken");
    ok(t.last && t.sb.input_done, "and the end told");
    end(&t);

    begin(&t);
    t.ex.producer = &producer;
    t.take = 0;
    t.ready_inside = 1000; /* says ready and takes nothing: no endless offers */
    sb_body_to_producer(&t.sb, (const uint8_t *)"xy", 2);
    ok(t.inputs < 10 && t.sb.held_len == 2, "a producer that takes nothing stops the offers");
    end(&t);

    begin(&t);
    t.ex.producer = &producer;
    t.take = 0;
    size_t big = SB_HELD_MAX / 2 + 1;
    uint8_t *p = calloc(1, big);
    sb_body_to_producer(&t.sb, p, big);
    is_int(t.resets, 0, "half the connection's limit is held");
    sb_body_to_producer(&t.sb, p, big);
    ok(t.resets == 1 && t.why == SB_CALM, "past it: reset (calm)");
    is_int(t.consumed, big, "... its bytes consumed");
    free(p);
    end(&t);
}

static void test_line(void)
{
    http_request_t req = {.method = {"GET", 3}, .target = {"/x?y", 4}};
    char line[64];
    size_t n = sb_line_size(&req);
    ok(n <= sizeof line, "the line's size");
    sb_line(&req, line, n, "HTTP/2.0");
    ok(req.line.n == 17 && !memcmp(req.line.p, "GET /x?y HTTP/2.0", 17), "GET /x?y HTTP/2.0");
}

/* The request's fields in blocks: the stream's own first, then doubling, a
   large field alone, and the connection's cap. */
/* The bytes of field blocks the stream's connection counts past base. */
static size_t used(size_t base)
{
    return sc.fields_bytes - base;
}

static void test_fields(void)
{
    tstream_t t;
    begin(&t);
    union {
        sb_chunk_t k;
        char room[sizeof(sb_chunk_t) + SB_CHUNK];
    } first;
    t.sb.first = &first.k;
    /* other streams of the connection hold all but 4 KiB of its cap */
    const size_t base = SB_CONN_FIELDS_MAX - 4096;
    sc.fields_bytes = base;
    char *a = sb_room(&t.sb, 100);
    ok(a == first.k.b && used(base) == SB_CHUNK, "the first bytes go to the stream's own block");
    ok(sb_room(&t.sb, 400) == a + 100, "... while they fit");
    char *c = sb_room(&t.sb, 100);
    ok(c && c != a + 500 && used(base) == 3 * SB_CHUNK, "then a block twice as large (%zu)",
       used(base));
    char *big = sb_room(&t.sb, 2000);
    ok(big && used(base) == 3 * SB_CHUNK + 2000, "a large field: a block of its size");
    ok(sb_room(&t.sb, 50) == c + 100, "... behind the current one");
    ok(!sb_room(&t.sb, 2000) && used(base) == 3 * SB_CHUNK + 2000,
       "past the connection's cap: NULL, nothing counted");
    end(&t);
    is_int((int)sc.fields_bytes, (int)base, "released: the bytes counted go");
    ok(!t.sb.fields, "no block left");
}

/* The response head's fields: the same list for HTTP/2 and HTTP/3. */
static void test_head_fields(void)
{
    static config_t cfg = {.hsts = 600};
    tstream_t t;
    begin(&t);
    site.cfg = &cfg;
    t.ex.date = "Wed, 25 Nov 2026 23:00:00 GMT"; /* a stored response's: the site's clock unused */
    ex_field(&t.ex, "X-Cache", "HIT");
    ex_field(&t.ex, "Connection", "close");
    ex_field(&t.ex, "Proxy-Connection", "keep-alive");
    ex_field(&t.ex, "Alt-Svc", "h3=\":443\"");
    sb_head_strs_t strs;
    const http_field_t *f = strs.t.low;
    size_t n = sb_head_fields(&t.ex, 200, "text/plain", 1234, -1, NULL, &strs);
    is_int((int)n, 7, "status, server, date, type, length, two fields kept of four");
    ok(!strcmp(f[0].name, ":status") && f[0].nlen == 7 && !strcmp(f[0].value, "200") &&
           f[0].vlen == 3, ":status first, lengths right");
    ok(!strcmp(f[2].value, t.ex.date), "the stored response's date");
    ok(!strcmp(f[4].name, "content-length") && !strcmp(f[4].value, "1234"), "content-length");
    ok(!strcmp(f[5].name, "x-cache") && f[5].nlen == 7 && !strcmp(f[6].name, "alt-svc"),
       "the exchange's names in lower case, the connection-specific ones dropped");
    t.ex.secure = 1;
    n = sb_head_fields(&t.ex, 304, NULL, 1234, -1, "alt-svc", &strs);
    is_int((int)n, 5, "304: no type, no length; HSTS when secure; alt-svc dropped on asking");
    ok(!strcmp(f[3].name, "strict-transport-security") && !strcmp(f[3].value, "max-age=600"),
       "HSTS's max-age");
    ok(!strcmp(f[4].name, "x-cache"), "only x-cache of the four");
    static const char longname[] = "X-Longlonglonglonglonglonglonglonglonglonglonglonglong-Name";
    ex_field(&t.ex, longname, "v");
    n = sb_head_fields(&t.ex, 200, NULL, 0, -1, NULL, &strs);
    ok(n == 8 && f[7].nlen == sizeof longname - 1 &&
           !strcmp(f[7].name, "x-longlonglonglonglonglonglonglonglonglonglonglonglong-name"),
       "a name of %zu characters whole, in lower case", sizeof longname - 1);
    char huge[SB_HEAD_NAMES / EX_FIELDS_MAX * 2];
    memset(huge, 'X', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    while (t.ex.nfields < EX_FIELDS_MAX)
        ex_field(&t.ex, huge, "v");
    ok(!sb_head_fields(&t.ex, 200, NULL, 0, -1, NULL, &strs),
       "names past SB_HEAD_NAMES in all: none (%u fields)", t.ex.nfields);
    site.cfg = NULL;
    end(&t);
}

/* The handler's names are lowered a word at a time: every length from 1
   to 40, at every offset of a name holding the bytes around 'A' and 'Z'
   and some past 0x7f, lowered as tolower would in the C locale. */
static void test_head_names_lowered(void)
{
    static config_t cfg = {.hsts = -1};
    static const char mix[] = "@AZ[`az{Aa\x80\xc1\xdaZz-09_Q\xff\x7fMN@[AZaz`{X-Y"
                              "@AZ[`az{Aa\x80\xc1\xdaZz-09_Q\xff\x7fMN@[AZaz`{X-Y";
    tstream_t t;
    begin(&t);
    site.cfg = &cfg;
    t.ex.date = "Wed, 25 Nov 2026 23:00:00 GMT";
    int bad = 0;
    for (size_t n = 1; n <= 40; n++)
        for (size_t off = 0; off + n < sizeof mix - 1 && off < 24; off++) {
            char name[64], want[64];
            memcpy(name, mix + off, n);
            name[n] = 0;
            for (size_t i = 0; i <= n; i++)
                want[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
            t.ex.nfields = 0;
            ex_field(&t.ex, name, "v");
            sb_head_strs_t strs;
            size_t k = sb_head_fields(&t.ex, 200, NULL, 0, -1, NULL, &strs);
            const http_field_t *f = &strs.t.low[k - 1];
            if (k != 5 || f->nlen != n || memcmp(f->name, want, n + 1) ||
                memcmp(name, mix + off, n))
                bad++;
        }
    is_int(bad, 0, "names of 1 to 40 bytes at each offset lowered byte for byte");
    site.cfg = NULL;
    end(&t);
}

/* A codec's stream as the pool sees it: the layout, then its request. */
typedef struct pstream {
    exchange_t ex;
    sbody_t sb;
    int own;
    http_request_t req;
} pstream_t;
SB_CHECK_LAYOUT(pstream_t);

/* Spare streams: kept while streams are open (or, lingering, up to the
   most open at once), reused warm, freed when the rule says. */
static void test_pool(void)
{
    sb_pool_t p = {.max = 3};
    size_t size = sizeof(pstream_t), off = offsetof(pstream_t, req);
    sb_stream_t *s[5];
    for (int i = 0; i < 5; i++)
        s[i] = sb_pool_take(&p, size, off);
    s[0]->sb.cap = 7; /* as if it had grown a parts array */
    s[0]->sb.parts = malloc(7 * sizeof(sb_part_t));
    ok(p.live == 5 && p.peak == 5 && !p.nspare, "five taken, none spare");
    sb_pool_give(&p, s[0]);
    sb_pool_give(&p, s[1]);
    is_int((int)p.nspare, 2, "given back while others are open: kept");
    sb_stream_t *again = sb_pool_take(&p, size, off);
    ok(again == s[1] && !again->sb.spare_next, "the newest spare is taken first, unlinked");
    sb_pool_give(&p, again);
    for (int i = 2; i < 5; i++)
        sb_pool_give(&p, s[i]);
    ok(!p.live && !p.nspare && !p.spare, "none open: the spares are freed");
    sb_pool_t q = {.max = 3, .linger = 1};
    for (int i = 0; i < 5; i++)
        s[i] = sb_pool_take(&q, size, off);
    for (int i = 0; i < 5; i++)
        sb_pool_give(&q, s[i]);
    ok(!q.live && q.nspare == 3, "lingering: kept when none is open, at most max");
    sb_stream_t *t = sb_pool_take(&q, size, off);
    ((pstream_t *)t)->own = 1, ((pstream_t *)t)->req.nheaders = 3;
    sb_pool_give(&q, t);
    t = sb_pool_take(&q, size, off);
    ok(q.nspare == 2 && !t->sb.fields && !((pstream_t *)t)->own && !((pstream_t *)t)->req.nheaders,
       "taken again: its own fields and its request's zeroed");
    sb_pool_give(&q, t);
    sb_pool_empty(&q);
    ok(!q.nspare && q.peak == 0, "emptied by its owner: the peak starts again");
    s[0] = sb_pool_take(&q, size, off);
    sb_pool_give(&q, s[0]);
    ok(q.nspare == 1, "then it keeps what the new peak allows");
    sb_pool_empty(&q);
}

int main(void)
{
    test_head();
    test_body();
    test_input();
    test_line();
    test_fields();
    test_head_fields();
    test_head_names_lowered();
    test_pool();
    return tap_done();
}
