/*
 * gatling — a scalable static web server.
 *
 * main() parses the command line into a struct config, sets up the document
 * root and the listeners, and runs the loop (or the -W supervisor).
 */
#include "acme_setup.h"
#include "check.h"
#include "cluster_setup.h"
#include "site/config.h"
#include "site/conffile.h"
#include "site/elog.h"
#include "site/privfs.h"
#include "site/spawn.h"
#include "handover.h"
#include "reload.h"
#include "gio.h"
#include "gio_os.h"
#include "site/mime.h"
#include "site/nets.h"
#include "server.h"
#include "conn/proxyproto.h"
#include "tls/tls.h"
#include "handlers/cache.h"
#include "handlers/compress.h"
#include "handlers/proxy.h"
#include "worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -h, its part on dynamic content. */
static void usage_dynamic(void)
{
    fputs(
        "  -w regex  run files whose path matches regex (POSIX ERE) as CGI programs\n"
        "            (the original gatling's -C; up to 8 times)\n"
        "  -z        run world-executable files that start with #! or are ELF as CGI\n"
        "  -J n      at most n CGI processes at once, then 503 (default 32)\n"
        "  --cgi-user user  run CGI programs (and their spawner) as user (root only)\n"
        "  --cgi-limits cpu=secs,mem=bytes,procs=n,files=n  each CGI's rlimits (default\n"
        "            cpu=60,mem=1G,procs=256,files=1024; 0: none)\n"
        "  -Q secs[,tunnel]  a CGI may run, and a backend may stay silent, secs (30);\n"
        "            a WebSocket tunnel may stay idle tunnel secs (3600, at least secs)\n"
        "  -P rule   send matching paths to a backend: [F/|S/]host/port/regex or\n"
        "            [F/|S/]unix:/path:regex (F/: FastCGI, S/: SCGI, else HTTP;\n"
        "            the original gatling's -O; up to 16 times); several backends,\n"
        "            comma-separated, each with *weight and +backup, are a pool:\n"
        "            -P '10.0.0.1/80,10.0.0.2/80*2/^/app/'; @name/regex names a --pool;\n"
        "            only for hosts whose directory holds a .proxy file (warned at start\n"
        "            when none does)\n"
        "  --pool name=[F/|S/]backends|file:/path[;key=value...]  a pool of backends:\n"
        "            balance=rr|least|hash[:Field], fails=, window=, down=, failon=,\n"
        "            tries=, slowstart=, check=/path, interval=, expect=, fall=, rise=,\n"
        "            timeout= (gatling.8, POOLS; up to 16 times, 64 backends in all)\n"
        "  --cache mem[,object]  the response cache in front of -P and CGI, for hosts\n"
        "            with a .cache file: bytes held (64M) and the largest response (1M)\n",
        stdout);
}

/* -h, the FTP options (ftp/ftp.h). */
static void usage_ftp(void)
{
    fputs("  -f port[,upload[=bytes]]  anonymous FTP on port (0: any; 21 as root is usual);\n"
          "            ,upload: STOR/APPE/MKD into world-writable dirs, files <= bytes (64M)\n"
          "  -U        no FTP uploads, whatever -f says (the original gatling's -U)\n",
          stdout);
}

/* -h, its part on HTTPS, proxies in front and load balancers. */
static void usage_https(void)
{
    fputs(
        "  -C dir    HTTPS certificates: dir/server.pem (chain and key), dir/NAME.pem,\n"
        "            dir/NAME/fullchain.pem + privkey.pem (default: ./server.pem if any)\n"
        "  -e [addr:]port  serve HTTPS on this port (and address, else -i's), and\n"
        "            fail if it cannot be bound (default: 443 as root, 4433\n"
        "            otherwise, skipped if busy; 0: any)\n"
        "  -E        no HTTPS\n"
        "  -o list   TLS 1.2 ciphers (default: Mozilla intermediate)\n"
        "  -O list   TLS 1.3 cipher suites (default: OpenSSL's three)\n"
        "  -x secs   send Strict-Transport-Security: max-age=secs over HTTPS\n"
        "  -X        answer plain HTTP with a redirect to HTTPS\n"
        "  -2        no HTTP/2 (ALPN h2 on HTTPS, h2c by prior knowledge on HTTP)\n"
        "  -3        no HTTP/3 (QUIC on UDP at the HTTPS port's number, Alt-Svc)\n"
        "  -y which  these listeners are behind a proxy: each connection starts with a\n"
        "            PROXY header (v1 or v2) whose client address is the one logged and\n"
        "            limited; which: http, https, or port numbers, comma-separated\n"
        "  -Y nets   trust PROXY headers from these addresses or networks only\n"
        "            (addr or addr/bits, comma-separated; required with -y)\n"
        "  -k path   answer GET path with 200 \"ok\" (503 \"draining\" once a drain has\n"
        "            begun), without touching the disk: a load balancer's health check\n"
        "  -g secs   on TERM or HUP, fail the health check for secs before the\n"
        "            listeners close (default 0: close at once)\n",
        stdout);
}

/* -h, automatic HTTPS (acme_setup.h). */
static void usage_acme(void)
{
    fputs(
        "  --acme email  get and renew the HTTPS certificates from an ACME CA (RFC 8555)\n"
        "            for the names served, with email as the account's contact\n"
        "  --acme-ca url  the CA's directory (default: Let's Encrypt's production)\n"
        "  --acme-ca-root file  trust these PEM roots for the CA (else the system's)\n"
        "  --acme-eab kid:@file  External Account Binding (ZeroSSL and others), the HMAC key\n"
        "                  read from file (kid:hmackey works but shows in ps)\n"
        "  --acme-profile name  ask for this profile (classic, tlsserver, shortlived)\n"
        "  --acme-key ec256|rsa2048|rsa3072  the certificates' key type (ec256)\n"
        "  --acme-challenge http-01|tls-alpn-01|dns-01  only this challenge (default:\n"
        "            either of the first two; *.example.org always goes by dns-01)\n"
        "  --acme-dir dir  the ACME state (default /var/lib/gatling/acme; without -C the\n"
        "            certificates land in dir/live)\n"
        "  --acme-names a,b  these host names or IP addresses (default: each virtual host\n"
        "            directory that names a host)\n"
        "  --acme-issuer cn  prefer the chain whose root or intermediate is named cn\n"
        "  --acme-dns-server addr[:port]  DNS-01: the zone's primary, sent RFC 2136\n"
        "            updates signed with TSIG\n"
        "  --acme-dns-key file  ... the TSIG key: BIND's key statement, or alg:name:secret\n",
        stdout);
}

