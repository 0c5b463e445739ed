/* .htaccess Basic authentication: see htaccess.h. */
#define _GNU_SOURCE /* explicit_bzero, memrchr */
#include "htaccess.h"
#include "http/hbuf.h"
#include "http/owfat.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define AUTH_B64_MAX 1024 /* longest credentials token taken; crypt stops at 512 bytes anyway */
#define AUTH_DEC_MAX (AUTH_B64_MAX / 4 * 3 + 4)

/*
 * Stand-in hash, crypted when a file has no users at all so that a wrong
 * login costs the same work whatever the file says.
 */
static const char dummy_hash[] = "$y$j9T$W.P43eoL2KH9WUdh7WsxL/$xeNIc.GdFBSJmymfATzt9PhseYyE/rjs2"
                                 "RamoCGhgP4";

typedef struct htuser {
    const char *user, *hash; /* into the file's buffer; hash NUL-terminated */
    size_t ulen;
} htuser_t;

typedef struct htfile {
    char *buf; /* the file, NUL-terminated, lines cut in place */
    const char *realm;
    htuser_t *users;
    size_t nusers, cap;
} htfile_t;

/*
 * Read the regular file fd (at most HTACCESS_MAX bytes) into a malloc'd,
 * NUL-terminated buffer.  Returns 0, or -1 (not regular, too large, I/O).
 */
static int read_file(int fd, char **buf, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > HTACCESS_MAX)
        return -1;
    char *b = malloc(HTACCESS_MAX + 2);
    if (!b)
        return -1;
    size_t n = 0;
    /* read to EOF, not to st_size: the file may grow between fstat and read */
    while (n <= HTACCESS_MAX) {
        ssize_t r = read(fd, b + n, HTACCESS_MAX + 1 - n);
        if (r == 0)
            break;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return -1;
        }
        n += (size_t)r;
    }
    if (n > HTACCESS_MAX) {
        free(b);
        return -1;
    }
    b[n] = 0;
    *buf = b, *len = n;
    return 0;
}

/*
 * Open the .htaccess nearest to path (see htaccess.h) and read it.  Returns
 * 1 with *buf set, 0 if there is none, -2 if one may not be looked for (a
 * directory on the way not searchable: EACCES), -1 if one cannot be opened
 * or read.
 */
static int find_file(int rootfd, const char *path, size_t n, char **buf, size_t *len)
{
    static const char name[] = ".htaccess";
    char *rel = malloc(n + sizeof name);
    if (!rel)
        return -1;
    size_t end = n; /* path[0..end) is the directory, with its final '/' */
    while (path[end - 1] != '/')
        end--;
    int rc = 0;
    for (;;) {
        memcpy(rel, path + 1, end - 1);
        memcpy(rel + end - 1, name, sizeof name);
        int fd = openat(rootfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd >= 0) {
            /* O_NONBLOCK: a FIFO planted as .htaccess must not hang the server; read_file
               refuses it as not regular */
            rc = read_file(fd, buf, len) == 0 ? 1 : -1;
            close(fd);
            break;
        }
        /* ENOTDIR: a path component is a file ("/f.txt/x"), so nothing can be below it;
           ENAMETOOLONG: a component no file system holds, so no such directory */
        struct stat st; /* EACCES: the .htaccess unreadable (-1), or its directory closed */
        if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG) {
            rc = errno == EACCES && fstatat(rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
                         errno == EACCES ? -2 : -1;
            break;
        }
        if (end == 1)
            break;
        for (end--; path[end - 1] != '/'; end--)
            ;
    }
    free(rel);
    return rc;
}

/* Cut the next line from *p, without its trailing CR, spaces and tabs; NULL at the end. */
static char *next_line(char **p, size_t *len)
{
    char *s = *p;
    if (!*s)
        return NULL;
    char *nl = strchr(s, '\n');
    char *e = nl ? nl : s + strlen(s);
    *p = nl ? nl + 1 : e;
    while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *e = 0;
    *len = (size_t)(e - s);
    return s;
}

/* crypt's base-64 alphabet: the index of c, or -1. */
static int itoa64(unsigned char c)
{
    static const char a[] = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const char *p = c ? strchr(a, c) : NULL;
    return p ? (int)(p - a) : -1;
}

