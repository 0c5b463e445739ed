/*
 * .htaccess Basic authentication: nearest file wins, each crypt method,
 * Authorization parsing, realm extraction, fail-closed on unreadable or
 * malformed files, the cost of an unknown user, and libowfat's scan_base64.
 */
#define _GNU_SOURCE
#include "htaccess.h"
#include "owfat.h"
#include "tap.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int rootfd;

/* A crypt(3) hash of pw with a fresh random salt for method prefix ("" = DES). */
static const char *hash(const char *prefix, const char *pw)
{
    static char out[8][CRYPT_OUTPUT_SIZE];
    static int k;
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data cd = {0};
    char *s = &out[k++ % 8][0];
    if (!crypt_gensalt_rn(prefix, 0, NULL, 0, salt, sizeof salt)) {
        perror("crypt_gensalt_rn");
        exit(1);
    }
    const char *h = crypt_rn(pw, salt, &cd, sizeof cd);
    if (!h) {
        perror("crypt_rn");
        exit(1);
    }
    strcpy(s, h);
    return s;
}

static void put(const char *rel, const char *text, size_t len)
{
    int fd = openat(rootfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len)
        perror(rel);
    if (fd >= 0)
        close(fd);
}

static void puts_file(const char *rel, const char *text)
{
    put(rel, text, strlen(text));
}

/* "Basic " + base64(user ":" pass) into buf. */
static const char *basic(char *buf, const char *user, const char *pass)
{
    char plain[256];
    int n = snprintf(plain, sizeof plain, "%s:%s", user, pass);
    strcpy(buf, "Basic ");
    buf[6 + fmt_base64(buf + 6, plain, (size_t)n)] = 0;
    return buf;
}

static int check_in(int fd, const char *path, const char *auth, char *realm, size_t realmsz)
{
    return htaccess_check(fd, path, strlen(path), auth, auth ? strlen(auth) : 0, realm, realmsz);
}

