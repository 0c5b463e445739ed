/*
 * Regressions of Debian's libowfat that gatling depends on (LIBOWFAT.md):
 * through gatling/owfat.h, the "pure" scan_/fmt_ calls must really write.
 */
#include "owfat.h"
#include "tap.h"

#include <time.h>

int main(void)
{
    time_t t = 0;
    size_t n = scan_httpdate("Sun, 06 Nov 1994 08:49:37 GMT", &t);
    is_int(n, 29, "scan_httpdate consumes an IMF-fixdate");
    is_int(t, 784111777, "scan_httpdate writes the time");
    /* libowfat 0.32 does not know the obsolete RFC 850 form: it must say
       so (0 bytes) rather than invent a time.  gatling reads HTTP-dates with
       http/cachectl.c's cc_http_date (all three forms, strict: t_cachectl.c),
       not with this; these checks keep the "pure" neutralising honest */
    t = 1;
    n = scan_httpdate("Sunday, 06-Nov-94 08:49:37 GMT", &t);
    ok(n == 0, "scan_httpdate: RFC 850 date is refused, not misread");
    t = 0;
    scan_httpdate("Sun Nov  6 08:49:37 1994", &t);
    is_int(t, 784111777, "scan_httpdate: asctime date");

    char buf[64];
    memset(buf, 'x', sizeof buf);
    n = fmt_ulong(buf, 1234567890UL);
    buf[n] = 0;
    is_str(buf, "1234567890", "fmt_ulong writes the digits");
    n = fmt_ulonglong(buf, 18446744073709551615ULL);
    buf[n] = 0;
    is_str(buf, "18446744073709551615", "fmt_ulonglong");
    n = fmt_httpdate(buf, 784111777);
    buf[n] = 0;
    is_str(buf, "Sun, 06 Nov 1994 08:49:37 GMT", "fmt_httpdate");
    unsigned long v = 0;
    n = scan_ulong("4711x", &v);
    ok(n == 4 && v == 4711, "scan_ulong writes the value");
    is_int(scan_fromhex('F'), 15, "scan_fromhex");
    char ip[16] = {0};
    ip[10] = (char)0xff, ip[11] = (char)0xff, ip[12] = 127, ip[15] = 1;
    n = fmt_ip6c(buf, ip);
    buf[n] = 0;
    is_str(buf, "127.0.0.1", "fmt_ip6c prints v4-mapped addresses as IPv4");
    return tap_done();
}
