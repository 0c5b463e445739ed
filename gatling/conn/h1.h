/*
 * h1 — the HTTP/1.1 codec: the only code that writes HTTP/1.1.  From a
 * parsed request head it decides keep-alive (RFC 9112 9.3 and our caps)
 * and the body's framing, answers 100-continue, and sets up the exchange
 * the handlers answer; their answer becomes a status line, Date, Server,
 * Content-Length, Connection and the exchange's fields in the request
 * block's head buffer, and the body goes onto the connection's output batch
 * behind it (writev and sendfile, as gio_batch sends them).  HEAD is
 * handled here once: the head goes, the body does not.  A head that does
 * not fit its buffer becomes a 500 and closes the connection.  The canned
 * answers sent past the state machine (408, the 503s of the caps and of a
 * full worker queue) are here too.
 */
#ifndef GATLING_H1_H
#define GATLING_H1_H

#include "conn.h"

/* A fresh exchange in c's request block, with the connection's facts. */
void h1_exchange_init(conn_t *c);

/*
 * A complete head is parsed: decide keep-alive and the body's framing (sets
 * c->body, c->body_left), answer 100-continue if the client waits for it.
 * Returns 0, or the status to answer (400 for invalid or conflicting
 * framing, 413 over CONN_BODY_MAX, 501 for an unknown coding).
 */
int h1_request(conn_t *c);

/* Answer status (a complete error response: the stream may be out of step,
   the caller decided keep-alive), with one field name: value (or NULL).
   0, or -1 on ENOMEM. */
int h1_error(conn_t *c, int status, const char *name, const char *value);

/* Best effort on a socket that is given up on: 408 after a head that did
   not come in time, 503 when the worker threads are too far behind. */
void h1_late(conn_t *c, int status);

/*
 * Over a connection cap: answer 503 on the accepted socket fd at once,
 * without reading the request, and close it (tls: close only).
 */
void h1_refuse(int fd, int tls);

#endif
