/* --acme: the options, the state directory, the names, the client. See acme_setup.h. */
#define _GNU_SOURCE
#include "acme_setup.h"
#include "acme/acme.h"
#include "acme/acme_dns.h"
#include "handover.h"
#include "site/acme_chal.h"
#include "site/privfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>

#define ACME_URL_MAX 1024    /* --acme-ca */
#define ACME_EMAIL_MAX 254   /* --acme (RFC 5321's path) */
#define ACME_FIELD_MAX 255   /* --acme-eab's key id, --acme-issuer */
#define ACME_HMAC_MAX 512    /* --acme-eab's key, base64url */
#define ACME_PROFILE_MAX 64  /* --acme-profile */
#define ACME_DIR_MAX (PATH_MAX - 320) /* --acme-dir: room for the layout below it */

static int bad(int c, const char *arg, const char *why)
{
    fprintf(stderr, "gatling: --%s %s: %s\n", acme_opts[c].lname, arg, why);
    return opt_usage_error();
}

/* Printable ASCII only (space too when spaces may): no control characters. */
static int printable(const char *s, int spaces)
{
    for (; *s; s++)
        if ((unsigned char)*s < (spaces ? ' ' : '!') || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

static int fits(const char *s, size_t max)
{
    return *s && strnlen(s, max + 1) <= max;
}

static int b64url(const char *s)
{
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
    return n && (!s[n] || strspn(s + n, "=") == strlen(s + n)); /* padding tolerated */
}

/* --acme EMAIL: local@domain, the domain a host name. */
static int email_ok(const char *s)
{
    const char *at = strchr(s, '@');
    return fits(s, ACME_EMAIL_MAX) && printable(s, 0) && at && at > s && !strchr(at + 1, '@') &&
           !strpbrk(s, "<>(),;:\\\"[]") && acme_chal_host_ok(at + 1, strlen(at + 1));
}

/* --acme-ca URL: https://, a host, nothing a header or a log line could not hold. */
static int ca_ok(const char *s)
{
    return fits(s, ACME_URL_MAX) && printable(s, 0) && !strncmp(s, "https://", 8) && s[8] &&
           s[8] != '/';
}

/* --acme-on-demand URL: https://, or http:// to a loopback address (the
   ask goes in clear only where no one else sees it, as --cluster's etcd). */
static int ask_url_ok(const char *s)
{
    static const char *const loop[] = {"http://127.", "http://[::1]", "http://localhost"};
    if (!fits(s, ACME_URL_MAX) || !printable(s, 0) || strchr(s, '#'))
        return 0;
    if (!strncmp(s, "https://", 8))
        return s[8] && s[8] != '/';
    for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++) {
        size_t n = strlen(loop[i]);
        if (!strncmp(s, loop[i], n) && (i == 0 || strchr(":/", s[n]) || !s[n]))
            return 1;
    }
    return 0;
}

/* --acme-on-demand-rate HOUR,ADDR: names allowed an hour in all, and asks an
   hour from one address. */
static int od_rate(config_acme_t *a, const char *arg)
{
    char *e;
    long h = strtol(arg, &e, 10), n = 0;
    if (e == arg || *e != ',' || h < 1 || h > 100000)
        return -1;
    const char *q = e + 1;
    n = strtol(q, &e, 10);
    if (e == q || *e || n < 1 || n > h)
        return -1;
    a->od_per_hour = (int)h, a->od_per_addr = (int)n;
    return 0;
}

/* --acme-on-demand-rate, -names and -forget: -1 to go on, or 2 (said why). */
static int od_limit(int c, const char *arg, config_acme_t *a)
{
    if (c == ACME_OPT_ONDEMAND_RATE)
        return od_rate(a, arg) < 0 ? bad(c, arg, "not HOUR,ADDR (names allowed an hour, "
                                                 "1-100000, and asks from one address, 1-HOUR)")
                                   : -1;
    if (c == ACME_OPT_ONDEMAND_NAMES)
        return (a->od_max = (int)opt_number(arg, 1, CONFIG_ACME_OD_NAMES)) < 0
                   ? bad(c, arg, "not a number of names (1-100)") : -1;
    return (a->od_forget = (int)opt_number(arg, 10, 31536000)) < 0
               ? bad(c, arg, "not a time in seconds (10-31536000)") : -1;
}

/* --acme-names a,b,...: each a host name or an IP address, lower-cased in
   place.  0, or -1 with *bad at the name refused (NULL: one too many). */
static int parse_names(config_acme_t *a, char *arg, const char **bad)
{
    a->nnames = 0;
    for (char *s = arg;;) {
        char *e = strchr(s, ',');
        if (e)
            *e = 0;
        for (char *p = s; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p += 'a' - 'A';
        int wild = s[0] == '*' && s[1] == '.'; /* *.example.org: by DNS-01 */
        if (a->nnames == CONFIG_ACME_NAMES ||
            !(wild ? acme_chal_host_ok(s + 2, strlen(s + 2)) && strchr(s + 2, '.')
                   : acme_chal_name_ok(s, strlen(s)))) {
            *bad = a->nnames == CONFIG_ACME_NAMES ? NULL : s;
            return -1;
        }
        a->names[a->nnames++] = s;
        if (!e)
            return 0;
        s = e + 1;
    }
}

/* --acme-eab KID:@FILE: the key read from FILE (one line), so that it shows
   in no process list; NULL when it cannot be read. */
static const char *eab_file(const char *path)
{
    static char key[ACME_HMAC_MAX + 2];
    char why[256];
    struct stat st;
    int fd = pfs_open_file(path, PFS_SECRET, &st, why, sizeof why); /* a key: 0600 */
    if (fd < 0)
        fprintf(stderr, "gatling: --acme-eab @%s: %s\n", path, why);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    int ok = f && fgets(key, sizeof key, f) != NULL;
    if (f)
        fclose(f);
    else if (fd >= 0)
        close(fd);
    key[ok ? strcspn(key, "\r\n") : 0] = 0;
    return ok ? key : NULL;
}

/* --acme-eab KID:HMACKEY or KID:@FILE, split in place: the binding of the
   --acme-ca before it (of the first CA when none came before). */
static int parse_eab(config_acme_t *a, char *arg)
{
    char *colon = strchr(arg, ':');
    if (!colon)
        return -1;
    *colon = 0;
    const char *key = colon[1] == '@' ? eab_file(colon + 2) : colon + 1;
    if (!fits(arg, ACME_FIELD_MAX) || !printable(arg, 0) || !key || !fits(key, ACME_HMAC_MAX) ||
        !b64url(key)) {
        *colon = ':';
        return -1;
    }
    config_acme_ca_t *ca = &a->cas[a->ncas ? a->ncas - 1 : 0];
    ca->eab_kid = arg, ca->eab_hmac = key;
    return 0;
}

/* The options with a word for a value: --acme-key, --acme-challenge. */
static int word_option(int c, const char *arg, config_acme_t *a)
{
    static const char *const keys[] = {"ec256", "rsa2048", "rsa3072"};
    static const char *const chals[] = {"any", "http-01", "tls-alpn-01", "dns-01"};
    const char *const *t = c == ACME_OPT_KEY ? keys : chals;
    for (int i = c == ACME_OPT_KEY ? 0 : 1; i < (c == ACME_OPT_KEY ? 3 : 4); i++)
        if (!strcmp(arg, t[i])) {
            *(c == ACME_OPT_KEY ? &a->key_type : &a->challenge) = i;
            return -1;
        }
    return bad(c, arg, c == ACME_OPT_KEY ? "not ec256, rsa2048 or rsa3072"
                                         : "not http-01, tls-alpn-01 or dns-01");
}

static int given; /* the --acme options seen, one bit each, for acme_options_done */
static char *dir_names[CONFIG_ACME_NAMES]; /* vhost_names' copies (proc_t's acme_names) */
/* The write end of the keeper's stop pipe (acme.h): closing it, or this
   process's death, ends the keeper; -1: none.  What the running process
   owns, not a configuration value (DESIGN.md, Options), hence file scope. */
static int keeper_fd = -1;

void acme_options_begin(void)
{
    given = 0;
}

/* One --acme option: -1 to go on, or an exit code (2, after saying why). */
static int acme_option(int c, char *arg, config_t *cfg)
{
    config_acme_t *a = &cfg->acme;
    if (c < ACME_OPT || c >= ACME_OPT_END)
        return 1;
    given |= 1 << (c - ACME_OPT);
    switch (c) {
    case ACME_OPT:
        if (!email_ok(arg))
            return bad(c, arg, "not an email address (local@host.name, at most 254 bytes)");
        a->email = arg;
        return -1;
    case ACME_OPT_CA:
        if (!ca_ok(arg))
            return bad(c, arg, "not an https:// URL (at most 1024 bytes, no spaces or "
                               "control characters)");
        if (a->ncas == CONFIG_ACME_CAS)
            return bad(c, arg, "one CA too many (at most 4: --acme-ca given more than once "
                               "names the CAs tried in turn)");
        a->cas[a->ncas++].url = arg;
        return -1;
    case ACME_OPT_CA_ROOT:
    case ACME_OPT_DIR:
        if (!fits(arg, c == ACME_OPT_DIR ? ACME_DIR_MAX : PATH_MAX - 1))
            return bad(c, arg, "not a usable file name (empty or too long)");
        *(c == ACME_OPT_DIR ? &a->state_dir : &a->ca_root) = arg;
        return -1;
    case ACME_OPT_EAB:
        return parse_eab(a, arg) < 0
                   ? bad(c, arg, "not KID:HMACKEY or KID:@FILE (a key id, then the base64url "
                                 "key or a readable file holding it)")
                   : -1;
    case ACME_OPT_PROFILE:
        if (!fits(arg, ACME_PROFILE_MAX) ||
            strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                strlen(arg))
            return bad(c, arg, "not a profile name (letters, digits, . _ -; at most 64)");
        a->profile = arg;
        return -1;
    case ACME_OPT_KEY:
    case ACME_OPT_CHALLENGE:
        return word_option(c, arg, a);
    case ACME_OPT_NAMES: {
        const char *which;
        if (parse_names(a, arg, &which) < 0)
            return bad(c, which ? which : "...",
                       which ? "not a host name or IP address (comma-separated, at most 100)"
                             : "more than 100 names");
        return -1;
    }
    case ACME_OPT_DNS_SERVER:
        if (!acme_dns_server_ok(arg))
            return bad(c, arg, "not ADDRESS, ADDRESS:PORT or [IPv6]:PORT (an IP address: "
                               "the zone's primary server)");
        a->dns_server = arg;
        return -1;
    case ACME_OPT_DNS_KEY:
        if (!fits(arg, PATH_MAX - 1))
            return bad(c, arg, "not a usable file name (empty or too long)");
        a->dns_key_file = arg;
        return -1;
    case ACME_OPT_ONDEMAND:
        if (!ask_url_ok(arg))
            return bad(c, arg, "not an https:// URL, or http:// to 127.0.0.1, [::1] or "
                               "localhost (at most 1024 bytes, no spaces, no #)");
        a->ask_url = arg;
        return -1;
    case ACME_OPT_ONDEMAND_RATE:
    case ACME_OPT_ONDEMAND_NAMES:
    case ACME_OPT_ONDEMAND_FORGET:
        return od_limit(c, arg, a);
    default: /* ACME_OPT_ISSUER */
        if (!fits(arg, ACME_FIELD_MAX) || !printable(arg, 1))
            return bad(c, arg, "not a common name (at most 255 bytes, no control characters)");
        a->issuer = arg;
        return -1;
    }
}

/* The rows' setter: acme_option by the row's id. */
static int acme_set(config_t *cfg, const optdef_t *o, char *arg)
{
    int rc = acme_option(o->id, arg, cfg);
    return rc < 0 ? 0 : rc;
}

#define ACME_ROW(l, kind, flags, id, help) \
    OPT_ROW_FN(0, l, kind, OPT_ANY | (flags), 0, acme_set, id, NULL, help)
/* --acme's options, in ACME_OPT_*'s order (its messages name them by it). */
const optdef_t acme_opts[] = {
    ACME_ROW("acme", OPT_WORD, 0, ACME_OPT,
        "  --acme email  get and renew the HTTPS certificates from an ACME CA (RFC 8555)\n"
        "            for the names served, with email as the account's contact\n"),
    OPT_ROW_FN(0, "acme-ca", OPT_URL, OPT_ANY, CONFIG_ACME_CAS, acme_set, ACME_OPT_CA, NULL,
        "  --acme-ca url  the CA's directory (default: Let's Encrypt's production); again:\n"
        "            the next CA, where an order that fails at the one before goes\n"),
    ACME_ROW("acme-ca-root", OPT_PATH, 0, ACME_OPT_CA_ROOT,
        "  --acme-ca-root file  trust these PEM roots for the CA (else the system's)\n"),
    OPT_ROW_FN(0, "acme-eab", OPT_SECRET, OPT_ANY | OPT_NOT_RELATIVE, CONFIG_ACME_CAS, acme_set,
        ACME_OPT_EAB, NULL,
        "  --acme-eab kid:@file  External Account Binding (ZeroSSL and others) with the\n"
        "            --acme-ca before it, the HMAC key read from file (kid:hmackey works\n"
        "            but shows in ps)\n"),
    ACME_ROW("acme-profile", OPT_WORD, 0, ACME_OPT_PROFILE,
        "  --acme-profile name  ask for this profile (classic, tlsserver, shortlived)\n"),
    ACME_ROW("acme-key", OPT_WORD, 0, ACME_OPT_KEY,
        "  --acme-key ec256|rsa2048|rsa3072  the certificates' key type (ec256)\n"),
    ACME_ROW("acme-challenge", OPT_WORD, 0, ACME_OPT_CHALLENGE,
        "  --acme-challenge http-01|tls-alpn-01|dns-01  only this challenge (default:\n"
        "            either of the first two; *.example.org always goes by dns-01)\n"),
    ACME_ROW("acme-dir", OPT_USER_DIR, 0, ACME_OPT_DIR,
        "  --acme-dir dir  the ACME state (default /var/lib/gatling/acme; without -C the\n"
        "            certificates land in dir/live)\n"),
    ACME_ROW("acme-names", OPT_WORD, 0, ACME_OPT_NAMES,
        "  --acme-names a,b  these host names or IP addresses (default: each virtual host\n"
        "            directory that names a host)\n"),
    ACME_ROW("acme-issuer", OPT_WORD, 0, ACME_OPT_ISSUER,
        "  --acme-issuer cn  prefer the chain whose root or intermediate is named cn\n"),
    ACME_ROW("acme-dns-server", OPT_WORD, 0, ACME_OPT_DNS_SERVER,
        "  --acme-dns-server addr[:port]  DNS-01: the zone's primary, sent RFC 2136\n"
        "            updates signed with TSIG\n"),
    ACME_ROW("acme-dns-key", OPT_SECRET, 0, ACME_OPT_DNS_KEY,
        "  --acme-dns-key file  ... the TSIG key: BIND's key statement, or alg:name:secret\n"),
    ACME_ROW("acme-on-demand", OPT_URL, 0, ACME_OPT_ONDEMAND,
        "  --acme-on-demand url  a certificate at the first handshake for a name url allows\n"
        "            (GET url?domain=NAME answers 200)\n"),
    ACME_ROW("acme-on-demand-rate", OPT_WORD, 0, ACME_OPT_ONDEMAND_RATE,
        "  --acme-on-demand-rate h,a  ... names allowed an hour at most, and asks an hour\n"
        "            from one client address (60,10)\n"),
    ACME_ROW("acme-on-demand-names", OPT_NUMBER, 0, ACME_OPT_ONDEMAND_NAMES,
        "  --acme-on-demand-names n  ... names got on demand kept at most (100; the\n"
        "            names given at start are not counted)\n"),
    ACME_ROW("acme-on-demand-forget", OPT_SECONDS, 0, ACME_OPT_ONDEMAND_FORGET,
        "  --acme-on-demand-forget s  ... one no handshake named in s seconds\n"
        "            forgotten, not renewed (604800: 7 days)\n"),
    OPT_LAST};
_Static_assert(sizeof acme_opts / sizeof acme_opts[0] == ACME_OPT_END + 1,
               "a row for each --acme option");

static acme_dns_key_t dns_key; /* --acme-dns-key's, read at start (root may own the file) */

/* DNS-01: wildcard names and --acme-challenge dns-01 need a server and a
   key, which is read now.  -1 to go on, or an exit code. */
static int dns_options_done(config_acme_t *a)
{
    const char *wild = NULL, *ip = NULL;
    char err[256];
    for (int i = 0; i < a->nnames; i++) {
        if (a->names[i][0] == '*' && !wild)
            wild = a->names[i];
        if ((strchr(a->names[i], ':') ||
             strspn(a->names[i], "0123456789.") == strlen(a->names[i])) && !ip)
            ip = a->names[i];
    }
    if (a->challenge == CONFIG_ACME_DNS01 && ip) {
        fprintf(stderr, "gatling: --acme-names %s: an IP address has no DNS-01 (RFC 8738): "
                "not with --acme-challenge dns-01\n", ip);
        return 2;
    }
    if ((wild || a->challenge == CONFIG_ACME_DNS01) && (!a->dns_server || !a->dns_key_file)) {
        fprintf(stderr, "gatling: %s%s: DNS-01 needs --acme-dns-server and --acme-dns-key\n",
                wild ? "--acme-names " : "--acme-challenge dns-01", wild ? wild : "");
        return 2;
    }
    if (a->dns_key_file && acme_dnskey_load(a->dns_key_file, &dns_key, err, sizeof err) < 0) {
        fprintf(stderr, "gatling: --acme-dns-key %s: %s\n", a->dns_key_file, err);
        return 2;
    }
    a->dns_key = a->dns_key_file ? &dns_key : NULL;
    return -1;
}

int acme_options_done(config_t *cfg)
{
    config_acme_t *a = &cfg->acme;
    /* the defaults first: --check goes on past a refusal below to the state
       directory (acme_prepare), which needs its name */
    if (!a->cas[0].url)
        a->cas[0].url = ACME_CA_DEFAULT;
    a->ncas = a->ncas ? a->ncas : 1;
    a->ca = a->cas[0].url;
    if (!a->state_dir)
        a->state_dir = ACME_DIR_DEFAULT;
    if (!a->od_per_hour)
        a->od_per_hour = 60, a->od_per_addr = 10;
    a->od_max = a->od_max ? a->od_max : CONFIG_ACME_OD_NAMES;
    a->od_forget = a->od_forget ? a->od_forget : 7 * 86400;
    if (!a->email && (given & ~1)) {
        for (int i = 1; i < ACME_OPT_END - ACME_OPT; i++)
            if (given & (1 << i)) {
                fprintf(stderr, "gatling: --%s without --acme EMAIL: nothing to do\n",
                        acme_opts[i].lname);
                break;
            }
        return 2;
    }
    for (int i = ACME_OPT_ONDEMAND_RATE; i < ACME_OPT_END && !a->ask_url; i++)
        if (given & 1 << (i - ACME_OPT)) {
            fprintf(stderr, "gatling: --%s without --acme-on-demand: nothing to limit\n",
                    acme_opts[i].lname);
            return 2;
        }
    if (a->email && cfg->tls_off) {
        fputs("gatling: --acme gets certificates for HTTPS, which -E turns off: give one\n",
              stderr);
        return 2;
    }
    int rc;
    if (a->email && (rc = dns_options_done(a)) >= 0)
        return rc;
    return -1;
}

/* Can a file be made in dir?  (A read-only file system, a full one, a
   directory of another user: said now, not by the client at its first order.) */
static int writable(const char *dir)
{
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%.*s/.probe.%d", (int)sizeof probe - 32, dir, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = write(fd, "x", 1) == 1;
    close(fd);
    unlink(probe);
    return ok ? 0 : (errno = ENOSPC, -1);
}

/* fn(path), as -u's user when root is to become it (the client opens the
   state directory and the CA root as that user; a directory on the way that
   only root may cross is found now).  fn's result; -1 with errno if the ids
   cannot be switched. */
static int as_user(const proc_t *p, int (*fn)(const char *), const char *path)
{
    pfs_ids_t ids;
    if (pfs_become(&ids, p->uid, p->gid) < 0)
        return -1;
    int r = fn(path);
    pfs_unbecome(&ids); /* keeps errno */
    return r;
}

static int readable(const char *path)
{
    return faccessat(AT_FDCWD, path, R_OK, AT_EACCESS);
}

/*
 * Hand what an earlier run as root (without -u) made below dfd, a directory
 * of root's alone (so no one else put anything there), to uid/gid, depth
 * levels down: the account key, the schedule, live/'s versions.  Through
 * descriptors only (O_PATH | O_NOFOLLOW, fstat, fchown): a directory of
 * root's alone or a regular file of root's with one link; a directory's
 * entries before itself, so an interrupted start resumes where root still
 * owns.  Anything else is left as it is (the client says what it cannot use).
 */
static void migrate(int dfd, int uid, int gid, int depth)
{
    int rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
    if (!d) {
        if (rfd >= 0)
            close(rfd);
        return;
    }
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int fd = openat(rfd, e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        int dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && pfs_root_only(&st);
        if (dir && depth > 1)
            migrate(fd, uid, gid, depth - 1);
        if (dir || (S_ISREG(st.st_mode) && st.st_uid == 0 && st.st_nlink == 1))
            (void)!fchownat(fd, "", (uid_t)uid, (gid_t)gid, AT_EMPTY_PATH);
        close(fd);
    }
    closedir(d);
}

/* 1 if what dfd holds is only what gatling puts in a state directory (an
   earlier run's, or nothing): one of root's that gatling may hand over. */
static int gatlings_own(int dfd)
{
    static const char *const names[] = {"account", ACME_CHAL_DIR, "live", "schedule", "lock",
                                        ".schedule.tmp"};
    int rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), own = 1;
    DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
    struct dirent *e;
    if (!d) {
        if (rfd >= 0)
            close(rfd);
        return 0;
    }
    while (own && (e = readdir(d))) {
        int known = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                    !strncmp(e->d_name, ".probe.", 7);
        for (size_t i = 0; !known && i < sizeof names / sizeof names[0]; i++)
            known = !strcmp(e->d_name, names[i]);
        own = known;
    }
    closedir(d);
    return own;
}

/* STATE, walked to by site/privfs.h's rules (made 0700 when missing: as
   root where only root writes, as -u's user elsewhere) and checked:
   -u's user's, or root's alone and gatling's (made now, or holding only what
   gatling puts there): then *give is set, for hand_over once every check
   passed.  Its O_PATH descriptor, or -1 after saying why. */
static int open_state(const config_t *cfg, const proc_t *p, int *give)
{
    const char *dir = cfg->acme.state_dir;
    int owner = p->uid >= 0 ? p->uid : (int)geteuid();
    char why[PATH_MAX + 160];
    struct stat st;
    pfs_dir_t where;
    int fd = pfs_walk_dir(dir, 0700, p->uid, p->gid, &where, why, sizeof why);
    *give = 0;
    if (fd < 0 && *why) { /* a link the walk does not follow */
        fprintf(stderr, "gatling: --acme-dir %s: %s\n", dir, why);
        return -1;
    }
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "gatling: --acme-dir %s: %s cannot be made or written%s (%s): the "
                "ACME state (account key, challenges) lives there\n", dir, dir,
                p->uid >= 0 ? " by -u's user" : "", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (p->uid >= 0 && st.st_uid != (uid_t)owner && st.st_uid == 0 && pfs_root_only(&st) &&
        (where.made || gatlings_own(fd)))
        *give = 1;
    else if (st.st_uid != (uid_t)owner) {
        fprintf(stderr, "gatling: --acme-dir %s: belongs to uid %lu, not to %s (uid %d), as "
                "whom the ACME client runs%s: not used\n", dir, (unsigned long)st.st_uid,
                p->uid >= 0 ? "-u's user" : "the user gatling runs as", owner,
                st.st_uid != 0 ? "" : !pfs_root_only(&st) ? " (and others than root may write it)"
                : " (and it holds what gatling did not put there: gatling hands over only a "
                  "directory it made; chown it yourself if it is to be the state)");
        close(fd);
        return -1;
    }
    return fd;
}

/* STATE (fd), root's and gatling's, handed to -u's user with what an
   earlier run as root made in it (migrate). */
static void hand_over(const proc_t *p, int fd)
{
    migrate(fd, p->uid, p->gid, 4); /* STATE/live/.acme/VERSION/FILE */
    (void)!fchownat(fd, "", (uid_t)p->uid, (gid_t)p->gid, AT_EMPTY_PATH);
}

/* name below at, made (mode) and opened O_NOFOLLOW by whoever runs now: a
   directory of owner's.  Its O_PATH descriptor, or -1 with errno set. */
static int sub_dir(int at, const char *name, mode_t mode, int owner)
{
    struct stat st;
    if (mkdirat(at, name, mode) < 0 && errno != EEXIST)
        return -1;
    int fd = openat(at, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOTDIR || errno == ELOOP ? (errno = ENOTDIR, -1) : -1;
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != (uid_t)owner) {
        close(fd);
        return errno = EPERM, -1;
    }
    return fd;
}

/* STATE's layout, made as -u's user (STATE is that user's: nothing in it is
   root's to make or chown); *chal gets challenges/.  0, or -1 after saying. */
static int make_layout(const config_t *cfg, const proc_t *p, int state, int *chal)
{
    static const struct {
        int in_chal; /* below challenges/, or STATE */
        const char *name;
        mode_t mode;
    } dirs[] = {{0, ACME_CHAL_DIR, 0755}, {1, ACME_CHAL_HTTP, 0755}, {1, ACME_CHAL_ALPN, 0755},
                {0, "live", 0700}};
    int owner = p->uid >= 0 ? p->uid : (int)geteuid(), fd = -1, e = 0;
    size_t i, n = cfg->tls_dir ? 3 : 4; /* live/ only where it is -C */
    pfs_ids_t ids;
    if (pfs_become(&ids, p->uid, p->gid) < 0) {
        fprintf(stderr, "gatling: --acme: cannot become -u's user: %s\n", strerror(errno));
        return -1;
    }
    for (i = 0; i < n; i++) {
        int sub = sub_dir(dirs[i].in_chal ? fd : state, dirs[i].name, dirs[i].mode, owner);
        if (sub < 0) {
            e = errno;
            break;
        }
        if (i == 0)
            fd = sub;
        else
            close(sub);
    }
    pfs_unbecome(&ids);
    if (i < n) {
        fprintf(stderr, "gatling: --acme-dir %s: %s%s%s cannot be made or used%s (%s): not a "
                "directory of %s, or a link\n", cfg->acme.state_dir,
                dirs[i].in_chal ? ACME_CHAL_DIR : "", dirs[i].in_chal ? "/" : "", dirs[i].name,
                p->uid >= 0 ? " by -u's user" : "", strerror(e),
                p->uid >= 0 ? "-u's user" : "gatling's user");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *chal = fd;
    return 0;
}

/* --acme with -C: the client writes the certificates there as -u's user;
   gatling never hands an admin's directory to that user: it must be
   writable by it already.  0, or -1 after saying. */
static int check_tls_dir(const config_t *cfg, const proc_t *p)
{
    if (!cfg->tls_dir || p->uid < 0 || geteuid() != 0)
        return 0;
    if (as_user(p, writable, cfg->tls_dir) < 0) {
        fprintf(stderr, "gatling: --acme: -C %s: -u's user %s cannot write there (%s), and the "
                "ACME client writes the certificates there as that user: give it the directory "
                "(gatling does not), or leave -C out to use the state directory's live/\n",
                cfg->tls_dir, cfg->user, strerror(errno));
        return -1;
    }
    return 0;
}

/* --acme-ca-root, readable by the client's user: 0, or -1 after saying. */
static int check_ca_root(const config_t *cfg, const proc_t *p)
{
    const char *root = cfg->acme.ca_root;
    if (!root || as_user(p, readable, root) >= 0)
        return 0;
    fprintf(stderr, "gatling: --acme-ca-root %s: %s%s\n", root, strerror(errno),
            p->uid >= 0 ? " (for -u's user, as whom the client reads it)" : "");
    return -1;
}

int acme_prepare(const config_t *cfg, proc_t *p)
{
    const config_acme_t *a = &cfg->acme;
    int state, chal, give;
    if (!a->email)
        return 0;
    if ((state = open_state(cfg, p, &give)) < 0)
        return -1;
    /* the checks that do not need STATE first: a directory is handed over
       only when the start will not stop at them */
    if ((cfg->tls_dir && check_tls_dir(cfg, p) < 0) || check_ca_root(cfg, p) < 0) {
        close(state);
        return -1;
    }
    if (give)
        hand_over(p, state);
    int rc = make_layout(cfg, p, state, &chal);
    close(state);
    if (rc < 0)
        return -1;
    if (as_user(p, writable, a->state_dir) < 0) {
        fprintf(stderr, "gatling: --acme-dir %s: %s cannot be made or written%s (%s): the "
                "ACME state (account key, challenges) lives there\n", a->state_dir,
                a->state_dir, p->uid >= 0 ? " by -u's user" : "", strerror(errno));
        close(chal);
        return -1;
    }
    if (!p->tls_dir) { /* the certificates land in STATEDIR/live */
        snprintf(p->acme_live, sizeof p->acme_live, "%s/live", a->state_dir);
        p->tls_dir = p->acme_live;
        p->tls_dir_acme = 1;
    }
    if (!(p->acme_chal = acme_chal_open(chal))) { /* the workers see challenges/ alone */
        fprintf(stderr, "gatling: --acme-dir %s: %s\n", a->state_dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* A virtual host directory's name ("example.org:80") as a name to get a
   certificate for, into out; 0 for those that name none ("default",
   "[::1]:8000", "localhost:80", "192.0.2.1:80"). */
static size_t vhost_host(const char *d, char *out, size_t cap)
{
    const char *colon = strrchr(d, ':');
    size_t n = colon ? (size_t)(colon - d) : strlen(d);
    if (colon && (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1)))
        return 0;
    if (!n || n >= cap || !acme_chal_host_ok(d, n))
        return 0;
    const char *dot = memrchr(d, '.', n);
    if (!dot || strspn(dot + 1, "0123456789") == (size_t)(d + n - dot - 1))
        return 0; /* one label, or an address */
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(d[i] >= 'A' && d[i] <= 'Z' ? d[i] + 'a' - 'A' : d[i]);
    out[n] = 0;
    return n;
}

static int cmp_name(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The names of the document root's virtual host directories, sorted, once
   each, into dir_names (p->acme_names).  How many, or -1 after saying why. */
static int vhost_names(const config_t *cfg, proc_t *p)
{
    const char *root = cfg->root ? cfg->root : ".";
    int n = 0;
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr, "gatling: --acme: %s: %s\n", root, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char name[256];
    struct stat sb;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !vhost_host(e->d_name, name, sizeof name) ||
            fstatat(dirfd(d), e->d_name, &sb, 0) < 0 || !S_ISDIR(sb.st_mode))
            continue;
        int dup = 0;
        for (int i = 0; i < n && !dup; i++)
            dup = !strcmp(dir_names[i], name);
        if (dup)
            continue;
        char *copy = n < CONFIG_ACME_NAMES ? strdup(name) : NULL;
        if (!copy) {
            fprintf(stderr, "gatling: --acme: more than %d host directories in %s: the first "
                    "%d are kept (or give --acme-names)\n", CONFIG_ACME_NAMES, root,
                    CONFIG_ACME_NAMES);
            break;
        }
        dir_names[n++] = copy;
    }
    closedir(d);
    qsort(dir_names, (size_t)n, sizeof dir_names[0], cmp_name);
    p->acme_names = (const char *const *)dir_names, p->acme_nnames = n;
    return n;
}

int acme_launch(const config_t *cfg, proc_t *p)
{
    const config_acme_t *a = &cfg->acme;
    if (!a->email)
        return 0;
    p->acme_names = a->names, p->acme_nnames = a->nnames;
    if (!a->nnames && (!cfg->vhosts || vhost_names(cfg, p) <= 0) && !a->ask_url) {
        fprintf(stderr, "gatling: --acme: no name to get a certificate for: %s, or give "
                "--acme-names a,b,...\n", cfg->vhosts ? "no directory of the document root "
                "names a host (example.org, example.org:80)" : "-H serves no virtual hosts");
        return -1;
    }
    char err[512] = "";
    int ask[2] = {-1, -1};
    if (a->ask_url && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, ask) < 0) {
        fprintf(stderr, "gatling: --acme-on-demand: socketpair() failed: %s\n", strerror(errno));
        return -1;
    }
    p->acme_od_fd = ask[1];
    /* HTTP-01 needs the plain HTTP port, which gatling always serves; the
       client weighs --acme-challenge itself */
    /* an upgrade's start writes stderr to a file until it serves: the client,
       which outlives that, gets the real stderr */
    int real = handover_stderr(), saved = real != STDERR_FILENO ? dup(STDERR_FILENO) : -1;
    if (saved >= 0)
        dup2(real, STDERR_FILENO);
    pid_t pid = acme_start(cfg, p, p->acme_names, p->acme_nnames, a->challenge != CONFIG_ACME_TLSALPN01,
                           getpid(), &keeper_fd, err, sizeof err);
    if (saved >= 0) {
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    if (ask[1] >= 0)
        close(ask[1]); /* the client's end: the client's alone */
    p->acme_od_fd = -1;
    if (pid >= 0 && ask[0] >= 0)
        acme_chal_set_ask(p->acme_chal, ask[0]);
    else if (ask[0] >= 0)
        close(ask[0]);
    if (pid < 0) {
        fprintf(stderr, "gatling: --acme: the ACME client did not start: %s\n", err);
        return -1;
    }
    p->acme_pid = (int)pid;
    /* the client has the TSIG key now: the serving processes keep no copy */
    OPENSSL_cleanse(&dns_key, sizeof dns_key);
    int n = p->acme_nnames;
    if (n)
        fprintf(stderr, "gatling: --acme: certificates for %d name%s (%s%s)%s from %s%s%s%s, "
                "kept in %s\n", n, n == 1 ? "" : "s", p->acme_names[0], n > 1 ? ", ..." : "", a->ask_url ? " and on demand" : "", a->ca,
                a->ncas > 1 ? " (then " : "", a->ncas > 1 ? a->cas[1].url : "",
                a->ncas > 2 ? ", ...)" : a->ncas > 1 ? ")" : "", p->tls_dir);
    else
        fprintf(stderr, "gatling: --acme: certificates on demand (asked of %s) from %s%s%s%s, "
                "kept in %s\n", a->ask_url, a->ca, a->ncas > 1 ? " (then " : "",
                a->ncas > 1 ? a->cas[1].url : "", a->ncas > 2 ? ", ...)" : a->ncas > 1 ? ")" : "",
                p->tls_dir);
    return 0;
}

static volatile sig_atomic_t term_now; /* acme_end's wait: a SIGTERM came */

static void on_term(int sig)
{
    (void)sig;
    term_now = 1;
}

void acme_detach(void)
{
    if (keeper_fd >= 0)
        close(keeper_fd);
    keeper_fd = -1;
}

void acme_end(proc_t *p)
{
    pid_t pid = (pid_t)p->acme_pid;
    acme_chal_free(p->acme_chal);
    p->acme_chal = NULL;
    for (int i = 0; p->acme_names == (const char *const *)dir_names && i < p->acme_nnames; i++)
        free(dir_names[i]), dir_names[i] = NULL;
    p->acme_names = NULL, p->acme_nnames = 0;
    OPENSSL_cleanse(&dns_key, sizeof dns_key); /* what cfg->acme.dns_key points to */
    acme_detach(); /* the keeper's stop: the order in flight, if any, finishes (ACME_STOP_GRACE) */
    if (pid <= 0)
        return;
    p->acme_pid = 0;
    /* the keeper ends within ACME_KEEPER_STOP by itself; a root keeper cannot
       be signalled by a server that became -u's user (EPERM), and is not
       waited for past that bound, nor past a SIGTERM (or SIGINT) now: the
       loops are done, so it is the second, which exits at once (gatling.8) */
    struct sigaction sa = {.sa_handler = on_term}, old[2];
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old[0]), sigaction(SIGINT, &sa, &old[1]);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM), sigaddset(&term, SIGINT);
    sigprocmask(SIG_UNBLOCK, &term, NULL); /* -W's supervisor blocks them */
    int i = 0;
    for (; i < (ACME_KEEPER_STOP + 1) * 100 && !term_now; i++) {
        if (waitpid(pid, NULL, WNOHANG) != 0)
            break;
        usleep(10000);
    }
    if (i == (ACME_KEEPER_STOP + 1) * 100 && kill(pid, SIGKILL) == 0)
        waitpid(pid, NULL, 0);
    sigaction(SIGTERM, &old[0], NULL), sigaction(SIGINT, &old[1], NULL);
}
