/* acme_dnskey — see acme_dnskey.h. */
#include "acme_dnskey.h"
#include "site/privfs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

static const struct {
    const char *file, *ldns; /* the algorithm as key files name it, as libldns does */
} algs[] = {{"hmac-md5", "hmac-md5.sig-alg.reg.int."},
            {"hmac-md5.sig-alg.reg.int", "hmac-md5.sig-alg.reg.int."},
            {"hmac-sha1", "hmac-sha1."},
            {"hmac-sha224", "hmac-sha224."},
            {"hmac-sha256", "hmac-sha256."},
            {"hmac-sha384", "hmac-sha384."},
            {"hmac-sha512", "hmac-sha512."}};

int acme_err(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static int set_alg(acme_dns_key_t *k, const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++)
        if (strlen(algs[i].file) == n && !strncasecmp(s, algs[i].file, n)) {
            snprintf(k->alg, sizeof k->alg, "%s", algs[i].ldns);
            return 0;
        }
    return -1;
}

/* A domain name: labels of letters, digits, '-', '_' (1..63), a dot at the
   end added; lower case. */
static int set_name(acme_dns_key_t *k, const char *s, size_t n)
{
    if (n && s[n - 1] == '.')
        n--;
    if (!n || n > 253)
        return -1;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '.') {
            if (!label)
                return -1;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_') {
            if (++label > 63)
                return -1;
        } else
            return -1;
        k->name[i] = (char)(c >= 'A' && c <= 'Z' ? c + 'a' - 'A' : c);
    }
    if (!label)
        return -1;
    k->name[n] = '.';
    k->name[n + 1] = 0;
    return 0;
}

/* Standard base64 with its padding, of 1..ACME_DNSKEY_BYTES bytes. */
static int set_secret(acme_dns_key_t *k, const char *s, size_t n)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t data = 0;
    while (data < n && s[data] && strchr(b64, s[data]))
        data++;
    size_t pad = n - data, eq = 0;
    while (data + eq < n && s[data + eq] == '=') /* within n: s is a piece of a line */
        eq++;
    if (!data || (data + pad) % 4 || pad > 2 || eq != pad ||
        data * 3 / 4 > ACME_DNSKEY_BYTES || n >= sizeof k->secret)
        return -1;
    memcpy(k->secret, s, n);
    k->secret[n] = 0;
    return 0;
}

/* ---- BIND's format: a tokenizer, then key NAME { algorithm A; secret "S"; }; */

typedef struct lex {
    const char *s;
    size_t len, at;
    const char *tok; /* the last token: a word, a string's inside, or one of {};"" */
    size_t tlen;
    int quoted;
} lex_t;

/* Past white space and comments. */
static void skip(lex_t *x)
{
    while (x->at < x->len) {
        const char *p = x->s + x->at;
        size_t left = x->len - x->at;
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            x->at++;
        else if (*p == '#' || (left > 1 && p[0] == '/' && p[1] == '/')) {
            const char *nl = memchr(p, '\n', left);
            x->at = nl ? (size_t)(nl - x->s) + 1 : x->len;
        } else if (left > 1 && p[0] == '/' && p[1] == '*') {
            size_t i = 2;
            while (i + 1 < left && !(p[i] == '*' && p[i + 1] == '/'))
                i++;
            x->at += i + 1 < left ? i + 2 : left;
        } else
            return;
    }
}

/* The next token: 1, or 0 at the end (or an unterminated string). */
static int next(lex_t *x)
{
    skip(x);
    if (x->at >= x->len)
        return 0;
    const char *p = x->s + x->at;
    x->quoted = 0;
    if (*p == '"') {
        const char *q = memchr(p + 1, '"', x->len - x->at - 1);
        if (!q)
            return 0;
        x->tok = p + 1, x->tlen = (size_t)(q - p - 1), x->quoted = 1;
        x->at += x->tlen + 2;
        return 1;
    }
    size_t n = 1;
    if (!strchr("{};", *p))
        while (x->at + n < x->len && !strchr(" \t\r\n{};\"#", p[n]))
            n++;
    x->tok = p, x->tlen = n;
    x->at += n;
    return 1;
}

static int is(const lex_t *x, const char *word)
{
    return !x->quoted && x->tlen == strlen(word) && !strncasecmp(x->tok, word, x->tlen);
}