static int check(const char *path, const char *auth, char *realm)
{
    return check_in(rootfd, path, auth, realm, 64);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void check_scan_base64(void)
{
    char d[64];
    size_t dl = 0;
    is_int(scan_base64("dXNlcjpwYXNz", d, &dl), 12, "scan_base64 consumes the token");
    ok(dl == 9 && !memcmp(d, "user:pass", 9), "scan_base64 decodes");
    is_int(scan_base64("dXNlcjpwYQ==", d, &dl), 12, "scan_base64 consumes '=' padding");
    is_int(dl, 7, "... decoding 7 bytes");
    is_int(scan_base64("dXNl!cjpw", d, &dl), 4, "scan_base64 stops at a byte outside the alphabet");
    is_int(scan_base64("dXNlcjpwYQ==x", d, &dl), 12, "scan_base64 stops after padding");
    is_int(scan_base64("a-_b", d, &dl), 0, "scan_base64 refuses the URL alphabet");
    is_int(scan_base64("", d, &dl), 0, "scan_base64 of nothing");
    char enc[16];
    enc[fmt_base64(enc, "a:b", 3)] = 0;
    is_str(enc, "YTpi", "fmt_base64");
}

static void check_methods(void)
{
    char realm[64], h[512];
    is_int(check("/index.html", NULL, realm), 401, "no Authorization -> 401");
    is_str(realm, "Root Realm", "realm of the root file");
    is_int(check("/index.html", basic(h, "alice", "alicepw"), realm), 0, "yescrypt user, right");
    is_str(realm, "", "realm empty when allowed");
    is_int(check("/index.html", basic(h, "alice", "alicepx"), realm), 401, "yescrypt, wrong");
    is_str(realm, "Root Realm", "realm on a wrong password");
    is_int(check("/index.html", basic(h, "alice", ""), realm), 401, "empty password");
    is_int(check("/index.html", basic(h, "bob", "bobpw"), realm), 0, "SHA-512 user, right");
    is_int(check("/index.html", basic(h, "bob", "alicepw"), realm), 401, "other user's password");
    is_int(check("/index.html", basic(h, "frank", "frankpw"), realm), 0, "bcrypt user, right");
    is_int(check("/index.html", basic(h, "frank", "frankpx"), realm), 401, "bcrypt, wrong");
    is_int(check("/index.html", basic(h, "erin", "a:b:c"), realm), 0, "password with ':'");
    is_int(check("/index.html", basic(h, "erin", "a"), realm), 401, "... split at the first ':'");
    is_int(check("/index.html", basic(h, "mallory", "alicepw"), realm), 401, "unknown user");
    is_int(check("/index.html", basic(h, "Alice", "alicepw"), realm), 401, "names are case-exact");
    is_int(check("/index.html", basic(h, "alic", "alicepw"), realm), 401, "prefix of a name");
    is_int(check("/index.html", basic(h, "alicee", "alicepw"), realm), 401, "name extended");
    is_int(check("/index.html", basic(h, "", "alicepw"), realm), 401, "empty user");
    is_int(check("/index.html", basic(h, "carol", "carolpw"), realm), 401, "sub's user at /");
    is_int(check("/a/b/c/d.html", basic(h, "alice", "alicepw"), realm), 0, "deep, no file: root");

    is_int(check("/sub/f.txt", basic(h, "carol", "carolpw"), realm), 0, "MD5 user in /sub/");
    is_int(check("/sub/f.txt", basic(h, "carol", "carolpx"), realm), 401, "MD5, wrong");
    is_int(check("/sub/f.txt", basic(h, "dave", "davepass"), realm), 0, "DES user in /sub/");
    is_int(check("/sub/f.txt", basic(h, "dave", "davepass-and-more"), realm), 0,
           "DES looks at 8 characters only");
    is_int(check("/sub/f.txt", basic(h, "dave", "davepasx"), realm), 401, "DES, wrong");
    is_int(check("/sub/f.txt", basic(h, "alice", "alicepw"), realm), 401,
           "nearest file wins: root user refused in /sub/");
    is_str(realm, "Sub Realm x", "realm: CRLF, '\"' and '\\' stripped");
    is_int(check("/sub/deeper/g.txt", basic(h, "carol", "carolpw"), realm), 0, "/sub/deeper/");
    is_int(check("/sub/deeper/g.txt", NULL, realm), 401, "/sub/deeper/ needs sub's login");
    is_str(realm, "Sub Realm x", "... with sub's realm");
    is_int(check("/sub/", NULL, realm), 401, "/sub/ itself is governed by sub/");
    is_str(realm, "Sub Realm x", "... with sub's realm");
    is_int(check("/sub", NULL, realm), 401, "/sub without '/' is a name in /");
    is_str(realm, "Root Realm", "... with the root's realm");
    is_int(check("/", NULL, realm), 401, "/ is governed by the root file");
    is_int(check("/index.html/x", NULL, realm), 401, "a file used as a directory: ENOTDIR");
    is_int(check("/nousers/x", basic(h, "alice", "alicepw"), realm), 401, "realm only: nobody");
    is_str(realm, "Nobody", "... realm");
    is_int(check("/ctl/x", NULL, realm), 401, "realm with control characters");
    is_str(realm, "ABC", "... stripped");
}

static void check_headers(void)
{
    char realm[64], h[2600], tok[600];
    basic(h, "alice", "alicepw");
    strcpy(tok, h + 6);
    static const struct {
        const char *fmt;
        int want;
        const char *name;
    } cases[] = {
        {"Basic %s", 0, "Basic"},
        {"basic %s", 0, "scheme is case-insensitive"},
        {"BASIC %s", 0, "scheme in capitals"},
        {"  Basic   %s  ", 0, "surrounding spaces"},
        {"Basic\t%s", 401, "tab after the scheme"},
        {"Basic %s x", 401, "a second token"},
        {"Basic %s!", 401, "junk after the token"},
        {"Basic !%s", 401, "junk before the token"},
        {"Basicx %s", 401, "scheme Basicx"},
        {"Bearer %s", 401, "Bearer scheme"},
        {"Digest %s", 401, "Digest scheme"},
        {"%s", 401, "token without a scheme"},
        {"Basic", 401, "scheme only"},
        {"Basic ", 401, "scheme and space only"},
        {"Basic dXNlcg==", 401, "no ':' in the credentials"},
        {"Basic YWxpY2UAOmFsaWNlcHc=", 401, "NUL in the credentials"},
        {"Basic YWxp Y2U6YWxpY2Vwdw==", 401, "space inside the token"},
        {"Basic ====", 401, "padding only"},
        {"", 401, "empty header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char auth[700];
        snprintf(auth, sizeof auth, cases[i].fmt, tok);
        is_int(check("/index.html", auth, realm), cases[i].want, "%s", cases[i].name);
    }

    /* authlen is honoured: the header sits in a request buffer */
    snprintf(h, sizeof h, "Basic %s\r\nHost: x\r\n", tok);
    is_int(htaccess_check(rootfd, "/i", 2, h, 6 + strlen(tok), realm, sizeof realm), 0,
           "authlen bounds the value");
    /* scan_base64 does not insist on the padding, which changes nothing decoded */
    is_int(htaccess_check(rootfd, "/i", 2, h, 6 + strlen(tok) - 2, realm, sizeof realm), 0,
           "... a token without its '=' padding decodes the same");
    is_int(htaccess_check(rootfd, "/i", 2, h, 6 + strlen(tok) - 4, realm, sizeof realm), 401,
           "... and a token cut shorter fails");

    /* over-long credentials are refused before decoding */
    char pw[1500];
    memset(pw, 'p', sizeof pw - 1);
    pw[sizeof pw - 1] = 0;
    char plain[1600], *b = h;
    int n = snprintf(plain, sizeof plain, "alice:%s", pw);
    b += sprintf(b, "Basic ");
    b[fmt_base64(b, plain, (size_t)n)] = 0;
    is_int(check("/index.html", h, realm), 401, "2,000-byte token refused");

    /* realm truncated to realmsz, always NUL-terminated */
    char small[5] = "xxxx";
    is_int(check_in(rootfd, "/index.html", NULL, small, sizeof small), 401, "small realm");
    is_str(small, "Root", "... truncated");
    is_int(check_in(rootfd, "/index.html", NULL, NULL, 0), 401, "realmsz 0");
}

static void check_costs_within_bounds(void)
{
    char realm[64], h[512];
    is_int(check("/costly-ok/x", basic(h, "bob", "bobpw"), realm), 0,
           "100,000 SHA-512 rounds and a 32 MiB yescrypt line: within the bounds, bob logs in");
    /* hashes within the bounds that crypt cannot match: parsed, then 401 */
    static const char *const users[] = {"scrypt", "bcrypt", "sha256", "sha1", "gy"};
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++)
        is_int(check("/bounded/x", basic(h, users[i], "pw"), realm), 401,
               "a bounded %s hash: the file is taken, a wrong password 401", users[i]);
    is_int(check("/costly-ok/x", basic(h, "alice", "x"), realm), 401, "... alice (wrong) 401");
}

static void check_fail_closed(void)
{
    char realm[64], h[512];
    basic(h, "alice", "alicepw");
    static const char *const bad[][2] = {
        {"/bad-dir/x", "a directory named .htaccess"},
        {"/bad-link/x", "a symlink .htaccess"},
        {"/bad-big/x", "a file over 64 KiB"},
        {"/bad-colon/x", "a user line without ':'"},
        {"/bad-empty/x", "an empty file"},
        {"/bad-comments/x", "comments only"},
        {"/bad-nohash/x", "an empty hash"},
        {"/bad-nouser/x", "an empty user"},
        {"/bad-nul/x", "a NUL byte"},
        {"/bad-fifo/x", "a FIFO (must not hang)"},
        {"/bad-yescrypt/x", "a yescrypt hash asking for 6 GiB ($y$jJ9T$, a fuzz_htaccess find)"},
        {"/bad-yesparams/x", "a yescrypt hash with parameters past r"},
        {"/bad-scrypt/x", "an scrypt hash asking for 512 MiB"},
        {"/bad-bcrypt/x", "a bcrypt hash of cost 31"},
        {"/bad-rounds/x", "a SHA-512 hash of 999,999,999 rounds"},
        {"/bad-gy/x", "a gost-yescrypt hash asking for 6 GiB ($gy$jJ9T$)"},
        {"/bad-yesshort/x", "a yescrypt hash cut in its parameters"},
        {"/bad-yesdigit/x", "a yescrypt number of two characters, the second not base-64"},
        {"/bad-yesnodollar/x", "a yescrypt hash whose parameters run into the salt"},
        {"/bad-scryptchar/x", "an scrypt hash with a character not base-64 in r"},
        {"/bad-scryptp/x", "an scrypt hash with p = 2"},
        {"/bad-scryptn0/x", "an scrypt hash with N = 2^0"},
        {"/bad-scryptr/x", "an scrypt hash with r over 1024"},
        {"/bad-bcryptdigit/x", "a bcrypt hash whose cost is not two digits"},
        {"/bad-sha256rounds/x", "a SHA-256 hash whose rounds= does not end in '$'"},
        {"/bad-sha1rounds/x", "a $sha1$ hash of 999,999,999 rounds"},
        {"/bad-sha1end/x", "a $sha1$ hash whose rounds do not end in '$'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        is_int(check(bad[i][0], h, realm), 500, "500 for %s", bad[i][1]);
        is_int(check(bad[i][0], NULL, realm), 500, "... also without credentials");
        is_str(realm, "", "... and no realm");
    }
    is_int(check("/big-ok/x", h, realm), 0, "a file of exactly 64 KiB is fine");
    is_int(htaccess_check(rootfd, "x", 1, h, strlen(h), realm, 64), 500, "relative path");
    is_int(htaccess_check(rootfd, "", 0, h, strlen(h), realm, 64), 500, "empty path");
    is_int(htaccess_check(rootfd, "/bad-dir\0/x", 11, h, strlen(h), realm, 64), 500, "NUL");
    is_int(htaccess_check(-1, "/x", 2, h, strlen(h), realm, 64), 500, "bad rootfd");

    /* Permission errors need an unprivileged process: root reads anything. */
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
            _exit(10);
        int a = check("/unreadable/x", h, realm);
        int b = check("/noexec/x", h, realm);
        int c = check("/index.html", h, realm);
        _exit(a == 500 && b == 403 && c == 0 ? 0 : 20 + (a != 500) + 2 * (b != 403));
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    is_int(WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, 0,
           "unprivileged: unreadable .htaccess -> 500, unsearchable directory -> 403 "
           "(the files' answer there)");
}

static double secs(const char *user)
{
    char h[512], realm[64];
    struct timespec a, b;
    basic(h, user, "wrong-password");
    /* CPU time, not the wall clock: make check runs this beside other jobs, and
       a wait for a CPU (163.9 ms vs 512.5 ms in one run) is not the crypt's cost */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int i = 0; i < 5; i++)
        check("/index.html", h, realm);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

static void check_timing(void)
{
    /* Without the stand-in crypt an unknown user would answer ~1000x faster. */
    secs("alice");
    double known = secs("alice"), unknown = secs("no-such-user");
    ok(unknown > known / 3, "unknown user costs a crypt too (%.1f ms vs %.1f ms for 5)",
       unknown * 1e3, known * 1e3);
}

static void make_tree(const char *top)
{
    char text[4096];
    snprintf(text, sizeof text,
             "Root Realm\nalice:%s\n# a comment\n\n   \nbob:%s  \nerin:%s\nfrank:%s\n",
             hash("$y$", "alicepw"), hash("$6$", "bobpw"), hash("$y$", "a:b:c"),
             hash("$2b$", "frankpw"));
    puts_file(".htaccess", text);
    mkdirat(rootfd, "sub", 0755);
    mkdirat(rootfd, "sub/deeper", 0755);
    snprintf(text, sizeof text, "\r\n# sub\r\nSub \"Realm\" \\x\r\ncarol:%s\r\ndave:%s\r\n",
             hash("$1$", "carolpw"), hash("", "davepass"));
    puts_file("sub/.htaccess", text);
    puts_file("index.html", "hi\n");
    mkdirat(rootfd, "nousers", 0755);
    puts_file("nousers/.htaccess", "# only a realm\nNobody\n");
    mkdirat(rootfd, "ctl", 0755);
    puts_file("ctl/.htaccess", "A\rB\001\177C\t\n");

    static const char *const dirs[] = {"bad-dir",   "bad-link",     "bad-big",    "bad-colon",
                                       "bad-empty", "bad-comments", "bad-nohash", "bad-nouser",
                                       "bad-nul",   "bad-fifo",     "big-ok",     "unreadable",
                                       "noexec",    "bad-yescrypt", "bad-yesparams",
                                       "bad-scrypt", "bad-bcrypt",  "bad-rounds", "costly-ok",
                                       "bad-gy", "bad-yesshort", "bad-yesdigit", "bad-yesnodollar",
                                       "bad-scryptchar", "bad-scryptp", "bad-scryptn0",
                                       "bad-scryptr", "bad-bcryptdigit", "bad-sha256rounds",
                                       "bad-sha1rounds", "bad-sha1end", "bounded"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        mkdirat(rootfd, dirs[i], 0755);
    mkdirat(rootfd, "bad-dir/.htaccess", 0755);
    symlinkat("../.htaccess", rootfd, "bad-link/.htaccess");
    /* comment filler after a realm (and a user): one byte over the cap, and exactly at it */
    static char big[HTACCESS_MAX + 1];
    memset(big, '#', sizeof big);
    size_t hl = (size_t)snprintf(text, sizeof text, "Big\nalice:%s\n", hash("$6$", "alicepw"));
    memcpy(big, text, hl);
    big[HTACCESS_MAX - 1] = '\n';
    put("bad-big/.htaccess", big, HTACCESS_MAX + 1);
    put("big-ok/.htaccess", big, HTACCESS_MAX);
    puts_file("bad-colon/.htaccess", "R\nalice\n");
    puts_file("bad-empty/.htaccess", "");
    puts_file("bad-comments/.htaccess", "# just\n#comments\n\n");
    puts_file("bad-nohash/.htaccess", "R\nalice:\n");
    puts_file("bad-nouser/.htaccess", "R\n:$1$abc$def\n");
    put("bad-nul/.htaccess", "R\nal\0ice:x\n", 11);
    mknodat(rootfd, "bad-fifo/.htaccess", S_IFIFO | 0644, 0);
    puts_file("bad-yescrypt/.htaccess", "R\nalice:$y$jJ9T$salt$hash\n");
    puts_file("bad-yesparams/.htaccess", "R\nalice:$y$j9T.2$salt$hash\n");
    puts_file("bad-scrypt/.htaccess", "R\nalice:$7$K/....0..../....salt$hash\n");
    puts_file("bad-bcrypt/.htaccess", "R\nalice:$2b$31$abcdefghijklmnopqrstuu0123456789012345678901234567\n");
    puts_file("bad-rounds/.htaccess", "R\nalice:$6$rounds=999999999$salt$hash\n");
    /* within the bounds: a yescrypt of 32 MiB ($y$jAT$) and 100,000 SHA-512 rounds */
    snprintf(text, sizeof text, "R\nalice:$y$jAT$W.P43eoL2KH9WUdh7WsxL/$x\nbob:%s\n",
             crypt("bobpw", "$6$rounds=100000$abcdefgh"));
    puts_file("costly-ok/.htaccess", text);
    puts_file("bad-gy/.htaccess", "R\nalice:$gy$jJ9T$salt$hash\n");
    puts_file("bad-yesshort/.htaccess", "R\nalice:$y$j9\n");
    puts_file("bad-yesdigit/.htaccess", "R\nalice:$y$z!T$salt$hash\n");
    puts_file("bad-yesnodollar/.htaccess", "R\nalice:$y$j9Tsalt$hash\n");
    puts_file("bad-scryptchar/.htaccess", "R\nalice:$7$C/.!../....salt$hash\n");
    puts_file("bad-scryptp/.htaccess", "R\nalice:$7$C/....0....salt$hash\n");
    puts_file("bad-scryptn0/.htaccess", "R\nalice:$7$./..../....salt$hash\n");
    puts_file("bad-scryptr/.htaccess", "R\nalice:$7$CzzzzA/....salt$hash\n");
    puts_file("bad-bcryptdigit/.htaccess", "R\nalice:$2b$1x$abcdefghijklmnopqrstuu\n");
    puts_file("bad-sha256rounds/.htaccess", "R\nalice:$5$rounds=5000x$salt$hash\n");
    puts_file("bad-sha1rounds/.htaccess", "R\nalice:$sha1$999999999$salt$hash\n");
    puts_file("bad-sha1end/.htaccess", "R\nalice:$sha1$12x$salt$hash\n");
    puts_file("bounded/.htaccess",
              "R\nscrypt:$7$C/..../....salt$hash\nbcrypt:$2a$05$abcdefghijklmnopqrstuu\n"
              "sha256:$5$rounds=1000$salt$hash\nsha1:$sha1$40000$salt$hash\n"
              "gy:$gy$jAT$salt$hash\n");
    puts_file("unreadable/.htaccess", "R\n");
    fchmodat(rootfd, "unreadable/.htaccess", 0, 0); /* no one but root reads it */
    fchmodat(rootfd, "noexec", 0600, 0);            /* no one but root searches it */
    chmod(top, 0755); /* mkdtemp made it 0700; the unprivileged child must get in */
}

int main(void)
{
    umask(022);
    char top[] = "/tmp/t_htaccess.XXXXXX";
    if (!mkdtemp(top)) {
        perror("mkdtemp");
        return 1;
    }
    char free_root[64];
    snprintf(free_root, sizeof free_root, "%s/free", top);
    mkdir(free_root, 0755);
    int freefd = open(free_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char site[64];
    snprintf(site, sizeof site, "%s/site", top);
    mkdir(site, 0755);
    rootfd = open(site, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    make_tree(top);

    check_scan_base64();
    char realm[64] = "x";
    is_int(check_in(freefd, "/x.html", NULL, realm, sizeof realm), 0, "no .htaccess: allowed");
    is_str(realm, "", "... realm cleared");
    is_int(check_in(freefd, "/a/b/", NULL, realm, sizeof realm), 0, "missing directories");
    check_methods();
    check_headers();
    check_fail_closed();
    check_costs_within_bounds();
    check_timing();
    /* --check's line by line (htaccess_line): the same rules as parse_file */
    int seen = 0;
    const char *why = NULL;
    is_int(htaccess_line("# c", 3, &seen, &why), 0, "check: a comment");
    is_int(htaccess_line("Realm \r", 7, &seen, &why), 0, "check: the realm");
    is_int(seen, 1, "check: ... seen");
    is_int(htaccess_line("u:$6$s$h", 8, &seen, &why), 0, "check: user:hash");
    is_int(htaccess_line("nocolon", 7, &seen, &why), -1, "check: not user:hash");
    is_int(htaccess_line(":h", 2, &seen, &why), -1, "check: no user");
    is_int(htaccess_line("u:", 2, &seen, &why), -1, "check: no hash");
    is_int(htaccess_line("u:$6$rounds=99999999$s$h", 24, &seen, &why), -1,
           "check: a cost past the bounds");
    is_int(htaccess_line("u\0:x", 4, &seen, &why), -1, "check: a NUL byte");

    close(rootfd);
    close(freefd);
    nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
