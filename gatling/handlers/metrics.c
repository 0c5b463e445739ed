/* /metrics: see metrics.h. */
#include "metrics.h"
#include "status.h"
#include "cache.h"
#include "proxy.h"
#include "http/hbuf.h"
#include "site/acme_chal.h"
#include "site/cluster.h"
#include "site/dict.h"
#include "site/encoding.h"

#include <stdlib.h>
#include <string.h>

/* The page is about 15 KiB without -P rules; each rule's backend adds its
   label, escaped (at most twice as long), on BACKEND_KINDS lines (see
   metrics_serve).  What does not fit is a 500, never a page cut short. */
#define METRICS_PAGE_MAX (48 * 1024)

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const proto_names[STATS_PROTOS] = {"http1", "h2", "ftp", "h3"};

/* One sample without labels, with its family's HELP. */
typedef struct metric {
    const char *name, *help;
    uint64_t v;
} metric_t;

/* One sample of a family with one label: its value and the sample's. */
typedef struct lv {
    const char *label;
    uint64_t v;
} lv_t;

/* The "# HELP" and "# TYPE" lines of a family. */
static void head(hbuf_t *b, const char *name, const char *type, const char *help)
{
    hb_puts(b, "# HELP ");
    hb_puts(b, name);
    hb_puts(b, " ");
    hb_puts(b, help);
    hb_puts(b, "\n# TYPE ");
    hb_puts(b, name);
    hb_puts(b, " ");
    hb_puts(b, type);
    hb_puts(b, "\n");
}

/* sep ('{' or ',') and key="v[0..n)", escaped as the format says: backslash,
   double quote and newline. */
static void label(hbuf_t *b, char sep, const char *key, const char *v, size_t n)
{
    hb_put(b, &sep, 1);
    hb_puts(b, key);
    hb_puts(b, "=\"");
    for (size_t i = 0; i < n; i++) {
        const char *e = v[i] == '\\' ? "\\\\" : v[i] == '"' ? "\\\"" : v[i] == '\n' ? "\\n" : NULL;
        if (e)
            hb_puts(b, e);
        else
            hb_put(b, v + i, 1);
    }
    hb_puts(b, "\"");
}

/* The end of a sample: "}" if labels are open, the value, the newline. */
static void value(hbuf_t *b, int labels, uint64_t v)
{
    hb_puts(b, labels ? "} " : " ");
    hb_num(b, v);
    hb_puts(b, "\n");
}

/* us microseconds as seconds, without trailing zeros: "0.0005", "2.5", "10". */
static void seconds(hbuf_t *b, uint64_t us)
{
    hb_num(b, us / 1000000);
    uint64_t f = us % 1000000;
    if (!f)
        return;
    char d[7] = {'.'};
    size_t n = 6;
    for (size_t i = 6; i >= 1; i--, f /= 10)
        d[i] = (char)('0' + f % 10);
    while (d[n] == '0')
        n--;
    hb_put(b, d, n + 1);
}

/* Families of one sample each, all of type type. */
static void scalars(hbuf_t *b, const char *type, const metric_t *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        head(b, m[i].name, type, m[i].help);
        hb_puts(b, m[i].name);
        value(b, 0, m[i].v);
    }
}

/* A family of n samples told apart by label key. */
static void family(hbuf_t *b, const char *name, const char *type, const char *help, const char *key,
                   const lv_t *lv, size_t n)
{
    head(b, name, type, help);
    for (size_t i = 0; i < n; i++) {
        hb_puts(b, name);
        label(b, '{', key, lv[i].label, strlen(lv[i].label));
        value(b, 1, lv[i].v);
    }
}

