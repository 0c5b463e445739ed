/*
 * counters — the one list of what a loop counts and shows: each row is one
 * number, where it is kept, and its name on each page.  site/stats.h makes
 * the fields of status_counters_t and of stats_snap_t's more and g from it,
 * site/stats.c the table stats_rows[] the pages walk; route/status.c
 * shows a row on /server-status under its key and label, route/metrics.c
 * on /metrics as a sample of its family.  A new counter is one row here and
 * its increment where it happens.
 *
 * X(where, field, type, metric, lkey, lval, help, skey, slabel):
 *   where   C: a field of status_counters_t this list declares;
 *           E: an element or field of status_counters_t declared by hand
 *              (stats.h), such as h2_flood[H2_FLOOD_PING];
 *           M: a counter kept elsewhere (stats_snap_t's more, filled by
 *              status_snapshot); G: a gauge (stats_snap_t's g, likewise);
 *           A: the ACME client's (its status file, site/acme_chal.h): one
 *              number for the whole server, not summed across -W's workers
 *              (stats_snap_t's side, filled by status_side after the sum),
 *              shown with --acme only; O: the same, with --acme-on-demand.
 *   type    COUNTER, GAUGE, or MS: a counter of milliseconds that /metrics
 *           shows in seconds.
 *   metric  its family on /metrics (NULL: not there); rows of one family
 *           follow each other, the first gives the family's help (the
 *           others NULL); lkey="lval" is the sample's label (NULL: none).
 *   skey    its JSON key on /server-status?json, slabel its HTML row
 *           (NULL: not on the page).
 * With -W the workers' snapshots add word by word (stats_shm_total), gauges
 * included; draining takes the largest.
 */
#ifndef GATLING_COUNTERS_H
#define GATLING_COUNTERS_H

