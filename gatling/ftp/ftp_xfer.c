/*
 * The FTP data link and transfers (ftp.h): passive listeners that accept
 * only the control peer, active connections only to it, downloads through
 * an output batch (sendfile), listings, uploads written by the loop with a
 * size cap, and the deadlines of each.
 */
#define _GNU_SOURCE
#include "ftp_list.h"
#include "ftp_xfer.h"
#include "gio_os.h"
#include "tls/tls.h"
#include "handlers/htaccess.h"
#include "site/encoding.h"
#include "site/fs.h"
#include "site/vhost.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FTP_RATE_WINDOW_MS 10000             /* -B is checked over windows this long (or -T) */
#define FTP_SEND_BUDGET (256 << 10)          /* bytes a download may send per event */
#define FTP_RECV_CHUNK (64 << 10)            /* bytes an upload reads per read(2) */
#define FTP_RECV_BUDGET (4 * FTP_RECV_CHUNK) /* ... and per event */
#define FTP_DATA_UNSENT (128 << 10)          /* as server.c's SERVER_UNSENT_MAX */

static gio_loop_t *loop_of(const ftp_sess_t *s)
{
    return s->site->loop;
}

static int64_t setup_ms(const ftp_sess_t *s)
{
    return ftp_capped_ms(s, (int64_t)s->site->cfg->head_timeout * 1000);
}

static void data_deadline(ftp_sess_t *s, int64_t ms)
{
    gio_set_deadline(loop_of(s), s->dfd, gio_now(loop_of(s)) + ms);
}

/* p with a '/' at its end for a directory (htaccess_check starts there). */
static const char *as_checked(const char *p, int dir, char *buf, size_t cap)
{
    size_t n = strlen(p);
    if (!dir || p[n - 1] == '/' || n + 2 > cap)
        return p;
    memcpy(buf, p, n);
    memcpy(buf + n, "/", 2);
    return buf;
}

/*
 * Would HTTP ask for a password (an .htaccess governs path, or the file its
 * symlinks lead to)?  Then it is not for anonymous FTP either.  500s (an
 * unreadable .htaccess) count as protected.
 */
static int protected(ftp_sess_t *s, int fd, const char *path, int dir)
{
    char real[FTP_PATH_MAX + 2], b1[FTP_PATH_MAX + 2], b2[FTP_PATH_MAX + 2], realm[2];
    const char *paths[2] = {as_checked(path, dir, b1, sizeof b1), NULL};
    if (path[1] && fs_path_below(s->root, fd, path + 1, real, sizeof real - 1) == 0 &&
        strcmp(real, path))
        paths[1] = as_checked(real, dir, b2, sizeof b2);
    for (int i = 0; i < 2 && paths[i]; i++)
        if (htaccess_check(s->root, paths[i], strlen(paths[i]), NULL, 0, realm, sizeof realm))
            return 1;
    return 0;
}

fs_at_t ftp_at(const ftp_sess_t *s)
{
    /* vname is the name vhost_open() was given (open_root): "ip:port" fits */
    return site_at(s->site, vhost_dir(s->vhost_dir, s->vname));
}

int ftp_open(ftp_sess_t *s, const char *path, struct stat *st)
{
    if (ftp_path_hidden(path)) {
        errno = ENOENT;
        return -1;
    }
    int fd = fs_open_beneath(s->root, path[1] ? path + 1 : ".", site_root_check(s->site));
    if (fd < 0)
        return -1;
    fs_at_t at = ftp_at(s);
    if (fstat(fd, st) < 0 || !fs_public(&at, path + 1, fd, 0) ||
        protected(s, fd, path, S_ISDIR(st->st_mode))) {
        close(fd);
        errno = EACCES;
        return -1;
    }
    return fd;
}

/* The 16 address bytes of a, IPv4 as ::ffff:a.b.c.d. */
static void addr16(const ftp_addr_t *a, unsigned char out[16])
{
    if (a->sa.sa_family == AF_INET) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &a->in4.sin_addr, 4);
    } else {
        memcpy(out, &a->in6.sin6_addr, 16);
    }
}

