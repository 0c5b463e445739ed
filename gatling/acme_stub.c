/*
 * A stand-in for the ACME client (acme/acme.h) until branch acme-client
 * lands: weak, so that its acme_start takes over when linked in beside it.
 * It starts no process: --acme serves the challenges and certificates that
 * appear in the state and -C directories, and gets none itself.
 */
#include "acme/acme.h"

#include <stdio.h>

__attribute__((weak)) pid_t acme_start(const config_t *cfg, const char *const *names, int nnames,
                                       int http01, pid_t notify, char *err, size_t errlen)
{
    (void)cfg, (void)names, (void)nnames, (void)http01, (void)notify, (void)err, (void)errlen;
    fputs("gatling: --acme: this build has no ACME client yet (acme_stub.c): challenges and "
          "certificates are served, none is ordered\n",
          stderr);
    return 0;
}
