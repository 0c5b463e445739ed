/*
 * htaccess — HTTP Basic authentication (RFC 7617) from .htaccess files, as in
 * the original gatling.
 *
 * The file: the first line that is neither blank nor a comment ('#' first) is
 * the realm; every following such line is "user:hash", split at the first
 * ':', the hash as crypt(3) makes it (yescrypt "$y$", SHA-512 "$6$", bcrypt
 * "$2b$"/"$2y$" as from htpasswd -B, MD5 "$1$", DES: whatever Debian's
 * libxcrypt accepts; Apache's own "$apr1$" and "{SHA}" are not crypt(3) and
 * never match).  Trailing spaces, tabs and CRs are ignored.  A file with a
 * realm and no users locks everyone out.
 * Malformed (answered 500, never "open"): no realm line, a user line without
 * ':' or with an empty user or hash, a NUL byte, more than HTACCESS_MAX bytes,
 * something other than a regular file (a symlink, a directory, a FIFO), or a
 * hash whose parameters ask crypt for more than the bounds below (yescrypt or
 * scrypt memory, bcrypt cost, SHA-crypt rounds): the cost is part of the hash,
 * and one line could otherwise make every login allocate gigabytes or spin for
 * minutes on the worker threads.
 *
 * An Apache .htaccess (Debian's WordPress and DokuWiki packages ship them:
 * its first line neither blank nor a comment is a <Section> or one of the
 * directives those hold, RewriteRule, Options, Require, Deny, AuthType...)
 * is read for what it denies: "Require all denied", "Deny from all" or
 * Apache's own authentication (which gatling cannot check) at its top, in
 * <IfModule> or in a <Files>/<FilesMatch> section whose pattern takes the
 * file's name make 403; its other directives are Apache's, ignored.
 *
 * The nearest .htaccess governs alone: one in a subdirectory replaces, not
 * extends, those above it.
 *
 * Cost: each check opens one .htaccess per directory level until one is found,
 * and a successful or failed login runs crypt once, which for yescrypt or
 * SHA-512 takes milliseconds of CPU.  Needs -lcrypt.
 */
#ifndef GATLING_HTACCESS_H
#define GATLING_HTACCESS_H

#include <stddef.h>

#define HTACCESS_MAX (64 * 1024) /* larger files are refused as malformed */
#define HTACCESS_HASH_MEM_MAX (64u << 20) /* yescrypt/scrypt: 4x Debian's default ($y$j9T$) */
#define HTACCESS_BCRYPT_COST_MAX 13       /* about half a second here */
#define HTACCESS_ROUNDS_MAX 1000000       /* SHA-crypt rounds= (default 5000) */

/*
 * Find the .htaccess that governs the file at path[0..n) (decoded,
 * normalised, relative to the document root open on rootfd, starting with
 * '/'): the nearest one in the file's directory or its parents up to the
 * root (for a directory path ending in '/', start in that directory).  Each
 * is opened with openat relative to rootfd and O_NOFOLLOW (directories on the
 * way are followed as the server follows them).
 * auth[0..authlen) is the raw Authorization header value, or NULL.
 * Returns 0 = allowed (no .htaccess, or the credentials match), 401 =
 * credentials missing, not Basic, undecodable or wrong (the realm is copied
 * into realm[0..realmsz), NUL-terminated, truncated, with '"', '\' and
 * control characters removed, ready for WWW-Authenticate: Basic
 * realm="..."), 403 = an Apache .htaccess denies it, or a directory on the
 * way may not be searched (EACCES: a closed directory, as the files answer
 * it), 500 = an .htaccess exists but cannot be read or is malformed, or
 * path is not absolute.  realm is "" unless 401 is returned.
 * User names and hashes are compared in constant time, and crypt runs (on a
 * stand-in hash) for an unknown user too, so timing does not tell which
 * user names exist.
 */
int htaccess_check(int rootfd, const char *path, size_t n, const char *auth, size_t authlen,
                   char *realm, size_t realmsz);

/*
 * The same check in two steps, so that the expensive one can leave the event
 * loop.  htaccess_prepare does everything but crypt: it returns 0, 401
 * (credentials missing, not Basic or undecodable) or 500 as htaccess_check
 * does, or HTACCESS_VERIFY with p holding copies of the hash to check and
 * the password, and realm filled in for the 401 a failed check will need.
 * htaccess_verify (thread-safe: crypt_rn with its own data) runs crypt,
 * wipes the password, and returns 1 if the credentials are right.
 */
enum { HTACCESS_VERIFY = 1 };

typedef struct htaccess_pending {
    char hash[256];  /* the user's hash, or the stand-in for an unknown user */
    char pass[772];  /* the password, NUL-terminated; wiped by htaccess_verify */
    int found;       /* the user exists */
} htaccess_pending_t;

int htaccess_prepare(int rootfd, const char *path, size_t n, const char *auth, size_t authlen,
                     char *realm, size_t realmsz, htaccess_pending_t *p);

int htaccess_verify(htaccess_pending_t *p);

/*
 * --check's look at one line of an .htaccess, line[0..n) without its
 * newline, given in order (*realm 0 before the first, kept by the caller):
 * 0, or -1 with why (a static string) when the line makes the file
 * malformed as the server reads it (answered 500): a NUL byte, a user line
 * that is not user:hash, a hash whose cost passes the bounds above.  After
 * the last line, !*realm means the file has no realm line: malformed too.
 */
int htaccess_line(const char *line, size_t n, int *realm, const char **why);

#endif
