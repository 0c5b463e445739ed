/* The FTP command parser and path arithmetic (gatling/ftp/ftp_parse.c). */
#include "tap.h"
#include "ftp/ftp_parse.h"
#include "ftp/ftp_list.h"

#include <stdint.h>

static long parse(const char *s, ftp_cmd_t *c, size_t *used)
{
    *used = 0;
    return ftp_parse_line(s, strlen(s), c, used);
}

static void lines(void)
{
    ftp_cmd_t c;
    size_t used;
    is_int(parse("USER anonymous\r\nPASS x\r\n", &c, &used), 16, "a line with CRLF");
    is_int(c.verb, FTP_USER, "USER");
    ok(c.arglen == 9 && !memcmp(c.arg, "anonymous", 9), "its argument");
    is_int(parse("pwd\n", &c, &used), 4, "a bare LF, lower case");
    ok(c.verb == FTP_PWD && c.arg == NULL, "PWD, no argument");
    is_int(parse("xpwd\r\n", &c, &used), 6, "XPWD");
    is_int(c.verb, FTP_PWD, "is PWD");
    is_int(parse("RETR a file with spaces \r\n", &c, &used), 26, "spaces kept");
    ok(c.arglen == 19 && c.arg[18] == ' ', "a trailing space is part of the name");
    is_int(parse("\xff\xf4\xff\xf2"
                 "ABOR\r\n",
                 &c, &used),
           10, "Telnet IP/DM before ABOR");
    is_int(c.verb, FTP_ABOR, "is ABOR");
    is_int(parse("FOOB\r\n", &c, &used), 6, "an unknown verb is a line");
    ok(c.verb == FTP_UNKNOWN && !strcmp(c.name, "FOOB"), "unknown, with its name");
    is_int(parse("RETR a", &c, &used), FTP_INCOMPLETE, "no line end: incomplete");
    is_int(parse("", &c, &used), FTP_INCOMPLETE, "empty: incomplete");
    is_int(parse("\r\n", &c, &used), FTP_BAD, "an empty line is bad");
    is_int(used, 2, "and consumed");
    is_int(parse("TOOLONG x\r\n", &c, &used), FTP_BAD, "a five-letter verb is bad");
    is_int(parse("R1TR x\r\n", &c, &used), FTP_BAD, "a digit in the verb is bad");
    static const char nul[] = "RETR a\0b\r\n";
    used = 0;
    is_int(ftp_parse_line(nul, sizeof nul - 1, &c, &used), FTP_BAD, "a NUL is bad");
    is_int(used, sizeof nul - 1, "and the line consumed");
    char big[FTP_LINE_MAX + 10];
    memset(big, 'a', sizeof big);
    memcpy(big, "RETR ", 5);
    is_int(ftp_parse_line(big, sizeof big, &c, &used), FTP_TOO_LONG, "no LF in FTP_LINE_MAX");
    is_int(ftp_parse_line(big, FTP_LINE_MAX - 1, &c, &used), FTP_INCOMPLETE,
           "just under: incomplete");
    big[FTP_LINE_MAX - 1] = '\n';
    is_int(ftp_parse_line(big, sizeof big, &c, &used), FTP_LINE_MAX, "LF as the last byte fits");
}

/* Byte by byte: incomplete until the LF, never reading past len. */
static void byte_by_byte(void)
{
    const char *s = "EPSV ALL\r\n";
    size_t n = strlen(s), used;
    ftp_cmd_t c;
    int fine = 1;
    for (size_t k = 0; k < n; k++) {
        char *copy = malloc(k ? k : 1);
        memcpy(copy, s, k);
        fine &= ftp_parse_line(copy, k, &c, &used) == FTP_INCOMPLETE;
        free(copy);
    }
    ok(fine, "every prefix is incomplete");
}

