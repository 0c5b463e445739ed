/* config — everything the command line sets, in one struct. */
#ifndef GATLING_CONFIG_H
#define GATLING_CONFIG_H

#define GATLING_VERSION "0.1"

typedef struct config {
    const char *addr;      /* -i: NULL = all addresses, IPv6 and IPv4 */
    int port;              /* -p: default 80 as root, 8000 otherwise; 0 = any */
    int timeout;           /* -T: idle/stall timeout in seconds */
    int access_log;        /* 0 with -n */
    const char *root;      /* -c: chroot (root) or chdir here; NULL = cwd */
    const char *mime_file; /* -m: NULL = /etc/mime.types */
    int workers;           /* -W: worker processes; 1 = no supervisor */
} config_t;

#endif
