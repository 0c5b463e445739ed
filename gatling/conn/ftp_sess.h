/*
 * ftp_sess — what ftp.c (the control connection, the commands) and
 * ftp_xfer.c (the data link, transfers, listings) share: the session.
 * Private to those two files.
 */
#ifndef GATLING_FTP_SESS_H
#define GATLING_FTP_SESS_H

#include "ftp.h"
#include "ftp_parse.h"
#include "gio_batch.h"

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

/* The data link's loop cookie: kind first, as every cookie. */
typedef struct ftp_data {
    int kind; /* COOKIE_FTP_DATA */
    struct ftp_sess *s;
} ftp_data_t;

typedef struct ftp_sess {
    int kind; /* COOKIE_FTP: first */
    int fd;
    ftp_state_t state;
    site_t *site;
    ftp_set_t *set;
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

/* ftp.c: queue a reply line (printf format, CRLF added); -1 if it did not fit. */
int ftp_reply(ftp_sess_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ftp.c: AUTH, PBSZ, PROT.  1 if cmd was one of them. */
int ftp_cmd_tls(ftp_sess_t *s, const ftp_cmd_t *cmd);

/* ftp.c: the control connection's deadline and interest for its state. */
void ftp_ctl_arm(ftp_sess_t *s);

/* ftp.c: -T capped like conn.c's, in ms; 0 = none. */
int64_t ftp_capped_ms(const ftp_sess_t *s, int64_t ms);

/* ftp_xfer.c */
void ftp_link_close(ftp_sess_t *s);
int ftp_cmd_pasv(ftp_sess_t *s, const ftp_cmd_t *cmd);
int ftp_cmd_port(ftp_sess_t *s, const ftp_cmd_t *cmd);
void ftp_cmd_transfer(ftp_sess_t *s, const ftp_cmd_t *cmd, const char *path);
void ftp_xfer_abort(ftp_sess_t *s, int code, const char *why);
void ftp_data_event(ftp_sess_t *s, int fd, unsigned events);
/* ftp_xfer.c: open path (absolute, from ftp_path_join) below s->root as
   HTTP would serve it: no dotfiles, no password asked, only what everyone
   may read (fs_public: world-readable, directories also searchable, no
   closed directory on the way).  fd, or -1 with errno; *st gets its stat.
   RETR, SIZE, MDTM, MLST, STAT, CWD and the listings all open through it. */
int ftp_open(ftp_sess_t *s, const char *path, struct stat *st);
/* ftp_xfer.c: where fs_public walks from for the session's paths. */
fs_at_t ftp_at(const ftp_sess_t *s);
/* ftp_xfer.c: for STOR, APPE, MKD: the world-writable directory that path's
   parent is, opened (its fd), with path's last segment in *name; -1 after
   replying why not (uploads off, not world-writable, a dotfile, ...). */
int ftp_upload_dir(ftp_sess_t *s, const char *path, const char **name);
/* ftp_list.c: a listing of dirfd, the directory path (from at: its symlinks
   are checked with fs_public), for LIST, NLST or MLSD, into a malloc'd
   buffer.  0 or -1. */
int ftp_list_dir(int dirfd, const fs_at_t *at, const char *path, ftp_verb_t how, int64_t now,
                 char **out, size_t *len);
/* ftp_list.c: one entry's line: "facts; name" (MLST, MLSD), ls -l (LIST),
   the name (NLST).  Bytes written (without NUL) or -1 if it did not fit. */
long ftp_list_line(char *out, size_t cap, ftp_verb_t how, const struct stat *st, const char *name,
                   int64_t now);

#endif
