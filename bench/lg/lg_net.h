/*
 * lg_net — addresses and connections for the load generators: the target
 * URL, the list of local source addresses, and non-blocking connects that
 * bind a source address first.
 */
#ifndef LG_NET_H
#define LG_NET_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct lg_addr {
    struct sockaddr_storage ss;
    socklen_t len;
} lg_addr_t;

typedef struct lg_url {
    lg_addr_t addr; /* where to connect */
    unsigned port;
    char host[300]; /* Host: header value, as written in the URL */
    char *path;     /* malloc'd; "/" when the URL has none */
    int tls;        /* https:// */
    int ftp;        /* ftp:// */
} lg_url_t;

/*
 * Parse "http[s]://HOST[:PORT][/PATH]" or "ftp://HOST[:PORT]/PATH" (the
 * scheme may be left out: http; ftp's port is 21 unless given).  HOST is an
 * IPv4 literal, an IPv6 literal in brackets, or a name getaddrinfo() knows.
 * 0, or -1 with a message in err.
 */
int lg_url_parse(const char *s, lg_url_t *u, char *err, size_t errlen);

void lg_url_free(lg_url_t *u);

/*
 * Parse a source address list: comma-separated addresses, each either one
 * address or an IPv4 range "A-B" (B a full address or the last octet:
 * 127.0.0.2-127.0.0.9 or 127.0.0.2-9).  All must be of family.  Returns a
 * malloc'd array and its size in *n, or NULL with a message in err.
 */
lg_addr_t *lg_srcs_parse(const char *s, int family, size_t *n, char *err, size_t errlen);

/*
 * Start a non-blocking TCP connect to dst, first binding src when not NULL
 * (with IP_BIND_ADDRESS_NO_PORT where the OS has it, so that the port is
 * picked at connect time per destination rather than reserved at bind time).
 * TCP_NODELAY is set.  Returns the descriptor (registered nowhere), or
 * -errno: a failure of socket(), bind() or an immediate connect() failure.
 * *now is 1 if the connect completed at once, 0 if it is in progress.
 */
int lg_connect(const lg_addr_t *dst, const lg_addr_t *src, int *now);

/* Set the port of a (IPv4 or IPv6). */
void lg_addr_set_port(lg_addr_t *a, unsigned port);

/* The outcome of a connect in progress that became writable: 0 or an errno. */
int lg_connect_result(int fd);

/* "1.2.3.4:80" or "[::1]:80" (port omitted when zero). */
const char *lg_addr_str(const lg_addr_t *a, char *buf, size_t len);

/* Ports in the local ephemeral range (ip_local_port_range); 28232 if unknown. */
unsigned lg_ephemeral_ports(void);

#endif
