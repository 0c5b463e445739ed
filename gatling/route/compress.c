/* Content coding on the fly of dynamic answers: see compress.h. */
#include "compress.h"
#include "router.h"
#include "handlers/hstate.h"
#include "http/hbuf.h"
#include "http/path.h"
#include "site/encoding.h"
#include "site/zcoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The loop's part: the options read once, the process's coders counted. */
typedef struct compress {
    const config_t *cfg;
    zc_budget_t budget;
    size_t min, streams, memory;
    const char *types, *skip;
    int secrets; /* --compress secrets: code answers that may carry one (BREACH) */
} compress_t;

#define VARY_MAX 512
#define ETAG_MAX 256

/* One exchange's stage: the codec it wraps, and the coder once it codes. */
typedef struct cstage {
    ex_codec_t codec; /* the original's, with ours where the body passes */
    const ex_codec_t *orig;
    compress_t *cp;
    zc_t *z;          /* NULL until (unless) the head says code */
    int enc;
    uint64_t len, got; /* the handler's length (EX_LEN_STREAM: none), and bytes so far */
    uint8_t done;      /* the coded stream was ended (the codec was told) */
    compress_kept_t kept; /* compress_keep's: a copy of the coded body to it, or NULL */
    void *karg;
    char *kp; /* the copy so far */
    size_t kn, kcap, kmax;
    char vary[VARY_MAX];
    char etag[ETAG_MAX];
} cstage_t;

static ex_slot_t *zslot(exchange_t *ex)
{
    return hslot(ex, HSLOT_COMPRESS);
}

/* ---- the rules ---- */

/* Is the item it[0..n) of a list a match for s[0..m) ("text/ *" a whole
   type, "*+json" a suffix)? */
static int type_item(const char *it, size_t n, const char *s, size_t m)
{
    if (n >= 2 && it[n - 1] == '*' && it[n - 2] == '/')
        return m >= n - 1 && !strncasecmp(it, s, n - 1);
    if (n >= 1 && it[0] == '*')
        return m >= n - 1 && !strncasecmp(it + 1, s + m - (n - 1), n - 1);
    return n == m && !strncasecmp(it, s, n);
}

/* Is Content-Type ctype (its parameters aside) on the comma list? */
static int type_listed(const char *list, const char *ctype)
{
    if (!ctype)
        return 0;
    while (*ctype == ' ' || *ctype == '\t')
        ctype++;
    size_t m = strcspn(ctype, "; \t");
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n && type_item(p, n, ctype, m))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Is the path (normalised) below a prefix of the skip list? */
static int path_skipped(const char *list, const char *path, size_t len)
{
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n && n <= len && !memcmp(p, path, n))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The field name's value among ex's response fields, and its index. */
static const char *field(const exchange_t *ex, const char *name, int *at)
{
    int i = ex_field_at(ex, name);
    if (i >= 0 && at)
        *at = i;
    return i >= 0 ? ex->fields[i].value : NULL;
}

/* Has the list value v the token tok (case-insensitive, as a whole item)? */
static int has_token(const char *v, const char *tok)
{
    return http_list_has((http_str_t){v, strlen(v)}, tok);
}

/* BREACH: may the answer carry a secret beside what the request reflects?
   The request's credentials (a CSRF token, a session's data come back to
   them), or an answer that sets a cookie or is private. */
static int creds(const exchange_t *ex)
{
    return http_header(ex->req, "Cookie") || http_header(ex->req, "Authorization") ||
           (ex->client && ex->client->cert);
}

static int answer_private(const exchange_t *ex, const char *cc)
{
    return field(ex, "Set-Cookie", NULL) ||
           (cc && (has_token(cc, "private") || has_token(cc, "no-store")));
}

/* May this answer be coded at all?  (The client's offer was checked at
   the entry; the caps come after.)  RFC 9110 8.4: an encoded answer stays
   as it is; 9111 5.2.2.6: no-transform is kept. */
