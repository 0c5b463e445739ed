/* t_acme_dns — DNS-01's exchanges with the zone's primary (gatling/acme/acme_dns.c)
   against a fake primary: a child process on a loopback UDP port that parses
   each message with libldns, checks the request's TSIG with libldns's
   verification, tells the test what it was sent (one line a message, on a
   pipe) and answers as the case asks: the SOA where a server puts it, or none;
   NOERROR signed with the key, with another secret, or unsigned; REFUSED,
   NOTAUTH with each TSIG error, a code past NOTZONE; bytes that are no DNS
   message; the TXT record only from the Nth query on (the wait for it).
   Asserted: the UPDATE messages' contents (zone, prerequisite, the TXT
   record added and deleted, its value RFC 8555 8.4's digest), and each
   error's line as the admin reads it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ldns/ldns.h>
#include <openssl/sha.h>

#include "acme_crypto.h"
#include "acme_dns.h"
#include "tap.h"

#define ZONE "zone.test."
#define SECRET "jA5Hz8JSFMXNl7eHSFsmqmB8Gb0RPBEAH/pzmuJnCnU="
#define OTHER "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU="

enum { SOA_AUTH, SOA_ANSWER, SOA_NONE, SOA_NXDOMAIN, SOA_REFUSED };
enum { SIGN_KEY, SIGN_OTHER, SIGN_NONE, SIGN_GARBAGE };

typedef struct fake {
    int soa;       /* where the SOA query's answer puts the SOA */
    int rcode;     /* the UPDATE's answer code */
    int tsig_err;  /* ... and its TSIG's error field (0: none) */
    int sign;      /* ... signed how */
    int txt_after; /* TXT queries answered empty before the record is served */
} fake_t;

static acme_dns_key_t key = {"acme-update.", "hmac-sha256.", SECRET};

/* The fake primary: one child on fd, what it was sent on out. */
typedef struct peer {
    pid_t pid;
    int port, out;
} peer_t;

static void say(int out, const char *fmt, const char *a, const char *b)
{
    char line[1200];
    int k = snprintf(line, sizeof line - 1, fmt, a, b);
    k = k < 0 ? 0 : k > (int)sizeof line - 2 ? (int)sizeof line - 2 : k;
    for (int i = 0; i < k; i++)
        line[i] = line[i] == '\t' || line[i] == '\n' ? ' ' : line[i];
    line[k++] = '\n';
    if (write(out, line, (size_t)k) < 0)
        _exit(1);
}

static char *rr_text(ldns_rr_list *l)
{
    ldns_rr *rr = ldns_rr_list_rr_count(l) ? ldns_rr_list_rr(l, 0) : NULL;
    return rr ? ldns_rr2str(rr) : strdup("-");
}