static int same_host(const ftp_addr_t *a, const ftp_addr_t *b)
{
    unsigned char x[16], y[16];
    addr16(a, x);
    addr16(b, y);
    return memcmp(x, y, 16) == 0;
}

static int is_ipv4(const ftp_addr_t *a)
{
    return a->sa.sa_family == AF_INET || IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr);
}

void ftp_link_close(ftp_sess_t *s)
{
    if (s->dssl && !s->dtls_hs)
        tls_close_notify(s->dssl); /* the end of a download, as RFC 4217 wants it */
    tls_free(s->dssl);
    s->dssl = NULL;
    s->dtls_hs = 0;
    if (s->dfd >= 0)
        gio_close(loop_of(s), s->dfd);
    s->dfd = -1;
    s->link = LINK_NONE;
}

/* Register the data link's descriptor; -1 (closed) on failure. */
static int link_add(ftp_sess_t *s, int fd, ftp_link_t link)
{
    if (gio_add(loop_of(s), fd, &s->dk) < 0) {
        close(fd);
        return -1;
    }
    s->dfd = fd;
    s->link = link;
    return 0;
}

/*
 * Passive ports are ours to pick, round the range below, with SO_REUSEADDR:
 * the server closes a download's data connection first, so each leaves a
 * TIME_WAIT on its port, and the kernel's own choice (port 0) slows to
 * milliseconds a bind once they fill its ephemeral range, on the one loop.
 * A port in TIME_WAIT is bound again at once; one in use is skipped, also
 * when that shows only at listen(): two sockets with SO_REUSEADDR may bind
 * one port while neither listens (another process's PASV at the same
 * moment).  Each process starts at its own place in the range.
 */
#define FTP_PASV_LO 49152
#define FTP_PASV_N 16384
#define FTP_PASV_TRIES 64

/* A socket of the control connection's family, bound to its local address
   on port (0: the kernel's choice), listening if asked.  -1 with errno. */
