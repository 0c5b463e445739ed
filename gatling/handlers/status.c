/* /server-status: see status.h. */
#include "status.h"
#include "http/hbuf.h"
#include "site/site.h"
#include "site/encoding.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* One row of the page: its JSON key, its HTML label, its value. */
typedef struct row {
    const char *key, *label;
    uint64_t v;
} row_t;

#define STATUS_PAGE_MAX 12288 /* the page is about 5 KiB */

/* The rows, in the order shown; the same list makes both forms. */
static size_t rows(const site_t *s, row_t *r, int64_t now)
{
    const status_counters_t *st = &s->stats;
    size_t n = 0;
#define ROW(k, l, v) r[n++] = (row_t){k, l, (uint64_t)(v)}
    ROW("uptime", "uptime (s)", now - st->started);
    ROW("connections", "open connections", s->nconns);
    ROW("requests", "requests", st->requests);
    ROW("bytes", "bytes sent", st->bytes);
    ROW("requests_per_second", "requests/s", st->rps);
    ROW("bytes_per_second", "bytes/s", st->bps);
    ROW("refused_connection_cap", "refused: over the connection cap (-N), 503 (HTTPS: closed)",
        st->refused_cap);
    ROW("refused_address_cap", "refused: over the per-address cap (-K), 503 (HTTPS: closed)",
        st->refused_addr);
    ROW("refused_descriptors", "accept paused: out of descriptors", st->refused_fds);
    ROW("rate_limited", "over the request rate (-A): tarpitted or dropped", st->rate_limited);
    ROW("auth_throttled", "failed logins slowed down: 429", st->auth_throttled);
    ROW("auth_remembered", "recent failed credentials: 401 without hashing", st->auth_remembered);
    ROW("busy", "worker pool full: 503", st->busy);
    enc_gz_counters_t gz = s->gzcache ? enc_gzip_counters(s->gzcache) : (enc_gz_counters_t){0};
    ROW("gzip_skipped_busy", "gzip misses served identity: compressions busy", gz.skipped_busy);
    ROW("gzip_paced", "compressions paced: the machine was saturated", gz.paced);
    ROW("gzip_paced_ms", "time they yielded the CPU (ms)", gz.paced_ms);
    ROW("timeout_head", "timed out: request head (-s)", st->timeout_head);
    ROW("timeout_body", "timed out: request body too slow (-B)", st->timeout_body);
    ROW("timeout_drain", "timed out: response read too slowly (-B)", st->timeout_drain);
    ROW("timeout_idle", "timed out: keep-alive idle (-T)", st->timeout_idle);
    ROW("max_requests", "closed after -R requests", st->max_requests);
    ROW("head_overflows", "response heads too large: 500", st->head_overflows);
    fcache_mem_t m = fcache_mem(s->fcache);
    ROW("memory_files", "small files held in memory (-F)", m.files);
    ROW("memory_bytes", "bytes of them held", m.held);
    ROW("memory_full", "small files sent from disk: memory budget full", m.skipped);
    ROW("https_connections", "open HTTPS connections", s->ntls);
    ROW("tls_handshakes", "HTTPS: handshakes done", st->tls_handshakes);
    ROW("tls_resumed", "HTTPS: of which resumed (ticket or cache)", st->tls_resumed);
    ROW("tls_failed", "HTTPS: handshakes failed", st->tls_failed);
    ROW("tls_not_tls", "HTTPS port: not TLS, closed", st->tls_not_tls);
    ROW("timeout_handshake", "timed out: TLS handshake (-s)", st->timeout_handshake);
    ROW("tls_misdirected", "HTTPS: Host of another certificate: 421", st->tls_misdirected);
    ROW("tls_ktls", "HTTPS: connections sent by kernel TLS (sendfile)", st->tls_ktls);
    ROW("h2_connections", "connections that spoke HTTP/2", st->h2_conns);
    ROW("h2_errors", "HTTP/2: ended by GOAWAY with an error (floods, resets)", st->h2_errors);
    ROW("h2_yields", "HTTP/2: sends paused at the per-event budget", st->h2_yields);
    ROW("h2_refused", "HTTP/2: streams refused, header memory full", st->h2_refused);
    ROW("h2_file_waits", "HTTP/2: streams that waited for a file slot", st->h2_file_waits);
    ROW("h2_flood_settings", "HTTP/2 floods ended: SETTINGS", st->h2_flood[H2_FLOOD_SETTINGS]);
    ROW("h2_flood_ping", "HTTP/2 floods ended: PING", st->h2_flood[H2_FLOOD_PING]);
    ROW("h2_flood_window_update", "HTTP/2 floods ended: small WINDOW_UPDATEs",
        st->h2_flood[H2_FLOOD_WINDOW]);
    ROW("h2_flood_empty_data", "HTTP/2 floods ended: empty DATA frames",
        st->h2_flood[H2_FLOOD_EMPTY_DATA]);
    ROW("h2_flood_other", "HTTP/2 floods ended: PRIORITY, PRIORITY_UPDATE, unknown frames",
        st->h2_flood[H2_FLOOD_OTHER]);
    ROW("h2_flood_reset_sent", "HTTP/2 floods ended: streams we had to reset",
        st->h2_flood[H2_FLOOD_RESET_SENT]);
    ROW("h2_flood_rapid_reset", "HTTP/2 floods ended: streams reset by the client",
        st->h2_flood[H2_FLOOD_RAPID_RESET]);
    ROW("h2_flood_continuation", "HTTP/2 floods ended: CONTINUATION frames",
        st->h2_flood[H2_FLOOD_CONTINUATION]);
#undef ROW
    return n;
}

int status_serve(exchange_t *ex, int json)
{
    site_t *s = ex->site;
    int64_t now = gio_wallclock(s->loop);
    stats_roll(&s->stats, now);
    row_t r[64];
    size_t n = rows(s, r, now);
    char *body = malloc(STATUS_PAGE_MAX), pid[24];
    if (!body)
        return -1;
    hbuf_t b = hb_init(body, STATUS_PAGE_MAX);
    hbuf_t pb = hb_init(pid, sizeof pid);
    hb_num(&pb, (uint64_t)getpid());
    hb_str(&pb);
    if (json) {
        hb_puts(&b, "{\"version\":\"" GATLING_VERSION "\",\"backend\":\"");
        hb_puts(&b, gio_backend_name());
        hb_puts(&b, "\",\"pid\":");
        hb_puts(&b, pid);
        for (size_t i = 0; i < n; i++) {
            hb_puts(&b, ",\"");
            hb_puts(&b, r[i].key);
            hb_puts(&b, "\":");
            hb_num(&b, r[i].v);
        }
        hb_puts(&b, "}\n");
    } else {
        hb_puts(&b,
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<title>gatling status</title></head>\n<body><h1>gatling " GATLING_VERSION " (");
        hb_puts(&b, gio_backend_name());
        hb_puts(&b, "), pid ");
        hb_puts(&b, pid);
        hb_puts(&b, "</h1>\n<table>\n");
        for (size_t i = 0; i < n; i++) {
            hb_puts(&b, "<tr><th>");
            hb_puts(&b, r[i].label);
            hb_puts(&b, "</th><td>");
            hb_num(&b, r[i].v);
            hb_puts(&b, "</td></tr>\n");
        }
        hb_puts(&b, "</table></body></html>\n");
    }
    if (b.over) {
        free(body);
        return ex_error(ex, 500, NULL, NULL);
    }
    ex_field(ex, "Cache-Control", "no-store");
    return ex_page(ex, json ? "application/json" : "text/html; charset=utf-8", body, hb_len(&b));
}
