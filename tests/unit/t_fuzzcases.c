/*
 * Inputs that libFuzzer found (tests/fuzz), kept as regression tests: each
 * failed on the code of its day.
 */
#include "tap.h"
#include "vhost.h"

static int host(const char *h, char *out)
{
    http_str_t v = {h, strlen(h)};
    return vhost_name(&v, 80, 0, out);
}

int main(void)
{
    char out[VHOST_NAME_MAX];
    /* fuzz_host: brackets took any hex digits, colons and dots, ".." too */
    is_int(host("[1..11A11]", out), -1, "Host [1..11A11]: not an IPv6 address, 400");
    is_int(host("[1.2.3.4]", out), -1, "Host [1.2.3.4]: not an IPv6 address");
    is_int(host("[]", out), -1, "Host []");
    http_str_t nul = {"[::1\0]:", 8}; /* the parser never passes a NUL; the function refuses it too */
    is_int(vhost_name(&nul, 80, 0, out), -1, "Host with a NUL inside the brackets");
    ok(host("[::1]", out) > 0 && !strcmp(out, "[::1]:80"), "Host [::1] still fine: %s", out);
    ok(host("[2001:DB8::A]:8080", out) > 0 && !strcmp(out, "[2001:db8::a]:80"),
       "Host [2001:DB8::A]:8080 lower-cased, port replaced: %s", out);
    return tap_done();
}
