/*
 * status_int — what status.c and status_page.c share (header only): a row
 * of the page, a warning, and the page's parts both forms are made of.
 * status.c calls status_page.c, never the other way.
 */
#ifndef GATLING_STATUS_INT_H
#define GATLING_STATUS_INT_H

#include "http/hbuf.h"
#include "site/site.h"
#include "status_ring.h"

#include <stdint.h>

/* One row of the page: its JSON key, its HTML label, its value. */
typedef struct row {
    const char *key, *label;
    uint64_t v;
} row_t;

/* Something wrong, for the top of the page: what (plain text, escaped
   where it is shown), what it means and which option governs it. */
typedef struct status_warn {
    int bad; /* 1: red (down, expired, refusing); 0: amber (rising, soon) */
    char what[200];
    const char *means;
} status_warn_t;

#define STATUS_WARNS 24 /* warnings shown, at most */
#define STATUS_WINDOW 10 /* the rates at the top: the last 10 seconds */

/* The wrong things now, into w[0..max): how many.  ring may be NULL (no
   samples yet); snap is the loop's (or -W's sum). */
int status_warnings(const site_t *s, const status_ring_t *ring, const stats_snap_t *snap,
                    int64_t now, status_warn_t *w, int max);

/* The parts each form has, JSON (a key and its value after a comma) or
   HTML: the backends, --cluster's locks, --acme-on-demand's names, the
   processes and under -W each worker's numbers (from the slots: the caller
   published its own first); the warnings. */
void status_backends(hbuf_t *b, const site_t *s, const status_ring_t *ring, int64_t now,
                     int json);
void status_cluster_locks(hbuf_t *b, const site_t *s, int json);
void status_ondemand_names(hbuf_t *b, const site_t *s, int json);
void status_processes(hbuf_t *b, const site_t *s, int json);
void status_warn_list(hbuf_t *b, const status_warn_t *w, int n, int json);

/* The HTML page's body: the rates over the last STATUS_WINDOW seconds and
   conns open, the graphs' place (status.js fills it), the rows r[0..n) by
   section, each section's zero rows folded away. */
void status_sections(hbuf_t *b, const site_t *s, const status_ring_t *ring, int64_t now,
                     uint64_t conns, const row_t *r, size_t n);

/* s[0..) for JSON (a string's inside) or HTML (text). */
void status_escaped(hbuf_t *b, const char *s, int json);

/* The page's script and style sheet (status.js, status.css), built in by
   status_assets.c: served as /server-status?js and ?css, NUL-terminated. */
extern const char status_js[], status_css[];

/* What the page and its assets may load: only from this server, nothing
   inline (the script is ?js, the style ?css). */
#define STATUS_CSP                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "    \
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

#define STATUS_PROCS_MAX 64 /* -W's workers listed, at most (worker.c's cap) */
/* A worker's line of the per-worker table at most: 8 numbers of 20 digits,
   the keys or cells around them, and the table's head once */
#define STATUS_WORKER_LINE_MAX 600

#endif