/* What the server is, its connections, requests, bytes, refusals, timeouts. */
static void general(hbuf_t *b, const site_t *s, const stats_snap_t *t)
{
    const status_counters_t *c = &t->c;
    head(b, "gatling_info", "gauge", "The version and the IO backend (the value is 1)");
    hb_puts(b, "gatling_info");
    label(b, '{', "version", GATLING_VERSION, strlen(GATLING_VERSION));
    label(b, ',', "io", gio_backend_name(), strlen(gio_backend_name()));
    value(b, 1, 1);
    const metric_t g[] = {
        {"gatling_start_time_seconds",
         "When the server started (with -W the oldest worker), "
         "seconds since the Epoch",
         (uint64_t)c->started},
        {"gatling_workers", "Worker processes (-W; 1 without)", (uint64_t)s->cfg->workers},
        {"gatling_connections", "Open connections: HTTP, HTTPS, FTP control", t->g.conns},
        {"gatling_tls_connections", "Open HTTPS connections", t->g.tls_conns},
        {"gatling_draining",
         "1 once a drain has begun: the health check fails (-g), the "
         "listeners close",
         t->g.draining},
        {"gatling_memory_files", "Small files held in memory (-F)", t->g.mem_files},
        {"gatling_memory_bytes", "Bytes of the small files held in memory", t->g.mem_bytes},
        {"gatling_cache_entries", "Response cache: entries held", t->g.cache_entries},
        {"gatling_cache_bytes", "Response cache: bytes held", t->g.cache_bytes},
    };
    scalars(b, "gauge", g, N(g));
    lv_t req[STATS_PROTOS], bytes[STATS_PROTOS];
    for (int p = 0; p < STATS_PROTOS; p++) {
        req[p] = (lv_t){proto_names[p], c->proto_requests[p]};
        bytes[p] = (lv_t){proto_names[p], c->proto_bytes[p]};
    }
    family(b, "gatling_requests_total", "counter",
           "Requests answered (FTP: transfers ended), by protocol", "protocol", req, N(req));
    family(b, "gatling_transferred_bytes_total", "counter",
           "Bytes of responses sent (FTP: of transfers, either way), by protocol", "protocol",
           bytes, N(bytes));
    static const char *const grpc_codes[17] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"};
    lv_t grpc[17];
    for (int k = 0; k < 17; k++)
        grpc[k] = (lv_t){grpc_codes[k], c->grpc[k]};
    family(b, "gatling_grpc_responses_total", "counter",
           "gRPC calls proxied, by the grpc-status they ended with (the backend's, or "
           "gatling's: UNAVAILABLE, DEADLINE_EXCEEDED)", "code", grpc, N(grpc));
    const lv_t refused[] = {{"connection_cap", c->refused_cap},
                            {"address_cap", c->refused_addr},
                            {"descriptors", c->refused_fds},
                            {"offender", c->refused_offender}};
    family(b, "gatling_refused_total", "counter",
           "Connections refused: over -N or -K (503; HTTPS: closed), accept failed for "
           "want of descriptors or memory, or a flood ended the address's connections lately "
           "(closed)",
           "reason", refused, N(refused));
    const lv_t to[] = {{"head", c->timeout_head},
                       {"body", c->timeout_body},
                       {"drain", c->timeout_drain},
                       {"idle", c->timeout_idle},
                       {"tls_handshake", c->timeout_handshake},
                       {"proxy_header", c->proxy_timeout}};
    family(b, "gatling_timeouts_total", "counter",
           "Connections closed at a deadline: request head (-s), request body or response "
           "read too slowly (-B), keep-alive idle (-T), TLS handshake, PROXY header (-s)",
           "phase", to, N(to));
}

/* The request duration histogram, per protocol: cumulative buckets. */
static void histograms(hbuf_t *b, const status_counters_t *c)
{
    static const char name[] = "gatling_request_duration_seconds";
    head(b, name, "histogram",
         "Request durations, from the loop round the head began in to the response's end "
         "(FTP: a transfer's, from its command), by protocol");
    for (int p = 0; p < STATS_PROTOS; p++) {
        uint64_t n = 0;
        for (int k = 0; k <= STATS_BOUNDS; k++) {
            n += c->duration[p][k];
            hb_puts(b, "gatling_request_duration_seconds_bucket");
            label(b, '{', "protocol", proto_names[p], strlen(proto_names[p]));
            hb_puts(b, ",le=\"");
            if (k < STATS_BOUNDS)
                seconds(b, stats_bounds_us[k]);
            else
                hb_puts(b, "+Inf");
            hb_puts(b, "\"");
            value(b, 1, n);
        }
        hb_puts(b, "gatling_request_duration_seconds_sum");
        label(b, '{', "protocol", proto_names[p], strlen(proto_names[p]));
        hb_puts(b, "} ");
        seconds(b, c->duration_us[p]);
        hb_puts(b, "\ngatling_request_duration_seconds_count");
        label(b, '{', "protocol", proto_names[p], strlen(proto_names[p]));
        value(b, 1, n);
    }
}