static int codable(const compress_t *cp, const exchange_t *ex, int status, const char *ctype,
                   uint64_t len)
{
    if (ex->head_only || ex->file || status < 200 || status == 204 || status == 206 ||
        (status >= 300 && status < 400) || len == 0)
        return 0;
    if (len != EX_LEN_STREAM && len < cp->min)
        return 0;
    const char *ce = field(ex, "Content-Encoding", NULL);
    const char *cc = field(ex, "Cache-Control", NULL);
    if ((ce && strcasecmp(ce, "identity")) || field(ex, "Content-Range", NULL) ||
        (cc && has_token(cc, "no-transform")))
        return 0;
    if (!cp->secrets && answer_private(ex, cc)) /* coded only where the site says so */
        return 0;
    return type_listed(cp->types, ctype);
}

/* Vary: Accept-Encoding, merged with the handler's (one field). */
static void vary_merge(cstage_t *c, exchange_t *ex)
{
    int at;
    const char *v = field(ex, "Vary", &at);
    if (!v) {
        ex_field(ex, "Vary", "Accept-Encoding");
        return;
    }
    if (has_token(v, "accept-encoding") || has_token(v, "*"))
        return;
    int n = snprintf(c->vary, sizeof c->vary, "%s, Accept-Encoding", v);
    if (n > 0 && (size_t)n < sizeof c->vary)
        ex->fields[at].value = c->vary;
}

/* A strong ETag becomes weak: the coded bytes are not the backend's
   (RFC 9110 8.8.3), but they mean the same, and a weak validator still
   lets the backend answer If-None-Match with 304. */
static void etag_weaken(cstage_t *c, exchange_t *ex)
{
    int at;
    const char *v = field(ex, "ETag", &at);
    if (!v || v[0] != '"')
        return;
    int n = snprintf(c->etag, sizeof c->etag, "W/%s", v);
    if (n > 0 && (size_t)n < sizeof c->etag)
        ex->fields[at].value = c->etag;
}

/* Drop the field name (one), if there. */
static void drop_field(exchange_t *ex, const char *name)
{
    int at;
    if (!field(ex, name, &at))
        return;
    memmove(&ex->fields[at], &ex->fields[at + 1], (ex->nfields - at - 1) * sizeof ex->fields[0]);
    ex->nfields--;
}

/* The stats' index of a coding: compressed[] is gzip, br, zstd. */
static int enc_index(int enc)
{
    return enc == ENC_GZIP ? 0 : enc == ENC_BR ? 1 : 2;
}

/* ---- the stage ---- */

/* --compress secrets and an answer that may carry one: a coding that can be
   padded (brotli cannot: zc_pad), the client's next choice, or identity (0). */
static int padded_enc(const exchange_t *ex, int enc)
{
    if (enc != ENC_BR)
        return enc;
    const http_str_t *ae = http_header(ex->req, "Accept-Encoding");
    return ae ? enc_choose_coded(ae->p, ae->n, ENC_ALL & ~ENC_BR) : ENC_IDENTITY;
}

/* Random padding of 1..COMPRESS_PAD bytes ("Heal the BREACH"): a guess that
   compresses a few bytes better hides in it (gatling(8), CONTENT CODINGS). */
static int pad(exchange_t *ex, zc_t *z)
{
    if (zc_pad(z, 1 + arc4random_uniform(COMPRESS_PAD)) < 0)
        return -1;
    ex->site->stats.compress_padded++;
    return 0;
}

static int z_head(exchange_t *ex, int status, const char *ctype, uint64_t len, time_t mtime)
{
    cstage_t *c = zslot(ex)->p;
    compress_t *cp = c->cp;
    if (!codable(cp, ex, status, ctype, len)) {
        ex->codec = c->orig; /* steps aside for the rest of the exchange */
        return c->orig->head(ex, status, ctype, len, mtime);
    }
    vary_merge(c, ex);
    int secret = cp->secrets && (creds(ex) || answer_private(ex, field(ex, "Cache-Control", NULL)));
    if (secret && !(c->enc = padded_enc(ex, c->enc))) {
        ex->codec = c->orig; /* only brotli offered: identity */
        return c->orig->head(ex, status, ctype, len, mtime);
    }
    if (cp->budget.streams >= cp->streams || cp->budget.bytes >= cp->memory ||
        !(c->z = zc_new(c->enc, len == EX_LEN_STREAM ? 0 : len, &cp->budget)) ||
        (secret && pad(ex, c->z) < 0)) {
        zc_free(c->z);
        c->z = NULL;
        ex->site->stats.compress_capped++; /* a preference, not a demand: identity */
        ex->codec = c->orig;
        return c->orig->head(ex, status, ctype, len, mtime);
    }
    etag_weaken(c, ex);
    drop_field(ex, "Accept-Ranges"); /* ranges of the coded bytes are not offered */
    drop_field(ex, "Content-Encoding"); /* "identity", if any: ours replaces it */
    ex_field(ex, "Content-Encoding", enc_name(c->enc));
    ex->site->stats.compressed[enc_index(c->enc)]++;
    c->len = len;
    return c->orig->head(ex, status, ctype, EX_LEN_STREAM, mtime);
}