/* -h: the synopsis, and the options that say where the others come from. */
static void usage_head(void)
{
    fputs(
        "usage: gatling [--config file] [--check] [-i addr] [-p port] [-a secs] [-T secs]\n"
        "               [-s secs] [-B rate] [-N n] [-K n]\n"
        "               [-A rpm] [-R n] [-b n] [-j n] [-n] [-G] [-l file] [-q file] [-c dir]\n"
        "               [-u user] [-m file] [-W n] [-H] [-v] [-t] [-d|-D] [-I name]\n"
        "               [-r url] [-M secs] [-S] [-L] [-Z] [-F bytes] [-C dir] [-e port] [-E]\n"
        "               [-o ciphers] [-O suites] [-x secs] [-X] [-2] [-3] [-y which]\n"
        "               [-Y nets] [-k path] [-g secs] [-w regex] [-z] [-J n] [-Q secs[,tunnel]]\n"
        "               [-P rule] [--cache mem[,obj]] [--status-from nets]\n"
        "               [--flood-memory secs] [--h3-retry busy|never|always]\n"
        "               [-f port[,upload[=bytes]]] [-U] [--acme email [--acme-* ...]]\n"
        "               [--log-format combined|json] [--cgi-user user] [--cgi-limits l]\n"
        "               [--cluster etcd=url[,...] [--cluster-name name]] [-V] [-h]\n"
        "       gatling --reload pid\n"
        "Serve the current directory (or -c dir) over HTTP/1.1 and HTTP/2, and over HTTPS when\n"
        "there are certificates.\n"
        "  --config file  read options from file first (one or more a line, # comments,\n"
        "            'quotes'; relative paths relative to it); the command line's win\n"
        "  --check   check the options, certificates, document root and the files they\n"
        "            name, as the start would; exit 0, or 2 naming every problem\n",
        stdout);
}

static void usage_signals(void);

/* -h: the whole usage, on stdout (a bad option gets usage_error()). */
static void usage(void)
{
    usage_head();
    fputs(
        "  -i addr   listen on this IPv4 or IPv6 address (default: all, IPv6 and IPv4)\n"
        "  -p port   listen on this port (default: 80 as root, 8000 otherwise; 0: any)\n"
        "  -a secs   accept a connection once its first bytes arrived, or after secs\n"
        "            (TCP_DEFER_ACCEPT; default 1; 0: at once)\n"
        "  -T secs   close keep-alive connections idle this long (default 23; 0: never)\n"
        "  -s secs   a request head must arrive within secs (default 10, or -T)\n"
        "  -B rate   bodies and responses must move rate bytes/s (default 512; 0: any)\n"
        "  -N n      at most n open connections, then 503 (default: the fd limit - 64)\n"
        "  -K n      at most n open connections per client address or /64 (default: no cap)\n"
        "  -A rpm    at most rpm requests per minute per client address; above it the\n"
        "            client is tarpitted until -T (with -T 0, dropped) (default: no limit)\n"
        "  -R n      at most n requests per keep-alive connection (default 10000; 0: no cap)\n"
        "  -b n      after n failed logins a client address waits 1, 2, 4 ... 60 s\n"
        "            between password checks, answered 429 (default 5; 0: no waits)\n"
        "  --flood-memory secs  a client address whose connection a flood defence ended\n"
        "            gets half the budgets per offence on its next connections, then is\n"
        "            refused; one offence is forgotten per secs (default 10; 0: off)\n"
        "  --h3-retry when  QUIC Retry (address validation) for new connections: busy\n"
        "            (many handshakes, or many Initials from one address), never, always\n"
        "  -j n      threads for password checks and compression (default 2)\n"
        "  -n        no access log (default: Combined Log Format on stdout)\n"
        "  -l file   append the access log to file; SIGUSR1 reopens it\n"
        "  -G        log in vhost_combined format (the vhost first on each line)\n"
        "  --log-format combined|json  the access log's format (json: an object a line)\n"
        "  -q file   append the error log to file (default: stderr); SIGUSR1 reopens it\n"
        "  -c dir    serve dir; as root, chroot into it after opening the listeners\n"
        "  -u user   run as user after opening the listeners\n"
        "  -m file   read MIME types from file (default /etc/mime.types)\n"
        "  -W n      run n worker processes sharing the port (default 1)\n"
        "  -H        no virtual hosting: serve every Host from the document root\n"
        "  -v        virtual hosts only: never serve from the document root itself\n"
        "  -t        keep the Host header's port when choosing the vhost directory\n"
        "  -d / -D   generate directory listings / do not (default)\n"
        "  -I name   also try name as a directory's index (after index.html)\n"
        "  -r url    redirect requests for missing files to url + path\n"
        "  -M secs   send Cache-Control: max-age=secs and Expires\n"
        "  -S        serve /server-status (HTML, ?json) and /metrics (Prometheus) to loopback\n"
        "  --status-from nets  ... and to these addresses or addr/bits too (comma-separated;\n"
        "            -S implied), e.g. the Prometheus server's\n"
        "  -L        follow symlinks that lead out of the document root\n"
        "  -Z        no compression (neither precompressed files nor gzip, nor the dcz\n"
        "            deltas of a directory's .dictionary rules: gatling(8))\n"
        "  --compress off|types=LIST|skip=/PATH,...|min=B|streams=N|memory=B  zstd, br, gzip\n"
        "            on the fly for CGI and -P answers (repeatable; gatling(8))\n"
        "  -F bytes  keep files up to bytes in memory and send each with its head in\n"
        "            one write (default 16384, 32 MiB in all; 0: never; at most 1 MiB)\n",
        stdout);
    usage_https();
    usage_acme();
    cluster_usage();
    usage_dynamic();
    usage_ftp();
    usage_signals();
}

/* -h's end: the signals, and --reload, which sends one and waits. */
static void usage_signals(void)
{
    fputs(
        "  -V        print the version and the IO backend, and exit\n"
        "  -h        print this help, and exit\n"
        "  --reload pid  the binary upgrade (USR2) of the gatling with that pid, waited\n"
        "            for: exit 0 once the new process serves, 1 and why if it failed\n"
        "Signals: TERM/INT stop accepting and exit after the responses in flight;\n"
        "HUP closes the listeners and exits once the open connections are done;\n"
        "USR1 reopens the -l and -q log files and reloads changed certificates;\n"
        "USR2 starts the binary again (an upgrade: the new process reads --config's file\n"
        "again and takes over the listeners, this one drains; if it fails, nothing changes).\n"
        "Started by systemd with sockets (LISTEN_FDS), it serves those.  See gatling(8).\n",
        stdout);
}

/* A whole decimal number in [min, max], or -1. */
static long number(const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    return v;
}