/* yescrypt's variable-length number (decode64_uint32 in libxcrypt): NULL if malformed. */
static const char *yes_number(const char *s, uint32_t min, uint64_t *out)
{
    uint32_t start = 0, end = 47, chars = 1, bits = 0;
    int c = itoa64((unsigned char)*s++);
    if (c < 0)
        return NULL;
    uint64_t v = min;
    while ((uint32_t)c > end) {
        v += (uint64_t)(end + 1 - start) << bits;
        start = end + 1;
        end = start + (62 - end) / 2;
        chars++;
        bits += 6;
    }
    v += (uint64_t)((uint32_t)c - start) << bits;
    while (--chars) {
        if ((c = itoa64((unsigned char)*s++)) < 0)
            return NULL;
        bits -= 6;
        v += (uint64_t)c << bits;
    }
    *out = v;
    return s;
}

/* "rounds=N$" after a $5$/$6$ prefix: N, or the default when absent. */
static uint64_t sha_rounds(const char *s)
{
    if (strncmp(s, "rounds=", 7))
        return 5000;
    char *end;
    unsigned long long v = strtoull(s + 7, &end, 10);
    return *end == '$' ? v : UINT64_MAX;
}

/*
 * Is crypt's work for this hash bounded (HTACCESS_HASH_MEM_MAX bytes,
 * HTACCESS_BCRYPT_COST_MAX, HTACCESS_ROUNDS_MAX)?  The parameters are part of
 * the hash: "$y$jJ9T$..." would make every check allocate gigabytes.
 * Hashes without parameters (MD5, DES, ...) are fine.
 */
static int hash_cost_ok(const char *h)
{
    uint64_t flavor, nlog, r;
    const char *q;
    if (!strncmp(h, "$y$", 3) || !strncmp(h, "$gy$", 4)) { /* yescrypt: flavor, N, r */
        q = h + (h[1] == 'y' ? 3 : 4);
        if (!(q = yes_number(q, 0, &flavor)) || !(q = yes_number(q, 1, &nlog)) ||
            !(q = yes_number(q, 1, &r)) || *q != '$') /* p, t, g: not taken */
            return 0;
        return nlog <= 30 && r <= 1024 && (128 * r << nlog) <= HTACCESS_HASH_MEM_MAX;
    }
    if (!strncmp(h, "$7$", 3)) { /* scrypt: N as one character, r and p as five */
        int n = itoa64((unsigned char)h[3]);
        uint64_t rv = 0, pv = 0;
        for (int i = 0; i < 10; i++) {
            int c = itoa64((unsigned char)h[4 + i]);
            if (c < 0)
                return 0;
            if (i < 5)
                rv |= (uint64_t)c << (6 * i);
            else
                pv |= (uint64_t)c << (6 * (i - 5));
        }
        return n >= 1 && n <= 30 && rv <= 1024 && pv == 1 &&
               (128 * rv << n) <= HTACCESS_HASH_MEM_MAX;
    }
    if (h[0] == '$' && h[1] == '2' && h[2] && h[3] == '$') /* bcrypt: $2b$NN$ */
        return h[4] >= '0' && h[4] <= '9' && h[5] >= '0' && h[5] <= '9' && h[6] == '$' &&
               (h[4] - '0') * 10 + (h[5] - '0') <= HTACCESS_BCRYPT_COST_MAX;
    if (!strncmp(h, "$5$", 3) || !strncmp(h, "$6$", 3))
        return sha_rounds(h + 3) <= HTACCESS_ROUNDS_MAX;
    if (!strncmp(h, "$sha1$", 6)) {
        char *end;
        unsigned long long v = strtoull(h + 6, &end, 10);
        return *end == '$' && v <= HTACCESS_ROUNDS_MAX;
    }
    return 1;
}

/* Is line[0..n) (blanks first skipped) one of Apache's: a <Section> or
   </Section>, or a directive Debian's WordPress and DokuWiki .htaccess
   files hold (rewrites, access, options, types, expiry)? */