static void serve(int fd, int out, const fake_t *f)
{
    uint8_t buf[4096];
    char last[64] = ""; /* the value of the last TXT record added */
    int txt_seen = 0;
    for (;;) {
        struct sockaddr_storage from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
        ldns_pkt *q = NULL;
        if (n <= 0 || ldns_wire2pkt(&q, buf, (size_t)n) != LDNS_STATUS_OK)
            continue;
        ldns_pkt *a = ldns_pkt_new();
        ldns_pkt_set_id(a, ldns_pkt_id(q));
        ldns_pkt_set_qr(a, 1);
        ldns_pkt_set_aa(a, 1);
        ldns_pkt_set_opcode(a, ldns_pkt_get_opcode(q));
        ldns_rr_list *ql = ldns_rr_list_clone(ldns_pkt_question(q));
        ldns_pkt_push_rr_list(a, LDNS_SECTION_QUESTION, ql);
        ldns_rr_list_free(ql);
        ldns_rr *q0 = ldns_rr_list_rr(ldns_pkt_question(q), 0);
        ldns_rr *rr = NULL;
        int sign = SIGN_NONE;
        if (ldns_pkt_get_opcode(q) == LDNS_PACKET_UPDATE) {
            int good = ldns_pkt_tsig(q) &&
                       ldns_pkt_tsig_verify(q, buf, (size_t)n, key.name, key.secret, NULL);
            char *z = ldns_rdf2str(ldns_rr_owner(q0));
            char *pr = rr_text(ldns_pkt_answer(q)), *up = rr_text(ldns_pkt_authority(q));
            char head[400];
            snprintf(head, sizeof head, "UPDATE zone %s tsig %s", z, good ? "good" : "bad");
            say(out, "%s pr %s", head, pr);
            say(out, "  up %s%s", up, "");
            ldns_rr_list *ul = ldns_pkt_authority(q);
            if (ldns_rr_list_rr_count(ul) &&
                ldns_rr_get_class(ldns_rr_list_rr(ul, 0)) == LDNS_RR_CLASS_IN) {
                const ldns_rdf *d = ldns_rr_rdf(ldns_rr_list_rr(ul, 0), 0);
                size_t l = ldns_rdf_size(d) - 1;
                memcpy(last, ldns_rdf_data(d) + 1, l < sizeof last ? l : sizeof last - 1);
                last[l < sizeof last ? l : sizeof last - 1] = 0;
            }
            free(z), free(pr), free(up);
            ldns_pkt_set_rcode(a, (uint8_t)f->rcode);
            sign = f->sign;
        } else if (ldns_rr_get_type(q0) == LDNS_RR_TYPE_SOA) {
            char *qn = ldns_rdf2str(ldns_rr_owner(q0));
            say(out, "SOA %s%s", qn, "");
            free(qn);
            if (f->soa != SOA_NONE && f->soa != SOA_REFUSED)
                ldns_rr_new_frm_str(&rr, ZONE " 60 IN SOA ns." ZONE " h." ZONE " 1 2 3 4 5", 0,
                                    NULL, NULL);
            if (rr)
                ldns_pkt_push_rr(a, f->soa == SOA_ANSWER ? LDNS_SECTION_ANSWER
                                                         : LDNS_SECTION_AUTHORITY, rr);
            ldns_pkt_set_rcode(a, f->soa == SOA_NXDOMAIN   ? LDNS_RCODE_NXDOMAIN
                                  : f->soa == SOA_REFUSED ? LDNS_RCODE_REFUSED
                                                          : LDNS_RCODE_NOERROR);
        } else if (ldns_rr_get_type(q0) == LDNS_RR_TYPE_TXT) {
            char text[400], *qn = ldns_rdf2str(ldns_rr_owner(q0));
            say(out, "TXT %s%s", qn, "");
            snprintf(text, sizeof text, "%s 60 IN TXT \"%s\"", qn, last);
            if (f->txt_after >= 0 && txt_seen++ >= f->txt_after &&
                ldns_rr_new_frm_str(&rr, text, 0, NULL, NULL) == LDNS_STATUS_OK)
                ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr);
            free(qn);
        } /* NS: none (the primary is the only server) */
        uint8_t *wire = NULL;
        size_t wlen = 0;
        if (sign == SIGN_KEY || sign == SIGN_OTHER) {
            const ldns_rr *qt = ldns_pkt_tsig(q);
            ldns_pkt_tsig_sign(a, key.name, sign == SIGN_KEY ? key.secret : OTHER, 300, key.alg,
                               qt ? ldns_rr_rdf(qt, 3) : NULL);
            if (f->tsig_err && ldns_pkt_tsig(a)) {
                ldns_rdf *e = ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, (uint16_t)f->tsig_err);
                ldns_rdf_deep_free(ldns_rr_set_rdf(ldns_pkt_tsig(a), e, 5));
            }
        }
        if (sign == SIGN_GARBAGE)
            sendto(fd, "\x12\x34\x80", 3, 0, (struct sockaddr *)&from, flen);
        else if (ldns_pkt2wire(&wire, a, &wlen) == LDNS_STATUS_OK)
            sendto(fd, wire, wlen, 0, (struct sockaddr *)&from, flen);
        free(wire);
        ldns_pkt_free(a);
        ldns_pkt_free(q);
    }
}

static peer_t start(const fake_t *f, int v6)
{
    peer_t p = {-1, 0, -1};
    int fds[2], fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_storage ss = {0};
    socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (v6) {
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
    } else {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0 || pipe(fds) < 0) {
        if (fd >= 0)
            close(fd);
        return p;
    }
    p.port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                      : ((struct sockaddr_in *)&ss)->sin_port);
    fflush(stdout);
    p.pid = fork();
    if (p.pid == 0) {
        close(fds[0]);
        serve(fd, fds[1], f);
        _exit(0);
    }
    close(fd);
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    p.out = fds[0];
    return p;
}

/* What the fake was sent since the last call (the answers come after the
   lines, so everything is there when the client returns). */
static const char *sent(peer_t *p)
{
    static char log[8192];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof log - 1 && (k = read(p->out, log + n, sizeof log - 1 - n)) > 0)
        n += (size_t)k;
    log[n] = 0;
    return log;
}

