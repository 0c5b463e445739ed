/* acme_dns — see acme_dns.h. */
#include "acme_dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <ldns/ldns.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "acme_crypto.h"

#define NS_MAX 8 /* the zone's name servers looked at for propagation */

typedef struct server {
    char addr[64]; /* numeric */
    int v6;
    unsigned short port;
} server_t;

int acme_dns_wanted(const config_acme_t *a, const char *name)
{
    return (name[0] == '*' && name[1] == '.') || a->challenge == CONFIG_ACME_DNS01;
}

/* ADDR, ADDR:PORT, [IPv6]:PORT or a bare IPv6 address into s: 0 or -1. */
static int parse_server(const char *in, server_t *s)
{
    const char *port = NULL;
    size_t n;
    unsigned char tmp[16];
    if (in[0] == '[') {
        const char *close = strchr(in, ']');
        if (!close || (close[1] && close[1] != ':'))
            return -1;
        n = (size_t)(close - in - 1), in++;
        port = close[1] ? close + 2 : NULL;
    } else {
        const char *c = strchr(in, ':');
        n = strlen(in);
        if (c && !strchr(c + 1, ':')) /* one colon: IPv4:PORT */
            n = (size_t)(c - in), port = c + 1;
    }
    if (!n || n >= sizeof s->addr)
        return -1;
    memcpy(s->addr, in, n);
    s->addr[n] = 0;
    s->v6 = strchr(s->addr, ':') != NULL;
    if (inet_pton(s->v6 ? AF_INET6 : AF_INET, s->addr, tmp) != 1)
        return -1;
    s->port = 53;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (!*port || *end || p < 1 || p > 65535 || port[0] == '0')
            return -1;
        s->port = (unsigned short)p;
    }
    return 0;
}

int acme_dns_server_ok(const char *s)
{
    server_t sv;
    return parse_server(s, &sv) == 0;
}

/* A resolver for one server, non-recursive, bounded; TSIG-signed with key. */
static ldns_resolver *resolver(const server_t *s, const acme_dns_key_t *key)
{
    ldns_resolver *r = ldns_resolver_new();
    ldns_rdf *ns = ldns_rdf_new_frm_str(s->v6 ? LDNS_RDF_TYPE_AAAA : LDNS_RDF_TYPE_A, s->addr);
    if (!r || !ns || ldns_resolver_push_nameserver(r, ns) != LDNS_STATUS_OK) {
        ldns_rdf_deep_free(ns);
        ldns_resolver_deep_free(r);
        return NULL;
    }
    ldns_rdf_deep_free(ns); /* pushed as a copy */
    ldns_resolver_set_port(r, s->port);
    ldns_resolver_set_recursive(r, false);
    ldns_resolver_set_timeout(r, (struct timeval){ACME_DNS_TIMEOUT_S, 0});
    ldns_resolver_set_retry(r, ACME_DNS_TRIES);
    ldns_resolver_set_retrans(r, 0); /* libldns sleep()s that long between tries */
    if (key) {
        ldns_resolver_set_tsig_keyname(r, key->name);
        ldns_resolver_set_tsig_algorithm(r, key->alg);
        ldns_resolver_set_tsig_keydata(r, key->secret);
    }
    return r;
}

/* The answer's code in words, and a TSIG error (RFC 8945 5.3) with what it
   means for the admin. */
static void rcode_words(const ldns_pkt *p, char *out, size_t cap)
{
    static const char *const names[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",
                                        "REFUSED", "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH",
                                        "NOTZONE"};
    unsigned rc = ldns_pkt_get_rcode(p);
    const ldns_rr *t = ldns_pkt_tsig(p);
    unsigned terr = t && ldns_rr_rd_count(t) > 5 ? ldns_rdf2native_int16(ldns_rr_rdf(t, 5)) : 0;
    char num[16];
    snprintf(num, sizeof num, "rcode %u", rc);
    int k = snprintf(out, cap, "%s", rc < 11 ? names[rc] : num);
    if (terr && k >= 0 && (size_t)k < cap)
        snprintf(out + k, cap - (size_t)k, " (TSIG %s)",
                 terr == 16   ? "BADSIG: the key's secret or algorithm is not the server's"
                 : terr == 17 ? "BADKEY: the server knows no key of that name and algorithm, "
                                "or (Knot) its ACL refuses this update"
                 : terr == 18 ? "BADTIME: the clocks differ by more than 5 minutes"
                              : "error");
    else if (rc == LDNS_RCODE_REFUSED && k >= 0 && (size_t)k < cap)
        snprintf(out + k, cap - (size_t)k, " (it does not serve the zone, or does not let "
                 "this key update it)");
}

