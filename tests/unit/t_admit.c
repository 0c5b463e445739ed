/* admit: what an HTTP/2 and an HTTP/3 request goes through before the
   router, against a codec of our own (its sb_ops record what it was told). */
#include "admit.h"
#include "config.h"
#include "gio.h"
#include "hstate.h"
#include "http_parse.h"
#include "peerlimits.h"
#include "site.h"
#include "tap.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tstream {
    exchange_t ex;
    sbody_t sb;
    int submits, status, resets, why, lasts, infos, nf;
    int turned[3];       /* turned_away's calls, by why */
    int said_goaway;     /* last() said it once */
    char f0[16], f1[32]; /* the informational head's first two values */
    http_request_t req;
} tstream_t; /* (sb_pool_take zeroes what lies between the exchange and req) */
SB_CHECK_LAYOUT(tstream_t);

static tstream_t *ts(exchange_t *ex)
{
    return (tstream_t *)ex;
}

static int t_submit(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    (void)ctype, (void)len, (void)mtime;
    ts(ex)->submits++, ts(ex)->status = status;
    return 0;
}

static void t_reset(exchange_t *ex, int why)
{
    ts(ex)->resets++, ts(ex)->why = why;
    sb_of(ex)->closed = 1;
}

static void t_consume(exchange_t *ex, size_t n)
{
    (void)ex, (void)n;
}

static int t_last(exchange_t *ex)
{
    tstream_t *t = ts(ex);
    t->lasts++;
    if (t->said_goaway)
        return 0;
    return t->said_goaway = 1;
}

static void t_turned(exchange_t *ex, int why)
{
    ts(ex)->turned[why]++;
}

static int t_info(exchange_t *ex, const http_field_t *f, size_t n)
{
    tstream_t *t = ts(ex);
    t->infos++, t->nf = (int)n;
    snprintf(t->f0, sizeof t->f0, "%s", f[0].value);
    snprintf(t->f1, sizeof t->f1, "%s", n > 1 ? f[1].value : "");
    return 0;
}

static const sb_ops_t ops = {.submit = t_submit,
                             .reset = t_reset,
                             .consume = t_consume,
                             .last = t_last,
                             .turned_away = t_turned,
                             .info = t_info,
                             .version = "HTTP/9.0"};

static void t_wake(void *conn)
{
    (void)conn;
}

static const ex_codec_t codec = {SB_CODEC_OPS, .hints = admit_codec_hints};
static proc_t proc; /* nothing made: no TLS store, no ACME, no cluster */
static site_t site = {.proc = &proc}; /* no route: no producer takes a body */
static config_t cfg;
static sb_conn_t sc;
static struct sockaddr_in peer = {.sin_family = AF_INET}; /* 0.0.0.0: any address */

static sb_pool_t pool; /* keeps none: every stream is new */

/* A stream (its memory and first field block as a codec's, sb_pool_take)
   of a request of method for /x, on a connection of its own unless
   same_conn. */
static tstream_t *begin(const char *method, int same_conn)
{
    tstream_t *t = (tstream_t *)sb_pool_take(&pool, sizeof *t, offsetof(tstream_t, req));
    if (!t)
        abort();
    memset(&t->ex, 0, sizeof t->ex);
    t->ex.site = &site;
    t->ex.codec = &codec;
    t->ex.peer = (const struct sockaddr *)&peer;
    t->ex.req = &t->req;
    t->sb.ops = &ops;
    if (!same_conn)
        sc = (sb_conn_t){.wake = t_wake, .conn = t};
    t->sb.c = &sc;
    t->req.method = (http_str_t){method, strlen(method)};
    t->req.target = (http_str_t){"/x", 2};
    return t;
}

static void end(tstream_t *t)
{
    sb_release(&t->sb);
    sb_pool_give(&pool, (sb_stream_t *)t);
}

static void test_fields_cap(void)
{
    tstream_t *t = begin("GET", 0);
    static uint8_t big[HTTP_MAX_HEAD];
    memset(big, 'a', sizeof big);
    const char *k = admit_keep(&t->sb, big, 100);
    ok(k && !memcmp(k, big, 100) && k[100] == 0, "a field is kept, NUL-terminated");
    is_int((int)t->sb.hdrlen, 101, "... and counted with its NUL");
    ok(!admit_keep(&t->sb, big, HTTP_MAX_HEAD - 101), "one byte past HTTP_MAX_HEAD: not kept");
    ok(t->sb.bad && !t->sb.refused, "... the head is bad (431), the stream not refused");
    ok(admit_keep(&t->sb, big, HTTP_MAX_HEAD - 102) != NULL, "what still fits is kept");
    is_int(admit_request(&t->sb, &t->req), -1, "a bad head is not routed");
    ok(t->status == 431 && t->submits == 1, "... it is answered 431");
    is_int(t->turned[SB_FIELDS_OVER], 1, "... and the codec told once (its counter)");
    end(t);
}

static void test_refused(void)
{
    tstream_t *t = begin("GET", 0);
    sc.fields_bytes = SB_CONN_FIELDS_MAX; /* the connection's blocks are full */
    ok(!admit_keep(&t->sb, (const uint8_t *)"v", 1), "no room on the connection: not kept");
    ok(t->sb.refused && !t->sb.bad, "... the stream is refused, not a 431");
    ok(t->resets == 1 && t->why == SB_REFUSED, "... reset as refused");
    is_int(t->turned[SB_NO_ROOM], 1, "... the codec told (its counter)");
    admit_refuse(&t->sb);
    ok(t->resets == 1 && t->turned[SB_NO_ROOM] == 1, "a second refusal does nothing");
    sc.fields_bytes = 0;
    end(t);
}