/* zc_run's sink: coded bytes to the codec, which owns them. */
static int z_sink(void *arg, char *p, size_t n)
{
    exchange_t *ex = arg;
    cstage_t *c = zslot(ex)->p;
    ex->site->stats.compress_out += n;
    if (c->kept) { /* a copy for compress_keep, while it fits */
        char *q = c->kn + n <= c->kmax ? hb_grow(c->kp, &c->kcap, c->kn + n, 1, 4096) : NULL;
        if (q) {
            c->kp = q;
            memcpy(q + c->kn, p, n);
            c->kn += n;
        } else {
            free(c->kp);
            c->kp = NULL, c->kn = c->kcap = 0, c->kept = NULL;
        }
    }
    return c->orig->body_buf(ex, p, n, EX_FREE);
}

/* The coded stream ends: its last bytes, then the codec's end.  Nothing of
   c is touched after that (the exchange may end inside it). */
static int z_finish(exchange_t *ex, cstage_t *c)
{
    c->done = 1;
    int r = zc_run(c->z, NULL, 0, ZC_END, z_sink, ex);
    zc_free(c->z); /* its memory back at once, not when a slow client is done */
    c->z = NULL;
    if (r == 0 && c->kept && c->kn) {
        char *q = realloc(c->kp, c->kn); /* what is kept is what it holds */
        if (q)
            c->kp = q;
        c->kept(c->karg, c->enc, c->kp, c->kn);
        c->kp = NULL, c->kept = NULL;
    }
    return r < 0 ? -1 : c->orig->body_end(ex);
}

static int z_body_buf(exchange_t *ex, const void *p, size_t n, int flags)
{
    cstage_t *c = zslot(ex)->p;
    if (c->done) { /* more than the length the head said: as the codec would, drop it */
        if (flags & EX_FREE)
            free((void *)p);
        return 0;
    }
    c->got += n;
    int last = c->len != EX_LEN_STREAM && c->got >= c->len;
    if (last && c->got > c->len)
        n -= (size_t)(c->got - c->len);
    ex->site->stats.compress_in += n;
    /* each chunk flushed: the producer hands over what it read, and a pause
       of its source must not hold bytes back from the client */
    int r = zc_run(c->z, p, n, last ? ZC_MORE : ZC_FLUSH, z_sink, ex);
    if (flags & EX_FREE)
        free((void *)p);
    if (r < 0)
        return -1;
    return last ? z_finish(ex, c) : 0;
}

/* A file range while coding: no handler the stage wraps sends one, but if
   one did, its bytes are read and coded as a buffer would be. */
static int z_body_file(exchange_t *ex, int fd, uint64_t off, uint64_t len)
{
    char *b = malloc(64 * 1024);
    if (!b)
        return -1;
    while (len > 0) {
        ssize_t k = pread(fd, b, len < 64 * 1024 ? len : 64 * 1024, (off_t)off);
        if (k <= 0 || z_body_buf(ex, b, (size_t)k, 0) < 0) {
            free(b);
            return -1;
        }
        off += (uint64_t)k, len -= (uint64_t)k;
    }
    free(b);
    return 0;
}

static int z_body_end(exchange_t *ex)
{
    cstage_t *c = zslot(ex)->p;
    if (c->done)
        return 0;
    if (c->len != EX_LEN_STREAM && c->got < c->len) { /* cut short: never a clean end */
        c->done = 1;
        c->orig->body_abort(ex);
        return 0;
    }
    return z_finish(ex, c);
}

static void z_end(exchange_t *ex, ex_slot_t *s)
{
    cstage_t *c = s->p;
    if (ex->codec == &c->codec)
        ex->codec = c->orig;
    zc_free(c->z);
    free(c->kp);
    s->p = NULL;
    free(c);
}

