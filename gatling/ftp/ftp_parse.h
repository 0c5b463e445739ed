/*
 * ftp_parse — the FTP control connection's pure parts (RFC 959, 2428,
 * 3659): one command line, the PORT and EPRT arguments, and joining a
 * path argument to the working directory.  No I/O, no globals, no
 * allocation: everything works on the caller's buffers, with every write
 * bounded by a size the caller passes.
 */
#ifndef GATLING_FTP_PARSE_H
#define GATLING_FTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* A command line, CRLF included: longer ones are answered 500 and dropped. */
#define FTP_LINE_MAX 1024
/* A path the session keeps (its working directory, a resolved argument). */
#define FTP_PATH_MAX 1024

/* The verbs known to the parser (ftp.c answers each; FTP_UNKNOWN is 500). */
typedef enum ftp_verb {
    FTP_UNKNOWN = 0,
    FTP_USER,
    FTP_PASS,
    FTP_ACCT,
    FTP_SYST,
    FTP_FEAT,
    FTP_OPTS,
    FTP_PWD,
    FTP_CWD,
    FTP_CDUP,
    FTP_TYPE,
    FTP_MODE,
    FTP_STRU,
    FTP_PASV,
    FTP_EPSV,
    FTP_PORT,
    FTP_EPRT,
    FTP_REST,
    FTP_RETR,
    FTP_SIZE,
    FTP_MDTM,
    FTP_LIST,
    FTP_NLST,
    FTP_MLSD,
    FTP_MLST,
    FTP_STAT,
    FTP_NOOP,
    FTP_ABOR,
    FTP_QUIT,
    FTP_HELP,
    FTP_STOR,
    FTP_APPE,
    FTP_MKD,
    FTP_AUTH,
    FTP_PBSZ,
    FTP_PROT,
    FTP_ALLO,
    /* known, never carried out here: 502 */
    FTP_DELE,
    FTP_RMD,
    FTP_RNFR,
    FTP_RNTO,
    FTP_STOU,
    FTP_SITE,
    FTP_SMNT,
    FTP_REIN,
    FTP_VERBS
} ftp_verb_t;

typedef struct ftp_cmd {
    ftp_verb_t verb;
    char name[5];    /* the verb as sent, upper-cased, NUL-terminated ("" if none) */
    const char *arg; /* after the first space, into the caller's buffer; NULL if none */
    size_t arglen;   /* without the line end */
} ftp_cmd_t;

enum {
    FTP_INCOMPLETE = 0, /* no line end yet: read more */
    FTP_TOO_LONG = -1,  /* FTP_LINE_MAX bytes and no line end: 500, drop to the next LF */
    FTP_BAD = -2        /* a NUL, or a verb that is no 3-4 letters: 500 (line consumed:
                         *consumed says how much) */
};

/*
 * Parse the first line of buf[0..len).  A line ends with LF (CRLF or a bare
 * LF).  Telnet bytes before the verb (IAC IP IAC DM, as clients send before
 * ABOR) are skipped.  Returns the bytes the line takes (> 0) with *cmd
 * filled, FTP_INCOMPLETE, FTP_TOO_LONG, or FTP_BAD with *consumed set to
 * the line's length.  The verb is matched case-insensitively; a known verb
 * with no match in the table is FTP_UNKNOWN with name set.
 */
long ftp_parse_line(const char *buf, size_t len, ftp_cmd_t *cmd, size_t *consumed);

/*
 * PORT's "h1,h2,h3,h4,p1,p2": ip gets the four address bytes, *port the
 * port.  0, or -1 if malformed (a number over 255, missing or extra parts).
 */
int ftp_parse_port(const char *arg, size_t n, unsigned char ip[4], unsigned *port);

/*
 * EPRT's "<d>proto<d>addr<d>port<d>" (RFC 2428), d any printable byte but a
 * digit: *family gets 4 or 6, addr the 4 or 16 address bytes, *port the
 * port (1-65535).  0, or -1 if malformed.
 */
int ftp_parse_eprt(const char *arg, size_t n, int *family, unsigned char addr[16], unsigned *port);

/* REST's byte offset: decimal digits only, at most 2^62.  0 with *off, or -1. */
int ftp_parse_offset(const char *arg, size_t n, uint64_t *off);

/*
 * The absolute path that arg[0..n) names from the working directory cwd
 * (absolute, as this function returns it): "." and ".." segments and empty
 * ones removed, never above "/" (RFC 3986's remove_dot_segments, as for
 * HTTP).  Written NUL-terminated to out[0..outsz): "/" or "/a/b", never a
 * trailing '/'.  Returns its length, or -1 if it does not fit or arg holds a
 * NUL byte.
 */
long ftp_path_join(const char *cwd, const char *arg, size_t n, char *out, size_t outsz);

/* Does a segment of path start with '.' (a dotfile, never served)?  1 or 0. */
int ftp_path_hidden(const char *path);

/*
 * The LIST/NLST argument without ls options ("-la", "-a dir"): *n is
 * shortened and the rest returned (possibly empty).
 */
const char *ftp_list_arg(const char *arg, size_t *n);

#endif