static int is_address(const char *s)
{
    unsigned char a[16];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/*
 * Option lengths are checked once, here, so that nothing later has to wonder
 * whether an option fits the buffer it is copied into: -r ends up in every
 * redirect's Location header, -I next to request paths.
 */
#define OPT_URL_MAX 1024 /* -r */
#define OPT_NAME_MAX 255 /* -I, -u */
#define FTP_UPLOAD_MAX (64LL << 20) /* -f port,upload: the default size cap of a file */

static int too_long(const char *s, size_t max)
{
    return strnlen(s, max + 1) > max;
}

/* No spaces or control characters: the value goes into a header. */
static int header_safe(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return 0;
    return 1;
}

/*
 * A bad option gets one line of error and one pointing at the help, as curl and
 * nginx do: 50 lines of usage would push the error itself off the screen.
 */
static int usage_error(void)
{
    fputs("gatling: try 'gatling -h' or see gatling(8)\n", stderr);
    return 2;
}

/*
 * Where the option being parsed was written: "FILE:LINE: " for an options
 * file's (conf_where), "" for the command line's.  File scope so that bad()'s
 * forty callers need not pass it; bad() empties it once it has named it.
 */
static char opt_where[PATH_MAX + 32];

static int bad(const char *opt, const char *arg, const char *why)
{
    fprintf(stderr, "gatling: %s-%s %s: %s\n", opt_where, opt, arg, why);
    opt_where[0] = 0;
    return usage_error();
}

/* The comma-separated items of arg, each at most max bytes, one by one to
   item(cfg, item).  0, or -1 when an item is empty, too long or refused. */
static int each_item(config_t *cfg, const char *arg, size_t max,
                     int (*item)(config_t *, const char *))
{
    char tmp[64];
    if (max >= sizeof tmp)
        return -1;
    for (const char *s = arg;;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || n > max)
            return -1;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        if (item(cfg, tmp) < 0)
            return -1;
        if (!e)
            return 0;
        s = e + 1;
    }
}

/* -y: "http", "https" or a port 1-65535. */
static int proxy_listener_item(config_t *cfg, const char *s)
{
    long port;
    if (!strcmp(s, "http"))
        cfg->proxy_http = 1;
    else if (!strcmp(s, "https"))
        cfg->proxy_https = 1;
    else if ((port = number(s, 1, 65535)) < 0 || cfg->nproxy_ports >= CONFIG_PROXY_PORTS)
        return -1;
    else
        cfg->proxy_ports[cfg->nproxy_ports++] = (int)port;
    return 0;
}

/* -Y: an address or network. */
static int trust_item(config_t *cfg, const char *s)
{
    if (cfg->ntrust >= CONFIG_TRUST_MAX || net_parse(s, &cfg->trust[cfg->ntrust]) < 0)
        return -1;
    cfg->ntrust++;
    return 0;
}

/* --status-from: an address or network. */
static int status_from_item(config_t *cfg, const char *s)
{
    if (cfg->nstatus_from >= CONFIG_TRUST_MAX ||
        net_parse(s, &cfg->status_from[cfg->nstatus_from]) < 0)
        return -1;
    cfg->nstatus_from++;
    return 0;
}

/* -k: an absolute path without query, spaces or control characters. */
static int health_path_ok(const char *s)
{
    return s[0] == '/' && !too_long(s, CONFIG_HEALTH_MAX) && header_safe(s) && !strchr(s, '?') &&
           !strchr(s, '#');
}

/* -e [addr:]port: "4433", "127.0.0.1:4433", "[::1]:4433".  0, or -1. */
static int parse_tls_listen(config_t *cfg, char *arg)
{
    char *port = arg;
    if (arg[0] == '[') { /* [IPv6]:port */
        char *end = strchr(arg, ']');
        if (!end || end[1] != ':')
            return -1;
        *end = 0;
        cfg->tls_addr = arg + 1;
        port = end + 2;
    } else if (strchr(arg, ':')) {
        port = strrchr(arg, ':');
        *port++ = 0;
        cfg->tls_addr = arg;
    }
    if (cfg->tls_addr && !is_address(cfg->tls_addr))
        return -1;
    return (cfg->tls_port = (int)number(port, 0, 65535)) < 0 ? -1 : 0;
}

/* -e: -1 to go on, or an exit code after naming the value as given
   (parse_tls_listen cuts it at the port's ':'). */
static int tls_listen_option(config_t *cfg, char *arg)
{
    char given[80];
    snprintf(given, sizeof given, "%s", arg);
    if (parse_tls_listen(cfg, arg) < 0)
        return bad("e", given, "not [addr:]port (an IPv4 address, [IPv6], a port 0-65535)");
    cfg->tls_port_given = 1;
    return -1;
}

static void config_defaults(config_t *cfg)
{
    *cfg = (config_t){.port = geteuid() == 0 ? 80 : 8000,
                      .timeout = 23,
                      .head_timeout = 10,
                      .min_rate = 512,
                      .max_requests = 10000,
                      .free_fails = 5,
                      .offence_s = 10,
                      .threads = 2,
                      .access_log = 1,
                      .workers = 1,
                      .vhosts = 1,
                      .max_age = -1,
                      .spawn_fd = -1,
                      .proc_fd = -1,
                      .gzip = 1,
                      .mem_file_max = 16384,
                      .tls_port = geteuid() == 0 ? 443 : 4433,
                      .cgi_max = 32,
                      .ftp_port = -1,
                      .ftp_upload_max = FTP_UPLOAD_MAX,
                      .dyn_timeout = 30,
                      /* CPU seconds, address space, processes of its uid, descriptors */
                      .cgi_limit = {60, 1LL << 30, 256, 1024},
                      .tunnel_timeout = 3600,
#ifdef TCP_DEFER_ACCEPT
                      .defer_accept = 1, /* as h2o: see server.c, defer_accept() */
#endif
                      .hsts = -1};
}

/*
 * Most options only store a checked value in an int or a string of the config, so
 * they are tables; the switch in option() is left with the ones that need their own
 * checks.  The tables hold pointers into this cfg rather than offsets, so that the
 * compiler checks each field's type.  Each returns 1 if c is not one of its options,
 * -1 to go on, or an exit code.
 */
static int int_option(int c, const char *arg, config_t *cfg)
{
    const struct {
        char opt;
        int min, max, *field;
        const char *why;
    } t[] = {
        {'p', 0, 65535, &cfg->port, "not a port number (0-65535)"},
        {'T', 0, 86400, &cfg->timeout, "not a timeout in seconds (0-86400)"},
        {'s', 1, 3600, &cfg->head_timeout, "not a time in seconds (1-3600)"},
        {'B', 0, 1 << 30, &cfg->min_rate, "not a rate in bytes per second"},
        {'N', 1, 1 << 24, &cfg->max_conns, "not a connection count (1-16777216)"},
        {'K', 0, 1 << 24, &cfg->max_conns_addr, "not a connection count"},
        {'A', 0, 1 << 24, &cfg->rpm, "not a number of requests per minute"},
        {'R', 0, 1 << 30, &cfg->max_requests, "not a request count"},
        {'b', 0, 1 << 20, &cfg->free_fails, "not a number of failed logins"},
        {'j', 1, 64, &cfg->threads, "not a thread count (1-64)"},
        {'M', 0, 315360000, &cfg->max_age, "not a max-age in seconds"},
        {'W', 1, 64, &cfg->workers, "not a worker count (1-64)"},
        {'x', 0, 0x7fffffff, &cfg->hsts, "not a number of seconds"},
        {'g', 0, 3600, &cfg->drain_grace, "not a time in seconds (0-3600)"},
        {'J', 1, 4096, &cfg->cgi_max, "not a number of CGI processes (1-4096)"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].opt == c) {
            char opt[2] = {(char)c, 0};
            if ((*t[i].field = (int)number(arg, t[i].min, t[i].max)) < 0)
                return bad(opt, arg, t[i].why);
            return -1;
        }
    return 1;
}