static int apache_line(const char *line, size_t n)
{
    static const char *const words[] = {
        "RewriteEngine", "RewriteRule", "RewriteCond", "RewriteBase", "RewriteOptions",
        "Options", "Require", "Order", "Deny", "Allow", "Satisfy", "AuthType", "AuthName",
        "AuthUserFile", "AuthGroupFile", "AuthBasicProvider", "DirectoryIndex", "ErrorDocument",
        "AddType", "AddHandler", "AddDefaultCharset", "AddCharset", "AddEncoding",
        "AddOutputFilterByType", "Header", "SetEnv", "SetEnvIf", "ExpiresActive",
        "ExpiresByType", "ExpiresDefault", "FileETag", "ForceType", "SetHandler",
        "RemoveHandler", "Redirect", "RedirectMatch", "php_value", "php_flag",
        "php_admin_value", "php_admin_flag", "IndexIgnore", "ServerSignature"};
    while (n && (*line == ' ' || *line == '\t'))
        line++, n--;
    if (n && *line == '<')
        return 1;
    size_t w = 0;
    while (w < n && line[w] != ' ' && line[w] != '\t')
        w++;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strlen(words[i]) == w && !strncasecmp(line, words[i], w))
            return 1;
    return 0;
}

/* Does the Apache pattern of a <Files pat>, <Files ~ "re"> or <FilesMatch
   "re"> line (l, after its '<') take the file name base?  A pattern not
   understood takes it: what it denies stays denied. */
static int section_takes(const char *l, const char *base)
{
    int re = !strncasecmp(l, "FilesMatch", 10);
    l += re ? 10 : 5;
    l += strspn(l, " \t");
    if (*l == '~')
        re = 1, l += 1 + strspn(l + 1, " \t");
    char pat[512];
    size_t k = strcspn(l, ">");
    if (k && *l == '"')
        l++, k = strcspn(l, "\"");
    if (!k || k >= sizeof pat)
        return 1;
    memcpy(pat, l, k), pat[k] = 0;
    if (!re)
        return fnmatch(pat, base, 0) == 0;
    regex_t rx;
    if (regcomp(&rx, pat, REG_EXTENDED | REG_NOSUB))
        return 1;
    int m = regexec(&rx, base, 0, NULL, 0) == 0;
    regfree(&rx);
    return m;
}

/* Does an Apache directive line l deny the file: Require all denied, Deny
   from all, or Apache's own authentication, which gatling cannot honour? */
static int apache_denies(const char *l)
{
    static const char *const deny[] = {"require all denied", "deny from all", "authtype",
                                       "authuserfile", "authgroupfile", "require valid-user",
                                       "require user", "require group"};
    for (size_t i = 0; i < sizeof deny / sizeof *deny; i++)
        if (!strncasecmp(l, deny[i], strlen(deny[i])))
            return 1;
    return 0;
}

/* An Apache .htaccess (its first line neither blank nor a comment is
   apache_line's): 403 when it denies the file at path[0..n) (apache_denies,
   at its top, in <IfModule> sections or a <Files> one that takes the
   file's name), else 0 (its rewrites, options and types are Apache's
   business); -1 when it is gatling's own (a realm, users).  buf: the file,
   NUL-terminated, not changed. */
static int apache_verdict(const char *buf, const char *path, size_t n)
{
    char base[256];
    const char *slash = memrchr(path, '/', n);
    size_t bl = (size_t)(path + n - slash - 1);
    snprintf(base, sizeof base, "%.*s", (int)bl, slash + 1);
    int first = 1, depth = 0, off = 0; /* off: the depth of a section that does not apply */
    for (const char *l = buf, *e; *l; l = *e ? e + 1 : e) {
        e = l + strcspn(l, "\n");
        l += strspn(l, " \t");
        if (l >= e || *l == '#' || *l == '\r')
            continue;
        if (first && !apache_line(l, (size_t)(e - l)))
            return -1;
        first = 0;
        if (*l == '<' && l[1] == '/')
            off = off == depth-- ? 0 : off;
        else if (*l == '<' && ++depth && !off && !strncasecmp(l + 1, "Files", 5))
            off = section_takes(l + 1, base) ? 0 : depth;
        else if (!off && apache_denies(l))
            return 403;
    }
    return first ? -1 : 0; /* (blank: gatling's, without a realm) */
}