/* What the defences did: rates, logins, pools, caps, TLS, the health check. */
static void defences(hbuf_t *b, const stats_snap_t *t)
{
    const status_counters_t *c = &t->c;
    const metric_t m[] = {
        {"gatling_rate_limited_total", "Requests over -A's rate: tarpitted or dropped",
         c->rate_limited},
        {"gatling_auth_throttled_total", "Failed logins slowed down: 429 without a password check",
         c->auth_throttled},
        {"gatling_auth_remembered_total",
         "Recently failed credentials: 401 without a password check", c->auth_remembered},
        {"gatling_busy_total", "Requests answered 503: the thread pool's queue was full", c->busy},
        {"gatling_gzip_skipped_busy_total",
         "gzip misses served identity: enough compressions were running", t->more.gz_skipped_busy},
        {"gatling_gzip_paced_total", "Compressions paced: the machine was saturated",
         t->more.gz_paced},
        {"gatling_compress_capped_total",
         "Answers sent identity: the coders' streams or memory cap (--compress) was reached",
         c->compress_capped},
        {"gatling_max_requests_closed_total", "Keep-alive connections closed after -R requests",
         c->max_requests},
        {"gatling_head_overflows_total", "Response heads too large: 500", c->head_overflows},
        {"gatling_memory_full_total", "Small files sent from disk: the memory budget was full",
         t->more.mem_full},
        {"gatling_tls_resumed_total", "TLS handshakes that resumed a session (ticket or cache)",
         c->tls_resumed},
        {"gatling_tls_not_tls_total", "Connections to the HTTPS port that spoke no TLS: closed",
         c->tls_not_tls},
        {"gatling_tls_misdirected_total", "Requests for a Host of another certificate: 421",
         c->tls_misdirected},
        {"gatling_tls_ktls_total", "TLS connections the kernel encrypts (kTLS, sendfile)",
         c->tls_ktls},
        {"gatling_acme_http01_answered_total", "ACME HTTP-01 challenges answered (--acme)",
         c->acme_http},
        {"gatling_acme_http01_refused_total",
         "Requests below acme-challenge/ for no outstanding token: 404", c->acme_http_refused},
        {"gatling_acme_tls_alpn01_answered_total",
         "ACME TLS-ALPN-01 challenge handshakes served (--acme)", c->acme_alpn},
        {"gatling_acme_tls_alpn01_refused_total",
         "TLS handshakes offering acme-tls/1 for a name without a challenge: refused",
         c->acme_alpn_refused},
        {"gatling_tls_no_certificate_total",
         "TLS handshakes refused: no certificate loaded yet (-C waits for certbot)", c->tls_no_cert},
        {"gatling_proxy_protocol_untrusted_total",
         "Connections to a -y listener not from a -Y proxy: closed", c->proxy_untrusted},
        {"gatling_proxy_protocol_malformed_total", "PROXY headers malformed or cut short: closed",
         c->proxy_malformed},
    };
    scalars(b, "counter", m, N(m));
    head(b, "gatling_gzip_paced_seconds_total", "counter",
         "Time paced compressions yielded the CPU");
    hb_puts(b, "gatling_gzip_paced_seconds_total ");
    seconds(b, t->more.gz_paced_ms * 1000);
    hb_puts(b, "\n");
    const lv_t zc[] = {{"gzip", c->compressed[0]}, {"br", c->compressed[1]},
                       {"zstd", c->compressed[2]}};
    family(b, "gatling_compressed_total", "counter",
           "Dynamic answers coded on the fly (--compress), by coding", "coding", zc, N(zc));
    const lv_t zb[] = {{"in", c->compress_in}, {"out", c->compress_out}};
    family(b, "gatling_compress_bytes_total", "counter",
           "Bytes of the answers coded on the fly, before and after", "side", zb, N(zb));
    const lv_t cz[] = {{"gzip", c->cache_coded[0]}, {"br", c->cache_coded[1]},
                       {"zstd", c->cache_coded[2]}};
    family(b, "gatling_cache_coded_hits_total", "counter",
           "Response cache: hits sent from a stored coded body, by coding", "coding", cz, N(cz));
    const lv_t hs[] = {{"ok", c->tls_handshakes}, {"failed", c->tls_failed}};
    family(b, "gatling_tls_handshakes_total", "counter", "TLS handshakes done or failed", "result",
           hs, N(hs));
    const lv_t px[] = {{"client", c->proxy_headers}, {"local", c->proxy_local}};
    family(b, "gatling_proxy_protocol_headers_total", "counter",
           "PROXY headers (-y): naming a client, or keeping the proxy's address (LOCAL, UNKNOWN)",
           "result", px, N(px));
    const lv_t hc[] = {{"ok", c->health_ok}, {"draining", c->health_failed}};
    family(b, "gatling_health_checks_total", "counter",
           "Health checks (-k): 200, or 503 while draining", "result", hc, N(hc));
}

