/*
 * The FTP control connection: the session's life, sending its reply queue
 * (ftp_sess.c fills it), and the commands that need no data connection
 * (ftp.h; the data link and the transfers are ftp_xfer.c's).
 */
#define _GNU_SOURCE
#include "ftp.h"
#include "ftp_list.h"
#include "ftp_xfer.h"
#include "tls/tls.h"
#include "site/peerlimits.h"
#include "site/vhost.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FTP_LOGIN_MS 30000 /* USER and PASS must be done by then (or -T, if shorter) */

/* The queued replies through TLS: 0 (maybe some left), -1 gone. */
static int flush_tls(ftp_sess_t *s)
{
    gio_batch_t b;
    unsigned want = GIO_WRITE;
    gio_batch_init(&b);
    if (gio_batch_add_buf(&b, s->rep + s->repoff, s->replen - s->repoff, 0) < 0)
        return -1;
    long r = gio_tls_send(s->ssl, &b, 0, &want);
    gio_batch_free(&b);
    if (r == GIO_ERR)
        return -1;
    s->tls_want = r == GIO_AGAIN ? (uint8_t)want : 0;
    if (r > 0)
        s->repoff += (uint32_t)r;
    if (s->repoff == s->replen)
        s->replen = s->repoff = 0;
    return 0;
}

/* Send what is queued.  0 (maybe some left: wait for writability), -1 gone. */
static int flush(ftp_sess_t *s)
{
    if (s->tls_hs) /* nothing may go out in the clear inside a handshake */
        return 0;
    if (s->ssl)
        return s->replen > s->repoff ? flush_tls(s) : 0;
    while (s->repoff < s->replen) {
        ssize_t w =
            send(s->fd, s->rep + s->repoff, s->replen - s->repoff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        s->repoff += (uint32_t)w;
    }
    s->replen = s->repoff = 0;
    if (s->tls_start) { /* "234" has left in the clear: the handshake begins */
        s->tls_start = 0;
        if (!(s->ssl = tls_new(s->site->proc->tls, s->fd)))
            return -1;
        s->tls_hs = 1;
        s->inlen = 0; /* nothing sent before the handshake counts after it */
    }
    return 0;
}

void ftp_refuse(int fd)
{
    static const char msg[] = "421 Too many connections, try again later.\r\n";
    (void)!send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
}

static void sess_free(ftp_sess_t *s)
{
    ftp_set_t *set = s->set;
    ftp_xfer_abort(s, 0, NULL);
    ftp_link_close(s);
    gio_batch_free(&s->dout);
    limits_conn_close(s->site->limits, &s->peer.sa);
    if (s->ssl && !s->tls_hs)
        tls_close_notify(s->ssl);
    tls_free(s->ssl);
    gio_close_sole(s->site->loop, s->fd);
    if (s->root >= 0)
        close(s->root);
    if (s->prev)
        s->prev->next = s->next;
    else
        set->list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->site->nconns--;
    free(s);
}

/* The control connection's deadline and interest for its state. */
static void ftp_ctl_arm(ftp_sess_t *s)
{
    gio_loop_t *l = s->site->loop;
    int64_t ms = 0;
    unsigned want = GIO_READ;
    if (s->tls_hs || s->tls_want)
        want = s->tls_want ? s->tls_want : GIO_READ;
    else if (s->replen > s->repoff)
        want = GIO_WRITE;
    else if (s->xfer_waiting || s->xfer != XFER_NONE)
        want = GIO_READ; /* ABOR, STAT, QUIT may come */
    if (s->inlen == sizeof s->in && !s->skipping)
        want &= ~(unsigned)GIO_READ; /* a line waits for the transfer to end */
    if (s->state == FTP_LOGIN)
        ms = ftp_capped_ms(s, FTP_LOGIN_MS);
    else if (s->xfer == XFER_NONE && !s->xfer_waiting)
        ms = (int64_t)s->site->cfg->timeout * 1000;
    if (s->set->draining && s->xfer == XFER_NONE && !s->xfer_waiting)
        ms = 1; /* closes at once, after "421" */
    if (s->state == FTP_CLOSING)
        ms = ftp_capped_ms(s, 5000); /* the last reply's time to leave */
    gio_want(l, s->fd, want);
    gio_set_deadline(l, s->fd, ms > 0 ? gio_now(l) + ms : 0);
}

/* "127.0.0.1:21" or "[::1]:21", the original gatling's vhost directory for FTP. */
static void local_name(const ftp_addr_t *a, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    if (a->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->in4.sin_addr, ip, sizeof ip);
        snprintf(out, cap, "%s:%u", ip, ntohs(a->in4.sin_port));
    } else if (IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr)) {
        inet_ntop(AF_INET, a->in6.sin6_addr.s6_addr + 12, ip, sizeof ip);
        snprintf(out, cap, "%s:%u", ip, ntohs(a->in6.sin6_port));
    } else {
        inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof ip);
        snprintf(out, cap, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
    }
}