/* Send q (signed when r has a key) and take the answer: 0, or -1 with err.
   ldns_send, not ldns_resolver_send_pkt: an answer whose TSIG does not
   verify is kept, so that the server's error (NOTAUTH, BADSIG: a wrong key)
   is what the admin reads; only a NOERROR answer must verify. */
static int exchange(ldns_resolver *r, const server_t *s, ldns_pkt *q, ldns_pkt **ans,
                    const char *what, char *err, size_t cap)
{
    ldns_status st = LDNS_STATUS_ERR;
    *ans = NULL;
    if (ldns_resolver_tsig_keyname(r) && ldns_update_pkt_tsig_add(q, r) != LDNS_STATUS_OK)
        return acme_err(err, cap, "%s: cannot sign it with the TSIG key", what);
    for (int i = 0; i < ACME_DNS_TRIES && !*ans; i++) /* a lost answer: the same again */
        st = ldns_send(ans, r, q);
    if (*ans && ldns_pkt_get_rcode(*ans) != LDNS_RCODE_NOERROR) {
        char words[160];
        rcode_words(*ans, words, sizeof words);
        return acme_err(err, cap, "%s: %s%s%s port %u answered %s", what, s->v6 ? "[" : "", s->addr,
                        s->v6 ? "]" : "", s->port, words);
    }
    char why[96];
    int gone = st == LDNS_STATUS_RES_NO_NS || st == LDNS_STATUS_NETWORK_ERR ||
               st == LDNS_STATUS_SOCKET_ERROR;
    snprintf(why, sizeof why, "no answer in %d tries of %d s (down, or not reachable)",
             ACME_DNS_TRIES, ACME_DNS_TIMEOUT_S);
    if (st != LDNS_STATUS_OK || !*ans)
        return acme_err(err, cap, "%s: %s%s%s port %u: %s", what, s->v6 ? "[" : "", s->addr,
                        s->v6 ? "]" : "", s->port,
                        *ans   ? "the answer's TSIG signature does not verify"
                        : gone ? why
                               : ldns_get_errorstr_by_id(st));
    return 0;
}

/* Free one exchange's parts: q owns name once it was made. */
static void done(ldns_resolver *r, ldns_pkt *q, ldns_rdf *name, ldns_pkt *ans)
{
    ldns_pkt_free(ans);
    if (q)
        ldns_pkt_free(q);
    else
        ldns_rdf_deep_free(name);
    ldns_resolver_deep_free(r);
}

/* Query name (type) at s, unsigned: the answer, or NULL with err. */
static ldns_pkt *ask(const server_t *s, const char *name, ldns_rr_type type, const char *what,
                     char *err, size_t cap)
{
    ldns_resolver *r = resolver(s, NULL);
    ldns_rdf *d = ldns_dname_new_frm_str(name);
    ldns_pkt *q = d ? ldns_pkt_query_new(d, type, LDNS_RR_CLASS_IN, 0) : NULL;
    ldns_pkt *ans = NULL;
    if (!r || !q)
        acme_err(err, cap, "%s: no memory", what);
    else if (exchange(r, s, q, &ans, what, err, cap) < 0 &&
             !(ans && ldns_pkt_get_rcode(ans) == LDNS_RCODE_NXDOMAIN)) {
        ldns_pkt_free(ans);
        ans = NULL;
    }
    done(r, q, d, NULL);
    return ans;
}

/* The owner's name and the data of the first rr of type in l owned by
   name (case aside), as text into out; 1, or 0 when none. */
static int rr_at(ldns_rr_list *l, ldns_rr_type type, const char *name, char *out, size_t cap)
{
    int found = 0;
    for (size_t i = 0; !found && i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        if (ldns_rr_get_type(rr) != type)
            continue;
        char *o = ldns_rdf2str(ldns_rr_owner(rr));
        char *v = type == LDNS_RR_TYPE_SOA ? o
                  : ldns_rr_rd_count(rr) == 1 ? ldns_rdf2str(ldns_rr_rdf(rr, 0)) : NULL;
        if (o && v && (!name || !strcasecmp(o, name)) && strlen(v) < cap) {
            memcpy(out, v, strlen(v) + 1);
            found = 1;
        }
        if (v != o)
            free(v);
        free(o);
    }
    return found;
}