/* HTTP/2: connections, errors, and the floods connections were ended for. */
static void http2(hbuf_t *b, const status_counters_t *c)
{
    const metric_t m[] = {
        {"gatling_h2_connections_total", "Connections that spoke HTTP/2", c->h2_conns},
        {"gatling_h2_errors_total", "HTTP/2 connections ended by GOAWAY with an error",
         c->h2_errors},
        {"gatling_h2_yields_total", "HTTP/2 sends paused at the per-event budget", c->h2_yields},
        {"gatling_h2_refused_streams_total", "HTTP/2 streams refused: header memory full",
         c->h2_refused},
        {"gatling_h2_file_waits_total", "HTTP/2 streams that waited for a file slot",
         c->h2_file_waits},
        {"gatling_flood_offences_total",
         "Connections a flood defence ended, remembered against the client address",
         c->offences},
        {"gatling_flood_reduced_total",
         "Connections from an address that flooded lately: budgets halved per offence",
         c->offender_reduced},
    };
    scalars(b, "counter", m, N(m));
    static const char *const kinds[H2_FLOOD_KINDS] = {[H2_FLOOD_SETTINGS] = "settings",
                                                      [H2_FLOOD_PING] = "ping",
                                                      [H2_FLOOD_WINDOW] = "window_update",
                                                      [H2_FLOOD_EMPTY_DATA] = "empty_data",
                                                      [H2_FLOOD_OTHER] = "other",
                                                      [H2_FLOOD_RESET_SENT] = "reset_sent",
                                                      [H2_FLOOD_RAPID_RESET] = "rapid_reset",
                                                      [H2_FLOOD_CONTINUATION] = "continuation"};
    lv_t f[H2_FLOOD_KINDS];
    for (int k = 0; k < H2_FLOOD_KINDS; k++)
        f[k] = (lv_t){kinds[k], c->h2_flood[k]};
    family(b, "gatling_h2_floods_total", "counter",
           "HTTP/2 connections ended by GOAWAY ENHANCE_YOUR_CALM, by the frames that flooded",
           "kind", f, N(f));
    const metric_t m3[] = {
        {"gatling_h3_connections_total", "HTTP/3: QUIC connections begun", c->h3_conns},
        {"gatling_h3_handshakes_total", "HTTP/3: handshakes completed", c->h3_handshakes},
        {"gatling_h3_failed_total", "HTTP/3: connections ended by an error", c->h3_failed},
        {"gatling_h3_idle_total", "HTTP/3: connections closed idle (-T)", c->h3_idle},
        {"gatling_h3_refused_total", "HTTP/3: Initials dropped (-N, -K, draining)",
         c->h3_refused},
        {"gatling_h3_stateless_resets_total", "HTTP/3: stateless resets sent", c->h3_resets},
        {"gatling_h3_version_negotiations_total", "HTTP/3: version negotiations sent",
         c->h3_version_neg},
        {"gatling_h3_dropped_total", "HTTP/3: datagrams dropped", c->h3_dropped},
        {"gatling_h3_send_lost_total", "HTTP/3: datagrams lost to a full socket buffer",
         c->h3_send_lost},
        {"gatling_h3_retries_total", "HTTP/3: Retry packets sent", c->h3_retries},
        {"gatling_h3_bad_tokens_total", "HTTP/3: Initials with a bad Retry token",
         c->h3_bad_tokens},
        {"gatling_h3_validated_total", "HTTP/3: connections begun with a token",
         c->h3_validated},
        {"gatling_h3_rapid_reset_total", "HTTP/3: connections closed for streams reset too fast",
         c->h3_rapid_reset},
        {"gatling_h3_fields_refused_total", "HTTP/3: requests with fields over the limits",
         c->h3_fields_refused},
        {"gatling_h3_refused_streams_total", "HTTP/3 streams refused: request field memory full",
         c->h3_streams_refused},
    };
    scalars(b, "counter", m3, N(m3));
}