/* File, directory and user names: not empty, and at most max bytes. */
static int name_option(int c, const char *arg, config_t *cfg)
{
    const struct {
        char opt;
        size_t max;
        const char **field;
        const char *why;
    } t[] = {
        {'q', PATH_MAX - 1, &cfg->error_log, "not a usable file name"},
        {'l', PATH_MAX - 1, &cfg->log_file, "not a usable file name"},
        {'c', PATH_MAX - 1, &cfg->root, "not a usable directory name"},
        {'u', OPT_NAME_MAX, &cfg->user, "not a user name"},
        {'m', PATH_MAX - 1, &cfg->mime_file, "not a usable file name"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].opt == c) {
            char opt[2] = {(char)c, 0};
            if (!*arg || too_long(arg, t[i].max))
                return bad(opt, arg, t[i].why);
            *t[i].field = arg;
            return -1;
        }
    return 1;
}

/* The options without an argument: each sets one int. */
static int flag_option(int c, config_t *cfg)
{
    const struct {
        char opt;
        int value, *field;
    } t[] = {
        {'n', 0, &cfg->access_log},   {'G', 1, &cfg->log_vhost},
        {'H', 0, &cfg->vhosts},       {'v', 1, &cfg->vhost_only},
        {'t', 1, &cfg->keep_host_port}, {'d', 1, &cfg->listings},
        {'D', 0, &cfg->listings},     {'S', 1, &cfg->status_page},
        {'L', 1, &cfg->symlinks_out}, {'Z', 0, &cfg->gzip},
        {'E', 1, &cfg->tls_off},      {'X', 1, &cfg->https_redirect},
        {'2', 1, &cfg->h2_off},       {'z', 1, &cfg->cgi_exec},
        {'U', 1, &cfg->ftp_no_upload}, {'3', 1, &cfg->h3_off},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].opt == c) {
            *t[i].field = t[i].value;
            return -1;
        }
    return 1;
}

/* -w: a regular expression that compiles, of a sane length. */
static int pattern_ok(const char *arg)
{
    regex_t re;
    if (!*arg || too_long(arg, CONFIG_PATTERN_MAX) || regcomp(&re, arg, REG_EXTENDED | REG_NOSUB))
        return 0;
    regfree(&re);
    return 1;
}

/* The number in [min, max] before arg's first comma (or its end), or -1;
   *comma gets where that comma is, or NULL (-f port,..., -Q secs,...). */
static long number_to_comma(const char *arg, long min, long max, const char **comma)
{
    char digits[12];
    *comma = strchr(arg, ',');
    size_t n = *comma ? (size_t)(*comma - arg) : strlen(arg);
    if (n == 0 || n >= sizeof digits)
        return -1;
    memcpy(digits, arg, n);
    digits[n] = 0;
    return number(digits, min, max);
}

/* -Q secs[,tunnel]: a tunnel may stay idle as long as asked, else an
   hour (HAProxy's usual "timeout tunnel"), and never less than secs.
   0, or -1 if arg is not that. */
static int parse_dyn_timeouts(config_t *cfg, const char *arg)
{
    const char *comma;
    if ((cfg->dyn_timeout = (int)number_to_comma(arg, 1, 86400, &comma)) < 0)
        return -1;
    if (comma)
        return (cfg->tunnel_timeout = (int)number(comma + 1, 1, 86400)) < 0 ? -1 : 0;
    cfg->tunnel_timeout = cfg->dyn_timeout > 3600 ? cfg->dyn_timeout : 3600;
    return 0;
}

/* A size: digits and an optional K, M or G (powers of 1024), in [min, max];
   -1 if s is not that. */
static long long size_arg(const char *s, long long min, long long max)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *s < '0' || *s > '9' || *end || v > (max >> shift))
        return -1;
    return v << shift >= min ? v << shift : -1;
}

/* --cache mem[,object]: 1M..64G of responses, each at most object (4K..mem). */
static int parse_cache(config_t *cfg, const char *arg)
{
    char mem[24];
    const char *comma = strchr(arg, ',');
    size_t n = comma ? (size_t)(comma - arg) : strlen(arg);
    if (n == 0 || n >= sizeof mem)
        return -1;
    memcpy(mem, arg, n), mem[n] = 0;
    if ((cfg->cache_mem = size_arg(mem, 1 << 20, 64LL << 30)) < 0)
        return -1;
    cfg->cache_object = comma ? size_arg(comma + 1, 4096, cfg->cache_mem) : 0;
    if (!comma && cfg->cache_mem < CACHE_OBJECT_DEFAULT)
        cfg->cache_object = cfg->cache_mem;
    return cfg->cache_object < 0 ? -1 : 0;
}

enum { OPT_CACHE = 256, OPT_STATUS_FROM, OPT_FLOOD_MEMORY, OPT_H3_RETRY, OPT_POOL, OPT_CONFIG,
       OPT_CHECK, OPT_LOG_FORMAT, OPT_CGI_USER, OPT_CGI_LIMITS }; /* long */

/* --config (read before the others: conffile.h), --check (found before them
   too), --log-format. */
static int file_option(int c, const char *arg, config_t *cfg)
{
    if (c == OPT_CONFIG || c == OPT_CHECK)
        return -1;
    if (c != OPT_LOG_FORMAT)
        return 1;
    if (strcmp(arg, "combined") && strcmp(arg, "json"))
        return bad("-log-format", arg, "not combined or json");
    cfg->log_json = arg[0] == 'j';
    return -1;
}

/* --cgi-limits: one of cpu=secs, mem=bytes (K, M, G), procs=n, files=n; 0: none. */
static int cgi_limit_item(config_t *cfg, const char *s)
{
    static const struct {
        const char *name;
        long long max;
    } k[CONFIG_CGI_LIMITS] = {[CONFIG_CGI_CPU] = {"cpu=", 86400},
                              [CONFIG_CGI_MEM] = {"mem=", 1LL << 40},
                              [CONFIG_CGI_PROCS] = {"procs=", 1 << 20},
                              [CONFIG_CGI_FILES] = {"files=", 1 << 20}};
    for (int i = 0; i < CONFIG_CGI_LIMITS; i++)
        if (!strncmp(s, k[i].name, strlen(k[i].name)))
            return (cfg->cgi_limit[i] = size_arg(s + strlen(k[i].name), 0, k[i].max)) < 0 ? -1
                                                                                           : 0;
    return -1;
}

