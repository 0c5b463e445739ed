/*
 * advise — what the start and --check say about the options before
 * anything is served: what gatling will do that the admin likely did not
 * mean (issue 68).  Each is one line on stderr, "gatling: warning: ..." or
 * "gatling: note: ...", naming the option or directory and what to do
 * instead; none stops the start.  The start and --check call the same
 * advise() at the same point (after the certificates are loaded, before
 * the chroot), so what --check says is what the start will say.
 */
#ifndef GATLING_ADVISE_H
#define GATLING_ADVISE_H

#include "site/config.h"
#include "site/proc.h"

/*
 * Say, for cfg and what the start made of it, p (its certificates loaded:
 * p->tls; the file: pools' directories open):
 *  - a name HTTPS answers for (a certificate's, or --acme's) whose virtual
 *    host directory exists only for another port ("a.example:80"): its
 *    HTTPS requests would be served from default/ or the document root;
 *  - under virtual hosting, the names a certificate gives that have no
 *    directory at all (served from default/, the root, or with -v nowhere);
 *  - as root with -c: the chroot, and that the binary upgrade is then
 *    refused;
 *  - in that chroot: a -P or --pool backend's unix socket that will not be
 *    found inside it, and a CGI script (-w, -z) whose #! interpreter is not
 *    inside it (the document root walked as check.h bounds it, only then).
 * Returns how many warnings were said (the chroot's note is not one).
 */
int advise(const config_t *cfg, const proc_t *p);

#endif