#define STATS_COUNTERS(X)                                                                        \
    X(G, conns, GAUGE, "gatling_connections", NULL, NULL,                                        \
      "Open connections: HTTP, HTTPS, FTP control", "connections", "open connections")           \
    X(E, requests, COUNTER, NULL, NULL, NULL, NULL, "requests", "requests")                      \
    X(E, bytes, COUNTER, NULL, NULL, NULL, NULL, "bytes", "bytes sent")                          \
    X(E, rps, GAUGE, NULL, NULL, NULL, NULL, "requests_per_second", "requests/s")                \
    X(E, bps, GAUGE, NULL, NULL, NULL, NULL, "bytes_per_second", "bytes/s")                      \
    X(C, responses_4xx, COUNTER, "gatling_responses_total", "class", "4xx",                      \
      "Requests answered with a client error (4xx) or a server error (5xx)", "responses_4xx",    \
      "answered 4xx (client errors)")                                                            \
    X(C, responses_5xx, COUNTER, "gatling_responses_total", "class", "5xx", NULL,                \
      "responses_5xx", "answered 5xx (server errors)")                                           \
    X(C, refused_cap, COUNTER, "gatling_refused_total", "reason", "connection_cap",              \
      "Connections refused: over -N or -K (503; HTTPS: closed), accept failed for want of "      \
      "descriptors or memory, or a flood ended the address's connections lately (closed)",       \
      "refused_connection_cap", "refused: over the connection cap (-N), 503 (HTTPS: closed)")    \
    X(C, refused_addr, COUNTER, "gatling_refused_total", "reason", "address_cap", NULL,          \
      "refused_address_cap", "refused: over the per-address cap (-K), 503 (HTTPS: closed)")      \
    X(C, refused_fds, COUNTER, "gatling_refused_total", "reason", "descriptors", NULL,           \
      "refused_descriptors", "accept paused: out of descriptors")                                \
    X(C, refused_offender, COUNTER, "gatling_refused_total", "reason", "offender", NULL,         \
      "refused_offender", "refused: a flood ended the address's connections lately, closed")     \
    X(C, rate_limited, COUNTER, "gatling_rate_limited_total", NULL, NULL,                        \
      "Requests over -A's rate: tarpitted or dropped", "rate_limited",                           \
      "over the request rate (-A): tarpitted or dropped")                                        \
    X(C, auth_throttled, COUNTER, "gatling_auth_throttled_total", NULL, NULL,                    \
      "Failed logins slowed down: 429 without a password check", "auth_throttled",               \
      "failed logins slowed down: 429")                                                          \
    X(C, auth_remembered, COUNTER, "gatling_auth_remembered_total", NULL, NULL,                  \
      "Recently failed credentials: 401 without a password check", "auth_remembered",            \
      "recent failed credentials: 401 without hashing")                                          \
    X(C, busy, COUNTER, "gatling_busy_total", NULL, NULL,                                        \
      "Requests answered 503: the thread pool's queue was full", "busy",                         \
      "worker pool full: 503")                                                                   \
    X(M, gz_skipped_busy, COUNTER, "gatling_gzip_skipped_busy_total", NULL, NULL,                \
      "gzip misses served identity: enough compressions were running", "gzip_skipped_busy",      \
      "gzip misses served identity: compressions busy")                                          \
    X(M, gz_paced, COUNTER, "gatling_gzip_paced_total", NULL, NULL,                              \
      "Compressions paced: the machine was saturated", "gzip_paced",                             \
      "compressions paced: the machine was saturated")                                           \
    X(M, gz_paced_ms, MS, "gatling_gzip_paced_seconds_total", NULL, NULL,                        \
      "Time paced compressions yielded the CPU", "gzip_paced_ms",                                \
      "time they yielded the CPU (ms)")                                                          \
    X(C, compress_capped, COUNTER, "gatling_compress_capped_total", NULL, NULL,                  \
      "Answers sent identity: the coders' streams or memory cap (--compress) was reached", NULL, \
      NULL)                                                                                      \
    X(C, compress_padded, COUNTER, "gatling_compress_padded_total", NULL, NULL,                  \
      "Answers that may carry a secret, coded with random padding (--compress secrets)",         \
      "compress_padded", "coded with padding (--compress secrets, BREACH)")                      \
    X(E, compressed[0], COUNTER, "gatling_compressed_total", "coding", "gzip",                   \
      "Dynamic answers coded on the fly (--compress), by coding", NULL, NULL)                    \
    X(E, compressed[1], COUNTER, "gatling_compressed_total", "coding", "br", NULL, NULL, NULL)   \
    X(E, compressed[2], COUNTER, "gatling_compressed_total", "coding", "zstd", NULL, NULL, NULL) \
    X(C, compress_in, COUNTER, "gatling_compress_bytes_total", "side", "in",                     \
      "Bytes of the answers coded on the fly, before and after", NULL, NULL)                     \
    X(C, compress_out, COUNTER, "gatling_compress_bytes_total", "side", "out", NULL, NULL, NULL) \
    X(C, timeout_head, COUNTER, "gatling_timeouts_total", "phase", "head",                       \
      "Connections closed at a deadline: request head (-s), request body or response read too "  \
      "slowly (-B), keep-alive idle (-T), TLS handshake, PROXY header (-s)", "timeout_head",     \
      "timed out: request head (-s)")                                                            \
    X(C, timeout_body, COUNTER, "gatling_timeouts_total", "phase", "body", NULL, "timeout_body", \
      "timed out: request body too slow (-B)")                                                   \
    X(C, timeout_drain, COUNTER, "gatling_timeouts_total", "phase", "drain", NULL,               \
      "timeout_drain", "timed out: response read too slowly (-B)")                               \
    X(C, timeout_idle, COUNTER, "gatling_timeouts_total", "phase", "idle", NULL, "timeout_idle", \
      "timed out: keep-alive idle (-T)")                                                         \
    X(C, timeout_handshake, COUNTER, "gatling_timeouts_total", "phase", "tls_handshake", NULL,   \
      "timeout_handshake", "timed out: TLS handshake (-s)")                                      \
    X(C, proxy_timeout, COUNTER, "gatling_timeouts_total", "phase", "proxy_header", NULL,        \
      "proxy_timeout", "timed out: PROXY header (-s)")                                           \
    X(C, idle_closed, COUNTER, "gatling_idle_closed_total", NULL, NULL,                         \
      "Connections that never sent a byte of a request (nor a TLS handshake's, or none after "   \
      "it), closed at -s: spare connections, not requests that timed out",                       \
      "idle_closed", "closed unused: never sent a byte (-s)")                                    \
    X(C, max_requests, COUNTER, "gatling_max_requests_closed_total", NULL, NULL,                 \
      "Keep-alive connections closed after -R requests", "max_requests",                         \
      "closed after -R requests")                                                                \
    X(C, head_overflows, COUNTER, "gatling_head_overflows_total", NULL, NULL,                    \
      "Response heads too large: 500", "head_overflows", "response heads too large: 500")        \
    X(G, mem_files, GAUGE, "gatling_memory_files", NULL, NULL,                                   \
      "Small files held in memory (-F)", "memory_files", "small files held in memory (-F)")      \
    X(G, mem_bytes, GAUGE, "gatling_memory_bytes", NULL, NULL,                                   \
      "Bytes of the small files held in memory", "memory_bytes", "bytes of them held")           \
    X(M, mem_full, COUNTER, "gatling_memory_full_total", NULL, NULL,                             \
      "Small files sent from disk: the memory budget was full", "memory_full",                   \
      "small files sent from disk: memory budget full")                                          \
    X(G, tls_conns, GAUGE, "gatling_tls_connections", NULL, NULL, "Open HTTPS connections",      \
      "https_connections", "open HTTPS connections")                                             \
    X(C, tls_handshakes, COUNTER, "gatling_tls_handshakes_total", "result", "ok",                \
      "TLS handshakes done or failed", "tls_handshakes", "HTTPS: handshakes done")               \
    X(C, tls_failed, COUNTER, "gatling_tls_handshakes_total", "result", "failed", NULL,          \
      "tls_failed", "HTTPS: handshakes failed")                                                  \
    X(C, tls_resumed, COUNTER, "gatling_tls_resumed_total", NULL, NULL,                          \
      "TLS handshakes that resumed a session (ticket or cache)", "tls_resumed",                  \
      "HTTPS: of which resumed (ticket or cache)")                                               \
    X(C, tls_not_tls, COUNTER, "gatling_tls_not_tls_total", NULL, NULL,                          \
      "Connections to the HTTPS port that spoke no TLS: closed", "tls_not_tls",                  \
      "HTTPS port: not TLS, closed")                                                             \
    X(C, tls_no_cert, COUNTER, "gatling_tls_no_certificate_total", NULL, NULL,                   \
      "TLS handshakes refused: no certificate loaded yet (-C waits for certbot)",                \
      "tls_no_certificate", "HTTPS: refused, no certificate loaded yet (-C)")                    \
    X(C, tls_reload_failed, COUNTER, "gatling_cert_reload_failures_total", NULL, NULL,           \
      "Certificate loads that failed (SIGUSR1, or a change in -C's files): a bad certificate "   \
      "or key file; the certificates in use stay", "tls_cert_reload_failures",                   \
      "HTTPS: certificate reloads failed, the old ones kept")                                    \
    X(C, tls_misdirected, COUNTER, "gatling_tls_misdirected_total", NULL, NULL,                  \
      "Requests for a Host of another certificate: 421", "tls_misdirected",                      \
      "HTTPS: Host of another certificate: 421")                                                 \
    X(C, tls_client_refused, COUNTER, "gatling_tls_client_refused_total", NULL, NULL,            \
      "Requests without a valid client certificate where one is required: 400",                  \
      "tls_client_refused", "HTTPS: no valid client certificate where required: 400")            \
    X(C, tls_ktls, COUNTER, "gatling_tls_ktls_total", NULL, NULL,                                \
      "TLS connections the kernel encrypts (kTLS, sendfile)", "tls_ktls",                        \
      "HTTPS: connections sent by kernel TLS (sendfile)")                                        \
    X(C, early_accepted, COUNTER, "gatling_early_data_total", "outcome", "accepted",             \
      "Handshakes with early data (0-RTT, TLS 1.3 and QUIC): accepted, a replay refused, or "    \
      "refused for want of room in the replay table (--early-data), its youth or another "       \
      "node's ticket", "early_data_accepted",                                                    \
      "early data (0-RTT): handshakes accepted")                                                 \
    X(C, early_replayed, COUNTER, "gatling_early_data_total", "outcome", "replayed",             \
      NULL, "early_data_replayed",                                                               \
      "early data: replays refused")                                                             \
    X(C, early_refused, COUNTER, "gatling_early_data_total", "outcome", "refused",               \
      NULL, "early_data_refused",                                                                \
      "early data: refused (table full or young, another node's ticket)")                        \
    X(C, early_requests, COUNTER, "gatling_early_data_requests_total", "answer", "early",        \
      "Requests that came in early data: answered before the handshake completed, held until "   \
      "it did (not safe to replay), or answered 425 Too Early", "early_data_requests",           \
      "early data: requests answered early")                                                     \
    X(C, early_held, COUNTER, "gatling_early_data_requests_total", "answer", "held",             \
      NULL, "early_data_held",                                                                   \
      "early data: requests held for the handshake")                                             \
    X(C, early_425, COUNTER, "gatling_early_data_requests_total", "answer", "too_early",         \
      NULL, "early_data_too_early",                                                              \
      "early data: requests answered 425 Too Early")                                             \
    X(C, acme_http, COUNTER, "gatling_acme_http01_answered_total", NULL, NULL,                   \
      "ACME HTTP-01 challenges answered (--acme)", "acme_http01",                                \
      "ACME: HTTP-01 challenges answered")                                                       \
    X(C, acme_http_refused, COUNTER, "gatling_acme_http01_refused_total", NULL, NULL,            \
      "Requests below acme-challenge/ for no outstanding token: 404", "acme_http01_refused",     \
      "ACME: acme-challenge/ for no token outstanding: 404")                                     \
    X(C, acme_alpn, COUNTER, "gatling_acme_tls_alpn01_answered_total", NULL, NULL,               \
      "ACME TLS-ALPN-01 challenge handshakes served (--acme)", "acme_tls_alpn01",                \
      "ACME: TLS-ALPN-01 challenge handshakes")                                                  \
    X(C, acme_alpn_refused, COUNTER, "gatling_acme_tls_alpn01_refused_total", NULL, NULL,        \
      "TLS handshakes offering acme-tls/1 for a name without a challenge: refused",              \
      "acme_tls_alpn01_refused", "ACME: acme-tls/1 for a name without a challenge")              \
    X(A, acme_orders, COUNTER, "gatling_acme_orders_total", NULL, NULL,                          \
      "Orders the ACME client made", "acme_orders", "ACME: orders made")                         \
    X(A, acme_failures, COUNTER, "gatling_acme_failures_total", NULL, NULL,                      \
      "ACME attempts that failed (any step)", "acme_failures", "ACME: attempts failed")          \
    X(O, od_names, GAUGE, "gatling_acme_ondemand_names", NULL, NULL, "Names got on demand",      \
      "acme_ondemand_names", "ACME on demand: names got")                                        \
    X(O, od_asks, COUNTER, "gatling_acme_ondemand_asks_total", NULL, NULL,                       \
      "Handshakes' asks the ACME client took (new names)", "acme_ondemand_asks",                 \
      "ACME on demand: asks taken")                                                              \
    X(O, od_allowed, COUNTER, "gatling_acme_ondemand_allowed_total", NULL, NULL,                 \
      "Names the ask URL allowed (each ordered)", "acme_ondemand_allowed",                       \
      "ACME on demand: allowed by the ask URL")                                                  \
    X(O, od_refused, COUNTER, "gatling_acme_ondemand_refused_total", NULL, NULL,                 \
      "Names the ask URL refused (or did not answer)", "acme_ondemand_refused",                  \
      "ACME on demand: refused by the ask URL")                                                  \
    X(O, od_limited, COUNTER, "gatling_acme_ondemand_limited_total", NULL, NULL,                 \
      "Names refused by a rate limit, never asked", "acme_ondemand_limited",                     \
      "ACME on demand: refused by a rate limit")                                                 \
    X(O, od_invalid, COUNTER, "gatling_acme_ondemand_invalid_total", NULL, NULL,                 \
      "Names refused as no host name, never asked", "acme_ondemand_invalid",                     \
      "ACME on demand: refused, no host name")                                                   \
    X(C, h2_conns, COUNTER, "gatling_h2_connections_total", NULL, NULL,                          \
      "Connections that spoke HTTP/2", "h2_connections", "connections that spoke HTTP/2")        \
    X(C, h2_errors, COUNTER, "gatling_h2_errors_total", NULL, NULL,                              \
      "HTTP/2 connections ended by GOAWAY with an error", "h2_errors",                           \
      "HTTP/2: ended by GOAWAY with an error (floods, resets)")                                  \
    X(C, h2_yields, COUNTER, "gatling_h2_yields_total", NULL, NULL,                              \
      "HTTP/2 sends paused at the per-event budget", "h2_yields",                                \
      "HTTP/2: sends paused at the per-event budget")                                            \
    X(C, h2_refused, COUNTER, "gatling_h2_refused_streams_total", NULL, NULL,                    \
      "HTTP/2 streams refused: header memory full", "h2_refused",                                \
      "HTTP/2: streams refused, header memory full")                                             \
    X(C, h2_file_waits, COUNTER, "gatling_h2_file_waits_total", NULL, NULL,                      \
      "HTTP/2 streams that waited for a file slot", "h2_file_waits",                             \
      "HTTP/2: streams that waited for a file slot")                                             \
    X(E, h2_flood[H2_FLOOD_SETTINGS], COUNTER, "gatling_h2_floods_total", "kind", "settings",    \
      "HTTP/2 connections ended by GOAWAY ENHANCE_YOUR_CALM, by the frames that flooded",        \
      "h2_flood_settings", "HTTP/2 floods ended: SETTINGS")                                      \
    X(E, h2_flood[H2_FLOOD_PING], COUNTER, "gatling_h2_floods_total", "kind", "ping", NULL,      \
      "h2_flood_ping", "HTTP/2 floods ended: PING")                                              \
    X(E, h2_flood[H2_FLOOD_WINDOW], COUNTER, "gatling_h2_floods_total", "kind", "window_update", \
      NULL, "h2_flood_window_update", "HTTP/2 floods ended: WINDOW_UPDATEs that buy nothing")    \
    X(E, h2_flood[H2_FLOOD_EMPTY_DATA], COUNTER, "gatling_h2_floods_total", "kind",              \
      "empty_data", NULL, "h2_flood_empty_data", "HTTP/2 floods ended: empty DATA frames")       \
    X(E, h2_flood[H2_FLOOD_OTHER], COUNTER, "gatling_h2_floods_total", "kind", "other", NULL,    \
      "h2_flood_other", "HTTP/2 floods ended: PRIORITY, PRIORITY_UPDATE, unknown frames")        \
    X(E, h2_flood[H2_FLOOD_RESET_SENT], COUNTER, "gatling_h2_floods_total", "kind",              \
      "reset_sent", NULL, "h2_flood_reset_sent", "HTTP/2 floods ended: streams we had to reset") \
    X(E, h2_flood[H2_FLOOD_RAPID_RESET], COUNTER, "gatling_h2_floods_total", "kind",             \
      "rapid_reset", NULL, "h2_flood_rapid_reset",                                               \
      "HTTP/2 floods ended: streams reset by the client")                                        \
    X(E, h2_flood[H2_FLOOD_CONTINUATION], COUNTER, "gatling_h2_floods_total", "kind",            \
      "continuation", NULL, "h2_flood_continuation", "HTTP/2 floods ended: CONTINUATION frames") \
    X(C, offences, COUNTER, "gatling_flood_offences_total", NULL, NULL,                          \
      "Connections a flood defence ended, remembered against the client address",                \
      "flood_offences", "floods ended, remembered against the address (--flood-memory)")         \
    X(C, offender_reduced, COUNTER, "gatling_flood_reduced_total", NULL, NULL,                   \
      "Connections from an address that flooded lately: budgets halved per offence",             \
      "flood_reduced", "connections from such an address: budgets halved per offence")           \
    X(C, h3_conns, COUNTER, "gatling_h3_connections_total", NULL, NULL,                          \
      "HTTP/3: QUIC connections begun", "h3_connections", "HTTP/3: QUIC connections begun")      \
    X(C, h3_handshakes, COUNTER, "gatling_h3_handshakes_total", NULL, NULL,                      \
      "HTTP/3: handshakes completed", "h3_handshakes", "HTTP/3: handshakes completed")           \
    X(C, h3_failed, COUNTER, "gatling_h3_failed_total", NULL, NULL,                              \
      "HTTP/3: connections ended by an error", "h3_failed",                                      \
      "HTTP/3: connections ended by an error")                                                   \
    X(C, h3_idle, COUNTER, "gatling_h3_idle_total", NULL, NULL,                                  \
      "HTTP/3: connections closed idle (-T)", "h3_idle", "HTTP/3: connections closed idle (-T)") \
    X(C, h3_refused, COUNTER, "gatling_h3_refused_total", NULL, NULL,                            \
      "HTTP/3: Initials dropped (-N, -K, draining)", "h3_refused",                               \
      "HTTP/3: Initials dropped (-N, -K, draining, no certificate)")                             \
    X(C, h3_resets, COUNTER, "gatling_h3_stateless_resets_total", NULL, NULL,                    \
      "HTTP/3: stateless resets sent", "h3_stateless_resets", "HTTP/3: stateless resets sent")   \
    X(C, h3_version_neg, COUNTER, "gatling_h3_version_negotiations_total", NULL, NULL,           \
      "HTTP/3: version negotiations sent", "h3_version_negotiations",                            \
      "HTTP/3: version negotiations sent")                                                       \
    X(C, h3_dropped, COUNTER, "gatling_h3_dropped_total", NULL, NULL,                            \
      "HTTP/3: datagrams dropped", "h3_dropped",                                                 \
      "HTTP/3: datagrams dropped (not QUIC, no connection)")                                     \
    X(C, h3_send_lost, COUNTER, "gatling_h3_send_lost_total", NULL, NULL,                        \
      "HTTP/3: datagrams lost to a full socket buffer", "h3_send_lost",                          \
      "HTTP/3: datagrams lost to a full socket buffer")                                          \
    X(C, h3_retries, COUNTER, "gatling_h3_retries_total", NULL, NULL,                            \
      "HTTP/3: Retry packets sent", "h3_retries",                                                \
      "HTTP/3: Retry packets sent (address validation)")                                         \
    X(C, h3_bad_tokens, COUNTER, "gatling_h3_bad_tokens_total", NULL, NULL,                      \
      "HTTP/3: Initials with a bad Retry token", "h3_bad_tokens",                                \
      "HTTP/3: Initials with a bad Retry token")                                                 \
    X(C, h3_validated, COUNTER, "gatling_h3_validated_total", NULL, NULL,                        \
      "HTTP/3: connections begun with a token", "h3_validated",                                  \
      "HTTP/3: connections begun with a token (Retry, NEW_TOKEN)")                               \
    X(C, h3_rapid_reset, COUNTER, "gatling_h3_rapid_reset_total", NULL, NULL,                    \
      "HTTP/3: connections closed for streams reset too fast", "h3_rapid_reset",                 \
      "HTTP/3: connections closed for streams reset too fast")                                   \
    X(C, h3_fields_refused, COUNTER, "gatling_h3_fields_refused_total", NULL, NULL,              \
      "HTTP/3: requests with fields over the limits", "h3_fields_refused",                       \
      "HTTP/3: requests whose fields were over the limits (431)")                                \
    X(C, h3_streams_refused, COUNTER, "gatling_h3_refused_streams_total", NULL, NULL,            \
      "HTTP/3 streams refused: request field memory full", "h3_streams_refused",                 \
      "HTTP/3: streams refused, request field memory full")                                      \
    X(C, proxy_headers, COUNTER, "gatling_proxy_protocol_headers_total", "result", "client",     \
      "PROXY headers (-y): naming a client, or keeping the proxy's address (LOCAL, UNKNOWN)",    \
      "proxy_headers", "PROXY headers naming a client (-y)")                                     \
    X(C, proxy_local, COUNTER, "gatling_proxy_protocol_headers_total", "result", "local", NULL,  \
      "proxy_local", "PROXY headers keeping the proxy's address (LOCAL, UNKNOWN)")               \
    X(C, proxy_untrusted, COUNTER, "gatling_proxy_protocol_untrusted_total", NULL, NULL,         \
      "Connections to a -y listener not from a -Y proxy: closed", "proxy_untrusted",             \
      "PROXY listener: not from a trusted proxy (-Y), closed")                                   \
    X(C, proxy_malformed, COUNTER, "gatling_proxy_protocol_malformed_total", NULL, NULL,         \
      "PROXY headers malformed or cut short: closed", "proxy_malformed",                         \
      "PROXY headers malformed or cut short, closed")                                            \
    X(C, health_ok, COUNTER, "gatling_health_checks_total", "result", "ok",                      \
      "Health checks (-k): 200, or 503 while draining", "health_ok", "health checks (-k): 200")  \
    X(C, health_failed, COUNTER, "gatling_health_checks_total", "result", "draining", NULL,      \
      "health_failed", "health checks (-k): 503, draining")                                      \
    X(C, cgi_spawned, COUNTER, "gatling_cgi_spawned_total", NULL, NULL, "CGI processes started", \
      "cgi_spawned", "CGI processes started")                                                    \
    X(C, cgi_killed, COUNTER, "gatling_cgi_killed_total", NULL, NULL,                            \
      "CGI processes killed: at -Q, or the client went first", "cgi_killed",                     \
      "CGI processes killed: deadline (-Q) or client gone")                                      \
    X(C, cgi_redirects, COUNTER, "gatling_cgi_redirects_total", NULL, NULL,                      \
      "CGI local redirects answered inside the server", "cgi_redirects",                         \
      "CGI local redirects answered inside the server")                                          \
    X(C, cgi_refused, COUNTER, "gatling_cgi_refused_total", NULL, NULL,                          \
      "CGI requests refused: over -J, spawner busy or gone, 503", "cgi_refused",                 \
      "CGI requests refused: over -J, spawner busy or gone, 503")                                \
    X(C, cgi_failed, COUNTER, "gatling_cgi_failed_total", NULL, NULL,                            \
      "CGI processes without a valid head: 502", "cgi_failed",                                   \
      "CGI processes without a valid head: 502")                                                 \
    X(C, cache_hits, COUNTER, "gatling_cache_hits_total", NULL, NULL,                            \
      "Response cache: hits (fresh)", "cache_hits", "cache: hits (fresh)")                       \
    X(C, cache_stale, COUNTER, "gatling_cache_stale_total", NULL, NULL,                          \
      "Response cache: stale served while one fetch refreshes", "cache_stale",                   \
      "cache: stale served while one fetch refreshes")                                           \
    X(C, cache_stale_errors, COUNTER, "gatling_cache_stale_errors_total", NULL, NULL,            \
      "Response cache: stale served, the backend failing", "cache_stale_errors",                 \
      "cache: stale served, the backend failing")                                                \
    X(C, cache_misses, COUNTER, "gatling_cache_misses_total", NULL, NULL,                        \
      "Response cache: misses (a fetch each)", "cache_misses", "cache: misses (a fetch each)")   \
    X(C, cache_collapsed, COUNTER, "gatling_cache_collapsed_total", NULL, NULL,                  \
      "Response cache: requests that waited for another's fetch", "cache_collapsed",             \
      "cache: requests that waited for another's fetch")                                         \
    X(C, cache_fetches, COUNTER, "gatling_cache_fetches_total", NULL, NULL,                      \
      "Response cache: backend requests made (misses, refreshes)", "cache_fetches",              \
      "cache: backend requests made (misses, refreshes)")                                        \
    X(C, cache_stored, COUNTER, "gatling_cache_stored_total", NULL, NULL,                        \
      "Response cache: responses stored", "cache_stored", "cache: responses stored")             \
    X(C, cache_revalidated, COUNTER, "gatling_cache_revalidated_total", NULL, NULL,              \
      "Response cache: stored responses freshened by a 304", "cache_revalidated",                \
      "cache: stored responses freshened by a 304")                                              \
    X(C, cache_passes, COUNTER, "gatling_cache_passes_total", NULL, NULL,                        \
      "Response cache: sent by, the response was not storable", "cache_passes",                  \
      "cache: sent by, the response was not storable")                                           \
    X(C, cache_bypass, COUNTER, "gatling_cache_bypass_total", NULL, NULL,                        \
      "Response cache: bypassed: Authorization, Cookie, a body", "cache_bypass",                 \
      "cache: bypassed: Authorization, Cookie, a body")                                          \
    X(C, cache_lock_timeouts, COUNTER, "gatling_cache_lock_timeouts_total", NULL, NULL,          \
      "Response cache: waiters that stopped waiting for a slow fetch", "cache_lock_timeouts",    \
      "cache: waiters that stopped waiting for a slow fetch")                                    \
    X(C, cache_purges, COUNTER, "gatling_cache_purges_total", NULL, NULL,                        \
      "Response cache: PURGE requests", "cache_purges", "cache: PURGE requests")                 \
    X(C, cache_coded_made, COUNTER, "gatling_cache_coded_total", NULL, NULL,                     \
      "Response cache: stored responses coded whole (--compress)", NULL, NULL)                   \
    X(E, cache_coded[0], COUNTER, "gatling_cache_coded_hits_total", "coding", "gzip",            \
      "Response cache: hits sent from a stored coded body, by coding", NULL, NULL)               \
    X(E, cache_coded[1], COUNTER, "gatling_cache_coded_hits_total", "coding", "br", NULL, NULL,  \
      NULL)                                                                                      \
    X(E, cache_coded[2], COUNTER, "gatling_cache_coded_hits_total", "coding", "zstd", NULL,      \
      NULL, NULL)                                                                                \
    X(M, cache_evictions, COUNTER, "gatling_cache_evictions_total", NULL, NULL,                  \
      "Response cache: entries evicted (room, idle)", "cache_evictions",                         \
      "cache: entries evicted (room, idle)")                                                     \
    X(G, cache_entries, GAUGE, "gatling_cache_entries", NULL, NULL,                              \
      "Response cache: entries held", "cache_entries", "cache: entries held")                    \
    X(G, cache_bytes, GAUGE, "gatling_cache_bytes", NULL, NULL, "Response cache: bytes held",    \
      "cache_bytes", "cache: bytes held")                                                        \
    X(G, draining, GAUGE, "gatling_draining", NULL, NULL,                                        \
      "1 once a drain has begun: the health check fails (-g), the listeners close", "draining",  \
      "draining: health checks fail (-g), listeners closing")                                    \
    X(C, ftp_sessions, COUNTER, "gatling_ftp_sessions_total", NULL, NULL,                        \
      "FTP control connections (-f)", "ftp_sessions", "FTP control connections (-f)")            \
    X(C, ftp_logins, COUNTER, "gatling_ftp_logins_total", NULL, NULL, "FTP logins (anonymous)",  \
      "ftp_logins", "FTP logins (anonymous)")                                                    \
    X(C, ftp_downloads, COUNTER, "gatling_ftp_downloads_total", NULL, NULL,                      \
      "FTP downloads completed", "ftp_downloads", "FTP downloads completed")                     \
    X(C, ftp_uploads, COUNTER, "gatling_ftp_uploads_total", NULL, NULL, "FTP uploads completed", \
      "ftp_uploads", "FTP uploads completed")                                                    \
    X(C, ftp_refused, COUNTER, "gatling_ftp_refused_total", NULL, NULL,                          \
      "FTP refused: other users, uploads, MKD", "ftp_refused",                                   \
      "FTP refused: other users, uploads, MKD")                                                  \
    X(C, ftp_bounce, COUNTER, "gatling_ftp_bounce_refused_total", NULL, NULL,                    \
      "FTP PORT/EPRT to another host or a low port: refused", "ftp_bounce",                      \
      "FTP PORT/EPRT to another host refused (bounce)")                                          \
    X(C, ftp_pasv_theft, COUNTER, "gatling_ftp_pasv_theft_total", NULL, NULL,                    \
      "FTP data connections from another host: closed", "ftp_pasv_theft",                        \
      "FTP data connections from another host, closed")                                          \
    X(C, ftp_timeouts, COUNTER, "gatling_ftp_timeouts_total", NULL, NULL,                        \
      "FTP deadlines: login, idle, data set-up, rate (-B)", "ftp_timeouts",                      \
      "timed out: FTP login, idle, data set-up, rate (-B)")                                      \
    X(M, dict_hits, COUNTER, "gatling_dictionary_hits_total", NULL, NULL,                        \
      "Responses sent as dcz against a client's dictionary", NULL, NULL)                         \
    X(M, dict_saved, COUNTER, "gatling_dictionary_bytes_saved_total", NULL, NULL,                \
      "Bytes dcz responses saved: their files' sizes less their bodies", NULL, NULL)             \
    X(M, dict_unknown, COUNTER, "gatling_dictionary_unknown_total", NULL, NULL,                  \
      "Available-Dictionary hashes not indexed (or stale): the ordinary response", NULL, NULL)   \
    X(M, dict_made, COUNTER, "gatling_dictionary_deltas_made_total", NULL, NULL,                 \
      "Deltas made on the job pool", NULL, NULL)