/* What s answered, for a message: "NOERROR, 2 answers: CNAME ..." */
static void answer_words(const ldns_pkt *p, char *out, size_t cap)
{
    ldns_rr_list *l = ldns_pkt_answer(p);
    size_t n = ldns_rr_list_rr_count(l);
    ldns_lookup_table *rc = ldns_lookup_by_id(ldns_rcodes, (int)ldns_pkt_get_rcode(p));
    int k = snprintf(out, cap, "%s%s, %zu answer record%s", rc ? rc->name : "rcode?",
                     ldns_pkt_aa(p) ? "" : " (not authoritative)", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n && i < 2 && k > 0 && (size_t)k < cap; i++) {
        char *t = ldns_rr_type2str(ldns_rr_get_type(ldns_rr_list_rr(l, i)));
        k += snprintf(out + k, cap - (size_t)k, "%s%s", i ? ", " : ": ", t ? t : "?");
        free(t);
    }
}

/* The zone of owner: the SOA the primary gives for it, in the answer (owner
   is the apex) or the authority section. */
static int find_zone(const server_t *s, const char *owner, char *zone, size_t zcap, char *err,
                     size_t cap)
{
    char what[400], words[200];
    snprintf(what, sizeof what, "the zone of %s (SOA query)", owner);
    ldns_pkt *ans = ask(s, owner, LDNS_RR_TYPE_SOA, what, err, cap);
    if (!ans)
        return -1;
    int rc = rr_at(ldns_pkt_answer(ans), LDNS_RR_TYPE_SOA, NULL, zone, zcap) ||
                     rr_at(ldns_pkt_authority(ans), LDNS_RR_TYPE_SOA, NULL, zone, zcap)
                 ? 0 : -1;
    if (rc < 0) {
        answer_words(ans, words, sizeof words);
        acme_err(err, cap, "%s: %s%s%s port %u serves no zone that holds it (answered %s, "
                 "no SOA)", what, s->v6 ? "[" : "", s->addr, s->v6 ? "]" : "", s->port, words);
    }
    ldns_pkt_free(ans);
    return rc;
}

/* Follow owner's CNAMEs at s (ACME_DNS_CNAME_MAX at most, a loop refused):
   the name that takes the TXT record into owner, the chain ("A -> B") into
   via ("" without one).  0, or -1 with err. */
static int follow(const server_t *s, char *owner, size_t ocap, char *via, size_t vcap, char *err,
                  size_t cap)
{
    char seen[ACME_DNS_CNAME_MAX + 1][256], next[256], what[400];
    via[0] = 0;
    for (int hop = 0;; hop++) {
        if (strlen(owner) >= sizeof seen[0])
            return acme_err(err, cap, "%s: the name is too long", owner);
        snprintf(seen[hop], sizeof seen[hop], "%s", owner);
        snprintf(what, sizeof what, "the CNAME of %s (TXT query)", owner);
        ldns_pkt *ans = ask(s, owner, LDNS_RR_TYPE_TXT, what, err, cap);
        if (!ans)
            return -1;
        int cname = rr_at(ldns_pkt_answer(ans), LDNS_RR_TYPE_CNAME, owner, next, sizeof next);
        ldns_pkt_free(ans);
        if (!cname)
            return 0;
        size_t vl = strlen(via);
        snprintf(via + vl, vcap - vl, "%s%s CNAME %s", vl ? ", " : "", owner, next);
        for (int i = 0; i <= hop; i++)
            if (!strcasecmp(seen[i], next))
                return acme_err(err, cap, "%s: a CNAME loop (%s)", seen[0], via);
        if (hop == ACME_DNS_CNAME_MAX)
            return acme_err(err, cap, "%s: more than %d CNAMEs (%s)", seen[0], ACME_DNS_CNAME_MAX,
                            via);
        if (strlen(next) >= ocap)
            return acme_err(err, cap, "%s: the CNAME's target is too long", owner);
        memcpy(owner, next, strlen(next) + 1);
    }
}