/* The session's directory: by the local address (-H: the root itself). */
static int open_root(ftp_sess_t *s)
{
    const config_t *cfg = s->site->cfg;
    char name[VHOST_NAME_MAX];
    int which;
    local_name(&s->local, name, sizeof name);
    snprintf(s->vname, sizeof s->vname, "%.63s", name);
    s->root = vhost_open(s->site->rootfd, cfg->vhosts ? name : NULL, cfg->vhost_only,
                         site_root_check(s->site), &which);
    s->vhost_dir = (uint8_t)which;
    return s->root;
}

static void on_ctl(watch_t *w, unsigned events);
static void on_data(watch_t *w, unsigned events);

int ftp_new(ftp_set_t *set, site_t *site, int fd, const struct sockaddr *peer, socklen_t plen)
{
    ftp_sess_t *s = calloc(1, sizeof *s);
    socklen_t llen = sizeof s->local;
    if (!s || gio_add(site->loop, fd, &s->w) < 0) {
        free(s);
        limits_conn_close(site->limits, peer);
        close(fd);
        return -1;
    }
    /* clients send ABOR's Telnet "synch" as urgent data (ftplib: the LF
       itself): inline, it stays in the line instead of vanishing */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof one);
    watch_init(&s->w, on_ctl);
    s->fd = fd;
    s->site = site;
    s->set = set;
    s->dk.s = s;
    watch_init(&s->dk.w, on_data);
    s->dfd = s->ufd = s->udir = -1;
    s->root = -1;
    memcpy(&s->peer, peer, plen <= sizeof s->peer ? plen : sizeof s->peer);
    strcpy(s->cwd, "/");
    gio_batch_init(&s->dout);
    s->next = set->list;
    if (s->next)
        s->next->prev = s;
    set->list = s;
    site->nconns++;
    site->stats.ftp_sessions++;
    if (getsockname(fd, &s->local.sa, &llen) < 0 || open_root(s) < 0) {
        ftp_reply(s, "421 No directory serves this address.");
        s->state = FTP_CLOSING;
    } else {
        ftp_reply(s, "220 gatling FTP server ready.");
    }
    if (flush(s) < 0 || (s->state == FTP_CLOSING && s->replen == 0)) {
        sess_free(s);
        return 0;
    }
    ftp_ctl_arm(s);
    return 0;
}

/* RFC 959 5.4: a '"' inside a quoted pathname is doubled. */
static void reply_path(ftp_sess_t *s, int code, const char *path, const char *what)
{
    char q[FTP_PATH_MAX * 2 + 1];
    size_t o = 0;
    for (const char *p = path; *p && o + 2 < sizeof q; p++) {
        if (*p == '"')
            q[o++] = '"';
        q[o++] = *p;
    }
    q[o] = 0;
    ftp_reply(s, "%d \"%s\" %s", code, q, what);
}

/* arg resolved from the working directory into out; replies 553 when it cannot be. */
static int resolve(ftp_sess_t *s, const ftp_cmd_t *cmd, char *out)
{
    if (ftp_path_join(s->cwd, cmd->arg, cmd->arglen, out, FTP_PATH_MAX) < 0) {
        ftp_reply(s, "553 Path too long or not allowed.");
        return -1;
    }
    return 0;
}

static void cmd_cwd(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    char path[FTP_PATH_MAX];
    struct stat st;
    if (resolve(s, cmd, path) < 0)
        return;
    int fd = ftp_open(s, path, &st);
    if (fd < 0 || !S_ISDIR(st.st_mode)) {
        ftp_reply(s, "550 Failed to change directory.");
    } else {
        memcpy(s->cwd, path, strlen(path) + 1);
        ftp_reply(s, "250 Directory successfully changed.");
    }
    if (fd >= 0)
        close(fd);
}

