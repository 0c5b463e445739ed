/*
 * ftp_sess — what ftp.c (the control connection, the commands) and
 * ftp_xfer.c (the data link, transfers, listings) share: the session, and
 * the two things of it both halves use (ftp_sess.c: the reply queue and
 * the capped deadline).  Private to this folder.  ftp.c calls ftp_xfer.c,
 * both call ftp_sess.c; nothing here calls back up (make layers checks it).
 */
#ifndef GATLING_FTP_SESS_H
#define GATLING_FTP_SESS_H

#include "ftp_parse.h"
#include "gio_batch.h"
#include "site/fs.h"
#include "site/site.h"
#include "site/watch.h"

#include <netinet/in.h>
#include <sys/stat.h>
#include <stdint.h>

#define FTP_REPLY_CAP 2048 /* replies queued for the control connection */

typedef union ftp_addr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} ftp_addr_t;

typedef enum { FTP_LOGIN, FTP_READY, FTP_CLOSING } ftp_state_t;
typedef enum { LINK_NONE, LINK_LISTEN, LINK_CONNECTING, LINK_OPEN } ftp_link_t;
typedef enum { XFER_NONE, XFER_SEND, XFER_RECV } ftp_xfer_t;

/* The data link's loop cookie (a passive listener or a data socket: dfd). */
typedef struct ftp_data {
    watch_t w; /* ftp.c's on_data */
    struct ftp_sess *s;
} ftp_data_t;

typedef struct ftp_sess {
    watch_t w; /* the control connection's loop cookie: ftp.c's on_ctl */
    int fd;
    ftp_state_t state;
    site_t *site;
    struct ftp_set *set; /* ftp.h: the sessions of its loop */
    struct ftp_sess *prev, *next;
    ftp_data_t dk; /* the data link's cookie */
    int root;      /* the directory this local address is served from */
    uint8_t user_ok, ascii, epsv_all, skipping, vhost_dir;
    char user[16]; /* "anonymous" or "ftp", for the log */
    uint64_t rest; /* REST: where the next RETR starts */
    char cwd[FTP_PATH_MAX];
    uint32_t inlen, replen, repoff;
    char in[FTP_LINE_MAX];
    char rep[FTP_REPLY_CAP];
    /* the data link */
    ftp_link_t link;
    int dfd;           /* the passive listener, or the data socket; -1 */
    ftp_addr_t active; /* PORT/EPRT: where to connect (family 0: none) */
    /* the transfer */
    ftp_xfer_t xfer;
    uint8_t xfer_waiting; /* a transfer command waits for its data link */
    ftp_verb_t xverb;
    int64_t xstarted_us;       /* when the command came (gio_now_us()), for /metrics */
    gio_batch_t dout;          /* XFER_SEND: the file range or the listing */
    int ufd;                   /* XFER_RECV: the file being written; -1 */
    int udir;                  /* ... its directory, to unlink it on failure; -1 */
    char uname[256];           /* ... its name there */
    uint64_t ubase;            /* APPE: the size the file had */
    uint64_t moved, window_at; /* bytes of the transfer, and at the window's start */
    char xpath[FTP_PATH_MAX];  /* what the transfer is about, for the log */
    struct fcache_entry *file; /* RETR: the open-file cache's entry, held until sent */
    char vname[64];            /* "ip:port" of the local address: the cache key's start */
    ftp_addr_t peer, local;
    /* FTPS (AUTH TLS, RFC 4217) */
    struct ssl_st *ssl;   /* the control connection's session, after AUTH TLS */
    struct ssl_st *dssl;  /* the data connection's, with PROT P */
    uint8_t tls_hs;       /* the control handshake is under way */
    uint8_t tls_want;     /* what OpenSSL waits for on the control socket (GIO_*) */
    uint8_t tls_start;    /* "234" is queued: the handshake begins once it left */
    uint8_t pbsz, prot_p; /* PBSZ 0 given; PROT P (data connections in TLS) */
    uint8_t dtls_hs;      /* the data connection's handshake is under way */
} ftp_sess_t;

/* Queue a reply line (printf format, CRLF added); -1 if it did not fit (the
   session is then closing: a client that reads no replies). */
int ftp_reply(ftp_sess_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ms capped by -T, as conn.c caps its deadlines; 0 = none. */
int64_t ftp_capped_ms(const ftp_sess_t *s, int64_t ms);

#endif