static void test_request(void)
{
    tstream_t *t = begin("HEAD", 0);
    is_int(admit_request(&t->sb, &t->req), 0, "a request is admitted");
    ok(t->ex.head_only, "HEAD: no body");
    ok(t->req.line.n == 16 && !memcmp(t->req.line.p, "HEAD /x HTTP/9.0", 16),
       "the access log's line, with the codec's version");
    is_int((int)sc.requests, 1, "counted on the connection");
    ok(!t->lasts && !t->submits && !t->resets, "nothing else said");
    end(t);
    t = begin("GET", 0);
    is_int(admit_request(&t->sb, &t->req), 0, "a GET ...");
    ok(!t->ex.head_only, "... has its body");
    end(t);
}

static void test_max_requests(void)
{
    tstream_t *t;
    cfg.max_requests = 2;
    uint64_t before = site.stats.max_requests;
    t = begin("GET", 0);
    admit_request(&t->sb, &t->req);
    is_int(t->lasts, 0, "-R 2: the first request is not the last");
    end(t);
    tstream_t *t2 = begin("GET", 1);
    t2->said_goaway = 0;
    is_int(admit_request(&t2->sb, &t2->req), 0, "the second is answered ...");
    is_int(t2->lasts, 1, "... and is the last: GOAWAY");
    is_int((int)(site.stats.max_requests - before), 1, "counted once");
    t2->lasts = 0;
    end(t2);
    tstream_t *t3 = begin("GET", 1);
    t3->said_goaway = 1; /* the connection said it already */
    is_int(admit_request(&t3->sb, &t3->req), 0, "a stream the GOAWAY let in is answered");
    is_int((int)(site.stats.max_requests - before), 1, "... and not counted again");
    end(t3);
    cfg.max_requests = 0;
}

static void test_rate_limit(void)
{
    limits_cfg_t lc = {.rpm = 1};
    limits_t *keep = site.limits;
    site.limits = limits_new(&lc, 16);
    uint64_t before = site.stats.rate_limited;
    tstream_t *t = begin("GET", 0);
    is_int(admit_request(&t->sb, &t->req), 0, "-A 1: the first request of the minute");
    end(t);
    t = begin("GET", 0);
    is_int(admit_request(&t->sb, &t->req), -1, "the second is turned away");
    is_int(t->turned[SB_RATE_LIMITED], 1, "... the codec's reaction");
    ok(!t->submits && !t->resets, "... and nothing else (the codec ends what it ends)");
    is_int((int)(site.stats.rate_limited - before), 1, "counted");
    end(t);
    limits_free(site.limits);
    site.limits = keep;
}

static void test_informational(void)
{
    tstream_t *t = begin("POST", 0);
    http_header_t h = {{"Expect", 6}, {"100-continue", 12}};
    is_int(admit_continue(&t->sb), 0, "no Expect ...");
    is_int(t->infos, 0, "... no 100");
    t->req.headers[0] = h, t->req.nheaders = 1;
    is_int(admit_continue(&t->sb), 0, "Expect: 100-continue ...");
    ok(t->infos == 1 && t->nf == 1 && !strcmp(t->f0, "100"), "... a 100 through the codec");
    is_int(ex_hints(&t->ex, "</a.css>; rel=preload"), 0, "103 Early Hints ...");
    ok(t->infos == 2 && t->nf == 2 && !strcmp(t->f0, "103") && !strcmp(t->f1, "</a.css>; rel=preload"),
       "... :status 103 and the link, through the codec");
    t->sb.closed = 1;
    is_int(ex_hints(&t->ex, "</b.css>"), 0, "a closed stream's hints ...");
    is_int(t->infos, 2, "... are not sent");
    end(t);
}

static void test_body(void)
{
    tstream_t *t = begin("POST", 0);
    is_int(admit_body(&t->sb), ADMIT_DROP, "no Content-Length, no producer: read and dropped");
    ok(t->ex.req_len == -1 && !t->sb.early, "... of no known length");
    end(t);
    t = begin("POST", 0);
    http_header_t cl = {{"Content-Length", 14}, {"1048576", 7}};
    t->req.headers[0] = cl, t->req.nheaders = 1;
    is_int(admit_body(&t->sb), ADMIT_DROP, "CODEC_BODY_MAX bytes: dropped");
    ok(t->ex.req_len == 1048576, "... its length known");
    end(t);
    t = begin("POST", 0);
    cl.value = (http_str_t){"1048577", 7};
    t->req.headers[0] = cl, t->req.nheaders = 1;
    is_int(admit_body(&t->sb), ADMIT_TOO_LARGE, "one byte more: 413");
    end(t);
    t = begin("POST", 0);
    cl.value = (http_str_t){"12x", 3};
    t->req.headers[0] = cl, t->req.nheaders = 1;
    is_int(admit_body(&t->sb), ADMIT_DROP, "a Content-Length not all digits ...");
    is_int((int)t->ex.req_len, -1, "... is no length");
    end(t);
}

int main(void)
{
    limits_cfg_t off = {0};
    site.cfg = &cfg;
    site.loop = gio_loop_new();
    site.limits = limits_new(&off, 16);
    test_fields_cap();
    test_refused();
    test_request();
    test_max_requests();
    test_rate_limit();
    test_informational();
    test_body();
    limits_free(site.limits);
    gio_loop_free(site.loop);
    return tap_done();
}