static int bound_socket(ftp_sess_t *s, uint16_t port, int listening)
{
    ftp_addr_t a = s->local;
    int zero = 0, one = 1,
        fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (a.sa.sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (port)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a.sa.sa_family == AF_INET)
        a.in4.sin_port = htons(port);
    else
        a.in6.sin6_port = htons(port);
    if (bind(fd, &a.sa, a.sa.sa_family == AF_INET ? sizeof a.in4 : sizeof a.in6) < 0 ||
        (listening && listen(fd, 1) < 0)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* A passive listener: on a port of the range, or the kernel's when every
   port tried is in use.  -1 with errno. */
static int passive_socket(ftp_sess_t *s)
{
    static _Thread_local unsigned next;
    if (!next)
        next = (unsigned)getpid() * 2654435761u | 1;
    for (int k = 0; k < FTP_PASV_TRIES; k++) {
        int fd = bound_socket(s, (uint16_t)(FTP_PASV_LO + next++ % FTP_PASV_N), 1);
        if (fd >= 0 || errno != EADDRINUSE)
            return fd;
    }
    return bound_socket(s, 0, 1);
}

/* EPSV's argument: none, "ALL", or the protocol (1 IPv4, 2 IPv6).  0 to go on. */
static int epsv_arg(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    int v4 = is_ipv4(&s->local);
    if (!cmd->arg || !cmd->arglen)
        return 0;
    if (cmd->arglen == 3 && !strncasecmp(cmd->arg, "ALL", 3)) {
        s->epsv_all = 1;
        ftp_reply(s, "200 EPSV ALL ok.");
        return -1;
    }
    if (cmd->arglen == 1 && (cmd->arg[0] == '1' || cmd->arg[0] == '2')) {
        if ((cmd->arg[0] == '1') == v4)
            return 0;
        ftp_reply(s, "522 Network protocol not supported, use (%d)", v4 ? 1 : 2);
        return -1;
    }
    ftp_reply(s, "501 EPSV takes ALL, 1 or 2.");
    return -1;
}

int ftp_cmd_pasv(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    int epsv = cmd->verb == FTP_EPSV;
    if (epsv ? epsv_arg(s, cmd) < 0 : 0)
        return 0;
    if (!epsv && s->epsv_all)
        return ftp_reply(s, "503 EPSV ALL in effect: PASV refused.");
    if (!epsv && !is_ipv4(&s->local)) /* 227 can only say IPv4 (RFC 2428) */
        return ftp_reply(s, "425 PASV is IPv4 only: use EPSV.");
    ftp_link_close(s);
    s->active.sa.sa_family = 0;
    ftp_addr_t a;
    socklen_t alen = sizeof a;
    int fd = passive_socket(s);
    if (fd < 0 || getsockname(fd, &a.sa, &alen) < 0 || link_add(s, fd, LINK_LISTEN) < 0) {
        site_error(s->site, "a passive data socket", errno, &s->peer.sa, NULL);
        if (fd >= 0 && s->dfd != fd)
            close(fd);
        return ftp_reply(s, "425 Cannot open a passive connection.");
    }
    gio_limit_unsent(fd, FTP_DATA_UNSENT);
    gio_want(loop_of(s), fd, GIO_READ);
    data_deadline(s, setup_ms(s));
    unsigned port = ntohs(a.sa.sa_family == AF_INET ? a.in4.sin_port : a.in6.sin6_port);
    if (epsv)
        return ftp_reply(s, "229 Entering Extended Passive Mode (|||%u|)", port);
    unsigned char ip[16];
    addr16(&a, ip);
    return ftp_reply(s, "227 Entering Passive Mode (%u,%u,%u,%u,%u,%u).", ip[12], ip[13], ip[14],
                     ip[15], port >> 8, port & 255);
}

int ftp_cmd_port(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    unsigned char ip[16];
    unsigned port;
    int family = 4;
    ftp_addr_t to = {0};
    if (s->epsv_all)
        return ftp_reply(s, "503 EPSV ALL in effect: %s refused.", cmd->name);
    int bad = cmd->verb == FTP_PORT ? ftp_parse_port(cmd->arg, cmd->arglen, ip, &port)
                                    : ftp_parse_eprt(cmd->arg, cmd->arglen, &family, ip, &port);
    if (bad < 0)
        return ftp_reply(s, "501 Syntax error in %s.", cmd->name);
    if (family == 4) {
        to.in4.sin_family = AF_INET;
        memcpy(&to.in4.sin_addr, ip, 4);
        to.in4.sin_port = htons((uint16_t)port);
    } else {
        to.in6.sin6_family = AF_INET6;
        memcpy(&to.in6.sin6_addr, ip, 16);
        to.in6.sin6_port = htons((uint16_t)port);
    }
    /* no FTP bounce: only the client itself, and not at a privileged port */
    if (!same_host(&to, &s->peer) || port < 1024) {
        s->site->stats.ftp_bounce++;
        return ftp_reply(s, "500 Illegal %s command: only to your own address.", cmd->name);
    }
    ftp_link_close(s);
    s->active = to;
    return ftp_reply(s, "200 %s command successful. Consider using EPSV.", cmd->name);
}

/* Active mode: connect to the client, from the control connection's address. */
static int link_connect(ftp_sess_t *s)
{
    ftp_addr_t to = s->active;
    int fd = bound_socket(s, 0, 0);
    if (fd < 0)
        return -1;
    if (to.sa.sa_family != s->local.sa.sa_family) { /* an IPv4 client on [::] */
        unsigned char a16[16];
        addr16(&to, a16);
        to.in6 = (struct sockaddr_in6){.sin6_family = AF_INET6, .sin6_port = to.in4.sin_port};
        memcpy(&to.in6.sin6_addr, a16, 16);
    }
    gio_limit_unsent(fd, FTP_DATA_UNSENT);
    if (connect(fd, &to.sa, to.sa.sa_family == AF_INET ? sizeof to.in4 : sizeof to.in6) < 0 &&
        errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    if (link_add(s, fd, LINK_CONNECTING) < 0)
        return -1;
    gio_want(loop_of(s), fd, GIO_WRITE);
    data_deadline(s, setup_ms(s));
    return 0;
}

/* No control characters in a name an upload makes: listings could not show it. */
static int plain_name(const char *name)
{
    for (; *name; name++)
        if ((unsigned char)*name < 0x20 || *name == 0x7f)
            return 0;
    return 1;
}

/* Would name (in dir) be a precompressed sibling of a file there, which HTTP
   serves in the file's place (site/encoding.h)?  HTTP checks the owner as
   well; this holds where uploads are the owner's too (no -u). */
static int shadows(int dir, const char *name)
{
    static const int codings[] = {ENC_GZIP, ENC_BR, ENC_ZSTD};
    size_t n = strlen(name);
    for (size_t k = 0; k < sizeof codings / sizeof codings[0]; k++) {
        const char *suf = enc_suffix(codings[k]);
        size_t sl = strlen(suf);
        char orig[256];
        struct stat st;
        if (n <= sl || n - sl >= sizeof orig || strcmp(name + n - sl, suf))
            continue;
        memcpy(orig, name, n - sl);
        orig[n - sl] = 0;
        if (fstatat(dir, orig, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return 1;
    }
    return 0;
}

int ftp_upload_dir(ftp_sess_t *s, const char *path, const char **name)
{
    struct stat st;
    char parent[FTP_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!s->site->cfg->ftp_upload) {
        s->site->stats.ftp_refused++;
        ftp_reply(s, "550 Uploads are not allowed here.");
        return -1;
    }
    if (!slash || !slash[1] || strlen(slash + 1) > 255 || ftp_path_hidden(path) ||
        !plain_name(slash + 1)) {
        ftp_reply(s, "553 File name not allowed.");
        return -1;
    }
    size_t n = (size_t)(slash - path);
    memcpy(parent, path, n);
    strcpy(parent + n, n ? "" : "/");
    int dir = ftp_open(s, parent, &st);
    if (dir >= 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH)) {
        if (shadows(dir, slash + 1)) {
            close(dir);
            s->site->stats.ftp_refused++;
            ftp_reply(s, "553 File name not allowed: a compressed variant of a file here.");
            return -1;
        }
        *name = slash + 1;
        return dir;
    }
    if (dir >= 0)
        close(dir);
    s->site->stats.ftp_refused++;
    ftp_reply(s, "550 Permission denied: not a world-writable directory.");
    return -1;
}

/* STOR (a new file only) or APPE (a regular file of ours, or a new one). */
static int open_upload(ftp_sess_t *s, ftp_verb_t verb, const char *path)
{
    const char *name;
    struct stat st;
    int dir = ftp_upload_dir(s, path, &name);
    if (dir < 0)
        return -1;
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = openat(dir, name, flags | (verb == FTP_STOR ? O_EXCL : O_APPEND), 0644);
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)) {
        close(fd);
        fd = -1, errno = EACCES;
    }
    if (fd < 0) {
        close(dir);
        s->site->stats.ftp_refused++;
        ftp_reply(s, errno == EEXIST ? "553 File exists: uploads never overwrite."
                                     : "553 Could not create file.");
        return -1;
    }
    s->ufd = fd, s->udir = dir;
    s->ubase = (uint64_t)st.st_size;
    snprintf(s->uname, sizeof s->uname, "%s", name);
    return 0;
}

/*
 * RETR's file from the open-file cache (site/fcache.h), as HTTP's: a file
 * asked for again within a second costs no open, fstat or .htaccess walk,
 * and a small one goes out from memory.  The key starts with a byte no Host
 * name has, so FTP's entries (checked by ftp_open) and HTTP's never meet.
 */
#define FTP_KEY_MAX (1 + sizeof((ftp_sess_t *)0)->vname + FTP_PATH_MAX)

static size_t cache_key(const ftp_sess_t *s, const char *path, char *key)
{
    size_t vn = strnlen(s->vname, sizeof s->vname - 1), pn = strnlen(path, FTP_PATH_MAX - 1);
    key[0] = 1;
    memcpy(key + 1, s->vname, vn);
    memcpy(key + 1 + vn, path, pn);
    return 1 + vn + pn;
}

static fcache_entry_t *retr_file(ftp_sess_t *s, const char *path)
{
    char key[FTP_KEY_MAX];
    size_t n = cache_key(s, path, key);
    int64_t now = gio_now(loop_of(s));
    fcache_entry_t *e = fcache_get(s->site->fcache, key, n, now);
    if (e)
        return e;
    fcache_entry_t t = {.fd = -1};
    t.fd = ftp_open(s, path, &t.st);
    if (t.fd < 0 || !S_ISREG(t.st.st_mode) || !(t.rel = strdup(path + 1))) {
        if (t.fd >= 0)
            close(t.fd);
        return NULL;
    }
    if (!(e = fcache_put(s->site->fcache, key, n, &t, now))) {
        close(t.fd);
        free(t.rel);
    }
    return e;
}

/* RETR: the file range onto the batch.  0, or -1 after replying. */
static int prepare_retr(ftp_sess_t *s, const char *path)
{
    fcache_entry_t *e = retr_file(s, path);
    if (!e)
        return ftp_reply(s, "550 Failed to open file."), -1;
    uint64_t size = (uint64_t)e->st.st_size, off = s->rest;
    if (off > size) {
        fcache_release(e);
        return ftp_reply(s, "554 Restart position beyond the end of the file."), -1;
    }
    int r = e->data ? gio_batch_add_buf(&s->dout, e->data + off, size - off, 0)
                    : gio_batch_add_file(&s->dout, e->fd, off, size - off, 0);
    if (r < 0) {
        fcache_release(e);
        return ftp_reply(s, "451 Out of memory."), -1;
    }
    s->file = e; /* released once the batch no longer points into it */
    ftp_reply(s, "150 Opening BINARY mode data connection for %s (%llu bytes).", path,
              (unsigned long long)(size - off));
    return 0;
}

/* LIST, NLST, MLSD: the listing onto the batch.  0, or -1 after replying. */
static int prepare_list(ftp_sess_t *s, ftp_verb_t verb, const char *path)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    int fd = ftp_open(s, path, &st);
    if (fd < 0 || (verb == FTP_MLSD && !S_ISDIR(st.st_mode))) {
        if (fd >= 0)
            close(fd);
        return ftp_reply(s, "550 No such directory."), -1;
    }
    int64_t now = gio_wallclock(loop_of(s));
    int r = 0;
    if (S_ISDIR(st.st_mode)) {
        fs_at_t at = ftp_at(s);
        r = ftp_list_dir(fd, &at, path, verb, now, &buf, &len);
    } else if ((buf = malloc(FTP_PATH_MAX + 160))) { /* LIST of one file */
        long n = ftp_list_line(buf, FTP_PATH_MAX + 160, verb, &st, strrchr(path, '/') + 1, now);
        len = n > 0 ? (size_t)n : 0;
    }
    close(fd);
    if (r < 0 || (len && !buf) || gio_batch_add_buf(&s->dout, buf, len, GIO_BATCH_FREE) < 0) {
        free(buf);
        return ftp_reply(s, "451 Cannot read the directory."), -1;
    }
    ftp_reply(s, "150 Here comes the directory listing.");
    return 0;
}

/* The transfer starts: the data link is open. */
static void recv_some(ftp_sess_t *s);

static void begin(ftp_sess_t *s)
{
    s->xfer_waiting = 0;
    s->xfer = s->ufd >= 0 ? XFER_RECV : XFER_SEND;
    s->moved = s->window_at = 0;
    gio_want(loop_of(s), s->dfd, s->xfer == XFER_RECV ? GIO_READ : GIO_WRITE);
    data_deadline(s, ftp_capped_ms(s, FTP_RATE_WINDOW_MS));
    /* an upload's first records (a small file, its close_notify too) may have come with
       the client's Finished: read ahead into OpenSSL's buffer by the handshake, they
       leave the kernel's empty, and no readiness would ever report them */
    if (s->xfer == XFER_RECV && s->dssl && tls_pending(s->dssl) > 0)
        recv_some(s);
}

void ftp_cmd_transfer(ftp_sess_t *s, const ftp_cmd_t *cmd, const char *path)
{
    uint64_t rest = s->rest;
    s->rest = 0;
    if (s->link == LINK_NONE && !s->active.sa.sa_family) {
        ftp_reply(s, "425 Use PORT, EPRT, PASV or EPSV first.");
        return;
    }
    int r;
    if (cmd->verb == FTP_RETR) {
        s->rest = rest;
        r = prepare_retr(s, path);
        s->rest = 0;
    } else if (cmd->verb == FTP_STOR || cmd->verb == FTP_APPE) {
        r = rest ? (ftp_reply(s, "501 REST is for RETR only."), -1)
                 : open_upload(s, cmd->verb, path);
        if (r == 0)
            ftp_reply(s, "150 Ok to send data.");
    } else {
        r = prepare_list(s, cmd->verb, path);
    }
    if (r < 0)
        return;
    s->xverb = cmd->verb;
    s->xstarted_us = gio_now_us(loop_of(s));
    snprintf(s->xpath, sizeof s->xpath, "%s", path);
    s->xfer_waiting = 1;
    gio_set_deadline(loop_of(s), s->fd, 0);
    if (s->link == LINK_OPEN && !s->dtls_hs)
        begin(s);
    else if (s->link == LINK_NONE && link_connect(s) < 0)
        ftp_xfer_abort(s, 425, "Cannot open the data connection.");
}

/* The access log's line and the counters for a transfer that ended with code. */
static void log_transfer(ftp_sess_t *s, int code)
{
    status_counters_t *st = &s->site->stats;
    uint64_t bytes = s->xfer == XFER_SEND ? s->dout.bytes_sent : s->moved;
    if (code == 226 && s->xverb == FTP_RETR)
        st->ftp_downloads++;
    else if (code == 226 && (s->xverb == FTP_STOR || s->xverb == FTP_APPE))
        st->ftp_uploads++;
    status_count(st, gio_wallclock(loop_of(s)), STATS_FTP, 0, bytes,
                 gio_now_us(loop_of(s)) - s->xstarted_us);
    static const char *const names[] = {
        [FTP_RETR] = "RETR", [FTP_STOR] = "STOR", [FTP_APPE] = "APPE",
        [FTP_LIST] = "LIST", [FTP_NLST] = "NLST", [FTP_MLSD] = "MLSD"};
    alog_ftp(&s->site->log, gio_wallclock(loop_of(s)), &s->peer.sa, s->user,
             names[s->xverb] ? names[s->xverb] : "?", s->xpath, code, bytes, s->ssl != NULL);
}

/* Undo a failed upload: a new file goes, an appended one is cut back. */
static void undo_upload(ftp_sess_t *s)
{
    if (s->xverb == FTP_STOR)
        unlinkat(s->udir, s->uname, 0);
    else
        (void)!ftruncate(s->ufd, (off_t)s->ubase); /* failing, the disk is the trouble */
}

/* End the transfer (if any) with code and text (code 0: silently); the
   data link goes with it. */
void ftp_xfer_abort(ftp_sess_t *s, int code, const char *why)
{
    if (s->xfer != XFER_NONE || s->xfer_waiting) {
        if (s->xfer != XFER_NONE)
            log_transfer(s, code ? code : 426);
        if (s->ufd >= 0) { /* the file changed: no cached copy of it may be served */
            char key[FTP_KEY_MAX];
            fcache_forget(s->site->fcache, key, cache_key(s, s->xpath, key));
        }
        if (s->ufd >= 0 && code != 226 && code != 426)
            undo_upload(s); /* a cap or a full disk; an aborted upload keeps what came */
        if (code)
            ftp_reply(s, "%d %s", code, why);
    }
    gio_batch_reset(&s->dout);
    if (s->file)
        fcache_release(s->file);
    s->file = NULL;
    if (s->ufd >= 0)
        close(s->ufd);
    if (s->udir >= 0)
        close(s->udir);
    s->ufd = s->udir = -1;
    s->xfer = XFER_NONE;
    s->xfer_waiting = 0;
    s->active.sa.sa_family = 0;
    ftp_link_close(s);
}

/* The data connection is open: with PROT P its handshake first (the
   client is the TLS client, RFC 4217), then the transfer if one waits. */
static void link_ready(ftp_sess_t *s)
{
    if (s->prot_p && !s->dssl) {
        if (!(s->dssl = tls_new(s->site->proc->tls, s->dfd))) {
            ftp_xfer_abort(s, 425, "Cannot set up TLS on the data connection.");
            return;
        }
        s->dtls_hs = 1;
        gio_want(loop_of(s), s->dfd, GIO_READ);
        return;
    }
    if (s->xfer_waiting)
        begin(s);
    else
        gio_want(loop_of(s), s->dfd, 0);
}

/* The data connection's handshake; it must resume the control connection's
   session (vsftpd's require_ssl_reuse): a connection that did not come from
   the client holding the control session cannot take the transfer. */
static void data_handshake(ftp_sess_t *s)
{
    unsigned want = GIO_READ;
    int r = gio_tls_handshake(s->dssl, &want);
    if (r == GIO_AGAIN) {
        gio_want(loop_of(s), s->dfd, want);
        return;
    }
    s->dtls_hs = 0;
    if (r < 0 || !tls_resumed(s->dssl)) {
        s->site->stats.ftp_refused += r >= 0;
        s->dtls_hs = 1; /* no close_notify on a session refused */
        if (s->xfer_waiting)
            ftp_xfer_abort(s, 522,
                           r < 0 ? "TLS handshake on the data connection failed."
                                 : "Data connections must reuse the TLS session.");
        else
            ftp_link_close(s);
        return;
    }
    link_ready(s);
}

/* A passive listener is readable: the control peer's connection, or a thief's. */
static void accept_data(ftp_sess_t *s)
{
    for (int i = 0; i < 8; i++) {
        ftp_addr_t from;
        socklen_t flen = sizeof from;
        int fd = accept4(s->dfd, &from.sa, &flen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (!same_host(&from, &s->peer)) { /* PASV theft: not the client's address */
            s->site->stats.ftp_pasv_theft++;
            close(fd);
            continue;
        }
        ftp_link_close(s); /* the listener: one connection per transfer */
        if (link_add(s, fd, LINK_OPEN) < 0) {
            if (s->xfer_waiting)
                ftp_xfer_abort(s, 425, "Cannot open the data connection.");
            return;
        }
        data_deadline(s, setup_ms(s));
        link_ready(s);
        return;
    }
}

/* Active mode: the connect finished (or failed). */
static void connected(ftp_sess_t *s)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s->dfd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
        ftp_xfer_abort(s, 425, "Cannot open the data connection.");
        return;
    }
    s->link = LINK_OPEN;
    link_ready(s);
}

