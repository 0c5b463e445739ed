/* acme_ca — see acme_ca.h. */
#include "acme_ca.h"

#include <stdio.h>
#include <string.h>

/* One order at cl's CA: 0; -1 (cl->ca_fault says whose fault); 1 when it
   failed before newOrder with the CA ready (DNS-01's check: no CA's). */
static int try_ca(acme_client_t *cl, const char *name, const char *replaces, acme_issued_t *out)
{
    cl->ca_fault = 0;
    if (acme_client_ready(cl) < 0)
        return -1;
    if (!cl->dir.renewal_info[0])
        replaces = NULL; /* no ARI at this CA: nothing it could match */
    unsigned long orders = cl->orders;
    if (acme_client_issue(cl, name, replaces, out) == 0)
        return 0;
    return cl->orders == orders && !cl->ca_fault ? 1 : -1;
}

int acme_ca_issue(acme_client_t *cl, acme_ca_turn_t *turn, const char *name, const char *replaces,
                  acme_issued_t *out, acme_ca_say_fn say, void *arg)
{
    int ncas = cl->cfg->acme.ncas > 0 ? cl->cfg->acme.ncas : 1;
    char line[ACME_ERR_MAX + 2 * ACME_URL_MAX];
    memset(out, 0, sizeof *out);
    if (turn->ca < 0 || turn->ca >= ncas)
        turn->ca = 0;
    for (int tried = 0; tried < ncas; tried++) {
        acme_client_use(cl, turn->ca);
        int rc = try_ca(cl, name, replaces, out);
        if (rc == 0) {
            turn->ca = 0, turn->fails = 0; /* the next order starts at the first CA */
            return 0;
        }
        if (ncas == 1 || rc > 0)
            return -1;
        int next = (turn->ca + 1) % ncas;
        const char *to = cl->cfg->acme.cas[next].url;
        if (!cl->ca_fault) { /* the CA answered: the next only after ACME_CA_TRIES */
            if (++turn->fails < ACME_CA_TRIES)
                return -1;
            snprintf(line, sizeof line, "%s: %u failures in a row at %s: the next attempt goes to "
                     "%s", name, turn->fails, cl->url, to);
            say(arg, line);
            turn->ca = next, turn->fails = 0;
            return -1;
        }
        snprintf(line, sizeof line, "%s: %s failed on its side (%s): the order goes to %s now",
                 name, cl->url, cl->err, to);
        say(arg, line);
        turn->ca = next, turn->fails = 0;
    }
    return -1;
}