/* A backend's labels: its pool and its address as written. */
static void be_label(hbuf_t *b, const char *pool, const char *addr)
{
    label(b, '{', "pool", pool, strlen(pool));
    label(b, ',', "backend", addr, strlen(addr));
}

/* Per backend (of -P rules and --pools), by this loop's slots: with -W the
   workers' counts of a slot are summed (each worker reads the same rules and
   lists in the same order, so a slot is the same backend in each). */
static void backends(hbuf_t *b, const site_t *s, const stats_snap_t *t)
{
    static const metric_t f[BACKEND_KINDS] = {
        [BACKEND_CONNECTS] = {"gatling_backend_connections_total", "Backend connections opened"},
        [BACKEND_REUSES] = {"gatling_backend_reuses_total",
                            "Requests sent on a pooled backend connection"},
        [BACKEND_502] = {"gatling_backend_failures_total",
                         "Backend failures: a connect, a reset, a bad or cut answer, a failon status"},
        [BACKEND_504] = {"gatling_backend_timeouts_total",
                         "Backends silent past -Q: 504, or a response cut short"},
        [BACKEND_TUNNEL_IDLE] = {"gatling_backend_tunnels_idle_total",
                                 "WebSocket tunnels closed idle (-Q's second value)"},
        [BACKEND_UNSIZED] = {"gatling_backend_unsized_total",
                             "Request bodies without a length not held for a backend: 413, 503"},
        [BACKEND_REQUESTS] = {"gatling_backend_requests_total",
                              "Requests sent to the backend (each attempt)"},
        [BACKEND_RETRIES] = {"gatling_backend_retries_total",
                             "Requests that failed at the backend and went to another"},
        [BACKEND_DOWNS] = {"gatling_backend_downs_total",
                           "Times the backend was taken out: failures within the window, failed checks"},
        [BACKEND_CHECKS_FAILED] = {"gatling_backend_checks_failed_total",
                                   "Active health checks (--pool check=) that failed"},
    };
    const char *pool[CONFIG_BACKENDS], *addr[CONFIG_BACKENDS], *state;
    unsigned out;
    int have[CONFIG_BACKENDS], any = 0;
    for (int i = 0; i < CONFIG_BACKENDS; i++)
        any |= have[i] = proxy_backend(s, i, &pool[i], &addr[i], &state, &out) != 0;
    if (!any)
        return;
    for (int k = 0; k < BACKEND_KINDS; k++) {
        head(b, f[k].name, "counter", f[k].help);
        for (int i = 0; i < CONFIG_BACKENDS; i++)
            if (have[i]) {
                hb_puts(b, f[k].name);
                be_label(b, pool[i], addr[i]);
                value(b, 1, t->c.backend[i][k]);
            }
    }
    static const metric_t g[2] = {
        {"gatling_backend_up", "1: the backend takes requests (with -W: the workers that "
                               "hold it up); 0: down or draining", 0},
        {"gatling_backend_outstanding", "Requests at the backend now", 0}};
    for (int k = 0; k < 2; k++) {
        head(b, g[k].name, "gauge", g[k].help);
        for (int i = 0; i < CONFIG_BACKENDS; i++)
            if (have[i]) {
                hb_puts(b, g[k].name);
                be_label(b, pool[i], addr[i]);
                value(b, 1, k ? t->g.be_outstanding[i] : t->g.be_up[i]);
            }
    }
    head(b, "gatling_backend_request_duration_seconds", "histogram",
         "Backend requests, from sending to the answer's end");
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        uint64_t n = 0;
        for (int k = 0; have[i] && k <= STATS_BOUNDS; k++) {
            n += t->c.be_duration[i][k];
            hb_puts(b, "gatling_backend_request_duration_seconds_bucket");
            be_label(b, pool[i], addr[i]);
            hb_puts(b, ",le=\"");
            if (k < STATS_BOUNDS)
                seconds(b, stats_bounds_us[k]);
            else
                hb_puts(b, "+Inf");
            hb_puts(b, "\"");
            value(b, 1, n);
        }
        if (!have[i])
            continue;
        hb_puts(b, "gatling_backend_request_duration_seconds_sum");
        be_label(b, pool[i], addr[i]);
        hb_puts(b, "} ");
        seconds(b, t->c.be_duration_us[i]);
        hb_puts(b, "\ngatling_backend_request_duration_seconds_count");
        be_label(b, pool[i], addr[i]);
        value(b, 1, n);
    }
}

