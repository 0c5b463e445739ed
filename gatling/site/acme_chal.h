/*
 * acme_chal — what the serving loops need of the ACME client (gatling/acme/):
 * the challenges it has outstanding and its status, read from its state
 * directory.  The client is another process (one for the whole server, under
 * -W too); it writes, the loops only read, so every worker and the HTTP/3
 * path see a challenge the moment its file is renamed into place.
 *
 * The state directory's challenges/ is opened (gatling/process/acme_setup.c) before
 * any chroot and -u; everything below it is read through that descriptor
 * with openat(), and nothing else of the state directory is reachable.
 *
 *   challenges/http-01/TOKEN        the key authorization ("TOKEN.THUMBPRINT"),
 *                                   served at /.well-known/acme-challenge/TOKEN
 *   challenges/tls-alpn-01/NAME.pem the RFC 8737 challenge certificate then its
 *                                   key, for a handshake for NAME offering only
 *                                   ALPN "acme-tls/1"
 *   challenges/status               the client's numbers (below), for /metrics
 *   challenges/ondemand             --acme-on-demand: the names refused lately,
 *                                   "NAME UNTIL" a line (unix seconds): a
 *                                   handshake for one waits no more
 *
 * Each file is written to a temporary name (starting with '.') and renamed.
 *
 * The status file, one fact per line, written whole each time it changes:
 *   orders N                        orders the client has made
 *   failures N                      attempts that failed (any step)
 *   cert NAME NOT_AFTER NEXT FAILS [ISSUER]
 *                                   per name: the certificate's expiry and the
 *                                   next renewal (unix seconds; 0: none yet),
 *                                   failures since the last success, and the
 *                                   certificate's issuer (its CN, printable,
 *                                   the rest of the line; none: no certificate)
 *   od_names N, od_asks N, od_allowed N, od_refused N, od_limited N,
 *   od_invalid N                    --acme-on-demand: names got so, asks
 *                                   received, allowed by the ask URL, refused
 *                                   by it, refused by a rate limit, refused as
 *                                   no host name (each a line of its own)
 *   ondemand_name NAME              after NAME's cert line: got on demand
 */
#ifndef GATLING_ACME_CHAL_H
#define GATLING_ACME_CHAL_H

#include <stddef.h>

#define ACME_CHAL_DIR "challenges"   /* all the serving loops see of the state */
#define ACME_CHAL_HTTP "http-01"     /* in it */
#define ACME_CHAL_ALPN "tls-alpn-01"
#define ACME_CHAL_STATUS "status"
#define ACME_CHAL_REFUSED "ondemand"
#define ACME_CHAL_HTTP_DIR ACME_CHAL_DIR "/" ACME_CHAL_HTTP /* from the state directory */
#define ACME_CHAL_ALPN_DIR ACME_CHAL_DIR "/" ACME_CHAL_ALPN
#define ACME_STATUS_FILE ACME_CHAL_DIR "/" ACME_CHAL_STATUS
#define ACME_TOKEN_MAX 128     /* a token's length (base64url) */
#define ACME_KEYAUTH_MAX 256   /* TOKEN "." base64url(SHA-256) */
#define ACME_ALPN_PEM_MAX 16384 /* a challenge certificate and its key */
#define ACME_ALPN_PROTO "acme-tls/1"

typedef struct acme_chal acme_chal_t;

/* The state directory's challenges/ (a descriptor opened before a chroot,
   which this takes), not the rest of it (the account key); NULL with errno
   set (then fd is closed). */
acme_chal_t *acme_chal_open(int fd);
void acme_chal_free(acme_chal_t *c);

/* HTTP-01: the key authorization for the token into buf (at most cap bytes).
   Its length; 0 when no such challenge is outstanding; -1 when the token is not
   base64url of at most ACME_TOKEN_MAX characters (then nothing is opened). */
int acme_chal_http(acme_chal_t *c, const char *token, size_t len, char *buf, size_t cap);

/* TLS-ALPN-01: the challenge PEM (certificate, then key) for a host name, in a
   malloc'd NUL-terminated buffer; NULL when none is outstanding or the name is
   not a valid host name or IP address.  A reverse-mapping name (RFC 8738 6:
   "1.2.0.192.in-addr.arpa", "...ip6.arpa") reads the address's file
   ("192.0.2.1.pem", "2001:db8::1.pem": inet_ntop's form). */
char *acme_chal_alpn_pem(acme_chal_t *c, const char *name, size_t len, size_t *pemlen);

/* The status file's text into buf (NUL-terminated); its length, 0 if none. */
int acme_chal_status(acme_chal_t *c, char *buf, size_t cap);

/* The status file, parsed: every line as the layout above says, or nothing
   (acme_chal_status_parse's -1: a line of another form, a number out of
   range, a name that is none, more than ACME_STATUS_NAMES names). */
#define ACME_STATUS_NAMES 200 /* CONFIG_ACME_NAMES + CONFIG_ACME_OD_NAMES */
#define ACME_STATUS_MAX 196608 /* the file's bytes at most (200 names of 253 bytes) */
typedef struct acme_status {
    unsigned long long orders, failures;
    unsigned long long od_names, od_asks, od_allowed, od_refused, od_limited, od_invalid;
    int n;
    struct {
        char name[254];
        long long not_after, next; /* unix seconds; 0: none yet */
        unsigned long long fails;
        char issuer[128]; /* "" when the line has none */
        int ondemand; /* got by --acme-on-demand */
    } names[ACME_STATUS_NAMES];
} acme_status_t;

/* text: the status file's (NUL-terminated).  0, or -1 (then *st is partial). */
int acme_chal_status_parse(const char *text, acme_status_t *st);

/* Is s[0..len) a host name (LDH labels of 1-63 bytes, at most 253 in all, no
   trailing dot)?  acme_chal_name_ok: that, or an IPv4 or IPv6 address (RFC
   8738), as an identifier the client may ask a certificate for. */
int acme_chal_host_ok(const char *s, size_t len);
int acme_chal_name_ok(const char *s, size_t len);

/*
 * --acme-on-demand: a handshake for a name no certificate answers asks the
 * client for one through a datagram socket (the client's end is its, the
 * loops' end set here after the client started; -W's workers inherit it):
 * "NAME ADDR", ADDR the client's address in text.  The client checks, limits
 * and asks the ask URL; what it refused it lists in challenges/ondemand for a
 * while, so that the handshakes waiting for the name stop waiting.
 */
#define ACME_OD_MSG_MAX 320        /* a datagram: a name, a space, an address */
#define ACME_OD_REFUSED_MAX 65536  /* challenges/ondemand's bytes read at most */
void acme_chal_set_ask(acme_chal_t *c, int fd); /* fd taken */
int acme_chal_ondemand(const acme_chal_t *c);   /* 1 when asks go somewhere */
/* May s[0..len) be asked for: a host name of two labels or more, its last
   not all digits (no IP address, nothing a handshake makes up that is not
   a name)?  The client checks again. */
int acme_chal_ondemand_ok(const char *s, size_t len);
/* Send the ask (never blocks): 0, or -1 (no socket, a name refused by
   acme_chal_ondemand_ok, the socket full). */
int acme_chal_ask(acme_chal_t *c, const char *name, size_t len, const char *addr);
/* Did the client refuse name lately (its line's UNTIL after now)? 1, else 0. */
int acme_chal_refused(acme_chal_t *c, const char *name, size_t len, long long now);

#endif