/* One signed UPDATE of zone: prerequisites pr (NULL: none), updates up. */
static int update(const config_acme_t *a, const server_t *s, const char *zone, ldns_rr_list *pr,
                  ldns_rr_list *up, const char *what, char *err, size_t cap)
{
    ldns_resolver *r = resolver(s, a->dns_key);
    ldns_rdf *z = ldns_dname_new_frm_str(zone);
    ldns_pkt *q = z ? ldns_update_pkt_new(z, LDNS_RR_CLASS_IN, pr, up, NULL) : NULL;
    ldns_pkt *ans = NULL;
    int rc = !r || !q ? acme_err(err, cap, "%s: no memory", what)
                      : exchange(r, s, q, &ans, what, err, cap);
    done(r, q, z, ans);
    return rc;
}

/* "_acme-challenge." + name without its "*." */
static int owner_of(const char *name, char *out, size_t cap)
{
    const char *base = name[0] == '*' && name[1] == '.' ? name + 2 : name;
    int k = snprintf(out, cap, "_acme-challenge.%s.", base);
    return k > 0 && (size_t)k < cap ? 0 : -1;
}

/* name's record: its owner (after the CNAMEs) and zone into rec, the
   server into s.  0, or -1 with err. */
static int locate(const config_acme_t *a, const char *name, server_t *s, acme_dns_rec_t *rec,
                  char *err, size_t cap)
{
    if (!a->dns_server || !a->dns_key || parse_server(a->dns_server, s) < 0)
        return acme_err(err, cap, "%s: DNS-01 needs --acme-dns-server and --acme-dns-key", name);
    if (owner_of(name, rec->owner, sizeof rec->owner) < 0)
        return acme_err(err, cap, "%s: the name is too long for _acme-challenge", name);
    if (follow(s, rec->owner, sizeof rec->owner, rec->via, sizeof rec->via, err, cap) < 0)
        return -1;
    return find_zone(s, rec->owner, rec->zone, sizeof rec->zone, err, cap);
}

static int change(const config_acme_t *a, const server_t *s, const acme_dns_rec_t *rec, int add,
                  char *err, size_t cap);

/* A signed UPDATE of zone that changes nothing (prerequisite: its SOA
   exists, RFC 2136 2.4.1): the key is the server's, whatever its policy. */
static int key_check(const config_acme_t *a, const server_t *s, const char *zone, char *err,
                     size_t cap)
{
    char what[560];
    ldns_rr_list *pr = ldns_rr_list_new(), *up = ldns_rr_list_new();
    ldns_rr *soa = ldns_rr_new();
    ldns_rdf *z = ldns_dname_new_frm_str(zone);
    int rc = -1;
    if (pr && up && soa && z) {
        ldns_rr_set_owner(soa, z);
        z = NULL;
        ldns_rr_set_type(soa, LDNS_RR_TYPE_SOA);
        ldns_rr_set_class(soa, LDNS_RR_CLASS_ANY);
        ldns_rr_set_ttl(soa, 0);
        ldns_rr_list_push_rr(pr, soa);
        soa = NULL;
        snprintf(what, sizeof what, "a signed update of zone %s (key %s)", zone,
                 a->dns_key->name);
        rc = update(a, s, zone, pr, up, what, err, cap);
    } else
        acme_err(err, cap, "%s: no memory", zone);
    ldns_rdf_deep_free(z);
    ldns_rr_free(soa);
    ldns_rr_list_deep_free(pr);
    ldns_rr_list_deep_free(up);
    return rc;
}

int acme_dns_check(const config_acme_t *a, const char *name, char *err, size_t cap)
{
    server_t s;
    acme_dns_rec_t rec;
    unsigned char rnd[12];
    memset(&rec, 0, sizeof rec);
    if (locate(a, name, &s, &rec, err, cap) < 0 || key_check(a, &s, rec.zone, err, cap) < 0)
        return -1;
    /* the very update, undone in the same message: a policy that refuses
       the record refuses this (acme_dns.h) */
    memcpy(rec.value, "check-", 6);
    if (RAND_bytes(rnd, sizeof rnd) != 1 ||
        acme_b64url(rnd, sizeof rnd, rec.value + 6, sizeof rec.value - 6) < 0)
        return acme_err(err, cap, "%s: no random bytes", name);
    if (change(a, &s, &rec, 2, err, cap) == 0)
        return 0;
    size_t n = strlen(err);
    snprintf(err + n, cap - n, ": the key is the server's (an empty update passed), but its "
             "update policy refuses this record");
    return -1;
}