/*
 * What is counted per backend (of a -P rule or a --pool): status_counters_t's
 * backend[slot][BACKEND_<kind>], kept by handlers/proxy*.c.  A row each, in
 * the order every page shows them:
 * XB(kind, metric, help, key, label, ckey, clabel):
 *   metric  its family on /metrics, a sample per backend (pool=, backend=),
 *           help its help;
 *   key     the row of all backends summed on /server-status?json, label its
 *           HTML row;
 *   ckey    its key in ?json's list of backends, clabel its column in the
 *           page's table of them (NULL: not there).
 * A new one is a row here and its increment where it happens.
 */
#define STATS_BACKEND_COUNTERS(XB)                                                               \
    XB(REQUESTS, "gatling_backend_requests_total", "Requests sent to the backend (each attempt)",  \
       "backend_requests", "proxy: requests sent to backends (each attempt)", "requests",        \
       "requests")                                                                               \
    XB(502, "gatling_backend_failures_total",                                                    \
       "Backend failures: a connect, a reset, a bad or cut answer, a failon status",             \
       "backend_502", "proxy: backend failed: 502 or response cut short", "failures", "failures")  \
    XB(504, "gatling_backend_timeouts_total",                                                    \
       "Backends silent past -Q: 504, or a response cut short", "backend_504",                   \
       "proxy: backend silent past -Q: 504", "timeouts", "timeouts")                             \
    XB(RETRIES, "gatling_backend_retries_total",                                                 \
       "Requests that failed at the backend and went to another", "backend_retries",             \
       "proxy: requests sent to another backend after a failure", "retries", "retries")          \
    XB(DOWNS, "gatling_backend_downs_total",                                                     \
       "Times the backend was taken out: failures within the window, failed checks",             \
       "backend_downs", "proxy: backends taken out (failures in the window, checks)", "downs",   \
       "downs")                                                                                  \
    XB(CHECKS_FAILED, "gatling_backend_checks_failed_total",                                     \
       "Active health checks (--pool check=) that failed", NULL, NULL, "checks_failed",          \
       "checks failed")                                                                          \
    XB(CONNECTS, "gatling_backend_connections_total", "Backend connections opened",              \
       "backend_connects", "proxy: backend connections opened", NULL, NULL)                      \
    XB(REUSES, "gatling_backend_reuses_total", "Requests sent on a pooled backend connection",   \
       "backend_reuses", "proxy: requests on a pooled backend connection", NULL, NULL)           \
    XB(TUNNEL_IDLE, "gatling_backend_tunnels_idle_total",                                        \
       "WebSocket tunnels closed idle (-Q's second value)", "backend_tunnel_idle",               \
       "proxy: WebSocket tunnels closed idle (-Q secs,tunnel)", NULL, NULL)                      \
    XB(UNSIZED, "gatling_backend_unsized_total",                                                 \
       "Request bodies without a length not held for a backend: 413, 503", "backend_unsized",    \
       "proxy: bodies without a length refused: 413 (1 MiB), 503 (64 MiB)", NULL, NULL)

#endif
