/* The FTP command parser and path arithmetic: see ftp_parse.h. */
#include "ftp_parse.h"

#include <string.h>

static const char verbs[FTP_VERBS][5] = {
    [FTP_USER] = "USER", [FTP_PASS] = "PASS", [FTP_ACCT] = "ACCT", [FTP_SYST] = "SYST",
    [FTP_FEAT] = "FEAT", [FTP_OPTS] = "OPTS", [FTP_PWD] = "PWD",   [FTP_CWD] = "CWD",
    [FTP_CDUP] = "CDUP", [FTP_TYPE] = "TYPE", [FTP_MODE] = "MODE", [FTP_STRU] = "STRU",
    [FTP_PASV] = "PASV", [FTP_EPSV] = "EPSV", [FTP_PORT] = "PORT", [FTP_EPRT] = "EPRT",
    [FTP_REST] = "REST", [FTP_RETR] = "RETR", [FTP_SIZE] = "SIZE", [FTP_MDTM] = "MDTM",
    [FTP_LIST] = "LIST", [FTP_NLST] = "NLST", [FTP_MLSD] = "MLSD", [FTP_MLST] = "MLST",
    [FTP_STAT] = "STAT", [FTP_NOOP] = "NOOP", [FTP_ABOR] = "ABOR", [FTP_QUIT] = "QUIT",
    [FTP_HELP] = "HELP", [FTP_STOR] = "STOR", [FTP_APPE] = "APPE", [FTP_MKD] = "MKD",
    [FTP_AUTH] = "AUTH", [FTP_PBSZ] = "PBSZ", [FTP_PROT] = "PROT", [FTP_ALLO] = "ALLO",
    [FTP_DELE] = "DELE", [FTP_RMD] = "RMD",   [FTP_RNFR] = "RNFR", [FTP_RNTO] = "RNTO",
    [FTP_STOU] = "STOU", [FTP_SITE] = "SITE", [FTP_SMNT] = "SMNT", [FTP_REIN] = "REIN",
};

/* The X-verbs of RFC 775 that clients still send, and their RFC 959 names. */
static ftp_verb_t alias(const char *name)
{
    if (!strcmp(name, "XPWD"))
        return FTP_PWD;
    if (!strcmp(name, "XCWD"))
        return FTP_CWD;
    if (!strcmp(name, "XCUP"))
        return FTP_CDUP;
    if (!strcmp(name, "XMKD"))
        return FTP_MKD;
    return FTP_UNKNOWN;
}

static ftp_verb_t lookup(const char *name)
{
    for (int v = 1; v < FTP_VERBS; v++)
        if (!strcmp(verbs[v], name))
            return (ftp_verb_t)v;
    return alias(name);
}

long ftp_parse_line(const char *buf, size_t len, ftp_cmd_t *cmd, size_t *consumed)
{
    size_t scan = len < FTP_LINE_MAX ? len : FTP_LINE_MAX;
    const char *lf = memchr(buf, '\n', scan);
    if (!lf)
        return len >= FTP_LINE_MAX ? FTP_TOO_LONG : FTP_INCOMPLETE;
    size_t line = (size_t)(lf - buf) + 1, end = line - 1;
    *consumed = line;
    if (end > 0 && buf[end - 1] == '\r')
        end--;
    size_t i = 0;
    while (i < end && (unsigned char)buf[i] >= 0xf0) /* Telnet IAC IP IAC DM (ABOR) */
        i++;
    memset(cmd, 0, sizeof *cmd);
    if (memchr(buf + i, 0, end - i))
        return FTP_BAD;
    size_t k = 0;
    for (; i < end && buf[i] != ' '; i++, k++) {
        char ch = buf[i];
        if (k == 4 || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')))
            return FTP_BAD;
        cmd->name[k] = (char)(ch & ~0x20);
    }
    if (k < 3)
        return FTP_BAD;
    cmd->name[k] = 0;
    cmd->verb = lookup(cmd->name);
    if (i < end) { /* buf[i] == ' ': the argument is everything after it */
        cmd->arg = buf + i + 1;
        cmd->arglen = end - i - 1;
    }
    return (long)line;
}

/* A decimal number of at most maxd digits at s[*i..n), up to max. */
static int number(const char *s, size_t n, size_t *i, unsigned long max, unsigned long *v)
{
    unsigned long x = 0;
    size_t start = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9' && *i - start < 20) {
        x = x * 10 + (unsigned long)(s[*i] - '0');
        if (x > max)
            return -1;
        (*i)++;
    }
    if (*i == start)
        return -1;
    *v = x;
    return 0;
}

int ftp_parse_port(const char *arg, size_t n, unsigned char ip[4], unsigned *port)
{
    unsigned long v[6];
    size_t i = 0;
    if (!arg)
        return -1;
    for (int k = 0; k < 6; k++) {
        if (k > 0 && (i >= n || arg[i++] != ','))
            return -1;
        if (number(arg, n, &i, 255, &v[k]) < 0)
            return -1;
    }
    if (i != n)
        return -1;
    for (int k = 0; k < 4; k++)
        ip[k] = (unsigned char)v[k];
    *port = (unsigned)(v[4] << 8 | v[5]);
    return 0;
}

/* One address in text ("1.2.3.4" or an IPv6 one) to bytes, without libc's
   locale or a NUL-terminated copy of unbounded length. */
