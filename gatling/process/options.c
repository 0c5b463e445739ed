/* The options: the command line and --config's file into a config_t, by the one table of
   options (site/optdef.h).  See options.h. */
#include "options.h"
#include "editdist.h"
#include "acme_setup.h"
#include "cluster_setup.h"
#include "sandbox.h"
#include "gio.h"
#include "quic/quic.h"
#include "site/nets.h"
#include "site/optdef.h"
#include "tls/tls.h"
#include "tls/tls_client.h"
#include "route/cache.h"
#include "route/compress.h"
#include "handlers/proxy.h"
#include "ftp/ftp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Option lengths are checked once, here, so that nothing later has to wonder whether an
   option fits where it is copied: -r ends up in every Location, -I next to request paths. */
#define OPT_URL_MAX 1024 /* -r */
#define OPT_NAME_MAX 255 /* -I, -u */

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

static int is_address(const char *s)
{
    unsigned char a[16];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* A bad option's pointer to the help: site/optdef.h's, said once under --check. */
int usage_error(void)
{
    return opt_usage_error();
}

/*
 * Where the option being parsed was written: "FILE:LINE: " for an options
 * file's (conf_where), "" for the command line's.  File scope so that bad()'s
 * callers need not pass it; bad() empties it once it has named it.
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
    else if ((port = opt_number(s, 1, 65535)) < 0 || cfg->nproxy_ports >= CONFIG_PROXY_PORTS)
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
    return (cfg->tls_port = (int)opt_number(port, 0, 65535)) < 0 ? -1 : 0;
}

/* -e: named as given (parse_tls_listen cuts it at the port's ':'). */
static int set_tls_listen(config_t *cfg, const optdef_t *o, char *arg)
{
    char given[80];
    snprintf(given, sizeof given, "%s", arg);
    if (parse_tls_listen(cfg, arg) < 0)
        return bad("e", given, o->why);
    cfg->tls_port_given = 1;
    return 0;
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

/* -w: a regular expression that compiles, of a sane length. */
static int set_cgi_regex(config_t *cfg, const optdef_t *o, char *arg)
{
    regex_t re;
    if (cfg->ncgi_regex == o->repeat || !*arg || too_long(arg, CONFIG_PATTERN_MAX) ||
        !opt_regex_bounded(arg, OPT_REGEX_NODES) || regcomp(&re, arg, REG_EXTENDED | REG_NOSUB))
        return -1;
    regfree(&re);
    cfg->cgi_regex[cfg->ncgi_regex++] = arg;
    return 0;
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
    return opt_number(digits, min, max);
}

/* -Q secs[,tunnel]: a tunnel may stay idle as long as asked, else an
   hour (HAProxy's usual "timeout tunnel"), and never less than secs. */
static int set_dyn_timeouts(config_t *cfg, const optdef_t *o, char *arg)
{
    const char *comma;
    (void)o;
    if ((cfg->dyn_timeout = (int)number_to_comma(arg, 1, 86400, &comma)) < 0)
        return -1;
    if (comma)
        return (cfg->tunnel_timeout = (int)opt_number(comma + 1, 1, 86400)) < 0 ? -1 : 0;
    cfg->tunnel_timeout = cfg->dyn_timeout > 3600 ? cfg->dyn_timeout : 3600;
    return 0;
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
            return (cfg->cgi_limit[i] = opt_size(s + strlen(k[i].name), 0, k[i].max)) < 0 ? -1
                                                                                           : 0;
    return -1;
}

/* Where a comma-separated value goes, one item at a time (o->id: which). */
enum { LIST_Y, LIST_TRUST, LIST_STATUS, LIST_CGI_LIMITS };

static int set_list(config_t *cfg, const optdef_t *o, char *arg)
{
    static const struct {
        size_t max;
        int (*item)(config_t *, const char *);
    } t[] = {[LIST_Y] = {5, proxy_listener_item},
             [LIST_TRUST] = {INET6_ADDRSTRLEN + 4, trust_item},
             [LIST_STATUS] = {INET6_ADDRSTRLEN + 4, status_from_item},
             [LIST_CGI_LIMITS] = {32, cgi_limit_item}};
    if (each_item(cfg, arg, t[o->id].max, t[o->id].item) < 0)
        return -1;
    if (o->id == LIST_STATUS) /* the pages, to these networks too: -S implied */
        cfg->status_page = 1;
    return 0;
}

/* A value that is one of o->why's words ("not busy, never or always"): its
   index among them into the int field.  0, or -1. */
static int set_word(config_t *cfg, const optdef_t *o, char *arg)
{
    static const char *const words[][4] = {{"combined", "json"}, {"busy", "never", "always"}};
    for (int i = 0; i < 4 && words[o->id][i]; i++)
        if (!strcmp(arg, words[o->id][i]))
            return *OPT_FIELD(cfg, o, int) = i, 0;
    return -1;
}

/* The values main's rows check by their own rule: 0, -1 (not what o->why
   says), or 2 once said. */
static int set_addr(config_t *cfg, const optdef_t *o, char *arg) /* -i */
{
    (void)o;
    return is_address(arg) ? (cfg->addr = arg, 0) : -1;
}

static int set_index(config_t *cfg, const optdef_t *o, char *arg) /* -I: a plain file name */
{
    (void)o;
    if (!*arg || strchr(arg, '/') || arg[0] == '.' || too_long(arg, OPT_NAME_MAX))
        return -1;
    return cfg->index2 = arg, 0;
}

static int set_redirect(config_t *cfg, const optdef_t *o, char *arg) /* -r */
{
    (void)o;
    if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
        return -1;
    if (too_long(arg, OPT_URL_MAX) || !header_safe(arg))
        return bad("r", "...", "longer than 1024 bytes, or has spaces or control characters");
    return cfg->redirect = arg, 0;
}

static int set_defer(config_t *cfg, const optdef_t *o, char *arg) /* -a */
{
    (void)o;
#ifdef TCP_DEFER_ACCEPT
    cfg->defer_accept_given = 1;
    return (cfg->defer_accept = (int)opt_number(arg, 0, 3600)) < 0 ? -1 : 0;
#else
    return bad("a", arg, "TCP_DEFER_ACCEPT: not on this system");
#endif
}

static int set_mem_file(config_t *cfg, const optdef_t *o, char *arg) /* -F: a long */
{
    return (cfg->mem_file_max = opt_number(arg, (long)o->min, (long)o->max)) < 0 ? -1 : 0;
}

static int set_certs(config_t *cfg, const optdef_t *o, char *arg) /* -C */
{
    return too_long(arg, PATH_MAX - 16) ? bad("C", "...", o->why) : (cfg->tls_dir = arg, 0);
}

static int set_ciphers(config_t *cfg, const optdef_t *o, char *arg) /* -o, -O */
{
    if (too_long(arg, TLS_CIPHERS_MAX) || !header_safe(arg) || !*arg)
        return bad(o->sname == 'o' ? "o" : "O", "...", o->why);
    return *(o->sname == 'o' ? &cfg->tls_ciphers : &cfg->tls_suites) = arg, 0;
}

/* -k: an absolute path without query, spaces or control characters. */
static int set_health(config_t *cfg, const optdef_t *o, char *arg)
{
    (void)o;
    if (arg[0] != '/' || too_long(arg, CONFIG_HEALTH_MAX) || !header_safe(arg) ||
        strchr(arg, '?') || strchr(arg, '#'))
        return -1;
    return cfg->health = arg, 0;
}

static void usage(void);

/* -h, -V, --list-options (1: done), --config (read before the others:
   conffile.h), --check (found before them too), --reload (a command of its
   own, first: 2), by the row's id. */
enum { ACT_NONE, ACT_VERSION, ACT_HELP, ACT_LIST, ACT_RELOAD };

static int set_action(config_t *cfg, const optdef_t *o, char *arg)
{
    (void)cfg, (void)arg;
    if (o->id == ACT_VERSION) /* the backend, and whether HTTP/3 is built in (make H3=0) */
        printf("gatling %s (%s)%s\n", GATLING_VERSION, gio_backend_name(), H3_BUILT ? " h3" : "");
    else if (o->id == ACT_HELP)
        usage();
    else if (o->id == ACT_LIST)
        options_list(stdout);
    else if (o->id == ACT_RELOAD) {
        fprintf(stderr, "gatling: %s--reload pid: a command of its own: gatling --reload "
                "pid, nothing before it\n", opt_where);
        opt_where[0] = 0;
        return usage_error();
    }
    return o->id != ACT_NONE;
}

/* The options of main's own, in -h's order: the file and the check (after
   the synopsis), the general ones, HTTPS's, dynamic content's, FTP's, the
   last ones; the modules' rows go between them (sections[], below). */
static const optdef_t head_opts[] = {
    OPT_ROW_FN(0, "config", OPT_PATH, OPT_RELOAD, 0, set_action, 0, NULL,
        "  --config file  read options from file first (one or more a line, # comments,\n"
        "            'quotes'; relative paths relative to it); the command line's win\n"),
    OPT_ROW_FN(0, "check", OPT_ACTION, OPT_ANY | OPT_NO_VALUE, 0, set_action, 0, NULL,
        "  --check   check the options, certificates, document root and the files they\n"
        "            name, as the start would; exit 0, or 2 naming every problem\n"),
    OPT_LAST};

static const optdef_t general_opts[] = {
    OPT_ROW_FN('i', NULL, OPT_WORD, OPT_IN_FILE, 0, set_addr, 0,
               "not an IPv4 or IPv6 address",
        "  -i addr   listen on this IPv4 or IPv6 address (default: all, IPv6 and IPv4)\n"),
    {'p', NULL, OPT_NUMBER, OPT_IN_FILE, 0, 0, 65535, OPT_INT(port), 0, NULL, 0,
     "not a port number (0-65535)",
        "  -p port   listen on this port (default: 80 as root, 8000 otherwise; 0: any)\n"},
    OPT_ROW_FN('a', NULL, OPT_SECONDS, OPT_ANY, 0, set_defer, 0,
               "not a number of seconds from 0 to 3600",
        "  -a secs   accept a connection once its first bytes arrived, or after secs\n"
        "            (TCP_DEFER_ACCEPT; default 1; 0: at once)\n"),
    OPT_ROW_NUM('T', NULL, OPT_SECONDS, 0, 86400, timeout, "not a timeout in seconds (0-86400)",
        "  -T secs   close keep-alive connections idle this long (default 23; 0: never)\n"),
    OPT_ROW_NUM('s', NULL, OPT_SECONDS, 1, 3600, head_timeout, "not a time in seconds (1-3600)",
        "  -s secs   a request head must arrive within secs (default 10, or -T)\n"),
    OPT_ROW_NUM('B', NULL, OPT_BYTES, 0, 1 << 30, min_rate, "not a rate in bytes per second",
        "  -B rate   bodies and responses must move rate bytes/s (default 512; 0: any)\n"),
    OPT_ROW_NUM('N', NULL, OPT_NUMBER, 1, 1 << 24, max_conns,
                "not a connection count (1-16777216)",
        "  -N n      at most n open connections, then 503 (default: the fd limit - 64)\n"),
    OPT_ROW_NUM('K', NULL, OPT_NUMBER, 0, 1 << 24, max_conns_addr, "not a connection count",
        "  -K n      at most n open connections per client address or /64 (default: no cap)\n"),
    OPT_ROW_NUM('A', NULL, OPT_NUMBER, 0, 1 << 24, rpm, "not a number of requests per minute",
        "  -A rpm    at most rpm requests per minute per client address; above it the\n"
        "            client is tarpitted until -T (with -T 0, dropped) (default: no limit)\n"),
    OPT_ROW_NUM('R', NULL, OPT_NUMBER, 0, 1 << 30, max_requests, "not a request count",
        "  -R n      at most n requests per keep-alive connection (default 10000; 0: no cap)\n"),
    OPT_ROW_NUM('b', NULL, OPT_NUMBER, 0, 1 << 20, free_fails, "not a number of failed logins",
        "  -b n      after n failed logins a client address waits 1, 2, 4 ... 60 s\n"
        "            between password checks, answered 429 (default 5; 0: no waits)\n"),
    OPT_ROW_NUM(0, "flood-memory", OPT_SECONDS, 0, 3600, offence_s,
                "not a number of seconds from 0 to 3600",
        "  --flood-memory secs  a client address whose connection a flood defence ended\n"
        "            gets half the budgets per offence on its next connections, then is\n"
        "            refused; one offence is forgotten per secs (default 10; 0: off)\n"),
    {0, "h3-retry", OPT_WORD, OPT_ANY, 0, 0, 0, OPT_INT(h3_retry), 0, set_word, 1,
     "not busy, never or always",
        "  --h3-retry when  QUIC Retry (address validation) for new connections: busy\n"
        "            (many handshakes, or many Initials from one address), never, always\n"},
    OPT_ROW_NUM('j', NULL, OPT_NUMBER, 1, 64, threads, "not a thread count (1-64)",
        "  -j n      threads for password checks and compression (default 2)\n"),
    OPT_ROW_FLAG('n', NULL, access_log, 0,
        "  -n        no access log (default: Combined Log Format on stdout)\n"),
    OPT_ROW_STR('l', NULL, OPT_LOG, PATH_MAX - 1, log_file, "not a usable file name",
        "  -l file   append the access log to file; SIGUSR1 reopens it\n"),
    OPT_ROW_FLAG('G', NULL, log_vhost, 1,
        "  -G        log in vhost_combined format (the vhost first on each line)\n"),
    {0, "log-format", OPT_WORD, OPT_ANY, 0, 0, 0, OPT_INT(log_json), 0, set_word, 0,
     "not combined or json",
        "  --log-format combined|json  the access log's format (json: an object a line)\n"},
    OPT_ROW_STR('q', NULL, OPT_LOG, PATH_MAX - 1, error_log, "not a usable file name",
        "  -q file   append the error log to file (default: stderr); SIGUSR1 reopens it\n"),
    OPT_ROW_STR(0, "pid-file", OPT_LOG, PATH_MAX - 1, pid_file, "not a usable file name",
        "  --pid-file file  write the serving process's pid to file (the new one's after\n"
        "            an upgrade), removed at exit; --reload file reads it\n"),
    OPT_ROW_STR('c', NULL, OPT_PATH, PATH_MAX - 1, root, "not a usable directory name",
        "  -c dir    serve dir; as root, chroot into it after opening the listeners\n"),
    OPT_ROW_FLAG(0, "no-chroot", no_chroot, 1,
        "  --no-chroot  as root too, serve -c's dir without a chroot (a PHP socket or a\n"
        "            CGI interpreter outside it stays reachable; the upgrade works)\n"),
    OPT_ROW_STR('u', NULL, OPT_WORD, OPT_NAME_MAX, user, "not a user name",
        "  -u user   run as user after opening the listeners\n"),
    OPT_ROW_STR('m', NULL, OPT_PATH, PATH_MAX - 1, mime_file, "not a usable file name",
        "  -m file   read MIME types from file (default /etc/mime.types)\n"),
    OPT_ROW_NUM('W', NULL, OPT_NUMBER, 1, 64, workers, "not a worker count (1-64)",
        "  -W n      run n worker processes sharing the port (default 1)\n"),
    OPT_ROW_FLAG('H', NULL, vhosts, 0,
        "  -H        no virtual hosting: serve every Host from the document root\n"),
    OPT_ROW_FLAG('v', NULL, vhost_only, 1,
        "  -v        virtual hosts only: never serve from the document root itself\n"),
    OPT_ROW_FLAG('t', NULL, keep_host_port, 1,
        "  -t        keep the Host header's port when choosing the vhost directory\n"),
    OPT_ROW_FLAG('d', NULL, listings, 1,
        "  -d / -D   a directory without an index: a listing / 403 (-D, the default)\n"),
    OPT_ROW_FLAG('D', NULL, listings, 0, NULL),
    OPT_ROW_FN('I', NULL, OPT_WORD, OPT_ANY, 0, set_index, 0, "not a plain file name",
        "  -I name   also try name as a directory's index (after index.html)\n"),
    OPT_ROW_FN('r', NULL, OPT_URL, OPT_ANY, 0, set_redirect, 0,
               "not an http:// or https:// URL",
        "  -r url    redirect requests for missing files to url + path\n"),
    OPT_ROW_NUM('M', NULL, OPT_SECONDS, 0, 315360000, max_age, "not a max-age in seconds",
        "  -M secs   send Cache-Control: max-age=secs and Expires\n"),
    OPT_ROW_FLAG('S', NULL, status_page, 1,
        "  -S        serve /server-status (HTML, ?json) and /metrics (Prometheus) to loopback\n"),
    OPT_ROW_FN(0, "status-from", OPT_NETS, OPT_ANY, CONFIG_TRUST_MAX, set_list, LIST_STATUS,
               "not addresses or addr/bits, comma-separated, at most 32",
        "  --status-from nets  ... and to these addresses or addr/bits too (comma-separated;\n"
        "            -S implied), e.g. the Prometheus server's\n"),
    OPT_ROW_FLAG('L', NULL, symlinks_out, 1,
        "  -L        follow symlinks that lead out of the document root\n"),
    OPT_ROW_FLAG('Z', NULL, gzip, 0,
        "  -Z        no compression (neither precompressed files nor gzip, nor the dcz\n"
        "            deltas of a directory's .dictionary rules: gatling(8))\n"),
    {'F', NULL, OPT_BYTES, OPT_ANY, 0, 0, 1 << 20, OPT_NOFIELD, 0, set_mem_file, 0,
     "not a size in bytes from 0 to 1048576",
        "  -F bytes  keep files up to bytes in memory and send each with its head in\n"
        "            one write (default 16384, 32 MiB in all; 0: never; at most 1 MiB)\n"},
    OPT_LAST};

static const optdef_t https_opts[] = {
    OPT_ROW_FN('C', NULL, OPT_PATH, OPT_ANY, 0, set_certs, 0, "path too long",
        "  -C dir    HTTPS certificates: dir/server.pem (chain and key), dir/NAME.pem,\n"
        "            dir/NAME/fullchain.pem + privkey.pem (default: ./server.pem if any)\n"),
    OPT_ROW_FN('e', NULL, OPT_NUMBER, OPT_IN_FILE, 0, set_tls_listen, 0,
               "not [addr:]port (an IPv4 address, [IPv6], a port 0-65535)",
        "  -e [addr:]port  serve HTTPS on this port (and address, else -i's), and\n"
        "            fail if it cannot be bound (default: 443 as root, 4433\n"
        "            otherwise, skipped if busy; 0: any)\n"),
    OPT_ROW_FLAG('E', NULL, tls_off, 1,
        "  -E        no HTTPS\n"),
    OPT_ROW_FN('o', NULL, OPT_WORD, OPT_ANY, 0, set_ciphers, 0,
               "empty, too long or with spaces",
        "  -o list   TLS 1.2 ciphers (default: Mozilla intermediate)\n"),
    OPT_ROW_FN('O', NULL, OPT_WORD, OPT_ANY, 0, set_ciphers, 0,
               "empty, too long or with spaces",
        "  -O list   TLS 1.3 cipher suites (default: OpenSSL's three)\n"),
    OPT_ROW_NUM('x', NULL, OPT_SECONDS, 0, 0x7fffffff, hsts, "not a number of seconds",
        "  -x secs   send Strict-Transport-Security: max-age=secs over HTTPS\n"),
    OPT_ROW_FLAG('X', NULL, https_redirect, 1,
        "  -X        answer plain HTTP with a redirect to HTTPS\n"),
    OPT_ROW_FLAG('2', NULL, h2_off, 1,
        "  -2        no HTTP/2 (ALPN h2 on HTTPS, h2c by prior knowledge on HTTP)\n"),
    OPT_ROW_FLAG('3', NULL, h3_off, 1,
        "  -3        no HTTP/3 (QUIC on UDP at the HTTPS port's number, Alt-Svc)\n"),
    OPT_ROW_FN('y', NULL, OPT_WORD, OPT_ANY, CONFIG_PROXY_PORTS, set_list, LIST_Y,
               "not http, https or ports (1-65535), comma-separated, at most 8 ports",
        "  -y which  these listeners are behind a proxy: each connection starts with a\n"
        "            PROXY header (v1 or v2) whose client address is the one logged and\n"
        "            limited; which: http, https, or port numbers, comma-separated\n"),
    OPT_ROW_FN('Y', NULL, OPT_NETS, OPT_ANY, CONFIG_TRUST_MAX, set_list, LIST_TRUST,
               "not addresses or addr/bits, comma-separated, at most 32",
        "  -Y nets   trust PROXY headers from these addresses or networks only\n"
        "            (addr or addr/bits, comma-separated; required with -y)\n"),
    OPT_ROW_FN('k', NULL, OPT_WORD, OPT_ANY, 0, set_health, 0,
               "not a path starting with / (at most 255 bytes, no spaces, controls, ? or #)",
        "  -k path   answer GET path with 200 \"ok\" (503 \"draining\" once a drain has\n"
        "            begun), without touching the disk: a load balancer's health check\n"),
    OPT_ROW_NUM('g', NULL, OPT_SECONDS, 0, 3600, drain_grace, "not a time in seconds (0-3600)",
        "  -g secs   on TERM or HUP, fail the health check for secs before the\n"
        "            listeners close (default 0: close at once)\n"),
    OPT_LAST};

static const optdef_t dynamic_opts[] = {
    OPT_ROW_FN('w', NULL, OPT_RULE, OPT_ANY, CONFIG_CGI_MAX, set_cgi_regex, 0,
               "not a POSIX extended regular expression (at most 1024 bytes; -w at most 8 "
               "times)",
        "  -w regex  run files whose path matches regex (POSIX ERE) as CGI programs\n"
        "            (the original gatling's -C; up to 8 times)\n"),
    OPT_ROW_FLAG('z', NULL, cgi_exec, 1,
        "  -z        run world-executable files that start with #! or are ELF as CGI\n"),
    OPT_ROW_NUM('J', NULL, OPT_NUMBER, 1, 4096, cgi_max, "not a number of CGI processes (1-4096)",
        "  -J n      at most n CGI processes at once, then 503 (default 32)\n"),
    OPT_ROW_STR(0, "cgi-user", OPT_WORD, OPT_NAME_MAX, cgi_user, "not a user name",
        "  --cgi-user user  run CGI programs (and their spawner) as user (root only)\n"),
    OPT_ROW_FN(0, "cgi-limits", OPT_RULE, OPT_ANY, 0, set_list, LIST_CGI_LIMITS,
               "not cpu=secs,mem=bytes,procs=n,files=n (any of them; 0: no limit)",
        "  --cgi-limits cpu=secs,mem=bytes,procs=n,files=n  each CGI's rlimits (default\n"
        "            cpu=60,mem=1G,procs=256,files=1024; 0: none)\n"),
    OPT_ROW_FN('Q', NULL, OPT_SECONDS, OPT_ANY, 0, set_dyn_timeouts, 0,
               "not a time in seconds (1-86400), or two: secs,tunnel",
        "  -Q secs[,tunnel]  a CGI may run, and a backend may stay silent, secs (30);\n"
        "            a WebSocket tunnel may stay idle tunnel secs (3600, at least secs)\n"),
    OPT_LAST};

static const optdef_t last_opts[] = {
    OPT_ROW_FN('V', NULL, OPT_ACTION, OPT_ANY | OPT_NO_VALUE, 0, set_action, ACT_VERSION, NULL,
        "  -V        print the version and the IO backend, and exit\n"),
    OPT_ROW_FN('h', NULL, OPT_ACTION, OPT_ANY | OPT_NO_VALUE, 0, set_action, ACT_HELP, NULL,
        "  -h        print this help, and exit\n"),
    OPT_ROW_FN(0, "reload", OPT_ACTION, 0, 0, set_action, ACT_RELOAD, NULL,
        "  --reload pid  the binary upgrade (USR2) of the gatling with that pid, waited\n"
        "            for: exit 0 once the new process serves, 1 and why if it failed\n"),
    OPT_ROW_FN(0, "list-options", OPT_ACTION, OPT_NO_VALUE, 0, set_action, ACT_LIST, NULL,
               "  --list-options  print this table of options (names, kind of value, whether\n"
               "            the options file may hold it and a reload change it), and exit\n"),
    OPT_LAST};
/* Every module's rows, in -h's order. */
static const optdef_t *const sections[] = {
    head_opts, general_opts, https_opts, tls_early_opts, tls_client_opts, acme_opts, cluster_opts,
    dynamic_opts, proxy_opts, cache_opts, compress_opts, ftp_opts, sandbox_opts, last_opts};

#define OPT_ROWS 128 /* rows in all */
#define OPT_LONG_VAL 1000 /* getopt_long's value of row i without a short name: 1000 + i */

/* The table, read once from sections[]: the rows, getopt's strings, the path
   options of the options file (conffile.h). */
static struct {
    const optdef_t *row[OPT_ROWS];
    int n;
    struct option longopts[OPT_ROWS + 1];
    char optstring[2 * OPT_ROWS + 2];
    char pathshort[OPT_ROWS + 1];
    const char *pathlong[OPT_ROWS + 1];
} tab;

static int is_path(const optdef_t *o)
{
    return (o->kind == OPT_PATH || o->kind == OPT_LOG || o->kind == OPT_USER_DIR ||
            o->kind == OPT_SECRET) && !(o->flags & OPT_NOT_RELATIVE);
}

/* One row into tab's strings. */
static void table_add(const optdef_t *o)
{
    int i = tab.n++, arg = !(o->flags & OPT_NO_VALUE);
    size_t ns = strlen(tab.optstring), nl = 0, np = strlen(tab.pathshort);
    tab.row[i] = o;
    if (o->sname) {
        tab.optstring[ns++] = o->sname;
        if (arg)
            tab.optstring[ns++] = ':';
        if (is_path(o))
            tab.pathshort[np] = o->sname;
    }
    if (o->lname) {
        while (tab.longopts[nl].name)
            nl++;
        tab.longopts[nl] = (struct option){o->lname, arg ? required_argument : no_argument,
                                           NULL, o->sname ? o->sname : OPT_LONG_VAL + i};
        for (nl = 0; is_path(o) && tab.pathlong[nl];)
            nl++;
        if (is_path(o))
            tab.pathlong[nl] = o->lname;
    }
}

static void table(void)
{
    if (tab.n)
        return;
    /* '+': no permuting (a stray word is named where it stands); ':': a
       missing value is told apart from an unknown option */
    strcpy(tab.optstring, "+:");
    for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++)
        for (const optdef_t *o = sections[s]; o->kind != OPT_END; o++)
            if (tab.n < OPT_ROWS)
                table_add(o);
}

/* getopt's c: its row, or NULL. */
static const optdef_t *row_of(int c)
{
    if (c >= OPT_LONG_VAL && c < OPT_LONG_VAL + tab.n)
        return tab.row[c - OPT_LONG_VAL];
    for (int i = 0; c > 0 && c < 128 && i < tab.n; i++)
        if (tab.row[i]->sname == c)
            return tab.row[i];
    return NULL;
}

/* -h's synopsis: every row with -h lines, in the table's order, as
   opt_synopsis_item makes it (so a new row cannot be left out), wrapped;
   --reload, which takes no other option, on a line of its own. */
static void synopsis(void)
{
    char item[160], reload[64] = "";
    int col = printf("usage: gatling");
    for (int i = 0; i < tab.n; i++) {
        int n = opt_synopsis_item(tab.row[i], item, sizeof item);
        if (n < 0)
            continue;
        if (tab.row[i]->lname && !strcmp(tab.row[i]->lname, "reload")) {
            snprintf(reload, sizeof reload, "%.*s", n - 2, item + 1);
            continue;
        }
        if (col + 1 + n > 90)
            col = printf("\n              ") - 1;
        col += printf(" %s", item);
    }
    printf("\n%s%s%s", *reload ? "       gatling " : "", reload, *reload ? "\n" : "");
}

/* -h: the synopsis, every row's lines in order, the signals. */
static void usage(void)
{
    synopsis();
    fputs(
        "Serve the current directory (or -c dir) over HTTP/1.1 and HTTP/2, and over HTTPS when\n"
        "there are certificates.\n",
        stdout);
    for (int i = 0; i < tab.n; i++)
        if (tab.row[i]->help)
            fputs(tab.row[i]->help, stdout);
    fputs(
        "Signals: TERM/INT stop accepting and exit after the responses in flight;\n"
        "HUP closes the listeners and exits once the open connections are done;\n"
        "USR1 reopens the -l and -q log files and reloads changed certificates;\n"
        "USR2 starts the binary again (an upgrade: the new process reads --config's file\n"
        "again and takes over the listeners, this one drains; if it fails, nothing changes).\n"
        "Started by systemd with sockets (LISTEN_FDS), it serves those.  See gatling(8).\n",
        stdout);
}

void options_list(FILE *f)
{
    static const char *const kinds[] = {"end",  "flag", "number", "seconds", "bytes",
                                        "path", "log",  "user-dir", "secret", "url",
                                        "nets", "rule", "word",   "action"};
    _Static_assert(sizeof kinds / sizeof kinds[0] == OPT_ACTION + 1, "a name for each kind");
    table();
    for (int i = 0; i < tab.n; i++) {
        const optdef_t *o = tab.row[i];
        char names[64];
        int k = o->sname ? snprintf(names, sizeof names, "-%c", o->sname) : 0;
        snprintf(names + k, sizeof names - (size_t)k, "%s%s%s", o->sname && o->lname ? "," : "",
                 o->lname ? "--" : "", o->lname ? o->lname : "");
        fprintf(f, "%-20s %-8s %s%s%s", names, kinds[o->kind],
                o->flags & OPT_IN_FILE ? "file" : "-", o->flags & OPT_RELOAD ? ",reload" : "",
                is_path(o) ? ",relative" : "");
        if (o->repeat)
            fprintf(f, " repeat=%d", o->repeat);
        if (o->max && (o->kind == OPT_NUMBER || o->kind == OPT_SECONDS || o->kind == OPT_BYTES))
            fprintf(f, " range=%lld-%lld", o->min, o->max);
        fputc('\n', f);
    }
}

/* " (there are --config, ..., --acme..., ...)": every long option, those of a
   family (--acme-ca, --cluster-name) as their head's "...". */
static void long_names(void)
{
    fputs(" (there are", stderr);
    for (int i = 0, first = 1; i < tab.n; i++) {
        const char *l = tab.row[i]->lname, *dash = l ? strchr(l, '-') : NULL;
        int family = 0, member = 0;
        for (int j = 0; l && j < tab.n; j++) {
            const char *m = tab.row[j]->lname;
            member |= dash && m && strlen(m) == (size_t)(dash - l) && !strncmp(m, l, strlen(m));
            family |= m && j != i && !strncmp(m, l, strlen(l)) && m[strlen(l)] == '-';
        }
        if (l && !member)
            fprintf(stderr, "%s --%s%s", first ? "" : ",", l, family ? "..." : "");
        first &= !l || member;
    }
    fputs(")\n", stderr);
}

/* An unknown or ambiguous long option, word (its value after '=' or as the
   next word, val, or NULL): said with the nearest long options. */
static void unknown_long(const char *word, const char *val)
{
    const char *name = word + 2, *eq = strchr(name, '='), *best = NULL;
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    int bestd = 99, prefixes = 0;
    char list[512] = "";
    for (int i = 0; i < tab.n; i++) {
        const char *l = tab.row[i]->lname;
        if (!l)
            continue;
        int d = editdist(name, n, l), pre = n && !strncmp(l, name, n);
        if (pre && strlen(list) + strlen(l) + 5 < sizeof list)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s--%s",
                     prefixes++ ? ", " : "", l);
        if (d < bestd)
            bestd = d, best = l;
    }
    fprintf(stderr, "gatling: %s%s long option --%.*s%s%s", opt_where,
            prefixes > 1 ? "ambiguous" : "unknown", (int)(n > 64 ? 64 : n), name,
            val ? " " : "", val ? val : "");
    if (prefixes > 1)
        fprintf(stderr, " (%s)\n", list);
    else if (best && bestd <= (n < 6 ? 2 : 3))
        fprintf(stderr, " (did you mean --%s?)\n", best);
    else
        long_names();
}

