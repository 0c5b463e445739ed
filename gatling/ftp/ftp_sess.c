/*
 * What both halves of an FTP session use (ftp_sess.h): the reply queue of
 * the control connection (ftp.c sends it) and -T's cap on a deadline.
 */
#include "ftp_sess.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int64_t ftp_capped_ms(const ftp_sess_t *s, int64_t ms)
{
    int64_t t = (int64_t)s->site->cfg->timeout * 1000;
    return t > 0 && t < ms ? t : ms;
}

int ftp_reply(ftp_sess_t *s, const char *fmt, ...)
{
    size_t room = sizeof s->rep - s->replen;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->rep + s->replen, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 2 >= room) { /* a client that reads no replies: give up */
        s->state = FTP_CLOSING;
        return -1;
    }
    memcpy(s->rep + s->replen + n, "\r\n", 2);
    s->replen += (uint32_t)n + 2;
    return 0;
}