/* SIZE, MDTM, MLST, STAT with a path: about one file or directory. */
static void cmd_about(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    char path[FTP_PATH_MAX], line[FTP_PATH_MAX + 160];
    struct stat st;
    if (resolve(s, cmd, path) < 0)
        return;
    int fd = ftp_open(s, path, &st);
    if (fd >= 0)
        close(fd);
    int isfile = fd >= 0 && S_ISREG(st.st_mode);
    if (fd < 0 || (!isfile && (cmd->verb == FTP_SIZE || cmd->verb == FTP_MDTM))) {
        ftp_reply(s, "550 Could not get file %s.", cmd->verb == FTP_MDTM ? "time" : "size");
        return;
    }
    if (cmd->verb == FTP_SIZE) {
        ftp_reply(s, "213 %lld", (long long)st.st_size);
    } else if (cmd->verb == FTP_MDTM) {
        struct tm tm;
        gmtime_r(&st.st_mtime, &tm);
        ftp_reply(s, "213 %04d%02d%02d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
    } else if (cmd->verb == FTP_MLST) {
        ftp_list_line(line, sizeof line, FTP_MLST, &st, path, gio_wallclock(s->site->loop));
        ftp_reply(s, "250-Listing %s\r\n %.*s\r\n250 End.", path, (int)strcspn(line, "\r"), line);
    } else {
        ftp_list_line(line, sizeof line, FTP_LIST, &st, path, gio_wallclock(s->site->loop));
        ftp_reply(s, "213-Status of %s:\r\n%.*s\r\n213 End of status.", path,
                  (int)strcspn(line, "\r"), line);
    }
}

static void cmd_user(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    if (s->state != FTP_LOGIN) {
        ftp_reply(s, "530 Can't change to another user.");
    } else if (cmd->arg && ((cmd->arglen == 9 && !strncasecmp(cmd->arg, "anonymous", 9)) ||
                            (cmd->arglen == 3 && !strncasecmp(cmd->arg, "ftp", 3)))) {
        s->user_ok = 1;
        snprintf(s->user, sizeof s->user, "%s", cmd->arglen == 3 ? "ftp" : "anonymous");
        ftp_reply(s, "331 Please specify the password.");
    } else {
        s->user_ok = 0;
        s->site->stats.ftp_refused++;
        ftp_reply(s, "530 This FTP server is anonymous only.");
    }
}

static void cmd_pass(ftp_sess_t *s)
{
    if (s->state != FTP_LOGIN) {
        ftp_reply(s, "230 Already logged in.");
    } else if (!s->user_ok) {
        ftp_reply(s, "503 Login with USER first.");
    } else {
        s->state = FTP_READY;
        s->site->stats.ftp_logins++;
        ftp_reply(s, "230 Login successful.");
    }
}

static void cmd_feat(ftp_sess_t *s)
{
    ftp_reply(s,
              "211-Features:\r\n%s EPRT\r\n EPSV\r\n MDTM\r\n MLST type*;size*;modify*;perm*;"
              "\r\n PASV\r\n REST STREAM\r\n SIZE\r\n TVFS\r\n UTF8\r\n211 End",
              tls_store_count(s->site->proc->tls) ? " AUTH TLS\r\n PBSZ\r\n PROT\r\n" : "");
}

static void cmd_help(ftp_sess_t *s)
{
    ftp_reply(s, "214-The following commands are recognized:\r\n"
                 " ABOR ALLO APPE CDUP CWD  EPRT EPSV FEAT HELP LIST MDTM MKD  MLSD MLST\r\n"
                 " MODE NLST NOOP OPTS PASS PASV PORT PWD  QUIT REST RETR SIZE STAT STOR\r\n"
                 " STRU SYST TYPE USER XCUP XCWD XMKD XPWD\r\n214 Help OK.");
}

static void cmd_type(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    const char *a = cmd->arg;
    size_t n = cmd->arglen;
    if (a && (n == 1 || (n == 3 && a[1] == ' ' && (a[2] | 0x20) == 'n')) && (a[0] | 0x20) == 'a') {
        s->ascii = 1;
        ftp_reply(s, "200 Switching to ASCII mode.");
    } else if (a && ((n == 1 && (a[0] | 0x20) == 'i') ||
                     (n == 3 && (a[0] | 0x20) == 'l' && a[1] == ' ' && a[2] == '8'))) {
        s->ascii = 0;
        ftp_reply(s, "200 Switching to Binary mode.");
    } else {
        ftp_reply(s, "504 Only TYPE A and TYPE I are supported.");
    }
}

/* One-letter arguments with one accepted value: MODE S, STRU F. */
static void cmd_only(ftp_sess_t *s, const ftp_cmd_t *cmd, char ok, const char *what)
{
    if (cmd->arg && cmd->arglen == 1 && (cmd->arg[0] & ~0x20) == ok)
        ftp_reply(s, "200 %s set to %c.", what, ok);
    else
        ftp_reply(s, "504 Only %s %c is supported.", what, ok);
}

static void cmd_opts(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    if (cmd->arg && cmd->arglen >= 4 && !strncasecmp(cmd->arg, "UTF8", 4) &&
        (cmd->arglen == 4 || (cmd->arglen == 7 && !strncasecmp(cmd->arg + 4, " ON", 3))))
        ftp_reply(s, "200 Always in UTF8 mode.");
    else
        ftp_reply(s, "501 Option not understood.");
}

static void cmd_rest(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    uint64_t off;
    if (ftp_parse_offset(cmd->arg, cmd->arglen, &off) < 0) {
        ftp_reply(s, "501 REST needs a byte offset.");
        return;
    }
    s->rest = off;
    ftp_reply(s, "350 Restart position accepted (%llu).", (unsigned long long)off);
}

static void cmd_stat(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    if (cmd->arg && cmd->arglen) {
        cmd_about(s, cmd);
        return;
    }
    ftp_reply(s,
              "211-gatling FTP server status:\r\n Logged in as %s\r\n TYPE: %s\r\n"
              " %s\r\n211 End of status.",
              s->state == FTP_LOGIN ? "nobody" : s->user, s->ascii ? "ASCII" : "BINARY",
              s->xfer != XFER_NONE ? "A transfer is in progress" : "No data connection");
}

static void cmd_mkd(ftp_sess_t *s, const ftp_cmd_t *cmd);
static int ftp_cmd_tls(ftp_sess_t *s, const ftp_cmd_t *cmd);

/* Commands allowed before the login; 1 if cmd was one. */
static int any_time(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    switch (cmd->verb) {
    case FTP_USER: cmd_user(s, cmd); break;
    case FTP_PASS: cmd_pass(s); break;
    case FTP_QUIT:
        ftp_reply(s, "221 Goodbye.");
        s->state = FTP_CLOSING;
        break;
    case FTP_SYST: ftp_reply(s, "215 UNIX Type: L8"); break;
    case FTP_FEAT: cmd_feat(s); break;
    case FTP_HELP: cmd_help(s); break;
    case FTP_NOOP: ftp_reply(s, "200 NOOP ok."); break;
    case FTP_OPTS: cmd_opts(s, cmd); break;
    case FTP_AUTH:
    case FTP_PBSZ:
    case FTP_PROT: ftp_cmd_tls(s, cmd); break;
    case FTP_ACCT: ftp_reply(s, "202 ACCT not needed."); break;
    case FTP_UNKNOWN: ftp_reply(s, "500 Unknown command."); break;
    default:
        if (cmd->verb >= FTP_DELE) {
            ftp_reply(s, "502 Command not implemented.");
            break;
        }
        return 0;
    }
    return 1;
}

/* What needs a login but no data connection; 1 if cmd was one. */
static int logged_in(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    switch (cmd->verb) {
    case FTP_PWD: reply_path(s, 257, s->cwd, "is the current directory"); break;
    case FTP_CWD: cmd_cwd(s, cmd); break;
    case FTP_CDUP: {
        ftp_cmd_t up = {.verb = FTP_CWD, .arg = "..", .arglen = 2};
        cmd_cwd(s, &up);
        break;
    }
    case FTP_TYPE: cmd_type(s, cmd); break;
    case FTP_MODE: cmd_only(s, cmd, 'S', "Mode"); break;
    case FTP_STRU: cmd_only(s, cmd, 'F', "Structure"); break;
    case FTP_REST: cmd_rest(s, cmd); break;
    case FTP_SIZE:
    case FTP_MDTM:
    case FTP_MLST: cmd_about(s, cmd); break;
    case FTP_STAT: cmd_stat(s, cmd); break;
    case FTP_ALLO: ftp_reply(s, "202 ALLO not needed."); break;
    case FTP_MKD: cmd_mkd(s, cmd); break;
    case FTP_ABOR: ftp_reply(s, "225 No transfer to abort."); break;
    default: return 0;
    }
    return 1;
}

/* One command, in the READY or LOGIN state. */
static void execute(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    char path[FTP_PATH_MAX];
    if (any_time(s, cmd))
        return;
    if (s->state == FTP_LOGIN) {
        ftp_reply(s, "530 Please login with USER and PASS.");
        return;
    }
    if (logged_in(s, cmd))
        return;
    switch (cmd->verb) {
    case FTP_PASV:
    case FTP_EPSV: ftp_cmd_pasv(s, cmd); break;
    case FTP_PORT:
    case FTP_EPRT: ftp_cmd_port(s, cmd); break;
    default: /* RETR, LIST, NLST, MLSD, STOR, APPE */
        if (cmd->verb == FTP_LIST || cmd->verb == FTP_NLST || cmd->verb == FTP_MLSD) {
            ftp_cmd_t c = *cmd;
            c.arg = ftp_list_arg(cmd->arg, &c.arglen);
            if (resolve(s, &c, path) == 0)
                ftp_cmd_transfer(s, cmd, path);
        } else if (!cmd->arg || !cmd->arglen) {
            ftp_reply(s, "501 %s needs a file name.", cmd->name);
        } else if (resolve(s, cmd, path) == 0) {
            ftp_cmd_transfer(s, cmd, path);
        }
        break;
    }
}

/* AUTH, PBSZ, PROT.  1 if cmd was one of them. */
static int ftp_cmd_tls(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    const char *a = cmd->arg ? cmd->arg : "";
    size_t n = cmd->arg ? cmd->arglen : 0;
    if (cmd->verb == FTP_AUTH) {
        if (!tls_store_count(s->site->proc->tls) || s->site->cfg->tls_off)
            return ftp_reply(s, "502 AUTH TLS not available: no certificates."), 1;
        if (s->ssl || s->tls_start)
            return ftp_reply(s, "503 Already in TLS."), 1;
        if (!((n == 3 && !strncasecmp(a, "TLS", 3)) || (n == 5 && !strncasecmp(a, "TLS-C", 5)) ||
              (n == 3 && !strncasecmp(a, "SSL", 3))))
            return ftp_reply(s, "504 AUTH TLS only."), 1;
        s->tls_start = 1; /* the handshake starts once this reply left (flush) */
        return ftp_reply(s, "234 Proceed with negotiation."), 1;
    }
    if (!s->ssl)
        return ftp_reply(s, "503 %s needs AUTH TLS first.", cmd->name), 1;
    if (cmd->verb == FTP_PBSZ) {
        s->pbsz = 1;
        return ftp_reply(s, "200 PBSZ=0"), 1;
    }
    if (n == 1 && (a[0] & ~0x20) == 'P') {
        s->prot_p = 1;
        return ftp_reply(s, "200 PROT now Private."), 1;
    }
    if (n == 1 && (a[0] & ~0x20) == 'C') {
        s->prot_p = 0;
        return ftp_reply(s, "200 PROT now Clear."), 1;
    }
    return ftp_reply(s, "504 PROT C or P only."), 1;
}

static void cmd_mkd(ftp_sess_t *s, const ftp_cmd_t *cmd)
{
    char path[FTP_PATH_MAX];
    const char *name;
    if (!cmd->arg || !cmd->arglen) {
        ftp_reply(s, "501 MKD needs a directory name.");
        return;
    }
    if (resolve(s, cmd, path) < 0)
        return;
    int dir = ftp_upload_dir(s, path, &name);
    if (dir < 0)
        return;
    /* no world write or search: an admin opens what anonymous users made */
    if (mkdirat(dir, name, 0750) < 0)
        ftp_reply(s, "550 Create directory operation failed.");
    else
        reply_path(s, 257, path, "created");
    close(dir);
}

/* The commands waiting in s->in, while the replies leave and no transfer
   stands in the way (during one, only ABOR, STAT, NOOP and QUIT). */
static void process(ftp_sess_t *s)
{
    while (s->state != FTP_CLOSING && s->replen == 0) {
        ftp_cmd_t cmd;
        size_t used = 0;
        long r = ftp_parse_line(s->in, s->inlen, &cmd, &used);
        if (r == FTP_INCOMPLETE)
            return;
        if (r == FTP_TOO_LONG) { /* drop it up to its line end */
            s->inlen = 0;
            s->skipping = 1;
            ftp_reply(s, "500 Command line too long.");
            return;
        }
        int busy = s->xfer != XFER_NONE || s->xfer_waiting;
        if (r > 0 && busy && cmd.verb != FTP_ABOR && cmd.verb != FTP_STAT && cmd.verb != FTP_NOOP &&
            cmd.verb != FTP_QUIT)
            return; /* after the transfer */
        if (r == FTP_BAD)
            ftp_reply(s, "500 Syntax error, command unrecognized.");
        else if (busy && cmd.verb == FTP_ABOR) {
            ftp_xfer_abort(s, 426, "Transfer aborted.");
            ftp_reply(s, "226 ABOR successful.");
        } else if (cmd.verb == FTP_ABOR && s->link != LINK_NONE) {
            ftp_link_close(s);
            ftp_reply(s, "225 Data connection closed.");
        } else if (busy && cmd.verb == FTP_QUIT) {
            ftp_xfer_abort(s, 426, "Transfer aborted.");
            ftp_reply(s, "221 Goodbye.");
            s->state = FTP_CLOSING;
        } else
            execute(s, &cmd);
        /* only now: cmd.arg points into s->in */
        memmove(s->in, s->in + used, s->inlen - used);
        s->inlen -= (uint32_t)used;
    }
}

/* Replies out, then the commands waiting, in turn while the replies leave at
   once: commands a client sent in one packet, or behind a transfer, all get
   theirs.  -1: the client is gone. */
static int pump(ftp_sess_t *s)
{
    uint32_t left = UINT32_MAX;
    while (flush(s) == 0) {
        if (s->replen || s->state == FTP_CLOSING || s->inlen == left)
            return 0; /* the client reads first, or nothing more to do */
        left = s->inlen;
        process(s);
    }
    return -1;
}

/* Read what the client sent (a line too long is dropped up to its LF). */
static int read_input(ftp_sess_t *s)
{
    while (s->inlen < sizeof s->in) {
        unsigned want = GIO_READ;
        long r = s->ssl ? gio_tls_read(s->ssl, s->in + s->inlen, sizeof s->in - s->inlen, &want)
                        : gio_read(s->fd, s->in + s->inlen, sizeof s->in - s->inlen);
        if (s->ssl)
            s->tls_want = r == GIO_AGAIN && want != GIO_READ ? (uint8_t)want : 0;
        if (r == GIO_AGAIN)
            return 0;
        if (r <= 0)
            return -1;
        s->inlen += (uint32_t)r;
        if (s->skipping) {
            char *lf = memchr(s->in, '\n', s->inlen);
            size_t drop = lf ? (size_t)(lf - s->in) + 1 : s->inlen;
            memmove(s->in, s->in + drop, s->inlen - drop);
            s->inlen -= (uint32_t)drop;
            s->skipping = lf == NULL;
        }
    }
    return 0;
}

/* A control connection's deadline passed: login, idle, the drain, a last reply. */
static void ctl_timeout(ftp_sess_t *s)
{
    if (s->state != FTP_CLOSING && !s->set->draining)
        s->site->stats.ftp_timeouts++;
    s->replen = s->repoff = 0;
    ftp_reply(s, s->set->draining ? "421 Server shutting down." : "421 Timeout.");
    flush(s);
    sess_free(s);
}

/* AUTH TLS: the control connection's handshake.  0 to go on, -1 gone. */
static int handshake(ftp_sess_t *s)
{
    unsigned want = GIO_READ;
    int r = gio_tls_handshake(s->ssl, &want);
    if (r == GIO_AGAIN) {
        s->tls_want = (uint8_t)want;
        return 0;
    }
    if (r < 0) {
        s->site->stats.tls_failed++;
        return -1;
    }
    s->tls_hs = 0;
    s->tls_want = 0;
    s->site->stats.tls_handshakes++;
    s->site->stats.tls_resumed += (uint64_t)tls_resumed(s->ssl);
    return 0;
}

static void ctl_event(ftp_sess_t *s, unsigned events)
{
    if (!events) {
        ctl_timeout(s);
        return;
    }
    if (s->tls_hs) {
        if (handshake(s) < 0) {
            sess_free(s);
            return;
        }
        if (s->tls_hs) {
            ftp_ctl_arm(s);
            return;
        }
    }
    if (flush(s) < 0 || (events & GIO_ERROR)) {
        sess_free(s);
        return;
    }
    if ((events & (GIO_READ | GIO_HANGUP)) && s->state != FTP_CLOSING && read_input(s) < 0) {
        sess_free(s);
        return;
    }
    if (pump(s) < 0 || (s->state == FTP_CLOSING && s->replen == 0)) {
        sess_free(s);
        return;
    }
    ftp_ctl_arm(s);
}

/* The loop's calls: readiness (events) or a passed deadline (0) of the
   control connection (s->w) and of the data link (s->dk.w, on s->dfd). */
static void on_ctl(watch_t *w, unsigned events)
{
    ctl_event((ftp_sess_t *)((char *)w - offsetof(ftp_sess_t, w)), events);
}

static void on_data(watch_t *w, unsigned events)
{
    ftp_sess_t *s = ((ftp_data_t *)((char *)w - offsetof(ftp_data_t, w)))->s;
    ftp_data_event(s, s->dfd, events);
    /* a transfer that ended may have queued a reply and freed the pipeline */
    int idle = s->xfer == XFER_NONE && !s->xfer_waiting && s->state != FTP_CLOSING;
    if ((idle ? pump(s) : flush(s)) < 0 || (s->state == FTP_CLOSING && s->replen == 0) ||
        (s->set->draining && s->xfer == XFER_NONE && !s->xfer_waiting)) {
        if (s->set->draining && s->state != FTP_CLOSING)
            ftp_reply(s, "421 Server shutting down."), flush(s);
        sess_free(s);
        return;
    }
    ftp_ctl_arm(s);
}

void ftp_set_drain(ftp_set_t *set)
{
    set->draining = 1;
    for (ftp_sess_t *s = set->list; s; s = s->next)
        ftp_ctl_arm(s); /* idle ones time out at once, with 421 */
}

/*
 * -f port[,upload[=bytes]]: FTP on port; uploads (STOR, APPE, MKD into
 * world-writable directories) only with ",upload", files of at most bytes
 * (a K, M or G suffix: powers of 1024).  0, or -1.
 */
static int ftp_set(config_t *cfg, const optdef_t *o, char *arg)
{
    char digits[12];
    const char *rest;
    (void)o;
    if (opt_first(arg, digits, sizeof digits, &rest) < 0 ||
        (cfg->ftp_port = (int)opt_number(digits, 0, 65535)) < 0)
        return -1;
    if (!rest)
        return 0;
    if (strncmp(rest, "upload", 6) || (rest[6] && rest[6] != '='))
        return -1;
    cfg->ftp_upload = 1;
    if (!rest[6])
        return 0;
    return (cfg->ftp_upload_max = opt_size(rest + 7, 1, 1LL << 62)) < 0 ? -1 : 0;
}

const optdef_t ftp_opts[] = {
    OPT_ROW_FN('f', NULL, OPT_NUMBER, OPT_IN_FILE, 0, ftp_set, 0,
               "not port[,upload[=bytes]] (a port 0-65535; bytes >= 1, with K, M or G)",
        "  -f port[,upload[=bytes]]  anonymous FTP on port (0: any; 21 as root is usual);\n"
        "            ,upload: STOR/APPE/MKD into world-writable dirs, files <= bytes (64M)\n"),
    OPT_ROW_FLAG('U', NULL, ftp_no_upload, 1,
        "  -U        no FTP uploads, whatever -f says (the original gatling's -U)\n"),
    OPT_LAST};
