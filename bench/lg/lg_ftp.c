/* lg_ftp: the FTP reply parser, the session's reply table, EPSV/PASV ports. */
#include "lg_ftp.h"

#include <string.h>

enum {
    P_CODE,   /* the first line's code and the character after it */
    P_TEXT,   /* the text of the reply's last line (a one-line reply's only line) */
    P_MTEXT,  /* the text of a multi-line reply's first line */
    P_LSTART, /* a multi-line reply, at a line start: is it "ddd "? */
    P_SKIP    /* a multi-line reply, inside a line that does not end it */
};

void lg_ftp_reply_start(lg_ftp_reply_t *r)
{
    memset(r, 0, sizeof *r);
}

static void keep(lg_ftp_reply_t *r, char ch)
{
    if (r->tlen < sizeof r->text)
        r->text[r->tlen++] = ch;
}

/* The reply is complete: drop the CR of the last line's CR LF, if it was kept. */
static int finish(lg_ftp_reply_t *r)
{
    if (r->tlen && r->tlen < sizeof r->text && r->text[r->tlen - 1] == '\r')
        r->tlen--;
    return LG_FTP_DONE;
}

/* The digit at position pos (0..2) of the reply's code. */
static char code_digit(const lg_ftp_reply_t *r, unsigned pos)
{
    static const unsigned div[3] = {100, 10, 1};
    return (char)('0' + r->code / div[pos] % 10);
}

/* One byte of the first line's code: -1 if it is not one, 1 if the reply ends here. */
static int code_byte(lg_ftp_reply_t *r, char ch)
{
    if (r->pos < 3) {
        if (ch < (r->pos ? '0' : '1') || ch > (r->pos ? '9' : '5'))
            return -1;
        r->code = (uint16_t)(r->code * 10 + (unsigned)(ch - '0'));
        r->pos++;
        return 0;
    }
    if (ch == ' ' || ch == '\r')
        r->state = P_TEXT; /* "ddd\r\n": a code without text is tolerated */
    else if (ch == '-')
        r->state = P_MTEXT;
    else if (ch == '\n')
        return 1;
    else
        return -1;
    if (ch == '\r')
        keep(r, ch);
    return 0;
}

/* One byte at a multi-line reply's line start: does the line begin with "ddd "? */
static void line_start_byte(lg_ftp_reply_t *r, char ch)
{
    if (r->pos < 3 && ch == code_digit(r, r->pos)) {
        r->pos++;
    } else if (r->pos == 3 && ch == ' ') {
        r->state = P_TEXT; /* the last line: its text replaces the first line's */
        r->tlen = 0;
    } else if (ch == '\n') {
        r->pos = 0;
    } else {
        r->state = P_SKIP;
    }
}

int lg_ftp_reply_parse(lg_ftp_reply_t *r, const char *p, size_t n, size_t *used)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (++r->len > LG_FTP_MAX_REPLY) {
            *used = i;
            return LG_FTP_BAD;
        }
        int k = 0;
        switch (r->state) {
        case P_CODE: k = code_byte(r, ch); break;
        case P_TEXT:
            if (ch == '\n')
                k = 1;
            else
                keep(r, ch);
            break;
        case P_MTEXT:
        case P_SKIP:
            if (ch == '\n')
                r->state = P_LSTART, r->pos = 0;
            else if (r->state == P_MTEXT)
                keep(r, ch);
            break;
        case P_LSTART: line_start_byte(r, ch); break;
        }
        if (k) {
            *used = i + (k > 0);
            return k > 0 ? finish(r) : LG_FTP_BAD;
        }
    }
    *used = n;
    return LG_FTP_MORE;
}

/* A 4xx or 5xx: the command failed (transiently or not). */
static int failed(unsigned code)
{
    return code >= 400 && code < 600;
}