/* CGI, the response cache, FTP. */
static void dynamic(hbuf_t *b, const stats_snap_t *t)
{
    const status_counters_t *c = &t->c;
    const metric_t m[] = {
        {"gatling_cgi_spawned_total", "CGI processes started", c->cgi_spawned},
        {"gatling_cgi_killed_total", "CGI processes killed: at -Q, or the client went first",
         c->cgi_killed},
        {"gatling_cgi_redirects_total", "CGI local redirects answered inside the server",
         c->cgi_redirects},
        {"gatling_cgi_refused_total", "CGI requests refused: over -J, spawner busy or gone, 503",
         c->cgi_refused},
        {"gatling_cgi_failed_total", "CGI processes without a valid head: 502", c->cgi_failed},
        {"gatling_cache_hits_total", "Response cache: hits (fresh)", c->cache_hits},
        {"gatling_cache_stale_total", "Response cache: stale served while one fetch refreshes",
         c->cache_stale},
        {"gatling_cache_stale_errors_total", "Response cache: stale served, the backend failing",
         c->cache_stale_errors},
        {"gatling_cache_misses_total", "Response cache: misses (a fetch each)", c->cache_misses},
        {"gatling_cache_collapsed_total",
         "Response cache: requests that waited for another's "
         "fetch",
         c->cache_collapsed},
        {"gatling_cache_fetches_total",
         "Response cache: backend requests made (misses, "
         "refreshes)",
         c->cache_fetches},
        {"gatling_cache_stored_total", "Response cache: responses stored", c->cache_stored},
        {"gatling_cache_revalidated_total", "Response cache: stored responses freshened by a 304",
         c->cache_revalidated},
        {"gatling_cache_passes_total", "Response cache: sent by, the response was not storable",
         c->cache_passes},
        {"gatling_cache_bypass_total", "Response cache: bypassed: Authorization, Cookie, a body",
         c->cache_bypass},
        {"gatling_cache_lock_timeouts_total",
         "Response cache: waiters that stopped waiting for "
         "a slow fetch",
         c->cache_lock_timeouts},
        {"gatling_cache_purges_total", "Response cache: PURGE requests", c->cache_purges},
        {"gatling_cache_coded_total", "Response cache: stored responses coded whole (--compress)",
         c->cache_coded_made},
        {"gatling_cache_evictions_total", "Response cache: entries evicted (room, idle)",
         t->more.cache_evictions},
        {"gatling_ftp_sessions_total", "FTP control connections (-f)", c->ftp_sessions},
        {"gatling_ftp_logins_total", "FTP logins (anonymous)", c->ftp_logins},
        {"gatling_ftp_downloads_total", "FTP downloads completed", c->ftp_downloads},
        {"gatling_ftp_uploads_total", "FTP uploads completed", c->ftp_uploads},
        {"gatling_ftp_refused_total", "FTP refused: other users, uploads, MKD", c->ftp_refused},
        {"gatling_ftp_bounce_refused_total",
         "FTP PORT/EPRT to another host or a low port: "
         "refused",
         c->ftp_bounce},
        {"gatling_ftp_pasv_theft_total", "FTP data connections from another host: closed",
         c->ftp_pasv_theft},
        {"gatling_ftp_timeouts_total", "FTP deadlines: login, idle, data set-up, rate (-B)",
         c->ftp_timeouts},
    };
    scalars(b, "counter", m, N(m));
}

/* Compression dictionaries (RFC 9842): deltas sent and what they saved. */
static void dictionaries(hbuf_t *b, const stats_snap_t *t)
{
    const metric_t m[] = {
        {"gatling_dictionary_hits_total", "Responses sent as dcz against a client's dictionary",
         t->more.dict_hits},
        {"gatling_dictionary_bytes_saved_total",
         "Bytes dcz responses saved: their files' sizes less their bodies", t->more.dict_saved},
        {"gatling_dictionary_unknown_total",
         "Available-Dictionary hashes not indexed (or stale): the ordinary response",
         t->more.dict_unknown},
        {"gatling_dictionary_deltas_made_total", "Deltas made on the job pool",
         t->more.dict_made},
    };
    scalars(b, "counter", m, N(m));
}