/* Dynamic content: -w (CGI patterns), -P (proxy rules), -Q (their deadlines). */
static int dynamic_option(int c, const char *arg, config_t *cfg)
{
    switch (c) {
    case OPT_CACHE:
        if (parse_cache(cfg, arg) < 0)
            return bad("-cache", arg, "not mem[,object]: sizes with K, M or G, mem 1M-64G, "
                                      "object 4K-mem");
        return -1;
    case OPT_STATUS_FROM: /* the pages, to these networks too: -S implied */
        if (each_item(cfg, arg, INET6_ADDRSTRLEN + 4, status_from_item) < 0)
            return bad("-status-from", arg, "not addresses or addr/bits, comma-separated, "
                                            "at most 32");
        cfg->status_page = 1;
        return -1;
    case OPT_POOL:
        if (cfg->npools == CONFIG_POOLS || too_long(arg, CONFIG_PATTERN_MAX) ||
            proxy_pool_check(arg) < 0) /* which says why */
            return bad("-pool", arg, "not a pool (at most 1024 bytes; --pool at most 16 times)");
        cfg->pool_def[cfg->npools++] = arg;
        return -1;
    case OPT_CGI_USER:
        if (!*arg || too_long(arg, OPT_NAME_MAX))
            return bad("-cgi-user", arg, "not a user name");
        cfg->cgi_user = arg;
        return -1;
    case OPT_CGI_LIMITS:
        if (each_item(cfg, arg, 32, cgi_limit_item) < 0)
            return bad("-cgi-limits", arg, "not cpu=secs,mem=bytes,procs=n,files=n (any of "
                                           "them; 0: no limit)");
        return -1;
    case OPT_FLOOD_MEMORY:
        if ((cfg->offence_s = (int)number(arg, 0, 3600)) < 0)
            return bad("-flood-memory", arg, "not a number of seconds from 0 to 3600");
        return -1;
    case OPT_H3_RETRY:
        if (!strcmp(arg, "busy") || !strcmp(arg, "never") || !strcmp(arg, "always"))
            cfg->h3_retry = arg[0] == 'b' ? CONFIG_RETRY_BUSY
                            : arg[0] == 'n' ? CONFIG_RETRY_NEVER : CONFIG_RETRY_ALWAYS;
        else
            return bad("-h3-retry", arg, "not busy, never or always");
        return -1;
    case 'Q':
        if (parse_dyn_timeouts(cfg, arg) < 0)
            return bad("Q", arg, "not a time in seconds (1-86400), or two: secs,tunnel");
        return -1;
    case 'w':
        if (cfg->ncgi_regex == CONFIG_CGI_MAX || !pattern_ok(arg))
            return bad("w", arg, "not a POSIX extended regular expression (at most 1024 "
                                 "bytes; -w at most 8 times)");
        cfg->cgi_regex[cfg->ncgi_regex++] = arg;
        return -1;
    case 'P':
        if (cfg->nproxy_rules == CONFIG_PROXY_RULES || too_long(arg, CONFIG_PATTERN_MAX) ||
            proxy_rule_check(arg) < 0) /* which says why */
            return bad("P", arg, "not a proxy rule (at most 1024 bytes; -P at most 16 times)");
        cfg->proxy_rule[cfg->nproxy_rules++] = arg;
        return -1;
    }
    return 1;
}

static int parse_ftp(config_t *cfg, const char *arg);

/* -f: FTP.  1 if c is not it, else -1 to go on or an exit code. */
static int ftp_option(int c, const char *arg, config_t *cfg)
{
    if (c != 'f')
        return 1;
    if (parse_ftp(cfg, arg) < 0)
        return bad("f", arg, "not port[,upload[=bytes]] (a port 0-65535; bytes >= 1, "
                             "with K, M or G)");
    return -1;
}

/* A long option's name, for getopt's ':' (NULL: c is a short option). */
static const char *long_name(int c)
{
    static const char *const names[] = {"cache",  "status-from", "flood-memory", "h3-retry",
                                        "pool",   "config",      "check",        "log-format",
                                        "cgi-user", "cgi-limits"};
    _Static_assert(sizeof names / sizeof names[0] == OPT_CGI_LIMITS - OPT_CACHE + 1,
                   "a name for each long option of main's");
    if (c >= OPT_CACHE && c <= OPT_CGI_LIMITS)
        return names[c - OPT_CACHE];
    if (compress_option_name(c))
        return compress_option_name(c);
    return cluster_option_name(c) ? cluster_option_name(c) : acme_option_name(c);
}

/* getopt's ':' (an argument missing) or '?' (an unknown option): the exit code;
   an options file's line is named (opt_where). */
static int getopt_trouble(int c)
{
    if (c == ':' && long_name(optopt))
        fprintf(stderr, "gatling: %s--%s needs an argument\n", opt_where, long_name(optopt));
    else if (c == ':')
        fprintf(stderr, "gatling: %s-%c needs an argument\n", opt_where, optopt);
    else if (optopt)
        fprintf(stderr, "gatling: %sunknown option -%c\n", opt_where, optopt);
    else
        fprintf(stderr, "gatling: %sunknown long option (there are --config, --check, --reload, "
                "--log-format, --cache, --status-from, --flood-memory, --h3-retry, --pool, "
                "--cgi-user, --cgi-limits, --cluster... and --acme...)\n", opt_where);
    opt_where[0] = 0;
    return usage_error();
}

/* One option from getopt().  Returns -1 to go on, or an exit code. */
static int option(int c, char *arg, config_t *cfg)
{
    int rc;
    if ((rc = int_option(c, arg, cfg)) != 1 || (rc = name_option(c, arg, cfg)) != 1 ||
        (rc = flag_option(c, cfg)) != 1 || (rc = dynamic_option(c, arg, cfg)) != 1 ||
        (rc = ftp_option(c, arg, cfg)) != 1 || (rc = acme_option(c, arg, cfg)) != 1 ||
        (rc = file_option(c, arg, cfg)) != 1 ||
        (rc = cluster_option(c, arg, cfg)) != 1 || (rc = compress_option(c, arg, cfg)) != 1)
        return rc;
    switch (c) {
    case 'i':
        if (!is_address(arg))
            return bad("i", arg, "not an IPv4 or IPv6 address");
        cfg->addr = arg;
        break;
    case 'I':
        if (!*arg || strchr(arg, '/') || arg[0] == '.' || too_long(arg, OPT_NAME_MAX))
            return bad("I", arg, "not a plain file name");
        cfg->index2 = arg;
        break;
    case 'r':
        if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
            return bad("r", arg, "not an http:// or https:// URL");
        if (too_long(arg, OPT_URL_MAX) || !header_safe(arg))
            return bad("r", "...", "longer than 1024 bytes, or has spaces or control characters");
        cfg->redirect = arg;
        break;
    case 'a':
#ifdef TCP_DEFER_ACCEPT
        if ((cfg->defer_accept = (int)number(arg, 0, 3600)) < 0)
            return bad("a", arg, "not a number of seconds from 0 to 3600");
        cfg->defer_accept_given = 1;
#else
        return bad("a", arg, "TCP_DEFER_ACCEPT: not on this system");
#endif
        break;
    case 'F': /* a long, unlike the int_options */
        if ((cfg->mem_file_max = number(arg, 0, 1 << 20)) < 0)
            return bad("F", arg, "not a size in bytes from 0 to 1048576");
        break;
    case 'C':
        if (too_long(arg, PATH_MAX - 16))
            return bad("C", "...", "path too long");
        cfg->tls_dir = arg;
        break;
    case 'e':
        return tls_listen_option(cfg, arg);
    case 'o':
    case 'O':
        if (too_long(arg, TLS_CIPHERS_MAX) || !header_safe(arg) || !*arg)
            return bad(c == 'o' ? "o" : "O", "...", "empty, too long or with spaces");
        *(c == 'o' ? &cfg->tls_ciphers : &cfg->tls_suites) = arg;
        break;
    case 'y':
        if (each_item(cfg, arg, 5, proxy_listener_item) < 0)
            return bad("y", arg, "not http, https or ports (1-65535), comma-separated, "
                                 "at most 8 ports");
        break;
    case 'Y':
        if (each_item(cfg, arg, INET6_ADDRSTRLEN + 4, trust_item) < 0)
            return bad("Y", arg, "not addresses or addr/bits, comma-separated, at most 32");
        break;
    case 'k':
        if (!health_path_ok(arg))
            return bad("k", arg, "not a path starting with / (at most 255 bytes, no spaces, "
                                 "controls, ? or #)");
        cfg->health = arg;
        break;
    case 'V': /* the backend, and whether HTTP/3 is built in (make H3=0, or its libraries) */
        printf("gatling %s (%s)%s\n", GATLING_VERSION, gio_backend_name(), H3_BUILT ? " h3" : "");
        return 0;
    case 'h': usage(); return 0;
    case ':':
    default:
        return getopt_trouble(c);
    }
    return -1;
}

