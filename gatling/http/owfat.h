/*
 * owfat.h — the one way into libowfat.
 *
 * Debian's libowfat-dev 0.32 marks fmt_* and scan_* functions that write
 * through a pointer as __attribute__((pure)); the optimiser then drops the
 * call or ignores what it wrote (scan_httpdate leaving the time untouched).
 * Defining `pure` away while the headers are read neutralises that.  Every
 * file that wants libowfat includes this header, never <fmt.h> and friends
 * directly.  tests/unit/t_owfat.c guards the regression.
 *
 * Never call: fmt_ulong0, fmt_netstring, stralloc_cat*long*, fmt_html*,
 * CAS.h, libowfat's io_/iob_ (the project's notes on libowfat, kept beside
 * the repository and not in it, say why; io/gio.h names our loop gio_ for
 * the last).
 */
#ifndef GATLING_OWFAT_H
#define GATLING_OWFAT_H

#define pure /* __attribute__((pure)) -> __attribute__(()) */
#include <case.h>
#include <fmt.h>
#include <ip4.h>
#include <ip6.h>
#include <scan.h>
#include <str.h>
#include <textcode.h>
#undef pure

#endif
