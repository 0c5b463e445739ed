/*
 * ftp — the FTP control connection (RFC 959, 2428, 3659) on the same loop
 * as HTTP: anonymous logins, passive (PASV, EPSV) and active (PORT, EPRT)
 * data connections, downloads by sendfile through an output batch,
 * listings (LIST, NLST, MLSD) of what HTTP would serve, and uploads
 * (STOR, APPE, MKD) into world-writable directories when -f ...,upload
 * allows them.  gatling(8) lists the commands and their replies.
 *
 * A session is one small state machine per control connection:
 *
 *   LOGIN ─► READY ─► (a transfer command) XFER ─► READY ... ─► QUIT/close
 *
 * and beside it the data link of the next transfer:
 *
 *   NONE ─► LISTEN (PASV/EPSV) ─► OPEN ─► transfer ─► NONE
 *   NONE ─► (PORT/EPRT, then a transfer command) CONNECTING ─► OPEN ─► ...
 *
 * Deadlines, each counted in ftp_timeouts when it fires: LOGIN 30 s (or -T
 * if shorter) for USER and PASS; READY -T idle; a data link -s to be set up
 * (a client that asks for PASV and never connects); a transfer -B bytes/s
 * over windows of 10 s (slow readers, slow senders).  The control
 * connection has no deadline while a transfer runs.
 *
 * A session is one allocation of about 5.8 KiB on x86-64 (its command line
 * buffer, reply queue, working directory and the transfer's path), plus its
 * socket; an idle one holds no file and no data connection.
 *
 * FTPS: AUTH TLS, PBSZ, PROT (RFC 4217) with HTTPS's certificates; a TLS data
 * connection must resume the control connection's session (require_ssl_reuse).
 *
 * Security rules: a passive data connection is accepted only from the
 * control connection's peer address (others are closed and counted,
 * ftp_pasv_theft); PORT/EPRT name only the peer's own address and a port
 * of 1024 or above (no FTP bounce, ftp_bounce); paths are resolved below
 * the session's directory with fs_open_beneath (openat2 RESOLVE_BENEATH),
 * no dotfiles, only what everyone may read whoever runs the server
 * (fs_public: world-readable files and world-readable and -searchable
 * directories, no closed directory on their way), one rule for RETR, SIZE,
 * MDTM, MLST, STAT, CWD and the listings (ftp_open).
 */
#ifndef GATLING_FTP_H
#define GATLING_FTP_H

#include "site/optdef.h"
#include "site/site.h"

#include <stdint.h>
#include <sys/socket.h>

struct ftp_sess;

/* The sessions of one loop: the owner (server.c) embeds it. */
typedef struct ftp_set {
    struct ftp_sess *list;
    int draining; /* shutting down: sessions close after their transfer */
} ftp_set_t;

/*
 * Take over an accepted, non-blocking control connection from peer, whose
 * peer the caller has counted open in site->limits (closed again when the
 * session ends).  Sends the 220 greeting (or 421 and closes when no
 * directory serves the local address).  0, or -1 (fd closed, the limits
 * count closed too).
 */
int ftp_new(ftp_set_t *set, site_t *site, int fd, const struct sockaddr *peer, socklen_t plen);

/* Over a cap (-N, -K): "421" at once, unread, and close fd. */
void ftp_refuse(int fd);

/* Shutting down: idle sessions get 421 and close now, busy ones after
   their transfer. */
void ftp_set_drain(ftp_set_t *set);

/* -f, -U: their rows of the options table (site/optdef.h). */
extern const optdef_t ftp_opts[];

#define FTP_UPLOAD_MAX (64LL << 20) /* -f port,upload: the default size cap of a file */

#endif