/* Bytes the client has taken: for a download, what it acknowledged. */
static uint64_t progress(const ftp_sess_t *s)
{
    if (s->xfer != XFER_SEND)
        return s->moved;
    uint64_t sent = s->dout.bytes_sent, q = sent ? gio_unacked(s->dfd) : 0;
    return sent > q ? sent - q : 0;
}

/* A transfer's window ended: fast enough (-B), or too slow and aborted. */
static void rate_check(ftp_sess_t *s)
{
    int64_t w = ftp_capped_ms(s, FTP_RATE_WINDOW_MS);
    uint64_t need = (uint64_t)s->site->cfg->min_rate * (uint64_t)w / 1000, now = progress(s);
    if (now - s->window_at < (need ? need : 1)) {
        s->site->stats.ftp_timeouts++;
        ftp_xfer_abort(s, 426, "Transfer too slow: aborted.");
        return;
    }
    s->window_at = now;
    data_deadline(s, w);
}

static void send_some(ftp_sess_t *s)
{
    unsigned want = GIO_WRITE;
    long r = s->dssl ? gio_tls_send(s->dssl, &s->dout, FTP_SEND_BUDGET, &want)
                     : gio_batch_send(&s->dout, s->dfd, FTP_SEND_BUDGET);
    if (r == GIO_AGAIN)
        gio_want(loop_of(s), s->dfd, want);
    if (r == GIO_ERR) {
        ftp_xfer_abort(s, 426, "Connection closed; transfer aborted.");
    } else if (gio_batch_done(&s->dout)) {
        ftp_xfer_abort(s, 226, "Transfer complete.");
    }
}