void metrics_snapshot(const site_t *s, stats_snap_t *snap)
{
    memset(snap, 0, sizeof *snap);
    snap->c = s->stats;
    enc_gz_counters_t gz = s->gzcache ? enc_gzip_counters(s->gzcache) : (enc_gz_counters_t){0};
    snap->more.gz_skipped_busy = gz.skipped_busy;
    snap->more.gz_paced = gz.paced;
    snap->more.gz_paced_ms = gz.paced_ms;
    if (s->dict) {
        const dict_counters_t *dc = dict_counters(s->dict);
        snap->more.dict_hits = dc->hits;
        snap->more.dict_saved = dc->bytes_saved;
        snap->more.dict_unknown = dc->unknown + dc->stale;
        snap->more.dict_made = dc->made;
    }
    fcache_mem_t m = fcache_mem(s->fcache);
    snap->more.mem_full = m.skipped;
    snap->g.mem_files = m.files;
    snap->g.mem_bytes = m.held;
    cache_mem(s, &snap->g.cache_bytes, &snap->g.cache_entries, &snap->more.cache_evictions);
    snap->g.conns = s->nconns;
    snap->g.tls_conns = s->ntls;
    snap->g.draining = s->draining != 0;
    const char *pool, *addr, *state;
    unsigned out;
    for (int i = 0; i < CONFIG_BACKENDS; i++) {
        int r = proxy_backend(s, i, &pool, &addr, &state, &out);
        snap->g.be_up[i] = r == 2;
        snap->g.be_outstanding[i] = r ? out : 0;
    }
}

/* Publish this loop's numbers into its slot now. */
static void publish(site_t *s)
{
    stats_snap_t snap;
    metrics_snapshot(s, &snap);
    stats_shm_publish(s->cfg->stats_shm, s->cfg->worker, &snap);
    s->stats_published = gio_now(s->loop);
}

/* The owed publish is due (or metrics_serve published meanwhile: later). */
static void on_publish(gio_loop_t *l, void *arg)
{
    site_t *s = arg;
    int64_t due = s->stats_published + METRICS_PUBLISH_MS;
    if (gio_now(l) < due)
        gio_timer_set(l, &s->stats_timer, due, on_publish, s);
    else
        publish(s);
}

void metrics_owe(site_t *s)
{
    if (s->cfg->stats_shm && !gio_timer_armed(&s->stats_timer))
        gio_timer_set(s->loop, &s->stats_timer, s->stats_published + METRICS_PUBLISH_MS,
                      on_publish, s);
}

/* Each loaded certificate's expiry (read at load, tls/tls.c). */
static void certificates(hbuf_t *b, const site_t *s)
{
    const char *name;
    int64_t t;
    if (!s->cert_expiry || !s->cfg->tls || !s->cert_expiry(s->cfg->tls, 0, &name, &t))
        return;
    head(b, "gatling_tls_certificate_expiry_seconds", "gauge",
         "When each certificate loaded expires (unix time, its notAfter)");
    for (int i = 0; s->cert_expiry(s->cfg->tls, i, &name, &t); i++) {
        hb_puts(b, "gatling_tls_certificate_expiry_seconds");
        label(b, '{', "name", name, strlen(name));
        value(b, 1, t > 0 ? (uint64_t)t : 0);
    }
}

/* --acme: the client's numbers from its status file (site/acme_chal.h);
   none when the file is missing or not all of it reads as it should. */
static void acme(hbuf_t *b, const site_t *s)
{
    char *text = s->cfg->acme_chal ? malloc(ACME_STATUS_MAX) : NULL;
    acme_status_t *st = text ? malloc(sizeof *st) : NULL;
    if (st && acme_chal_status(s->cfg->acme_chal, text, ACME_STATUS_MAX) > 0 &&
        acme_chal_status_parse(text, st) == 0) {
        const metric_t m[] = {
            {"gatling_acme_orders_total", "Orders the ACME client made", st->orders},
            {"gatling_acme_failures_total", "ACME attempts that failed (any step)", st->failures},
        };
        scalars(b, "counter", m, N(m));
        const char *fam[2] = {"gatling_acme_next_renewal_seconds", "gatling_acme_name_failures"};
        const char *help[2] = {"When the ACME client next renews each name (unix time; 0: none)",
                               "ACME failures for each name since its last success"};
        for (int k = 0; k < 2; k++) {
            head(b, fam[k], "gauge", help[k]);
            for (int i = 0; i < st->n; i++) {
                hb_puts(b, fam[k]);
                label(b, '{', "name", st->names[i].name, strlen(st->names[i].name));
                value(b, 1, k ? st->names[i].fails : (uint64_t)st->names[i].next);
            }
        }
    }
    free(st);
    free(text);
}