/*
 * -f port[,upload[=bytes]]: FTP on port; uploads (STOR, APPE, MKD into
 * world-writable directories) only with ",upload", files of at most bytes
 * (a K, M or G suffix: powers of 1024).  0, or -1.
 */
static int parse_ftp(config_t *cfg, const char *arg)
{
    const char *comma;
    if ((cfg->ftp_port = (int)number_to_comma(arg, 0, 65535, &comma)) < 0)
        return -1;
    if (!comma)
        return 0;
    if (strncmp(comma + 1, "upload", 6) || (comma[7] && comma[7] != '='))
        return -1;
    cfg->ftp_upload = 1;
    if (!comma[7])
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(comma + 8, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == comma + 8 || *end || v < 1 || v > (1LL << (62 - shift)))
        return -1;
    cfg->ftp_upload_max = v << shift;
    return 0;
}

static const char OPTSTRING[] = ":i:p:a:T:s:B:N:K:A:R:b:j:nGl:q:c:u:m:W:HvtdDI:r:M:SLZF:C:e:"
                                "Eo:O:x:X2y:Y:k:g:w:zJ:Q:P:Vhf:U3";
/* The options whose value is a path: in an options file, relative to it. */
static const char PATH_SHORTOPTS[] = "clqmC";
static const char *const PATH_LONGOPTS[] = {"acme-dir", "acme-ca-root", "acme-dns-key", NULL};

/* getopt over ca's argv into cfg: -1 to go on, or an exit code; with
   --check every option is looked at, and 2 if any was bad. */
static int getopt_all(conf_args_t *ca, config_t *cfg)
{
    static const struct option longopts[] = {
        {"cache", required_argument, NULL, OPT_CACHE},
        {"status-from", required_argument, NULL, OPT_STATUS_FROM},
        {"flood-memory", required_argument, NULL, OPT_FLOOD_MEMORY},
        {"h3-retry", required_argument, NULL, OPT_H3_RETRY},
        {"pool", required_argument, NULL, OPT_POOL},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"check", no_argument, NULL, OPT_CHECK},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"cgi-user", required_argument, NULL, OPT_CGI_USER},
        {"cgi-limits", required_argument, NULL, OPT_CGI_LIMITS},
        ACME_LONGOPTS,
        CLUSTER_LONGOPTS,
        COMPRESS_LONGOPTS,
        {NULL, 0, NULL, 0}};
    int c, rc, failed = 0;
    opterr = 0;
    for (int at = optind; (c = getopt_long(ca->argc, ca->argv, OPTSTRING, longopts, NULL)) != -1;
         at = optind) {
        conf_where(ca, at, opt_where, sizeof opt_where);
        if ((rc = option(c, optarg, cfg)) < 0)
            continue;
        if (rc && opt_where[0]) /* a message of another module's: name the line too */
            fprintf(stderr, "gatling: %sthe option above\n", opt_where);
        if (rc != 2 || !cfg->check)
            return rc;
        failed = 1;
    }
    opt_where[0] = 0;
    if (optind < ca->argc) {
        fprintf(stderr, "gatling: unexpected argument '%s'\n", ca->argv[optind]);
        return usage_error();
    }
    return failed ? 2 : -1;
}

/*
 * Parse the options file (--config) and argv into cfg; ca keeps the file's
 * words, which cfg points into.  Returns -1 to go on, or an exit code (with
 * --check: 2 after every problem found in the options is said).
 */
static int parse_options(int argc, char **argv, config_t *cfg, conf_args_t *ca)
{
    int rc, bad_config;
    config_defaults(cfg);
    const char *file = conf_named(argc, argv, &bad_config);
    if (bad_config) {
        fputs("gatling: --config needs a file\n", stderr);
        return usage_error();
    }
    if (conf_load(ca, file, argc, argv, OPTSTRING, PATH_SHORTOPTS, PATH_LONGOPTS) < 0)
        return 2;
    for (int i = 1; i < ca->argc && strcmp(ca->argv[i], "--"); i++)
        cfg->check |= !strcmp(ca->argv[i], "--check");
    int failed = (rc = getopt_all(ca, cfg)) == 2;
    if (rc >= 0 && (!failed || !cfg->check)) /* only --check goes on to say every problem */
        return rc;
    if (cfg->ftp_upload && cfg->ftp_no_upload) {
        fputs("gatling: -U forbids the uploads that -f ...,upload allows: give one\n", stderr);
        return usage_error();
    }
    if ((rc = acme_options_done(cfg)) >= 0 && (!cfg->check || rc != 2))
        return rc == 2 ? usage_error() : rc;
    failed |= rc == 2;
    if ((rc = cluster_option(0, NULL, cfg)) >= 0 && (!cfg->check || rc != 2))
        return rc == 2 ? usage_error() : rc;
    failed |= rc == 2;
    if (cfg->npools && !cfg->nproxy_rules)
        fputs("gatling: --pool without a -P rule naming it: no request goes to it\n", stderr);
    if ((cfg->npools || cfg->nproxy_rules) && proxy_config_check(cfg) < 0) {
        if (!cfg->check)
            return usage_error();
        failed = 1;
    }
    int proxied = cfg->proxy_http || cfg->proxy_https || cfg->nproxy_ports;
    if (proxied != (cfg->ntrust > 0)) {
        fputs(proxied ? "gatling: -y needs -Y: the addresses of the proxies to trust\n"
                      : "gatling: -Y without -y: no listener expects a PROXY header\n",
              stderr);
        return usage_error();
    }
    return failed ? 2 : -1;
}

/* --cgi-user: looked up now, as -u; only root can become it, and CGI as root
   (or as the server itself) would defeat its purpose.  And -W with CGI:
   /proc for the workers' spawners, opened before the chroot (site/spawn.h). */