/* getopt's ':' (a value missing) or '?' (an unknown option): the exit code;
   an options file's line is named (opt_where).  An unknown long option's
   value, the next word of the same line, goes with it. */
static int getopt_trouble(int c, conf_args_t *ca, int at)
{
    const optdef_t *o = row_of(optopt);
    if (c == ':' && o && !o->sname)
        fprintf(stderr, "gatling: %s--%s needs an argument\n", opt_where, o->lname);
    else if (c == ':')
        fprintf(stderr, "gatling: %s-%c needs an argument\n", opt_where, optopt);
    else if (optopt)
        fprintf(stderr, "gatling: %sunknown option -%c\n", opt_where, optopt);
    else {
        const char *w = ca->argv[at], *v = NULL;
        if (!strchr(w, '=') && optind < ca->argc && ca->argv[optind][0] != '-' &&
            ca->line[optind] == ca->line[at] && (ca->line[at] || at > ca->nfile))
            v = ca->argv[optind++];
        unknown_long(w, v);
    }
    opt_where[0] = 0;
    return usage_error();
}

/* One option, o, with its value arg: 0 to go on, or an exit code. */
static int option(const optdef_t *o, char *arg, config_t *cfg, int from_file)
{
    int rc;
    char name[40];
    if (o->sname)
        name[0] = o->sname, name[1] = 0;
    else
        snprintf(name, sizeof name, "-%s", o->lname);
    if (from_file && !(o->flags & OPT_IN_FILE))
        return bad(name, arg ? arg : "", "not in an options file");
    if (o->set)
        rc = o->set(cfg, o, arg);
    else if (o->kind == OPT_FLAG)
        rc = (*OPT_FIELD(cfg, o, int) = o->value, 0);
    else if (o->kind == OPT_NUMBER || o->kind == OPT_SECONDS || o->kind == OPT_BYTES)
        rc = (*OPT_FIELD(cfg, o, int) = (int)opt_number(arg, (long)o->min, (long)o->max)) < 0
                 ? -1 : 0;
    else if (!*arg || too_long(arg, (size_t)o->max))
        rc = -1;
    else
        rc = (*OPT_FIELD(cfg, o, const char *) = arg, 0);
    const char *why = opt_take_why();
    if (rc < 0)
        return bad(name, arg, why ? why : o->why);
    if (rc == 2 && opt_where[0]) /* a message of another module's: name the line too */
        fprintf(stderr, "gatling: %sthe option above\n", opt_where);
    return rc;
}

