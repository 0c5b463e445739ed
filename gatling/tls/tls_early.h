/*
 * tls_early — early data (TLS 1.3's 0-RTT, QUIC's): --early-data's option
 * row, and what the handshakes and the connections ask about it.  The
 * replay table itself is site/replay.h's, shared by -W's workers.
 *
 * With --early-data n every context takes up to TLS_EARLY_MAX bytes of
 * early data and says so in its tickets; OpenSSL's own anti-replay (its
 * in-process session cache: single-use sessions) is off, since gatling's
 * tickets are stateless and good on every worker and --cluster node
 * (tls_ctx.c's on_ticket).  Instead a handshake that offers early data is
 * decided by tls_early.c's callback: the ClientHello's random recorded in
 * the replay table (a replay of a captured first flight carries the same
 * random, and the PSK binder keeps it from being changed), accepted only
 * when it is new, the table old enough and with room; a ticket another
 * node issued (its app data names the store that sealed it), a connection
 * whose certificate asks for a client certificate, or no table, refuse.
 * A refusal refuses the early data only: the handshake resumes, and the
 * request is sent again after it, one round trip later.
 *
 * A connection reads the first flight with gio_tls_read_early (io/gio_tls.h)
 * and answers what is safe while the client's Finished is on its way
 * (conn/); the outcome of each handshake that offered early data is taken
 * once by tls_early_take and counted by the connection.
 */
#ifndef GATLING_TLS_EARLY_H
#define GATLING_TLS_EARLY_H

#include "site/optdef.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
struct tls_store;

/* Early data a context takes (and its tickets allow): a request head, or
   HTTP/2's preface, SETTINGS and a few HEADERS. */
#define TLS_EARLY_MAX 16384

/* --early-data's row (options.c's sections[]). */
extern const optdef_t tls_early_opts[];

/* tls.c, after tls_ctx_setup: a context's early data settings and callbacks (none when the
   option is off).  0, or -1 with why in err. */
int tls_early_setup(SSL_CTX *ctx, struct tls_store *st, char *err, size_t errlen);

/* Does this session take early data (read it with gio_tls_read_early)? */
int tls_early_on(SSL *ssl);

/* What became of the early data a handshake offered, once: TLS_EARLY_NONE
   (none offered, or already taken), or one of the others. */
enum { TLS_EARLY_NONE, TLS_EARLY_ACCEPTED, TLS_EARLY_REPLAYED, TLS_EARLY_REFUSED };
int tls_early_take(SSL *ssl);

#endif