static void port_args(void)
{
    unsigned char ip[16];
    unsigned port;
    int fam;
    ok(ftp_parse_port("127,0,0,1,4,1", 13, ip, &port) == 0 && ip[0] == 127 && ip[3] == 1 &&
           port == 1025,
       "PORT 127,0,0,1,4,1");
    ok(ftp_parse_port("256,0,0,1,4,1", 13, ip, &port) < 0, "PORT: 256 refused");
    ok(ftp_parse_port("1,2,3,4,5", 9, ip, &port) < 0, "PORT: five numbers refused");
    ok(ftp_parse_port("1,2,3,4,5,6,7", 13, ip, &port) < 0, "PORT: seven refused");
    ok(ftp_parse_port("1,2,,4,5,6", 10, ip, &port) < 0, "PORT: an empty part refused");
    ok(ftp_parse_port(NULL, 0, ip, &port) < 0, "PORT without argument");
    ok(ftp_parse_eprt("|1|10.0.0.2|6275|", 17, &fam, ip, &port) == 0 && fam == 4 && ip[0] == 10 &&
           ip[3] == 2 && port == 6275,
       "EPRT IPv4");
    ok(ftp_parse_eprt("|2|::1|5282|", 12, &fam, ip, &port) == 0 && fam == 6 && ip[15] == 1 &&
           ip[0] == 0 && port == 5282,
       "EPRT ::1");
    ok(ftp_parse_eprt("!2!2001:db8::7:1!80!", 20, &fam, ip, &port) == 0 && ip[0] == 0x20 &&
           ip[1] == 1 && ip[13] == 7 && ip[15] == 1,
       "EPRT 2001:db8::7:1 with '!'");
    ok(ftp_parse_eprt("|2|1:2:3:4:5:6:7:8|80|", 22, &fam, ip, &port) == 0 && ip[15] == 8,
       "EPRT eight groups");
    ok(ftp_parse_eprt("|2|1::2::3|80|", 14, &fam, ip, &port) < 0, "two :: refused");
    ok(ftp_parse_eprt("|2|1:2:3:4:5:6:7:8:9|80|", 24, &fam, ip, &port) < 0, "nine groups");
    ok(ftp_parse_eprt("|3|1.2.3.4|80|", 14, &fam, ip, &port) < 0, "protocol 3 refused");
    ok(ftp_parse_eprt("|1|1.2.3.4|0|", 13, &fam, ip, &port) < 0, "port 0 refused");
    ok(ftp_parse_eprt("|1|1.2.3.4|65536|", 17, &fam, ip, &port) < 0, "port 65536 refused");
    ok(ftp_parse_eprt("|1|1.2.3.4|80", 13, &fam, ip, &port) < 0, "no closing delimiter");
    ok(ftp_parse_eprt("1|1|1.2.3.4|80|", 15, &fam, ip, &port) < 0, "a digit as delimiter");
}

static void offsets(void)
{
    uint64_t off;
    ok(ftp_parse_offset("12345", 5, &off) == 0 && off == 12345, "REST 12345");
    ok(ftp_parse_offset("1x", 2, &off) < 0, "REST 1x refused");
    ok(ftp_parse_offset("", 0, &off) < 0, "REST empty refused");
    ok(ftp_parse_offset("99999999999999999999", 20, &off) < 0, "REST too large");
}

static void join(const char *cwd, const char *arg, const char *want)
{
    char out[64];
    long n = ftp_path_join(cwd, arg, arg ? strlen(arg) : 0, out, sizeof out);
    if (!want)
        is_int(n, -1, "join(%s, %s) refused", cwd, arg ? arg : "NULL");
    else
        is_str(n >= 0 ? out : "(refused)", want, "join(%s, %s)", cwd, arg ? arg : "NULL");
}