/* The login phases: GREET, USER, PASS, TYPE. */
static int next_login(int phase, unsigned code)
{
    switch (phase) {
    case LG_FTP_GREET:
        if (code < 200)
            return LG_FTP_A_WAIT; /* 120: service ready in a while */
        if (code == 220)
            return LG_FTP_A_USER;
        break;
    case LG_FTP_USER:
        if (code == 331)
            return LG_FTP_A_PASS;
        if (code == 230) /* no password wanted */
            return LG_FTP_A_TYPE;
        break;
    case LG_FTP_PASS:
        if (code == 230 || code == 202)
            return LG_FTP_A_TYPE;
        break;
    case LG_FTP_TYPE:
        if (code == 200)
            return LG_FTP_A_READY;
        break;
    }
    return failed(code) ? LG_FTP_A_REFUSED : LG_FTP_A_UNEXPECTED;
}

int lg_ftp_next(int phase, unsigned code)
{
    if (phase <= LG_FTP_TYPE)
        return next_login(phase, code);
    switch (phase) {
    case LG_FTP_IDLE: /* nothing was asked: only an idle server's goodbye makes sense */
        return code == 421 ? LG_FTP_A_CLOSING : LG_FTP_A_UNEXPECTED;
    case LG_FTP_EPSV:
        if (code == 229)
            return LG_FTP_A_CONNECT;
        /* not understood, not implemented, or "use another protocol" (RFC 2428 522) */
        if (code == 500 || code == 501 || code == 502 || code == 504 || code == 522)
            return LG_FTP_A_PASV;
        break;
    case LG_FTP_PASV:
        if (code == 227)
            return LG_FTP_A_CONNECT;
        break;
    case LG_FTP_RETR:
        if (code >= 100 && code < 200)
            return LG_FTP_A_WAIT; /* 125 / 150: the transfer starts */
        if (code == 226 || code == 250)
            return LG_FTP_A_DONE;
        break;
    }
    return failed(code) ? LG_FTP_A_REFUSED : LG_FTP_A_UNEXPECTED;
}

/* A decimal of 1..maxdig digits at s[*i] (advanced past it), at most max; -1 if none. */
static long number(const char *s, size_t len, size_t *i, unsigned maxdig, long max)
{
    long v = 0;
    unsigned d = 0;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
        if (++d > maxdig)
            return -1;
        v = v * 10 + (s[(*i)++] - '0');
    }
    return d && v <= max ? v : -1;
}

int lg_ftp_epsv_port(const char *t, size_t len)
{
    for (size_t i = 0; i + 6 < len; i++) { /* "(ddd1d)" is 7 bytes at least */
        char d = t[i + 1];
        if (t[i] != '(' || d < 33 || d > 126 || (d >= '0' && d <= '9') || t[i + 2] != d ||
            t[i + 3] != d)
            continue;
        size_t j = i + 4;
        long port = number(t, len, &j, 5, 65535);
        if (port > 0 && j + 1 < len && t[j] == d && t[j + 1] == ')')
            return (int)port;
    }
    return -1;
}

static int digit_or_comma(char ch)
{
    return (ch >= '0' && ch <= '9') || ch == ',';
}

int lg_ftp_pasv_port(const char *t, size_t len)
{
    for (size_t i = 0; i < len; i++) { /* six numbers, not part of a longer list */
        if (t[i] < '0' || t[i] > '9' || (i && digit_or_comma(t[i - 1])))
            continue;
        size_t j = i;
        long v[6];
        int k;
        for (k = 0; k < 6; k++) {
            if (k && (j >= len || t[j++] != ','))
                break;
            if ((v[k] = number(t, len, &j, 3, 255)) < 0)
                break;
        }
        if (k == 6 && (j >= len || !digit_or_comma(t[j])) && v[4] * 256 + v[5] > 0)
            return (int)(v[4] * 256 + v[5]);
    }
    return -1;
}

size_t lg_ftp_retr_format(char *buf, size_t cap, const char *path)
{
    if (*path == '/')
        path++;
    size_t pl = strlen(path);
    if (!pl || path[pl - 1] == '/' || strpbrk(path, "\r\n"))
        return 0;
    if (pl > cap || cap - pl < sizeof "RETR \r\n") /* the command and a NUL */
        return 0;
    memcpy(buf, "RETR ", 5);
    memcpy(buf + 5, path, pl);
    memcpy(buf + 5 + pl, "\r\n", 3);
    return pl + 7;
}