/* getopt over ca's argv into cfg: -1 to go on, or an exit code; with
   --check every option is looked at, and 2 if any was bad. */
static int getopt_all(conf_args_t *ca, config_t *cfg)
{
    int c, rc, failed = 0;
    opterr = 0;
    optind = 0; /* GNU getopt starts afresh (its place in a grouped -dS too): a
                   second parse in one process (the fuzz harness) begins anew */
    for (int at = 1;; at = optind) {
        c = getopt_long(ca->argc, ca->argv, tab.optstring, tab.longopts, NULL);
        if (at == 0)
            at = 1;
        if (c == -1 && optind < ca->argc) { /* a stray word, where it stands */
            at = optind++;
            conf_where(ca, at, opt_where, sizeof opt_where);
            fprintf(stderr, "gatling: %sunexpected argument '%s'\n", opt_where, ca->argv[at]);
            rc = usage_error();
        } else if (c == -1) {
            break;
        } else {
            const optdef_t *o = row_of(c);
            conf_where(ca, at, opt_where, sizeof opt_where);
            opt_where_line(c, ca->line[at]);
            rc = o && c != '?' && c != ':' ? option(o, optarg, cfg, opt_where[0] != 0)
                                           : getopt_trouble(c, ca, at);
        }
        if (rc == 0)
            continue;
        if (rc == 1) /* -h, -V: done */
            return 0;
        if (!cfg->check)
            return rc;
        failed = 1;
    }
    opt_where[0] = 0;
    return failed ? 2 : -1;
}