static void paths(void)
{
    join("/", NULL, "/");
    join("/", "a", "/a");
    join("/a", "b/c", "/a/b/c");
    join("/a/b", "..", "/a");
    join("/a", "../../..", "/");
    join("/a", "/x//y/./z/", "/x/y/z");
    join("/a", "/", "/");
    join("/a/b", "../c/../../d", "/d");
    join("/", "..hidden", "/..hidden");
    join("/", "0123456789012345678901234567890123456789012345678901234567890123", NULL);
    char out[16];
    ok(ftp_path_join("/", "a\0b", 3, out, sizeof out) < 0, "a NUL refused");
    ok(ftp_path_hidden("/a/.git/x") && ftp_path_hidden("/.x") && !ftp_path_hidden("/a/b.c") &&
           !ftp_path_hidden("/"),
       "dotfiles found in any segment");
    size_t n = 8;
    const char *a = ftp_list_arg("-la /pub", &n);
    ok(n == 4 && !memcmp(a, "/pub", 4), "LIST -la /pub lists /pub");
    n = 6;
    a = ftp_list_arg("-a -l ", &n);
    is_int(n, 0, "LIST -a -l: the directory itself");
}

/* The listing lines (ftp/ftp_list.c): what LIST, NLST, MLSD and MLST say. */
static void list_lines(void)
{
    struct stat st = {0};
    char out[256];
    int64_t now = 1795000000; /* 2026-11-18 */
    st.st_mode = S_IFREG | 0644;
    st.st_size = 1048576;
    st.st_mtime = now - 86400; /* recent: the time of day */
    is_int(ftp_list_line(out, sizeof out, FTP_LIST, &st, "big.bin", now), strlen(out),
           "LIST: its length");
    ok(!strncmp(out, "-rw-r--r-- 1 ftp ftp      1048576 Nov 17 ", 41) &&
           !strcmp(out + strlen(out) - 10, " big.bin\r\n"),
       "LIST: ls -l with the time: %s", out);
    st.st_mtime = 1600000000; /* 2020: the year */
    ftp_list_line(out, sizeof out, FTP_LIST, &st, "old", now);
    ok(strstr(out, " Sep 13  2020 old\r\n") != NULL, "LIST: an old file shows its year: %s", out);
    ftp_list_line(out, sizeof out, FTP_MLSD, &st, "old", now);
    is_str(out, "type=file;size=1048576;modify=20200913122640;perm=r; old\r\n", "MLSD facts");
    st.st_mode = S_IFDIR | 0755;
    ftp_list_line(out, sizeof out, FTP_MLSD, &st, "d", now);
    is_str(out, "type=dir;modify=20200913122640;perm=el; d\r\n", "MLSD: a directory");
    ftp_list_line(out, sizeof out, FTP_LIST, &st, "d", now);
    ok(!strncmp(out, "drwxr-xr-x ", 11), "LIST: a directory's mode");
    ftp_list_line(out, sizeof out, FTP_NLST, &st, "d", now);
    is_str(out, "d\r\n", "NLST: the name");
    is_int(ftp_list_line(out, 8, FTP_LIST, &st, "d", now), -1, "too small a buffer: -1");
}

/* Each refusal and each form by its own cause (issue 55: every branch of the
   parser). */