/* ---- for the response cache: a stored body coded whole ---- */

/* ex's stage, while it still wraps the codec; else NULL. */
static cstage_t *stage_of(exchange_t *ex)
{
    cstage_t *c = zslot(ex)->p;
    return c && ex->codec == &c->codec ? c : NULL;
}

int compress_wanted(exchange_t *ex, int status, const char *ctype, uint64_t len)
{
    cstage_t *c = stage_of(ex);
    return c && codable(c->cp, ex, status, ctype, len) ? c->enc : 0;
}

zc_t *compress_coder(exchange_t *ex, int enc, uint64_t len)
{
    cstage_t *c = stage_of(ex);
    if (!c)
        return NULL;
    compress_t *cp = c->cp;
    zc_t *z = NULL;
    if (cp->budget.streams >= cp->streams || cp->budget.bytes >= cp->memory ||
        !(z = zc_new(enc, len, &cp->budget)))
        ex->site->stats.compress_capped++;
    return z;
}

void compress_keep(exchange_t *ex, size_t max, compress_kept_t kept, void *arg)
{
    cstage_t *c = stage_of(ex);
    if (!c || c->z || c->done)
        return;
    c->kept = kept, c->karg = arg, c->kmax = max;
}

void compress_precoded(exchange_t *ex)
{
    cstage_t *c = stage_of(ex);
    if (!c)
        return;
    vary_merge(c, ex);
    etag_weaken(c, ex);
    drop_field(ex, "Accept-Ranges");
    drop_field(ex, "Content-Encoding");
    ex_field(ex, "Content-Encoding", enc_name(c->enc));
    ex->site->stats.compressed[enc_index(c->enc)]++;
    ex->codec = c->orig; /* the body passes as it is */
}

int compress_index(int enc)
{
    return enc_index(enc);
}

/* ---- the router's entry ---- */

/* Does ex's request offer a coding, and may its answer be coded?  Then
   the coding it prefers, a tie going to the cheapest (enc_choose_coded), else 0. */
static int offered(exchange_t *ex)
{
    const compress_t *cp = hstate(ex->site, HSTATE_COMPRESS);
    const http_str_t *ae = http_header(ex->req, "Accept-Encoding");
    if (!cp || !ae || ex->head_only || zslot(ex)->p)
        return 0;
    if (!cp->secrets && creds(ex)) /* BREACH: not coded by default */
        return 0;
    int enc = enc_choose_coded(ae->p, ae->n, ENC_ALL);
    if (enc == ENC_IDENTITY)
        return 0;
    path_t p;
    const http_str_t *t = &ex->req->target;
    if (cp->skip && (path_from_target(t->p, t->n, ex->path, EX_PATH_CAP, &p) != 0 ||
                     path_skipped(cp->skip, p.path, p.len)))
        return 0;
    return enc;
}

static int compress_match(exchange_t *ex)
{
    return offered(ex) && router_produced(ex->site, ex, HANDLER_CODE);
}

/* Wrap the codec: the answer's head decides. */
static int compress_serve(exchange_t *ex)
{
    cstage_t *c = malloc(sizeof *c);
    if (!c)
        return HANDLER_NOT_MINE; /* identity */
    *c = (cstage_t){.orig = ex->codec, .cp = hstate(ex->site, HSTATE_COMPRESS), .enc = offered(ex)};
    c->codec = *ex->codec;
    c->codec.head = z_head;
    c->codec.body_buf = z_body_buf;
    c->codec.body_file = z_body_file;
    c->codec.body_end = z_body_end;
    ex_slot_t *s = zslot(ex);
    s->p = c;
    s->end = z_end;
    ex->codec = &c->codec;
    return HANDLER_NOT_MINE;
}

static int compress_init(site_t *s)
{
    const config_t *cfg = s->cfg;
    compress_t *cp = calloc(1, sizeof *cp);
    if (!cp)
        return -1;
    cp->cfg = cfg;
    cp->min = cfg->compress_min ? (size_t)cfg->compress_min : COMPRESS_MIN;
    cp->streams = cfg->compress_streams ? (size_t)cfg->compress_streams : COMPRESS_STREAMS;
    cp->memory = cfg->compress_memory ? (size_t)cfg->compress_memory : COMPRESS_MEMORY;
    cp->types = cfg->compress_types ? cfg->compress_types : COMPRESS_TYPES;
    cp->skip = cfg->compress_skip;
    cp->secrets = cfg->compress_secrets;
    cp->budget.keep = 1; /* one loop's coders: their tables reused, not faulted in anew */
    hstate_set(s, HSTATE_COMPRESS, cp);
    return 0;
}