static int parse_ip4(const char *s, size_t n, unsigned char a[4])
{
    size_t i = 0;
    unsigned long v;
    for (int k = 0; k < 4; k++) {
        if (k > 0 && (i >= n || s[i++] != '.'))
            return -1;
        if (number(s, n, &i, 255, &v) < 0)
            return -1;
        a[k] = (unsigned char)v;
    }
    return i == n ? 0 : -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* An IPv6 address: hex groups, one "::", no embedded IPv4 form. */
static int parse_ip6(const char *s, size_t n, unsigned char a[16])
{
    unsigned g[8];
    int ng = 0, gap = -1;
    size_t i = 0;
    if (n >= 2 && s[0] == ':' && s[1] == ':')
        gap = 0, i = 2;
    while (i < n) {
        unsigned v = 0;
        int d = 0;
        while (i < n && hexval(s[i]) >= 0 && d < 4)
            v = v << 4 | (unsigned)hexval(s[i++]), d++;
        if (!d || ng == 8)
            return -1;
        g[ng++] = v;
        if (i == n)
            break;
        if (s[i++] != ':')
            return -1;
        if (i < n && s[i] == ':') {
            if (gap >= 0)
                return -1;
            gap = ng, i++;
        } else if (i == n) {
            return -1;
        }
    }
    if (gap < 0 ? ng != 8 : ng > 7)
        return -1;
    memset(a, 0, 16);
    int tail = gap < 0 ? 0 : ng - gap;
    for (int k = 0; k < ng; k++) {
        int at = gap >= 0 && k >= gap ? 8 - tail + (k - gap) : k;
        a[2 * at] = (unsigned char)(g[k] >> 8), a[2 * at + 1] = (unsigned char)g[k];
    }
    return 0;
}

int ftp_parse_eprt(const char *arg, size_t n, int *family, unsigned char addr[16], unsigned *port)
{
    if (!arg || n < 7)
        return -1;
    char d = arg[0];
    if (d < 33 || d > 126 || (d >= '0' && d <= '9'))
        return -1;
    const char *p1 = memchr(arg + 1, d, n - 1);
    if (!p1 || p1 != arg + 2 || (arg[1] != '1' && arg[1] != '2'))
        return -1;
    const char *a = p1 + 1, *end = arg + n;
    const char *p2 = memchr(a, d, (size_t)(end - a));
    if (!p2)
        return -1;
    const char *pp = p2 + 1;
    const char *p3 = memchr(pp, d, (size_t)(end - pp));
    if (!p3 || p3 + 1 != end)
        return -1;
    *family = arg[1] == '1' ? 4 : 6;
    if ((*family == 4 ? parse_ip4(a, (size_t)(p2 - a), addr)
                      : parse_ip6(a, (size_t)(p2 - a), addr)) < 0)
        return -1;
    size_t i = 0, pn = (size_t)(p3 - pp);
    unsigned long v;
    if (number(pp, pn, &i, 65535, &v) < 0 || i != pn || v == 0)
        return -1;
    *port = (unsigned)v;
    return 0;
}

int ftp_parse_offset(const char *arg, size_t n, uint64_t *off)
{
    uint64_t v = 0;
    if (!arg || n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (arg[i] < '0' || arg[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(arg[i] - '0');
    }
    if (v > (uint64_t)1 << 62)
        return -1;
    *off = v;
    return 0;
}

/* Append segment s[0..n) to out (length *o), handling "." and "..". */
static int push_segment(char *out, size_t outsz, size_t *o, const char *s, size_t n)
{
    if (n == 0 || (n == 1 && s[0] == '.'))
        return 0;
    if (n == 2 && s[0] == '.' && s[1] == '.') {
        while (*o > 0 && out[*o - 1] != '/')
            (*o)--;
        if (*o > 0) /* drop the '/' too: "/a" -> "" (the root) */
            (*o)--;
        return 0;
    }
    if (*o + 1 + n + 1 > outsz)
        return -1;
    out[(*o)++] = '/';
    memcpy(out + *o, s, n);
    *o += n;
    return 0;
}

/* Every segment of p[0..n) onto out. */
static int push_path(char *out, size_t outsz, size_t *o, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *slash = memchr(p + i, '/', n - i);
        size_t seg = slash ? (size_t)(slash - (p + i)) : n - i;
        if (push_segment(out, outsz, o, p + i, seg) < 0)
            return -1;
        i += seg + (slash != NULL);
    }
    return 0;
}

long ftp_path_join(const char *cwd, const char *arg, size_t n, char *out, size_t outsz)
{
    size_t o = 0;
    if (outsz < 2 || (arg && memchr(arg, 0, n)))
        return -1;
    if (!arg || n == 0 || arg[0] != '/')
        if (push_path(out, outsz, &o, cwd, strlen(cwd)) < 0)
            return -1;
    if (arg && push_path(out, outsz, &o, arg, n) < 0)
        return -1;
    if (o == 0)
        out[o++] = '/';
    out[o] = 0;
    return (long)o;
}

int ftp_path_hidden(const char *path)
{
    for (const char *p = path; *p; p++)
        if (*p == '.' && (p == path || p[-1] == '/'))
            return 1;
    return 0;
}

const char *ftp_list_arg(const char *arg, size_t *n)
{
    size_t i = 0;
    if (!arg)
        return (*n = 0, "");
    while (i < *n && arg[i] == '-') { /* "-la", "-a -l": ls options, ignored */
        while (i < *n && arg[i] != ' ')
            i++;
        while (i < *n && arg[i] == ' ')
            i++;
    }
    *n -= i;
    return arg + i;
}
