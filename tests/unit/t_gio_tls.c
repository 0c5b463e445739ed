/*
 * t_gio_tls — the pure parts of io/gio_tls.c.
 *
 * gio_tls_free_buffers_safe: which libssl versions may have their buffers
 * freed by SSL_free_buffers after a send (the bug: a version with
 * CVE-2024-4741 let through, whose SSL_free_buffers frees a read buffer
 * that still holds part of a record; or a fixed one refused, which keeps
 * OpenSSL freeing and allocating its write buffer around every record).
 */
#include "gio_tls.h"
#include "tap.h"

int main(void)
{
    static const struct {
        unsigned long v;
        int safe;
        const char *name;
    } cases[] = {
        {0x1010117fUL, 0, "1.1.1w"},     {0x30000000UL, 0, "3.0.0"},
        {0x300000d0UL, 0, "3.0.13"},     {0x300000e0UL, 1, "3.0.14"},
        {0x30000160UL, 1, "3.0.22"},     {0x30100050UL, 0, "3.1.5"},
        {0x30100060UL, 1, "3.1.6"},      {0x30200010UL, 0, "3.2.1"},
        {0x30200020UL, 1, "3.2.2"},      {0x30300000UL, 0, "3.3.0"},
        {0x30300010UL, 1, "3.3.1"},      {0x30400000UL, 1, "3.4.0"},
        {0x30500010UL, 1, "3.5.1"},      {0x40000000UL, 1, "4.0.0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ok(gio_tls_free_buffers_safe(cases[i].v) == cases[i].safe, "%s: %s", cases[i].name,
           cases[i].safe ? "SSL_free_buffers after a send" : "the mode kept as it is");
    return tap_done();
}