static void compress_free(site_t *s)
{
    compress_t *cp = hstate(s, HSTATE_COMPRESS);
    if (cp)
        zc_budget_clear(&cp->budget);
    free(cp);
    hstate_set(s, HSTATE_COMPRESS, NULL);
}

/* There only where something produces (router_init asks once every init
   is done): a site of files alone never pays for the entry's match. */
static int compress_on(const site_t *s)
{
    return s->cfg->gzip && !s->cfg->compress_off && router_produced(s, NULL, HANDLER_CODE);
}

const handler_t compress_handler = {
    .name = "compress", .phase = HANDLER_STAGE, .match = compress_match, .serve = compress_serve, .init = compress_init,
    .free = compress_free, .on = compress_on,
};

/* ---- --compress ---- */

/* A list of types or of path prefixes: no spaces or controls, not empty. */
static int list_ok(const char *v, int paths)
{
    if (!*v || strlen(v) > 4096)
        return 0;
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 127)
            return 0;
    if (paths)
        for (const char *p = v; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ','))
            if (*p != '/')
                return 0;
    return 1;
}

/* --compress's settings that take a value, and what each accepts. */
static const struct {
    const char *key, *why;
    long long min, max;
} settings[] = {
    {"types=", "types= is a list of Content-Types, comma-separated (type/sub, type/*, *+suffix; "
               "no spaces, at most 4096 bytes)", 0, 0},
    {"skip=", "skip= is a list of path prefixes, comma-separated, each beginning with / "
              "(no spaces, at most 4096 bytes)", 0, 0},
    {"min=", "min= is a size in bytes, 1 to 1G (K, M, G suffixes)", 1, 1LL << 30},
    {"streams=", "streams= is a count of coders, 1 to 1048576", 1, 1 << 20},
    {"memory=", "memory= is a size in bytes, 1M to 1T (K, M, G suffixes)", 1 << 20, 1LL << 40},
};

/* setting i's value v into cfg: 0, or -1 when v is not what it accepts. */
static int setting(config_t *cfg, size_t i, const char *v)
{
    long long n = settings[i].max ? opt_size(v, settings[i].min, settings[i].max) : 0;
    if (settings[i].max ? n <= 0 : !list_ok(v, i == 1))
        return -1;
    if (i == 0)
        cfg->compress_types = v;
    else if (i == 1)
        cfg->compress_skip = v;
    else
        *(i == 2 ? &cfg->compress_min : i == 3 ? &cfg->compress_streams
                                               : &cfg->compress_memory) = (long)n;
    return 0;
}

/* --compress: 0, or -1 with the reason (opt_set_why()), which names the
   setting and what it accepts. */
static int compress_set(config_t *cfg, const optdef_t *o, char *arg)
{
    (void)o;
    if (!strcmp(arg, "off"))
        return cfg->compress_off = 1, 0;
    if (!strcmp(arg, "secrets"))
        return cfg->compress_secrets = 1, 0;
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++)
        if (!strncmp(arg, settings[i].key, strlen(settings[i].key))) {
            if (setting(cfg, i, arg + strlen(settings[i].key)) == 0)
                return 0;
            return opt_set_why("%s", settings[i].why), -1;
        }
    opt_set_why("no such setting: --compress takes off, secrets, types=LIST, skip=/PATH[,...], "
                "min=BYTES, streams=N or memory=BYTES, one per --compress");
    return -1;
}

const optdef_t compress_opts[] = {
    OPT_ROW_FN(0, "compress", OPT_RULE, OPT_ANY, 6, compress_set, 0, NULL,
        "  --compress off|secrets|types=LIST|skip=/PATH,...|min=B|streams=N|memory=B  zstd,\n"
        "            br, gzip on the fly for CGI and -P answers (repeatable; gatling(8))\n"),
    OPT_LAST};