static void recv_some(ftp_sess_t *s)
{
    char buf[FTP_RECV_CHUNK];
    uint64_t cap = (uint64_t)s->site->cfg->ftp_upload_max;
    /* bytes OpenSSL holds decrypted are never reported by the kernel: take them too */
    for (size_t done = 0; done < FTP_RECV_BUDGET || (s->dssl && tls_pending(s->dssl) > 0);) {
        unsigned want = GIO_READ;
        long r = s->dssl ? gio_tls_read(s->dssl, buf, sizeof buf, &want)
                         : gio_read(s->dfd, buf, sizeof buf);
        if (r == GIO_AGAIN) {
            gio_want(loop_of(s), s->dfd, want);
            return;
        }
        if (r == GIO_EOF) {
            ftp_xfer_abort(s, 226, "Transfer complete.");
            return;
        }
        if (r < 0) {
            ftp_xfer_abort(s, 426, "Connection closed; transfer aborted.");
            return;
        }
        if (s->ubase + s->moved + (uint64_t)r > cap) {
            ftp_xfer_abort(s, 552, "Upload over the size limit: removed.");
            return;
        }
        ssize_t w = write(s->ufd, buf, (size_t)r);
        if (w != r) {
            int full = w >= 0 || errno == ENOSPC || errno == EDQUOT;
            ftp_xfer_abort(s, full ? 452 : 451,
                           full ? "Insufficient storage space: upload removed."
                                : "Local error in writing: upload removed.");
            return;
        }
        s->moved += (uint64_t)r;
        done += (size_t)r;
    }
}

/* No transfer on an open or pending link: its set-up deadline, or noise. */
static void link_idle(ftp_sess_t *s, unsigned events)
{
    if (events && s->link == LINK_LISTEN) {
        accept_data(s);
        return;
    }
    if (events && s->link == LINK_CONNECTING) {
        connected(s);
        return;
    }
    if (events && !(events & (GIO_ERROR | GIO_HANGUP))) {
        gio_want(loop_of(s), s->dfd, 0);
        return;
    }
    if (!events)
        s->site->stats.ftp_timeouts++;
    if (s->xfer_waiting)
        ftp_xfer_abort(s, 425, "Failed to establish the data connection.");
    else
        ftp_link_close(s);
}

void ftp_data_event(ftp_sess_t *s, int fd, unsigned events)
{
    if (fd != s->dfd) /* stale: the link changed since the wait */
        return;
    if (s->dtls_hs && events && s->link == LINK_OPEN)
        data_handshake(s);
    else if (s->xfer == XFER_NONE)
        link_idle(s, events);
    else if (!events)
        rate_check(s);
    else if (s->xfer == XFER_SEND)
        send_some(s);
    else
        recv_some(s);
}