static void stop(peer_t *p)
{
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    close(p->out);
}

/* A config for the fake's port (addr "127.0.0.1" or "[::1]"). */
static config_acme_t conf(char *server, size_t cap, const char *addr, int port)
{
    config_acme_t a;
    memset(&a, 0, sizeof a);
    snprintf(server, cap, "%s:%d", addr, port);
    a.dns_server = server;
    a.dns_key = &key;
    return a;
}

static void test_server_syntax(void)
{
    static const char *const good[] = {"127.0.0.1", "127.0.0.1:5353", "::1", "[::1]:53",
                                       "[2001:db8::1]", "10.0.0.1:65535"};
    static const char *const bad[] = {"",          "ns.example", "127.0.0.1:0",  "127.0.0.1:",
                                      "1.2.3.4:65536", "1.2.3.4:053", "1.2.3.4:5x", "[::1",
                                      "[::1]x",    "[::1]:",     "[]:53",
                                      "300.1.1.1", "1:2:3:4:5:6:7:8:9"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ok(acme_dns_server_ok(good[i]), "--acme-dns-server %s taken", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok(!acme_dns_server_ok(bad[i]), "--acme-dns-server '%s' refused", bad[i]);
    config_acme_t a;
    memset(&a, 0, sizeof a);
    ok(acme_dns_wanted(&a, "*.example.org") && !acme_dns_wanted(&a, "example.org") &&
           !acme_dns_wanted(&a, "*example.org"),
       "DNS-01 for a wildcard, not for a plain name by default");
    a.challenge = CONFIG_ACME_DNS01;
    ok(acme_dns_wanted(&a, "example.org"), "... and for it with --acme-challenge dns-01");
}

static void test_missing_config(void)
{
    config_acme_t a;
    acme_dns_rec_t rec;
    char err[600] = "";
    volatile sig_atomic_t no = 0;
    memset(&a, 0, sizeof a);
    is_int(acme_dns_check(&a, "x.test", err, sizeof err), -1, "a check without a server");
    ok(strstr(err, "x.test: DNS-01 needs --acme-dns-server and --acme-dns-key") != NULL,
       "... says what it needs (%s)", err);
    a.dns_server = "127.0.0.1";
    is_int(acme_dns_publish(&a, "x.test", "t.k", &no, &rec, err, sizeof err), -1,
           "a publish without a key");
    ok(strstr(err, "needs --acme-dns-server and --acme-dns-key") && !rec.zone[0],
       "... says so, nothing to remove (%s)", err);
    memset(&rec, 0, sizeof rec);
    is_int(acme_dns_remove(&a, &rec, err, sizeof err), 0, "removing what was never added: 0");
    strcpy(rec.zone, ZONE);
    a.dns_server = "nowhere";
    err[0] = 0;
    is_int(acme_dns_remove(&a, &rec, err, sizeof err), -1, "removing with a bad server");
    is_str(err, "no --acme-dns-server", "... says so");
    char name[300];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = 0;
    a.dns_server = "127.0.0.1", a.dns_key = &key;
    is_int(acme_dns_check(&a, name, err, sizeof err), -1, "a name of 299 characters");
    ok(strstr(err, "the name is too long for _acme-challenge") != NULL, "... too long (%s)",
       err);
    is_int(acme_dns_publish(&a, name, "t.k", &no, &rec, err, sizeof err), -1,
           "... published: refused too");
}

static void test_check(void)
{
    char server[64], err[600] = "";
    fake_t f = {.soa = SOA_AUTH, .sign = SIGN_KEY};
    peer_t p = start(&f, 0);
    config_acme_t a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_check(&a, "*.www.zone.test", err, sizeof err), 0,
           "check: a signed no-op update accepted (%s)", err);
    const char *log = sent(&p);
    ok(strstr(log, "SOA _acme-challenge.www.zone.test.\n") != NULL,
       "the zone asked for _acme-challenge.NAME, the wildcard's base (%s)", log);
    ok(strstr(log, "UPDATE zone zone.test. tsig good pr zone.test. 0 ANY SOA") != NULL,
       "the update: of the SOA's zone, signed with the key, prerequisite: its SOA exists");
    ok(strstr(log, "up -") != NULL, "... and nothing to change");
    stop(&p);

    f.soa = SOA_ANSWER;
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_check(&a, "zone.test", err, sizeof err), 0,
           "an SOA in the answer section (the apex) is the zone too");
    ok(strstr(sent(&p), "UPDATE zone zone.test. tsig good") != NULL, "... updated");
    stop(&p);

    f.soa = SOA_NXDOMAIN;
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_check(&a, "a.zone.test", err, sizeof err), 0,
           "NXDOMAIN with the zone's SOA in the authority section: the zone");
    stop(&p);

    f.soa = SOA_NONE;
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_check(&a, "a.zone.test", err, sizeof err), -1, "no SOA in the answer");
    ok(strstr(err, "the zone of _acme-challenge.a.zone.test. (SOA query): 127.0.0.1 port") &&
           strstr(err, "serves no zone that holds it (answered NOERROR, 0 answer records, no SOA)"),
       "... not authoritative (%s)", err);
    ok(!strstr(sent(&p), "UPDATE"), "... and no update sent");
    stop(&p);

    f.soa = SOA_REFUSED;
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_check(&a, "a.zone.test", err, sizeof err), -1, "the SOA query refused");
    char want[300];
    snprintf(want, sizeof want, "(SOA query): 127.0.0.1 port %d answered REFUSED (it does not "
             "serve the zone, or does not let this key update it)", p.port);
    ok(strstr(err, want) != NULL, "... REFUSED, with what it means (%s)", err);
    stop(&p);
}