/* The TXT record of rec as an update's RR: to add (class IN) or delete
   (class NONE, TTL 0); NULL when it cannot be built. */
static ldns_rr *txt_rr(const acme_dns_rec_t *rec, int add)
{
    char text[400];
    ldns_rr *rr = NULL;
    snprintf(text, sizeof text, "%s %d IN TXT \"%s\"", rec->owner, ACME_DNS_TTL, rec->value);
    if (ldns_rr_new_frm_str(&rr, text, 0, NULL, NULL) != LDNS_STATUS_OK)
        return NULL;
    if (!add) {
        ldns_rr_set_class(rr, LDNS_RR_CLASS_NONE);
        ldns_rr_set_ttl(rr, 0);
    }
    return rr;
}

/* rec's TXT record added (how 1), removed (0), or added and removed in one
   update (2: the check, which leaves the zone as it was). */
static int change(const config_acme_t *a, const server_t *s, const acme_dns_rec_t *rec, int how,
                  char *err, size_t cap)
{
    static const char *const verb[] = {"removing", "adding",
                                        "a test update adding and deleting"};
    char what[1200];
    ldns_rr_list *up = ldns_rr_list_new();
    int k = snprintf(what, sizeof what, "%s the TXT record of %s in zone %s (key %s)", verb[how],
                     rec->owner, rec->zone, a->dns_key ? a->dns_key->name : "-");
    if (rec->via[0] && k > 0 && (size_t)k < sizeof what)
        snprintf(what + k, sizeof what - (size_t)k, ", through %s", rec->via);
    ldns_rr *add = txt_rr(rec, how != 0), *del = how == 2 ? txt_rr(rec, 0) : NULL;
    if (!up || !add || (how == 2 && !del)) {
        ldns_rr_free(add);
        ldns_rr_free(del);
        ldns_rr_list_free(up);
        return acme_err(err, cap, "%s: cannot build it", what);
    }
    ldns_rr_list_push_rr(up, add);
    if (del)
        ldns_rr_list_push_rr(up, del);
    int rc = update(a, s, rec->zone, NULL, up, what, err, cap);
    ldns_rr_list_deep_free(up);
    return rc;
}

/* Does s serve rec's TXT value?  1 yes, 0 not yet, -1 no answer. */
static int has_txt(const server_t *s, const acme_dns_rec_t *rec)
{
    ldns_resolver *r = resolver(s, NULL);
    ldns_rdf *name = ldns_dname_new_frm_str(rec->owner);
    ldns_pkt *ans = r && name ? ldns_resolver_query(r, name, LDNS_RR_TYPE_TXT, LDNS_RR_CLASS_IN,
                                                    0)
                              : NULL;
    int rc = ans ? 0 : -1;
    ldns_rr_list *l = ans ? ldns_pkt_answer(ans) : NULL;
    size_t vlen = strlen(rec->value);
    for (size_t i = 0; l && rc == 0 && i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        const ldns_rdf *d = ldns_rr_get_type(rr) == LDNS_RR_TYPE_TXT && ldns_rr_rd_count(rr) == 1
                                ? ldns_rr_rdf(rr, 0) : NULL;
        const uint8_t *b = d ? ldns_rdf_data(d) : NULL;
        rc = b && ldns_rdf_size(d) == vlen + 1 && b[0] == vlen && !memcmp(b + 1, rec->value, vlen);
    }
    ldns_pkt_free(ans);
    ldns_rdf_deep_free(name);
    ldns_resolver_deep_free(r);
    return rc;
}

/* The addresses of the zone's name servers (port 53), from its NS set at
   the primary and the system's resolver, the primary left out: how many. */