int htaccess_line(const char *line, size_t n, int *realm, const char **why)
{
    char hash[512];
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--; /* as next_line cuts them */
    const char *colon = memchr(line, ':', n);
    *why = "a NUL byte";
    if (memchr(line, 0, n))
        return -1;
    if (n == 0 || line[0] == '#' || *realm == 2)
        return 0;
    if (!*realm)
        return *realm = apache_line(line, n) ? 2 : 1, 0; /* 2: Apache's (apache_verdict) */
    *why = "not user:hash (a user name, ':', then its crypt(3) hash)";
    if (!colon || colon == line || colon + 1 == line + n)
        return -1;
    *why = "the hash asks crypt(3) for more than the bounds (yescrypt or scrypt memory over "
           "64 MiB, bcrypt cost over 13, SHA-crypt rounds over 1000000)";
    size_t hl = (size_t)(line + n - colon - 1);
    if (hl >= sizeof hash) /* the cost is in the hash's first bytes ($y$j9T$, $6$rounds=) */
        hl = sizeof hash - 1;
    memcpy(hash, colon + 1, hl);
    hash[hl] = 0;
    return hash_cost_ok(hash) ? 0 : -1;
}

/* Parse f->buf[0..len) into realm and users.  Returns 0, or -1 if malformed (or ENOMEM). */
static int parse_file(htfile_t *f, size_t len)
{
    if (memchr(f->buf, 0, len))
        return -1;
    char *p = f->buf, *line;
    size_t n;
    const char *why;
    int realm = 0;
    while ((line = next_line(&p, &n))) {
        if (htaccess_line(line, n, &realm, &why) < 0) /* the rules --check says too */
            return -1;
        if (n == 0 || line[0] == '#')
            continue;
        if (!f->realm) {
            f->realm = line;
            continue;
        }
        char *colon = memchr(line, ':', n);
        htuser_t *u = hb_grow(f->users, &f->cap, f->nusers + 1, sizeof *u, 16);
        if (!u)
            return -1;
        f->users = u;
        f->users[f->nusers++] = (htuser_t){line, colon + 1, (size_t)(colon - line)};
    }
    return f->realm ? 0 : -1;
}

/*
 * a[0..an) == b[0..bn), in time that depends on the lengths only, not on
 * where the first difference is.
 */
static int ct_equal(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an > bn ? an : bn;
    volatile unsigned char d = an != bn; /* volatile: keep the compiler from stopping early */
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)((i < an ? a[i] : 0) ^ (i < bn ? b[i] : 0));
    return d == 0;
}

/*
 * Decode an Authorization value "Basic <token68>" (scheme case-insensitive,
 * RFC 7235 2.1) into dec (AUTH_DEC_MAX bytes): *user = dec[0..*ulen), *pass a
 * NUL-terminated string after the first ':'.  Returns 0, or -1 if missing,
 * not Basic, or not exactly one well-formed base64 token.
 */
static int parse_basic(const char *a, size_t n, char *dec, const char **user, size_t *ulen,
                       const char **pass)
{
    size_t i = 0, j;
    if (!a)
        return -1;
    while (i < n && (a[i] == ' ' || a[i] == '\t'))
        i++;
    if (n - i < 6 || strncasecmp(a + i, "basic", 5) != 0 || a[i + 5] != ' ')
        return -1;
    for (i += 6; i < n && (a[i] == ' ' || a[i] == '\t'); i++)
        ;
    for (j = i; j < n && a[j] != ' ' && a[j] != '\t'; j++)
        ;
    for (size_t k = j; k < n; k++)
        if (a[k] != ' ' && a[k] != '\t')
            return -1;
    char b64[AUTH_B64_MAX + 1];
    size_t tlen = j - i, dlen = 0;
    if (tlen == 0 || tlen > AUTH_B64_MAX)
        return -1;
    memcpy(b64, a + i, tlen);
    b64[tlen] = 0; /* scan_base64 reads up to the first byte outside the alphabet */
    if (scan_base64(b64, dec, &dlen) != tlen || dlen >= AUTH_DEC_MAX || memchr(dec, 0, dlen))
        return -1;
    dec[dlen] = 0;
    char *colon = memchr(dec, ':', dlen);
    if (!colon)
        return -1;
    *user = dec, *ulen = (size_t)(colon - dec), *pass = colon + 1;
    return 0;
}

/*
 * Pick the hash to check against, in constant time: the matching entry's,
 * or for an unknown user (or a file without users) the stand-in, so that
 * crypt runs once either way and timing does not tell which names exist.
 * Copies it and the password into p.  0, or -1 if the hash is too long.
 */