static void edges(void)
{
    ftp_cmd_t c;
    size_t used;
    static const char *const x[][2] = {{"XPWD\r\n", "PWD\r\n"}, {"XCWD /a\r\n", "CWD\r\n"},
                                       {"XCUP\r\n", "CDUP\r\n"}, {"XMKD d\r\n", "MKD\r\n"}};
    for (size_t i = 0; i < 4; i++) {
        ftp_cmd_t w;
        size_t u;
        parse(x[i][1], &w, &u);
        ok(parse(x[i][0], &c, &used) > 0 && c.verb != FTP_UNKNOWN && c.verb == w.verb,
           "%.4s: RFC 775's name for %.*s", x[i][0], (int)strcspn(x[i][1], "\r"), x[i][1]);
    }
    ok(parse("NOOP\n", &c, &used) == 5 && c.verb == FTP_NOOP && !c.arg, "a bare LF ends a line");
    ok(parse("\r\n", &c, &used) == FTP_BAD && used == 2, "an empty line: bad, consumed");
    ok(parse("ABCDE\r\n", &c, &used) == FTP_BAD, "a five-letter verb: bad");
    ok(parse("AB1\r\n", &c, &used) == FTP_BAD, "a digit in the verb: bad");
    ok(parse("QQQ\r\n", &c, &used) > 0 && c.verb == FTP_UNKNOWN, "an unknown verb: parsed");
    unsigned char ip[16];
    unsigned port;
    int fam;
    const char *p;
    p = "000000000000000000001,2,3,4,5,6";
    ok(ftp_parse_port(p, strlen(p), ip, &port) < 0, "PORT: a number of 21 digits refused");
    p = "1,2,3,4,5;6";
    ok(ftp_parse_port(p, strlen(p), ip, &port) < 0, "PORT: another separator refused");
    p = "1,2,3,4,5,6x";
    ok(ftp_parse_port(p, strlen(p), ip, &port) < 0, "PORT: trailing bytes refused");
    static const char *const bad[] = {
        "|1|1.2.3|80|", "|1|1.2.3.4.5|80|", "|1|1.2.3.x|80|", "|1|1:2.3.4|80|", "|1|1.2.3.4|8x|",
        "|2|1:2:3:4:5:6:7|80|", "|2|1:|80|", "|2|12345::1|80|", "|2|1::2:3:4:5:6:7:8|80|",
        "|2|:1|80|", "|2|g::1|80|", "|2|1.2.3.4|80|", "|2|1:2:3:4:5:6:7:8:|80|", "|12|1.2.3.4|80|",
        " 1 1.2.3.4 80 ", "\x7f" "1\x7f" "1.2.3.4\x7f" "80\x7f", "|1|1.2.3.4", "|1|1.2.3.4|80|x",
        "|1|", "|2|::1::|80|"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused += ftp_parse_eprt(bad[i], strlen(bad[i]), &fam, ip, &port) < 0;
    is_int(refused, (int)(sizeof bad / sizeof bad[0]), "every malformed EPRT refused");
    ok(ftp_parse_eprt(NULL, 0, &fam, ip, &port) < 0, "EPRT without argument");
    p = "|2|ABCD:ef::|21|";
    ok(ftp_parse_eprt(p, strlen(p), &fam, ip, &port) == 0 && ip[0] == 0xab && ip[3] == 0xef &&
           ip[15] == 0 && port == 21,
       "EPRT: upper-case hex, :: at the end");
    p = "|2|::|21|";
    ok(ftp_parse_eprt(p, strlen(p), &fam, ip, &port) == 0 && !ip[0] && !ip[15],
       "EPRT :: (the unspecified address, no group)");
    uint64_t off;
    ok(ftp_parse_offset(NULL, 0, &off) < 0, "REST without argument");
    ok(ftp_parse_offset("4611686018427387904", 19, &off) == 0 && off == (uint64_t)1 << 62,
       "REST 2^62");
    ok(ftp_parse_offset("4611686018427387905", 19, &off) < 0, "REST past 2^62 refused");
    char out[8];
    is_int(ftp_path_join("/", "a", 1, out, 1), -1, "join into one byte: refused");
    is_int(ftp_path_join("/", "a\0b", 3, out, sizeof out), -1, "join of a name with a NUL: refused");
    is_int(ftp_path_join("/abcdefgh", "x", 1, out, sizeof out), -1, "join past the room: cwd");
    is_int(ftp_path_join("/", "abcdefgh", 8, out, sizeof out), -1, "join past the room: the name");
    ok(ftp_path_join("/a", "", 0, out, sizeof out) == 2 && !strcmp(out, "/a"), "join of nothing");
    ok(ftp_path_hidden(".x") && ftp_path_hidden("/a/.b") && !ftp_path_hidden("/a.b/c") &&
           !ftp_path_hidden(""),
       "hidden: a segment that begins with a dot");
    size_t n = 0;
    ok(!strcmp(ftp_list_arg(NULL, &n), "") && n == 0, "LIST without argument");
    n = 9;
    ok(!strcmp(ftp_list_arg("-a -l dir", &n), "dir") && n == 3, "LIST -a -l dir");
    n = 3;
    ok(ftp_list_arg("-la", &n) && n == 0, "LIST -la");
}

int main(void)
{
    lines();
    byte_by_byte();
    port_args();
    offsets();
    paths();
    list_lines();
    edges();
    printf("1..%d\n", tap_n);
    return tap_failed != 0;
}