static int cgi_user(config_t *cfg)
{
    cfg->cgi_uid = cfg->cgi_gid = -1;
    if (cfg->workers > 1 && (cfg->ncgi_regex || cfg->cgi_exec)) /* before -W's chroot */
        cfg->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!cfg->cgi_user)
        return 0;
    struct passwd *pw = getpwnam(cfg->cgi_user);
    const char *why = !pw                     ? "no such user"
                      : pw->pw_uid == 0       ? "is root"
                      : (int)pw->pw_uid == cfg->uid ? "is -u's user: CGI could signal the server"
                      : geteuid() != 0        ? "only root can start CGI as another user"
                                              : NULL;
    if (why) {
        fprintf(stderr, "gatling: --cgi-user %s: %s\n", cfg->cgi_user, why);
        return -1;
    }
    cfg->cgi_uid = (int)pw->pw_uid, cfg->cgi_gid = (int)pw->pw_gid;
    return 0;
}

/* -u, -l, -q: look up the user while /etc is still visible, then open the
   logs by site/privfs.h's rules (as that user where their directory is not
   root's alone).  -W's supervisor keeps the error log's directory: it stays
   root, and reopens through it, never by name in a chroot. */
static int prepare(config_t *cfg)
{
    char why[512];
    /* before any fork: no process of ours (CGI included) reads our memory or
       traces us (keys, other clients' credentials); server_drop_privileges
       sets it again after -u */
    gio_proc_private();
    cfg->uid = cfg->gid = -1;
    cfg->error_dir = -1;
    if (cfg->user) {
        struct passwd *pw = getpwnam(cfg->user);
        if (!pw) {
            fprintf(stderr, "gatling: -u %s: no such user\n", cfg->user);
            return -1;
        }
        cfg->uid = (int)pw->pw_uid, cfg->gid = (int)pw->pw_gid;
    }
    cfg->log_fd = cfg->access_log ? STDOUT_FILENO : -1;
    if (cfg->access_log && cfg->log_file &&
        (cfg->log_fd = pfs_open_log(cfg->log_file, -1, cfg->uid, cfg->gid, NULL, why,
                                    sizeof why)) < 0) {
        fprintf(stderr, "gatling: -l %s: the access log cannot be opened: %s\n", cfg->log_file,
                why);
        return -1;
    }
    if ((cfg->error_fd = elog_open(cfg->error_log, cfg->uid, cfg->gid,
                                   cfg->workers > 1 ? &cfg->error_dir : NULL, why, sizeof why)) <
        0) {
        fprintf(stderr, "gatling: -q %s: the error log cannot be opened: %s\n", cfg->error_log,
                why);
        return -1;
    }
    return cgi_user(cfg);
}

/* Who reads the certificates at start: -u's user where it owns them (--acme's
   STATE/live) or others than root may write the directory (links and FIFOs
   it planted are then followed as that user, not as root); -1: root. */
static int cert_reader(const config_t *cfg)
{
    int trusted = 0, fd;
    if (!cfg->tls_dir || cfg->uid < 0 || geteuid() != 0)
        return -1;
    if (cfg->tls_dir_acme)
        return cfg->uid;
    if ((fd = pfs_open_dir(cfg->tls_dir, 0, cfg->uid, cfg->gid, &trusted)) >= 0)
        close(fd);
    return fd >= 0 && !trusted ? cfg->uid : -1;
}

/* HTTPS: the certificates, read while the files are still visible and
   readable (before a chroot and -u). */
static int load_certificates(config_t *cfg)
{
    if (cfg->tls_off)
        return 0;
    char real[PATH_MAX];
    const char *docroot = realpath(cfg->root ? cfg->root : ".", real);
    int missing;
    pfs_ids_t ids;
    if (pfs_become(&ids, cert_reader(cfg), cfg->gid) < 0) {
        fprintf(stderr, "gatling: -C %s: cannot become -u's user: %s\n", cfg->tls_dir,
                strerror(errno));
        return -1;
    }
    cfg->tls = tls_store_load(cfg->tls_dir, cfg, docroot, &missing);
    pfs_unbecome(&ids);
    int n = tls_store_count(cfg->tls);
    if (cfg->tls && !n) /* the port is bound now all the same: before a chroot and -u */
        fprintf(stderr,
                "gatling: HTTPS: no certificate in %s yet: handshakes are refused%s until one "
                "appears (looked for every %d s and on SIGUSR1)\n",
                cfg->tls_dir, cfg->acme_chal ? ", but for ACME's TLS-ALPN-01 challenges," : "",
                tls_store_check_period(cfg->tls));
    else if (cfg->tls)
        fprintf(stderr, "gatling: HTTPS with %d certificate%s from %s\n", n, n == 1 ? "" : "s",
                cfg->tls_dir ? cfg->tls_dir : "server.pem");
    if (cfg->tls)
        return 0;
    if (!missing)
        return -1;
    if (cfg->tls_port_given) {
        fprintf(stderr, "gatling: -e %d: no certificate: give -C dir, or put server.pem here\n",
                cfg->tls_port);
        return -1;
    }
    return 0; /* no certificates, no HTTPS */
}

/* A socket passed on the HTTPS port without certificates would serve plain
   HTTP where clients expect TLS: refuse. */
static int check_passed_https(const config_t *cfg, const int *fds, int n)
{
    for (int i = 0; i < n && !cfg->tls; i++) {
        listener_t l = {.fd = fds[i]};
        if (server_port(&l) == cfg->tls_port) {
            fprintf(stderr,
                    "gatling: a passed socket is on the HTTPS port %d, but there is no "
                    "certificate (-C dir) or HTTPS is off (-E)\n",
                    cfg->tls_port);
            return -1;
        }
    }
    return 0;
}

/* -c: change into the document root; as root, also chroot there. */
static int enter_root(const config_t *cfg)
{
    if (!cfg->root)
        return 0;
    if (chdir(cfg->root) < 0) {
        fprintf(stderr, "gatling: chdir(\"%s\") failed: %s\n", cfg->root, strerror(errno));
        return -1;
    }
    if (geteuid() == 0) {
        if (chroot(".") < 0 || chdir("/") < 0) {
            fprintf(stderr, "gatling: chroot(\"%s\") failed: %s\n", cfg->root, strerror(errno));
            return -1;
        }
        handover_chrooted();
    }
    return 0;
}

/* The CGI spawner confines itself as main() does below: -c, then -u. */
static int confine(const config_t *cfg)
{
    return enter_root(cfg) < 0 || server_drop_privileges(cfg) < 0 ? -1 : 0;
}

/* -w, -z: the CGI spawner, started before the chroot and -u (site/spawn.h). */
static int start_spawner(config_t *cfg)
{
    pid_t pid;
    if (!cfg->ncgi_regex && !cfg->cgi_exec)
        return 0;
    if (spawn_start(cfg, confine, &cfg->spawn_fd, &pid) < 0)
        return -1;
    cfg->spawn_pid = (int)pid;
    return 0;
}

/* -m's file could not be loaded (mime_load's errno e): say why. */
static void mime_failed(const config_t *cfg, int e)
{
    fprintf(stderr, "gatling: -m: cannot read MIME types from %s: %s\n",
            cfg->mime_file ? cfg->mime_file : "/etc/mime.types",
            e == EINVAL ? "not a regular file" : strerror(e));
}

