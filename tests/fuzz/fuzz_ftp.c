/* The FTP command parser (ftp/ftp_parse.c): lines, PORT/EPRT, REST, paths. */
#include "fuzz.h"

#include "ftp/ftp_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 3 * FTP_LINE_MAX)
        return 0;
    char *buf = fuzz_copy(data, size);
    size_t off = 0;
    while (off < size) {
        ftp_cmd_t c;
        size_t used = 0;
        long r = ftp_parse_line(buf + off, size - off, &c, &used);
        if (r == FTP_INCOMPLETE || r == FTP_TOO_LONG)
            break;
        if (r == FTP_BAD) {
            CHECK(used > 0 && used <= size - off);
            off += used;
            continue;
        }
        CHECK(r > 0 && (size_t)r <= size - off && (size_t)r <= FTP_LINE_MAX);
        CHECK(c.verb >= FTP_UNKNOWN && c.verb < FTP_VERBS);
        CHECK(strlen(c.name) >= 3 && strlen(c.name) <= 4);
        if (c.arg) {
            CHECK(c.arg >= buf + off && c.arg + c.arglen <= buf + off + r);
            unsigned char ip[16];
            unsigned port;
            int fam;
            uint64_t rest;
            if (ftp_parse_port(c.arg, c.arglen, ip, &port) == 0)
                CHECK(port <= 65535);
            if (ftp_parse_eprt(c.arg, c.arglen, &fam, ip, &port) == 0)
                CHECK((fam == 4 || fam == 6) && port >= 1 && port <= 65535);
            if (ftp_parse_offset(c.arg, c.arglen, &rest) == 0)
                CHECK(rest <= (uint64_t)1 << 62);
            char out[FTP_PATH_MAX];
            long n = ftp_path_join("/a/b", c.arg, c.arglen, out, sizeof out);
            if (n >= 0) { /* absolute, normalised: no "//", no "." or ".." segments */
                CHECK(out[0] == '/' && (size_t)n == strlen(out));
                CHECK(!strstr(out, "//") && !strstr(out, "/./") && !strstr(out, "/../"));
                CHECK(n == 1 || out[n - 1] != '/');
            }
            size_t ln = c.arglen;
            const char *la = ftp_list_arg(c.arg, &ln);
            CHECK(la >= c.arg && la + ln == c.arg + c.arglen);
        }
        off += (size_t)r;
    }
    free(buf);
    return 0;
}