/* Each error answer to the update, and the line the admin reads. */
static void test_update_errors(void)
{
    static const struct {
        fake_t f;
        const char *says;
    } cases[] = {
        {{SOA_AUTH, LDNS_RCODE_REFUSED, 0, SIGN_NONE, 0},
         "answered REFUSED (it does not serve the zone, or does not let this key update it)"},
        {{SOA_AUTH, LDNS_RCODE_NOTAUTH, 16, SIGN_KEY, 0},
         "answered NOTAUTH (TSIG BADSIG: the key's secret or algorithm is not the server's)"},
        {{SOA_AUTH, LDNS_RCODE_NOTAUTH, 17, SIGN_KEY, 0},
         "answered NOTAUTH (TSIG BADKEY: the server knows no key of that name and algorithm, or "
         "(Knot) its ACL refuses this update)"},
        {{SOA_AUTH, LDNS_RCODE_NOTAUTH, 18, SIGN_KEY, 0},
         "answered NOTAUTH (TSIG BADTIME: the clocks differ by more than 5 minutes)"},
        {{SOA_AUTH, LDNS_RCODE_NOTAUTH, 22, SIGN_KEY, 0}, "answered NOTAUTH (TSIG error)"},
        {{SOA_AUTH, LDNS_RCODE_NOTAUTH, 0, SIGN_NONE, 0}, "answered NOTAUTH"},
        {{SOA_AUTH, LDNS_RCODE_SERVFAIL, 0, SIGN_KEY, 0}, "answered SERVFAIL"},
        {{SOA_AUTH, 15, 0, SIGN_NONE, 0}, "answered rcode 15"},
        {{SOA_AUTH, 0, 0, SIGN_OTHER, 0}, "the answer's TSIG signature does not verify"},
        {{SOA_AUTH, 0, 0, SIGN_NONE, 0}, "the answer's TSIG signature does not verify"},
        {{SOA_AUTH, 0, 0, SIGN_GARBAGE, 0}, ""},
    };
    char server[64], err[600], want[400];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        peer_t p = start(&cases[i].f, 0);
        config_acme_t a = conf(server, sizeof server, "127.0.0.1", p.port);
        err[0] = 0;
        is_int(acme_dns_check(&a, "w.zone.test", err, sizeof err), -1,
               "update answered %d (TSIG error %d, signed %d): refused", cases[i].f.rcode,
               cases[i].f.tsig_err, cases[i].f.sign);
        snprintf(want, sizeof want, "a signed update of zone zone.test. (key acme-update.): "
                 "127.0.0.1 port %d%s%s", p.port, cases[i].says[0] == 'a' ? " " : ": ",
                 cases[i].says);
        if (cases[i].says[0])
            ok(strstr(err, want) != NULL, "... %s (%s)", cases[i].says, err);
        else /* bytes that are no DNS message: libldns's word for it */
            ok(strstr(err, want) && strlen(err) > strlen(want) + 2 &&
                   !strstr(err, "does not verify") && !strstr(err, "no answer"),
               "a reply that is no DNS message: a parse error (%s)", err);
        stop(&p);
    }
}