static int name_servers(const server_t *prim, const char *zone, server_t *out, int max)
{
    ldns_resolver *r = resolver(prim, NULL);
    ldns_rdf *name = ldns_dname_new_frm_str(zone);
    ldns_pkt *ans = r && name ? ldns_resolver_query(r, name, LDNS_RR_TYPE_NS, LDNS_RR_CLASS_IN, 0)
                              : NULL;
    ldns_rr_list *l = ans ? ldns_pkt_answer(ans) : NULL;
    int n = 0;
    for (size_t i = 0; l && i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        char *host = ldns_rr_get_type(rr) == LDNS_RR_TYPE_NS && ldns_rr_rd_count(rr) == 1
                         ? ldns_rdf2str(ldns_rr_rdf(rr, 0)) : NULL;
        struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
        if (host && getaddrinfo(host, "53", &hints, &ai) == 0)
            for (struct addrinfo *p = ai; p && n < max; p = p->ai_next) {
                server_t *s = &out[n];
                const void *at = p->ai_family == AF_INET6
                                     ? (void *)&((struct sockaddr_in6 *)p->ai_addr)->sin6_addr
                                     : (void *)&((struct sockaddr_in *)p->ai_addr)->sin_addr;
                s->v6 = p->ai_family == AF_INET6, s->port = 53;
                if (inet_ntop(p->ai_family, at, s->addr, sizeof s->addr) &&
                    (strcmp(s->addr, prim->addr) || prim->port != 53))
                    n++;
            }
        freeaddrinfo(ai);
        free(host);
    }
    ldns_pkt_free(ans);
    ldns_rdf_deep_free(name);
    ldns_resolver_deep_free(r);
    return n;
}

static void nap_ms(const volatile sig_atomic_t *stop, long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    while (!*stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Until the primary and each name server that answers serve the value. */
static int propagated(const server_t *prim, const acme_dns_rec_t *rec,
                      const volatile sig_atomic_t *stop, char *err, size_t cap)
{
    server_t ns[NS_MAX + 1];
    ns[0] = *prim;
    int n = 1 + name_servers(prim, rec->zone, ns + 1, NS_MAX);
    unsigned done = 0; /* bit i: ns[i] has it, or did not answer */
    time_t until = time(NULL) + ACME_DNS_PROPAGATION_S;
    for (int round = 0; !*stop; round++) {
        for (int i = 0; i < n; i++) {
            int got = done & (1u << i) ? 1 : has_txt(&ns[i], rec);
            if (got == 1 || (got < 0 && i > 0)) /* a secondary we cannot reach */
                done |= 1u << i;
        }
        if (done == (1u << n) - 1)
            return 0;
        if (time(NULL) >= until)
            break;
        nap_ms(stop, round ? 1000 : 250);
    }
    for (int i = 0; i < n && !*stop; i++) /* (a stop is no server's fault) */
        if (!(done & (1u << i)))
            return acme_err(err, cap, "%s: %s%s%s port %u does not serve the TXT record after %d s",
                            rec->owner, ns[i].v6 ? "[" : "", ns[i].addr, ns[i].v6 ? "]" : "",
                            ns[i].port, ACME_DNS_PROPAGATION_S);
    return acme_err(err, cap, "%s: stopped", rec->owner);
}

int acme_dns_publish(const config_acme_t *a, const char *name, const char *keyauth,
                     const volatile sig_atomic_t *stop, acme_dns_rec_t *rec, char *err,
                     size_t cap)
{
    server_t s;
    unsigned char md[SHA256_DIGEST_LENGTH];
    acme_dns_rec_t found;
    memset(rec, 0, sizeof *rec);
    memset(&found, 0, sizeof found);
    SHA256((const unsigned char *)keyauth, strlen(keyauth), md);
    if (acme_b64url(md, sizeof md, found.value, sizeof found.value) < 0)
        return acme_err(err, cap, "%s: cannot encode the key authorization", name);
    if (locate(a, name, &s, &found, err, cap) < 0)
        return -1;
    /* from here on acme_dns_remove deletes it: an update whose answer was
       lost may have been made (deleting what is not there changes nothing) */
    *rec = found;
    if (change(a, &s, rec, 1, err, cap) < 0)
        return -1;
    return propagated(&s, rec, stop, err, cap);
}

int acme_dns_remove(const config_acme_t *a, const acme_dns_rec_t *rec, char *err, size_t cap)
{
    server_t s;
    if (!rec->zone[0])
        return 0;
    if (!a->dns_server || parse_server(a->dns_server, &s) < 0)
        return acme_err(err, cap, "no --acme-dns-server");
    return change(a, &s, rec, 0, err, cap);
}
