/*
 * acme — the ACME client (RFC 8555, with RFC 8737's TLS-ALPN-01, RFC 8738's
 * IP identifiers and RFC 9773's renewal information): one process for the
 * whole server, forked by main() before the certificates are loaded and
 * before the chroot and -W's workers, never on a serving loop.  It blocks
 * as it likes (DNS, HTTPS to the CA through libcurl, polling), and hands
 * the loops two things only, both through files:
 *
 *   - challenges, in its state directory (site/acme_chal.h's layout);
 *   - certificates, in the -C directory: NAME is a relative symlink to
 *     .acme/NAME.SERIAL/ holding fullchain.pem and privkey.pem (0600), made
 *     in full, fsynced, and then swapped in by rename(2) of a new symlink,
 *     so that a crash at any point leaves the old pair or the new, never a
 *     mix; it then sends the server SIGUSR1 (tls.c reloads; its 60 s look
 *     would find the change anyway).
 *
 * Its own state lives in the state directory too: the account key
 * (account/CAHASH/key.pem, 0600, made once), the account's URL, and per
 * name the renewal schedule.  A fault of the CA never touches what is
 * served: it moves the next attempt (exponential back-off with jitter,
 * Retry-After honoured).
 */
#ifndef GATLING_ACME_H
#define GATLING_ACME_H

#include <sys/types.h>

#include "site/config.h"
#include "site/proc.h"

/* Seconds a stopped client (SIGTERM, SIGHUP: the server's own stop, or the
   old process's after a binary upgrade) gives the order it has in flight to
   finish before it gives it up; acme_end waits that long and a little more.
   An order given up is ordered again by the next client, after its
   back-off: one duplicate certificate of the CA's few a week. */
#define ACME_STOP_GRACE 20

/* Seconds the keeper takes at most to end once told (its stop pipe closed,
   its server dead, SIGTERM): the client's ACME_STOP_GRACE, then SIGKILL. */
#define ACME_KEEPER_STOP (ACME_STOP_GRACE + 3)

/* Start the client: fork a keeper (it stays as whom it was started, root,
   and starts the client, which drops to p's -u ids) that runs until the
   server ends: until the server closes *stop, the write end of a pipe whose
   other end the keeper watches, or dies (the kernel closes it then; a
   signal could not tell a root keeper, PR_SET_PDEATHSIG's neither, once the
   server is -u's user).  stop NULL: no pipe, only SIGTERM and the parent's
   death signal end it.  names: the identifiers to keep
   certificates for (host names or IP addresses), nnames of them.  http01:
   the HTTP port listens, so HTTP-01 may be used (else TLS-ALPN-01 only).
   notify: the process to send SIGUSR1 after a certificate lands, and when
   the client takes the state directory over from another one (which may
   have installed one since the server loaded its certificates).  p: what
   the server made at start (the error log, --acme-on-demand's socket, the
   --cluster page).  The child's pid, or -1 with a message in err. */
pid_t acme_start(const config_t *cfg, const proc_t *p, const char *const *names, int nnames,
                 int http01, pid_t notify, int *stop, char *err, size_t errlen);

#endif