static int pick(const htfile_t *f, const char *user, size_t ulen, const char *pass,
                htaccess_pending_t *p)
{
    size_t idx = 0, found = 0;
    for (size_t i = 0; i < f->nusers; i++) {
        size_t hit = (size_t)ct_equal(user, ulen, f->users[i].user, f->users[i].ulen) & ~found;
        size_t mask = (size_t)0 - hit; /* all ones on the first match */
        idx = (idx & ~mask) | (i & mask);
        found |= hit;
    }
    const char *hash = f->nusers ? f->users[idx].hash : dummy_hash;
    size_t hl = strlen(hash), pl = strlen(pass);
    if (hl >= sizeof p->hash || pl >= sizeof p->pass)
        return -1;
    memcpy(p->hash, hash, hl + 1);
    memcpy(p->pass, pass, pl + 1);
    p->found = (int)found;
    return 0;
}

int htaccess_verify(htaccess_pending_t *p)
{
    struct crypt_data *cd = calloc(1, sizeof *cd); /* ~32 KiB: not on a small stack */
    int good = 0;
    if (cd) {
        const char *out = crypt_rn(p->pass, p->hash, cd, sizeof *cd);
        /* crypt_rn gives NULL for a setting it cannot use; a result starting '*' is never a hash */
        good = out && out[0] != '*' && ct_equal(out, strlen(out), p->hash, strlen(p->hash));
        explicit_bzero(cd, sizeof *cd);
        free(cd);
    }
    explicit_bzero(p->pass, sizeof p->pass);
    return good & p->found;
}

/* The realm for WWW-Authenticate: realm="...": no '"', '\' or control bytes, truncated. */
static void copy_realm(const char *r, char *realm, size_t realmsz)
{
    size_t o = 0;
    for (; *r && o + 1 < realmsz; r++)
        if (*r != '"' && *r != '\\' && (unsigned char)*r >= 0x20 && *r != 0x7f)
            realm[o++] = *r;
    if (realmsz)
        realm[o] = 0;
}

/* Contract in htaccess.h. */
int htaccess_prepare(int rootfd, const char *path, size_t n, const char *auth, size_t authlen,
                     char *realm, size_t realmsz, htaccess_pending_t *p)
{
    if (realmsz)
        realm[0] = 0;
    /* a NUL would cut the name we open short: path.c refuses them, refuse them here too */
    if (n == 0 || path[0] != '/' || memchr(path, 0, n))
        return 500;
    htfile_t f = {0};
    size_t len;
    int st = find_file(rootfd, path, n, &f.buf, &len);
    if (st == -2)
        return 403; /* a closed directory on the way: the files' answer below it */
    if (st <= 0)
        return st == 0 ? 0 : 500;
    int rc = memchr(f.buf, 0, len) ? 500 : apache_verdict(f.buf, path, n);
    if (rc < 0) /* gatling's own */
        rc = parse_file(&f, len) == 0 ? 401 : 500;
    if (rc == 401) {
        char dec[AUTH_DEC_MAX];
        const char *user, *pass;
        size_t ulen;
        if (parse_basic(auth, authlen, dec, &user, &ulen, &pass) == 0)
            rc = pick(&f, user, ulen, pass, p) == 0 ? HTACCESS_VERIFY : 500;
        explicit_bzero(dec, sizeof dec);
        copy_realm(f.realm, realm, realmsz); /* the caller needs it if verify fails */
        if (rc == 500 && realmsz)
            realm[0] = 0;
    }
    free(f.users);
    free(f.buf);
    return rc;
}

int htaccess_check(int rootfd, const char *path, size_t n, const char *auth, size_t authlen,
                   char *realm, size_t realmsz)
{
    htaccess_pending_t *p = malloc(sizeof *p);
    if (!p)
        return 500;
    int rc = htaccess_prepare(rootfd, path, n, auth, authlen, realm, realmsz, p);
    if (rc == HTACCESS_VERIFY)
        rc = htaccess_verify(p) ? 0 : 401;
    else
        explicit_bzero(p->pass, sizeof p->pass);
    if (rc == 0 && realmsz)
        realm[0] = 0;
    free(p);
    return rc;
}