static void test_publish_remove(void)
{
    char server[64], err[600] = "", value[64];
    unsigned char md[SHA256_DIGEST_LENGTH];
    const char *keyauth = "tok3n.thumbpr1nt";
    volatile sig_atomic_t no = 0, yes = 1;
    acme_dns_rec_t rec;
    SHA256((const unsigned char *)keyauth, strlen(keyauth), md);
    acme_b64url(md, sizeof md, value, sizeof value);

    /* two empty answers: the first is to the look for a CNAME before the update */
    fake_t f = {.soa = SOA_AUTH, .sign = SIGN_KEY, .txt_after = 2};
    peer_t p = start(&f, 0);
    config_acme_t a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_publish(&a, "*.zone.test", keyauth, &no, &rec, err, sizeof err), 0,
           "publish: added, and served after one empty answer (%s)", err);
    is_str(rec.owner, "_acme-challenge.zone.test.", "the record's owner: the base name's");
    is_str(rec.zone, ZONE, "its zone");
    is_str(rec.value, value, "its value: base64url(SHA-256(key authorization))");
    const char *log = sent(&p);
    char want[400];
    snprintf(want, sizeof want, "UPDATE zone zone.test. tsig good pr -\n  up "
             "_acme-challenge.zone.test. 60 IN TXT \"%s\" \n", value);
    ok(strstr(log, want) != NULL, "the update adds the TXT record, TTL 60, signed (%s)", log);
    ok(strstr(log, "TXT _acme-challenge.zone.test.\nTXT _acme-challenge.zone.test.\n") != NULL,
       "looked for twice: the wait went on once it was not there (%s)", log);

    is_int(acme_dns_remove(&a, &rec, err, sizeof err), 0, "remove: accepted");
    snprintf(want, sizeof want, "UPDATE zone zone.test. tsig good pr -\n  up "
             "_acme-challenge.zone.test. 0 NONE TXT \"%s\" \n", value);
    ok(strstr(sent(&p), want) != NULL, "the update deletes that value only (class NONE, TTL 0)");
    stop(&p);

    f.txt_after = 5;
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_publish(&a, "w.zone.test", keyauth, &yes, &rec, err, sizeof err), -1,
           "publish with the stop already asked: -1");
    is_str(err, "_acme-challenge.w.zone.test.: stopped", "... saying stopped");
    is_str(rec.zone, ZONE, "... the record kept for removal");
    stop(&p);

    f.rcode = LDNS_RCODE_REFUSED;
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_publish(&a, "w.zone.test", keyauth, &no, &rec, err, sizeof err), -1,
           "the add refused");
    ok(strstr(err, "adding the TXT record of _acme-challenge.w.zone.test. in zone zone.test. "
                   "(key acme-update.): 127.0.0.1 port") && strstr(err, "answered REFUSED"),
       "... saying what was refused (%s)", err);
    is_str(rec.zone, ZONE, "... the zone kept: an update whose answer was lost may be made");
    is_int(acme_dns_remove(&a, &rec, err, sizeof err), -1, "its removal refused");
    ok(strstr(err, "removing the TXT record of _acme-challenge.w.zone.test.") != NULL,
       "... saying so (%s)", err);
    stop(&p);

    f = (fake_t){.soa = SOA_NONE};
    p = start(&f, 0);
    a = conf(server, sizeof server, "127.0.0.1", p.port);
    is_int(acme_dns_publish(&a, "w.zone.test", keyauth, &no, &rec, err, sizeof err), -1,
           "publish where no zone is found");
    ok(!rec.zone[0] && !strstr(sent(&p), "UPDATE"), "... nothing added, nothing to remove");
    stop(&p);
}

static void test_v6(void)
{
    char server[64], err[600] = "", want[200];
    fake_t f = {.soa = SOA_AUTH, .rcode = LDNS_RCODE_REFUSED, .sign = SIGN_NONE};
    peer_t p = start(&f, 1);
    if (p.pid < 0) {
        ok(1, "# SKIP no IPv6 loopback");
        return;
    }
    config_acme_t a = conf(server, sizeof server, "[::1]", p.port);
    is_int(acme_dns_check(&a, "w.zone.test", err, sizeof err), -1, "IPv6: the update refused");
    snprintf(want, sizeof want, "[::1] port %d answered REFUSED", p.port);
    ok(strstr(err, want) != NULL, "... the server in brackets (%s)", err);
    stop(&p);
}

int main(void)
{
    test_server_syntax();
    test_missing_config();
    test_check();
    test_update_errors();
    test_publish_remove();
    test_v6();
    return tap_done();
}
