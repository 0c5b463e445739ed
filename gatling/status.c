/* /server-status: see status.h. */
#include "status.h"
#include "response.h"
#include "site.h"
#include "conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void roll(status_counters_t *st, int64_t now)
{
    if (now == st->second)
        return;
    /* a new second: the one that ended gives the rate (0 after a quiet gap) */
    int quiet = now - st->second > 1;
    st->rps = quiet ? 0 : st->requests - st->last_requests;
    st->bps = quiet ? 0 : st->bytes - st->last_bytes;
    st->last_requests = st->requests;
    st->last_bytes = st->bytes;
    st->second = now;
}

void status_count(status_counters_t *st, int64_t now, uint64_t bytes)
{
    roll(st, now);
    st->requests++;
    st->bytes += bytes;
}

int status_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr)[0] == 127;
    if (sa->sa_family != AF_INET6)
        return 0;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return IN6_IS_ADDR_LOOPBACK(a) || (!memcmp(a->s6_addr, mapped, 12) && a->s6_addr[12] == 127);
}

int status_serve(conn_t *c, int json)
{
    site_t *s = c->site;
    status_counters_t *st = &s->stats;
    int64_t now = gio_wallclock(s->loop);
    roll(st, now);
    char *body = malloc(2048);
    if (!body)
        return -1;
    unsigned long long uptime = (unsigned long long)(now - st->started);
    /* one argument list for both forms: the compiler checks both formats */
    int n = snprintf(body, 2048,
                     json ? "{\"version\":\"%s\",\"backend\":\"%s\",\"pid\":%d,\"uptime\":%llu,"
                            "\"connections\":%zu,\"requests\":%llu,\"bytes\":%llu,"
                            "\"requests_per_second\":%llu,\"bytes_per_second\":%llu}\n"
                          : "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                            "<title>gatling status</title></head>\n<body><h1>gatling %s (%s), "
                            "pid %d</h1>\n<table>\n<tr><th>uptime (s)</th><td>%llu</td></tr>\n"
                            "<tr><th>open connections</th><td>%zu</td></tr>\n"
                            "<tr><th>requests</th><td>%llu</td></tr>\n"
                            "<tr><th>bytes sent</th><td>%llu</td></tr>\n"
                            "<tr><th>requests/s</th><td>%llu</td></tr>\n"
                            "<tr><th>bytes/s</th><td>%llu</td></tr>\n</table></body></html>\n",
                     GATLING_VERSION, gio_backend_name(), (int)getpid(), uptime, s->nconns,
                     (unsigned long long)st->requests, (unsigned long long)st->bytes,
                     (unsigned long long)st->rps, (unsigned long long)st->bps);
    const char *type = json ? "application/json" : "text/html; charset=utf-8";
    int r = resp_head(c, 200, type, (uint64_t)n, -1, "Cache-Control: no-store\r\n");
    if (r != 0 || c->head_only) {
        free(body);
        return r < 0 ? -1 : 0;
    }
    if (gio_batch_add_buf(&c->out, body, (size_t)n, GIO_BATCH_FREE) < 0) {
        free(body);
        return -1;
    }
    return 0;
}