/* --cluster: what the side process last had from etcd (site/cluster.h). */
static void cluster(hbuf_t *b, const site_t *s)
{
    uint64_t gen;
    if (!s->cfg->cluster)
        return;
    int64_t synced = cluster_synced(s->cfg->cluster, &gen);
    const metric_t m[] = {
        {"gatling_cluster_last_sync_seconds",
         "When the cluster's side process last had an answer from etcd (unix time; 0: never)",
         synced > 0 ? (uint64_t)synced : 0},
        {"gatling_cluster_ticket_generation",
         "The generation of the cluster's ticket keys in use (0: none yet, our own)", gen},
    };
    scalars(b, "gauge", m, N(m));
    int n = cluster_acme_count(s->cfg->cluster);
    if (!n)
        return;
    head(b, "gatling_cluster_acme_lock", "gauge",
         "1 while this node holds the cluster's ACME lock for the name (its client orders it)");
    char name[CLUSTER_ACME_NAME_MAX];
    for (int i = 0; i < n; i++) {
        size_t len = cluster_acme_name(s->cfg->cluster, i, name);
        hb_puts(b, "gatling_cluster_acme_lock");
        label(b, '{', "name", name, len);
        value(b, 1, (uint64_t)cluster_acme_held(s->cfg->cluster, i));
    }
}

int metrics_serve(exchange_t *ex)
{
    site_t *s = ex->site;
    const config_t *cfg = s->cfg;
    stats_snap_t own, t;
    stats_roll(&s->stats, gio_wallclock(s->loop));
    metrics_snapshot(s, &own);
    t = own;
    if (cfg->stats_shm) { /* -W: ours fresh, the others' as published */
        stats_shm_publish(cfg->stats_shm, cfg->worker, &own);
        s->stats_published = gio_now(s->loop);
        stats_shm_total(cfg->stats_shm, cfg->worker, &own, &t);
    }
    size_t cap = METRICS_PAGE_MAX;
    const char *pool, *addr, *state;
    unsigned out;
    for (int i = 0; i < CONFIG_BACKENDS; i++) /* each backend's labels, escaped, on its lines */
        if (proxy_backend(s, i, &pool, &addr, &state, &out))
            cap += (BACKEND_KINDS + 2 + STATS_BOUNDS + 3) * (2 * (strlen(pool) + strlen(addr)) + 128);
    const char *name;
    int64_t exp;
    for (int i = 0; s->cert_expiry && s->cert_expiry(cfg->tls, i, &name, &exp); i++)
        cap += 2 * strlen(name) + 96; /* its line, the name escaped */
    if (cfg->acme_chal) /* two lines per name (at most 253 bytes, no escapes) */
        cap += 1024 + ACME_STATUS_NAMES * 2 * (253 + 64);
    if (cfg->cluster) /* a lock line per name, the name escaped */
        cap += 1024 + CLUSTER_ACME_NAMES * (2 * CLUSTER_ACME_NAME_MAX + 64);
    char *page = malloc(cap);
    if (!page)
        return -1;
    hbuf_t b = hb_init(page, cap);
    general(&b, s, &t);
    histograms(&b, &t.c);
    defences(&b, &t);
    dictionaries(&b, &t);
    http2(&b, &t.c);
    backends(&b, s, &t);
    dynamic(&b, &t);
    certificates(&b, s);
    acme(&b, s);
    cluster(&b, s);
    if (b.over) {
        free(page);
        return ex_error(ex, 500, NULL, NULL);
    }
    ex_field(ex, "Cache-Control", "no-store");
    return ex_page(ex, "text/plain; version=0.0.4; charset=utf-8", page, hb_len(&b));
}

static int metrics_asked(exchange_t *ex)
{
    path_t p;
    return status_page_asked(ex, "/metrics", &p);
}

static int metrics_route(exchange_t *ex)
{
    if (!status_allowed(ex))
        return ex_error(ex, 403, NULL, NULL) < 0 ? -1 : 0;
    return metrics_serve(ex);
}

const handler_t metrics_handler = {"-S /metrics", metrics_asked, metrics_route, NULL, NULL,
                                   status_page_on};