/* --check, -c: the document root is a directory gatling can enter. */
static int check_root(const config_t *cfg)
{
    int fd = open(cfg->root ? cfg->root : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fchdir(fd) < 0) {
        fprintf(stderr, "gatling: -c %s: %s\n", cfg->root ? cfg->root : ".", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/*
 * --check: the start-up's own steps as far as the listeners (the MIME
 * types, the logs and -u, --acme's state, the certificates, the document
 * root), each problem said on stderr; nothing is bound, nothing served.
 * failed: the options had problems already.  Returns 0 or 2.
 */
static int check_run(config_t *cfg, int failed)
{
    mime_table_t *mime = mime_load(cfg->mime_file);
    if (!mime)
        mime_failed(cfg, errno);
    failed |= !mime;
    mime_free(mime);
    if (prepare(cfg) < 0)
        failed = 1;
    else {
        if (cfg->log_fd > STDERR_FILENO)
            close(cfg->log_fd);
        if (cfg->error_fd > STDERR_FILENO)
            close(cfg->error_fd);
    }
    if (acme_prepare(cfg) < 0 || load_certificates(cfg) < 0)
        failed = 1;
    acme_end(cfg); /* its challenges' directory: no client was started */
    tls_store_free(cfg->tls);
    cfg->tls = NULL;
    if (check_root(cfg) < 0 || check_dictionaries() < 0)
        failed = 1;
    fprintf(stderr, failed ? "gatling: --check: the configuration has the problems above\n"
                           : "gatling: --check: the configuration is good\n");
    return failed ? 2 : 0;
}

/* "listening on ..." for each listener (the tests wait for these lines). */
static void say_listening(const config_t *cfg, const listener_t *lst, int n, int passed)
{
    for (int i = 0; i < n; i++)
        fprintf(stderr, "gatling %s (%s): listening on %s port %d%s%s\n", GATLING_VERSION,
                gio_backend_name(),
                passed      ? "a passed socket,"
                : cfg->addr ? cfg->addr
                            : "::",
                server_port(&lst[i]), lst[i].tls ? " (https)" : lst[i].ftp ? " (ftp)" : "",
                passed ? " (-i and -p ignored)" : "");
}

/* The options, and --check's run: -1 to start, or an exit code. */
static int configure(int argc, char **argv, config_t *cfg, conf_args_t *ca)
{
    int rc = parse_options(argc, argv, cfg, ca);
    if (cfg->check && (rc < 0 || rc == 2))
        rc = check_run(cfg, rc == 2);
    if (rc >= 0)
        conf_free(ca);
    return rc;
}

/* --acme: its state directory before the certificates (without -C they are
   its live/), then the cluster's side process and the ACME client (which
   reads the side process's page), before a chroot, -u and -W: the processes
   that talk to the network never hold the served keys and the ticket
   secret, which are loaded after the forks.  0, or -1 with all of it ended. */
static int start_sides(config_t *cfg, const int *fds, int n)
{
    if (acme_prepare(cfg) < 0 || cluster_launch(cfg) < 0 || acme_launch(cfg) < 0 ||
        load_certificates(cfg) < 0 || check_passed_https(cfg, fds, n) < 0) {
        acme_end(cfg);
        cluster_end(cfg);
        tls_store_free(cfg->tls);
        return -1;
    }
    return 0;
}

#ifdef GATLING_GCOV
/* make coverage (COV=1) links the server with -Wl,--wrap=_exit: a process that ends by
   _exit (the ACME client, a -W worker, a child whose exec failed) writes its gcov counters
   first, as exit() does, or the code that only they run would count as never run. */
void __gcov_dump(void);
void __real__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status)
{
    __gcov_dump();
    __real__exit(status);
}
#endif

int main(int argc, char **argv)
{
    config_t cfg;
    static conf_args_t ca; /* static: cfg points into its words until the exit */
    if (argc >= 2 && !strcmp(argv[1], "--reload")) { /* a command of its own: reload.h */
        if (argc <= 3)
            return reload_run(argv[2]);
        fputs("gatling: --reload pid: a command of its own, nothing after the pid\n", stderr);
        return usage_error();
    }
    handover_capture(); /* an upgrade's new process: what it says goes to the old one too */
    int rc = configure(argc, argv, &cfg, &ca);
    if (rc >= 0)
        return rc;
    handover_init(argv); /* before anything changes the directory */
    int fds[SERVER_MAX_LISTENERS], groups;
    int n = handover_listeners(fds, SERVER_MAX_LISTENERS, &groups);
    server_passed_ports(&cfg, fds, n); /* -e 0, -f 0: the ports an old process got */
    quic_group_t qg = {.nfds = 0}; /* HTTP/3's sockets, if an old binary passed them */
    if (n < 0 || (qg.nfds = handover_datagrams(qg.fds, QUIC_STEER_MAX, &qg.bank)) < 0)
        return 1;
    qg.passed = qg.nfds > 0;
    mime_table_t *mime = mime_load(cfg.mime_file); /* before a chroot hides /etc */
    int mime_errno = errno;
    if (prepare(&cfg) < 0) {
        mime_free(mime);
        return 1;
    }
    if (!mime) {
        mime_failed(&cfg, mime_errno);
        return 1;
    }
    server_catch_usr1_early(); /* the sides' SIGUSR1 must not end this process */
    if (start_sides(&cfg, fds, n) < 0) {
        mime_free(mime);
        return 1;
    }
    if (cfg.workers > 1) {
        handover_capture_end(); /* the workers keep stderr */
        rc = enter_root(&cfg) < 0 ? 1 : worker_supervise(&cfg, mime, fds, n, groups, &qg);
        cluster_end(&cfg);
        acme_end(&cfg);
        tls_store_free(cfg.tls);
        mime_free(mime);
        return rc;
    }
    listener_t lst[SERVER_MAX_LISTENERS];
    server_t s;
    int passed = n > 0;
    if (passed)
        server_adopt(&cfg, fds, n, lst);
    quic_ep_t *quic = NULL;
    if ((!passed && server_listen(&cfg, lst, &n, 0, SERVER_BACKLOG) < 0) ||
        (quic = server_quic_open(&cfg, lst, n, &qg, 0), start_spawner(&cfg) < 0) ||
        enter_root(&cfg) < 0 || server_drop_privileges(&cfg) < 0 ||
        server_init(&s, &cfg, mime, lst, n) < 0 || server_quic_start(&s, quic) < 0) {
        quic_free(quic);
        quic_group_close(&qg);
        acme_end(&cfg); /* the cluster's side process ends with us (PR_SET_PDEATHSIG) */
        tls_store_free(cfg.tls);
        mime_free(mime);
        return 1;
    }
    s.upgradable = 1;
    s.qgroup = &qg;
    say_listening(&cfg, lst, n, passed);
    if (s.quic)
        server_quic_steer(&qg);
    handover_ready();
    rc = server_run(&s);
    cluster_end(&cfg);
    acme_end(&cfg);
    server_free(&s);
    quic_group_close(&qg);
    tls_store_free(cfg.tls);
    mime_free(mime);
    conf_free(&ca);
    return rc;
}