/* The statements inside the braces: algorithm and secret, each once. */
static int bind_body(lex_t *x, acme_dns_key_t *k, char *err, size_t cap)
{
    while (next(x) && !is(x, "}")) {
        int alg = is(x, "algorithm"), sec = is(x, "secret");
        if (!alg && !sec)
            return acme_err(err, cap, "key %s: \"%.*s\" is not algorithm or secret", k->name,
                            (int)(x->tlen > 40 ? 40 : x->tlen), x->tok);
        if (!next(x) || (alg ? set_alg(k, x->tok, x->tlen) : set_secret(k, x->tok, x->tlen)) < 0)
            return alg ? acme_err(err, cap, "key %s: not an algorithm of hmac-md5, hmac-sha1, "
                                  "hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512", k->name)
                       : acme_err(err, cap, "key %s: the secret is not base64 of 1 to %d bytes",
                                  k->name, ACME_DNSKEY_BYTES);
        if (!next(x) || !is(x, ";"))
            return acme_err(err, cap, "key %s: a ';' missing after %s", k->name,
                            alg ? "the algorithm" : "the secret");
    }
    if (!is(x, "}"))
        return acme_err(err, cap, "key %s: no closing '}'", k->name);
    if (!k->alg[0] || !k->secret[0])
        return acme_err(err, cap, "key %s: no %s", k->name, k->alg[0] ? "secret" : "algorithm");
    return 0;
}

static int parse_bind(const char *text, size_t len, acme_dns_key_t *k, char *err, size_t cap)
{
    lex_t x = {.s = text, .len = len};
    while (next(&x)) {
        if (!is(&x, "key"))
            continue; /* another statement of a named.conf: not ours */
        if (!next(&x) || set_name(k, x.tok, x.tlen) < 0)
            return acme_err(err, cap, "key: its name is not a domain name");
        if (!next(&x) || !is(&x, "{"))
            return acme_err(err, cap, "key %s: no '{' after its name", k->name);
        return bind_body(&x, k, err, cap);
    }
    return acme_err(err, cap, "no key statement (key \"NAME\" { algorithm ALG; secret "
                    "\"BASE64\"; };) and not one line ALG:NAME:SECRET");
}

/* [ALG:]NAME:SECRET, one word with one or two colons. */
static int parse_line(const char *s, size_t n, acme_dns_key_t *k, char *err, size_t cap)
{
    const char *c1 = memchr(s, ':', n);
    const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - s)) : NULL;
    const char *name = c2 ? c1 + 1 : s, *sec = c2 ? c2 + 1 : c1 + 1;
    const char *name_end = c2 ? c2 : c1;
    if (c2 && set_alg(k, s, (size_t)(c1 - s)) < 0)
        return acme_err(err, cap, "%.*s: not an algorithm of hmac-md5, hmac-sha1, hmac-sha224, "
                        "hmac-sha256, hmac-sha384, hmac-sha512",
                        (int)(c1 - s > 40 ? 40 : c1 - s), s);
    if (!c2)
        set_alg(k, "hmac-sha256", 11);
    if (set_name(k, name, (size_t)(name_end - name)) < 0)
        return acme_err(err, cap, "the key's name is not a domain name");
    if (set_secret(k, sec, n - (size_t)(sec - s)) < 0)
        return acme_err(err, cap, "key %s: the secret is not base64 of 1 to %d bytes", k->name,
                        ACME_DNSKEY_BYTES);
    return 0;
}

int acme_dnskey_parse(const char *text, size_t len, acme_dns_key_t *k, char *err, size_t cap)
{
    memset(k, 0, sizeof *k);
    const char *t = text;
    size_t n = len, colons = 0;
    while (n && strchr(" \t\r\n", *t))
        t++, n--;
    while (n && strchr(" \t\r\n", t[n - 1]))
        n--;
    for (size_t i = 0; i < n; i++)
        colons += t[i] == ':';
    /* one word with one or two colons: the short form; else BIND's */
    int word = n && !memchr(t, '{', n) && (colons == 1 || colons == 2);
    for (size_t i = 0; word && i < n; i++)
        word = t[i] > ' ' && t[i] != '"' && t[i] != ';';
    int r = word ? parse_line(t, n, k, err, cap) : parse_bind(text, len, k, err, cap);
    if (r < 0)
        OPENSSL_cleanse(k, sizeof *k);
    return r;
}

int acme_dnskey_load(const char *path, acme_dns_key_t *k, char *err, size_t cap)
{
    char *buf = malloc(ACME_DNSKEY_FILE_MAX + 1), why[256] = "";
    struct stat sb;
    int fd = pfs_open_file(path, PFS_SECRET, &sb, why, sizeof why); /* a key: 0600 */
    ssize_t got = -1;
    int e = errno;
    if (buf && fd >= 0) {
        if (sb.st_size > ACME_DNSKEY_FILE_MAX)
            e = EFBIG;
        else if ((got = read(fd, buf, ACME_DNSKEY_FILE_MAX + 1)) < 0)
            e = errno;
    } else if (!buf)
        e = ENOMEM, *why = 0;
    if (fd >= 0)
        close(fd);
    int r = -1;
    if (got < 0)
        acme_err(err, cap, "%s", *why && fd < 0 ? why : strerror(e));
    else if (got > ACME_DNSKEY_FILE_MAX)
        acme_err(err, cap, "longer than %d bytes", ACME_DNSKEY_FILE_MAX);
    else
        r = acme_dnskey_parse(buf, (size_t)got, k, err, cap);
    if (buf)
        OPENSSL_cleanse(buf, ACME_DNSKEY_FILE_MAX + 1);
    free(buf);
    return r;
}
