/*
 * acme_ca — which CA an order goes to, when --acme-ca is given more than
 * once (config_acme_t.cas, tried in their order).  An order goes to the
 * name's CA of the moment (the first, until it fails); a failure that is
 * the CA's own (acme_client_t.ca_fault: no answer or no directory, HTTP
 * 5xx or 429, a rateLimited problem) sends it to the next CA at once, in
 * the same attempt (each CA once); any other failure counts against the
 * CA, and after ACME_CA_TRIES of them in a row the name's next attempt,
 * after its back-off, goes to the next CA.  After a certificate the name
 * starts again at the first CA.  A failure before the CA is asked (DNS-01's
 * check) is no CA's.
 */
#ifndef GATLING_ACME_CA_H
#define GATLING_ACME_CA_H

#include "acme_proto.h"

#define ACME_CA_TRIES 3 /* failures in a row at one CA before the next one's turn */

/* Where a name stands: the CA of its next order, its failures there. */
typedef struct acme_ca_turn {
    int ca;
    unsigned fails;
} acme_ca_turn_t;

typedef void (*acme_ca_say_fn)(void *arg, const char *line);

/* The directory and account of turn's CA (acme_client_ready), then the
   order (acme_client_issue; replaces dropped where the CA has no ARI),
   moving on as above; each move said through say.  0 with out filled (the
   issuing CA is cl->ca, cl->url), or -1 with cl->err. */
int acme_ca_issue(acme_client_t *cl, acme_ca_turn_t *turn, const char *name, const char *replaces,
                  acme_issued_t *out, acme_ca_say_fn say, void *arg);

#endif