/* After every option: what does not go together.  -1 to go on, or an exit code (with
   --check: 2 after saying each problem). */
static int options_done(config_t *cfg, int failed)
{
    int rc;
    if (cfg->ftp_upload && cfg->ftp_no_upload) {
        fputs("gatling: -U forbids the uploads that -f ...,upload allows: give one\n", stderr);
        return usage_error();
    }
    if ((rc = acme_options_done(cfg)) >= 0 && (!cfg->check || rc != 2))
        return rc == 2 ? usage_error() : rc;
    failed |= rc == 2;
    if ((rc = cluster_options_done(cfg)) >= 0 && (!cfg->check || rc != 2))
        return rc == 2 ? usage_error() : rc;
    failed |= rc == 2;
    if (cfg->npools && !cfg->nproxy_rules)
        fputs("gatling: --pool without a -P rule naming it: no request goes to it\n", stderr);
    if ((cfg->npools || cfg->nproxy_rules || cfg->proxy_ca) && proxy_config_check(cfg) < 0) {
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

int options_parse(int argc, char **argv, config_t *cfg, conf_args_t *ca)
{
    int rc, bad_config;
    table();
    config_defaults(cfg);
    acme_options_begin();
    const char *file = conf_named(argc, argv, &bad_config);
    if (bad_config) {
        fputs("gatling: --config needs a file\n", stderr);
        return usage_error();
    }
    int file_bad = conf_load(ca, file, argc, argv, tab.optstring + 2, tab.pathshort,
                             tab.pathlong, tab.longopts);
    if (file_bad < 0)
        return 2;
    for (int i = 1; i < ca->argc && strcmp(ca->argv[i], "--"); i++)
        cfg->check |= !strcmp(ca->argv[i], "--check");
    if (file_bad && !cfg->check)
        return usage_error();
    opt_usage_defer(cfg->check);
    opt_where_file(ca->path);
    int failed = (rc = getopt_all(ca, cfg)) == 2 || file_bad;
    if (rc >= 0 && !failed) /* -h, -V */
        return opt_usage_end(rc);
    if (rc >= 0 && !cfg->check)
        return opt_usage_end(rc);
    return opt_usage_end(options_done(cfg, failed));
}
