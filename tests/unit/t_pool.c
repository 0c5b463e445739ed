/*
 * Pools of backends (handlers/proxy_pool.c): a -P rule's backend list, a
 * --pool definition and a file: list parsed, good and bad; and the
 * balancers: smooth weighted round robin (shares and interleaving), least
 * outstanding, the rendezvous hash (a key stays, a new backend takes about
 * 1/N of the keys and only those), backups, and who is usable (down,
 * probing, checks failing, draining, slow start's share).
 */
#include "proxy_int.h"
#include "site/site.h"
#include "tap.h"

static proc_t proc; /* nothing made: no TLS store, no ACME, no cluster */
static site_t site = {.proc = &proc};
static proxy_t px = {.site = &site};

static int list(const char *s, int in_rule, px_mdef_t *d, int *n, const char **rest)
{
    const char *why;
    return px_list_parse(s, in_rule, d, n, rest, &why);
}

static void lists(void)
{
    px_mdef_t d[POOL_MEMBERS];
    int n;
    const char *rest;
    ok(list("127.0.0.1/8080/^/app/", 1, d, &n, &rest) == 0 && n == 1 && !strcmp(rest, "^/app/") &&
           !strcmp(d[0].label, "127.0.0.1/8080") && d[0].weight == 1 && !d[0].backup,
       "one backend, as -P always took it");
    ok(list("10.0.0.1/80,10.0.0.2/80*3,[::1]/8003+backup/x", 1, d, &n, &rest) == 0 && n == 3 &&
           d[1].weight == 3 && d[2].backup && !strcmp(d[2].label, "[::1]/8003") &&
           !strcmp(rest, "x"),
       "a list with a weight and a backup");
    ok(list("unix:/run/a.sock,unix:/run/b.sock*2+backup:\\.php$", 1, d, &n, &rest) == 0 && n == 2 &&
           !strcmp(d[1].label, "unix:/run/b.sock") && d[1].weight == 2 && d[1].backup &&
           !strcmp(rest, "\\.php$"),
       "unix sockets, the pattern after a colon");
    ok(list("unix:/run/a.sock,127.0.0.1/9/p", 1, d, &n, &rest) == 0 && n == 2,
       "a unix socket then an address");
    ok(list("127.0.0.1/1,127.0.0.1/2;balance=least", 0, d, &n, &rest) == 0 && n == 2 &&
           *rest == ';',
       "a --pool list ends at ;");
    const char *bad[] = {"127.0.0.1/1*0/x", "127.0.0.1/1*101/x", "127.0.0.1/1*1000000000/x",
                         "127.0.0.1/0/x", "127.0.0.1/65536/x", "127.0.0.1/1,127.0.0.1/1/x",
                         "localhost/80/x", "127.0.0.1/80", "unix:run/a:x", "127.0.0.1/80:x",
                         "", "127.0.0.1/80,/x", "[::1/80/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok(list(bad[i], 1, d, &n, &rest) < 0, "refused: '%s'", bad[i]);
    char many[33 * 16 + 8] = "", one[24];
    for (int i = 0; i < 33; i++) {
        snprintf(one, sizeof one, "%s127.0.0.1/%d", i ? "," : "", 1000 + i);
        strcat(many, one);
    }
    strcat(many, "/x");
    ok(list(many, 1, d, &n, &rest) < 0, "33 backends in one pool: refused");
    many[strlen(many) - 17] = 0; /* the last one off: 32 */
    strcat(many, "/x");
    ok(list(many, 1, d, &n, &rest) == 0 && n == 32, "32 backends: taken");
}

static void pools(void)
{
    static px_pooldef_t pd;
    const char *why;
    ok(px_pool_parse("php=F/10.0.0.1/9000,10.0.0.2/9000*2;balance=least;check=/fpm-ping;"
                     "interval=2;expect=200;fails=5;window=30;down=20;failon=502,504;tries=2;"
                     "slowstart=0;fall=3;rise=4;timeout=1",
                     &pd, &why) == 0 &&
           !strcmp(pd.name, "php") && pd.kind == PX_FCGI && pd.n == 2 && pd.o.balance == BAL_LEAST &&
           !strcmp(pd.o.check, "/fpm-ping") && pd.o.interval == 2 && pd.o.expect_lo == 200 &&
           pd.o.expect_hi == 200 && pd.o.fails == 5 && pd.o.window == 30 && pd.o.down == 20 &&
           pd.o.nfailon == 2 && pd.o.failon[1] == 504 && pd.o.tries == 2 && !pd.o.slowstart &&
           pd.o.fall == 3 && pd.o.rise == 4 && pd.o.check_timeout == 1,
       "a --pool with every option");
    ok(px_pool_parse("a=127.0.0.1/1", &pd, &why) == 0 && pd.o.balance == BAL_RR &&
           pd.o.fails == 3 && pd.o.nfailon == 3 && pd.o.tries == 3 && pd.o.slowstart == 10 &&
           !pd.o.check[0] && pd.o.expect_lo == 200 && pd.o.expect_hi == 399,
       "the defaults");
    ok(px_pool_parse("s=S/file:/etc/gatling/s.pool;balance=hash:X-User", &pd, &why) == 0 &&
           pd.kind == PX_SCGI && !strcmp(pd.file, "/etc/gatling/s.pool") && !pd.n &&
           pd.o.balance == BAL_HASH && !strcmp(pd.o.hash_field, "X-User"),
       "a file: pool hashed by a field");
    ok(px_pool_parse("x=127.0.0.1/1;failon=none", &pd, &why) == 0 && !pd.o.nfailon, "failon=none");
    const char *bad[] = {"Bad=127.0.0.1/1",        "=127.0.0.1/1",
                         "a",                      "a=",
                         "a=127.0.0.1/1;foo=1",    "a=127.0.0.1/1;fails=0",
                         "a=127.0.0.1/1;tries=11", "a=127.0.0.1/1;balance=random",
                         "a=127.0.0.1/1;check=ping", "a=127.0.0.1/1;check=/a b",
                         "a=127.0.0.1/1;expect=300-200", "a=127.0.0.1/1;failon=200",
                         "a=127.0.0.1/1;balance=hash:", "a=127.0.0.1/1;balance=hash:a b",
                         "a=file:relative",        "a=file:/dir/",
                         "a=127.0.0.1/1;interval=", "a=127.0.0.1/1;;",
                         "a=127.0.0.1/1;window=99999999999999999999",
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=127.0.0.1/1",
                         /* issue 67: the forms the lists above left out */
                         "a=127.0.0.1/1;check=grpx", "a=127.0.0.1/1;check=",
                         "a=127.0.0.1/1;check=/\x7f",
                         "a=127.0.0.1/1;expect=200-", "a=127.0.0.1/1;expect=200x",
                         "a=127.0.0.1/1;expect=99", "a=127.0.0.1/1;failon=502;503",
                         "a=127.0.0.1/1;failon=502,", "a=127.0.0.1/1;failon=nonee",
                         "a=127.0.0.1/1;balance=hashX", "a=127.0.0.1/1;balance=leastx",
                         "a=127.0.0.1/1;balance=hash:a\x01", "a=127.0.0.1/1 ;balance=rr",
                         "a=127.0.0.1/1;balance=hash:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok(px_pool_parse(bad[i], &pd, &why) < 0 && why && *why, "refused: '%s' (%s)", bad[i],
           why);
    ok(px_pool_parse("a=127.0.0.1/1;expect=204;failon=500,502,503,504;balance=hash:X-Y_1~",
                     &pd, &why) == 0 && pd.o.expect_lo == 204 && pd.o.expect_hi == 204 &&
           pd.o.nfailon == 4 && !strcmp(pd.o.hash_field, "X-Y_1~"),
       "expect= one status, failon= four, a hash field of token characters");
}

static void files(void)
{
    px_mdef_t d[POOL_MEMBERS];
    int n, line;
    const char *why;
    ok(px_file_parse("# backends\n\n127.0.0.1/8001\n  127.0.0.1/8002*2  \r\nunix:/run/x.sock+backup\n",
                     d, &n, &line, &why) == 0 &&
           n == 3 && d[1].weight == 2 && d[2].backup,
       "a file: comments, blanks, spaces and CRLF");
    ok(px_file_parse("", d, &n, &line, &why) == 0 && n == 0, "an empty file: no backend");
    ok(px_file_parse("127.0.0.1/8001\nnonsense\n", d, &n, &line, &why) < 0 && line == 2,
       "a bad line: its number");
    ok(px_file_parse("127.0.0.1/8001 127.0.0.1/8002\n", d, &n, &line, &why) < 0,
       "two backends on a line: refused");
    ok(px_file_parse("127.0.0.1/8001\n127.0.0.1/8001\n", d, &n, &line, &why) < 0,
       "a backend twice: refused");
}

static px_pool_t *pool_of(int balance, const char *const *labels, const int *weights, int n)
{
    static px_pool_t p;
    while (p.n)
        px_member_drop(&px, p.m[0]);
    memset(&p, 0, sizeof p);
    px_popts_default(&p.o);
    p.o.balance = balance;
    snprintf(p.name, sizeof p.name, "t");
    for (int i = 0; i < n; i++) {
        px_mdef_t d;
        int k;
        const char *rest, *why;
        char s[64];
        snprintf(s, sizeof s, "%s*%d;", labels[i], weights[i]);
        if (px_list_parse(s, 0, &d, &k, &rest, &why) < 0 || !px_member_new(&px, &p, &d, 0))
            return NULL;
    }
    return &p;
}

static void round_robin(void)
{
    const char *l[] = {"127.0.0.1/1", "127.0.0.1/2", "127.0.0.1/3"};
    int w[] = {1, 2, 3}, count[3] = {0}, run = 0, longest = 0;
    px_pool_t *p = pool_of(BAL_RR, l, w, 3);
    px_member_t *last = NULL;
    for (int i = 0; i < 600; i++) {
        px_member_t *m = px_pick(p, 0, NULL, 0, 1000);
        count[m == p->m[0] ? 0 : m == p->m[1] ? 1 : 2]++;
        run = m == last ? run + 1 : 1;
        longest = run > longest ? run : longest;
        last = m;
    }
    ok(count[0] == 100 && count[1] == 200 && count[2] == 300, "weights 1:2:3 give 100:200:300 (%d %d %d)",
       count[0], count[1], count[2]);
    ok(longest <= 2, "interleaved: at most %d in a row", longest);
    /* one tried already: the others */
    for (int i = 0; i < 10; i++)
        ok(px_pick(p, 1ULL << p->m[2]->slot, NULL, 0, 1000) != p->m[2], "a tried backend is skipped");
    ok(!px_pick(p, (1ULL << p->m[0]->slot) | (1ULL << p->m[1]->slot) | (1ULL << p->m[2]->slot), NULL,
                0, 1000),
       "every backend tried: none");
    /* slow start: a backend back for 1 s of 10 has a tenth of its weight */
    p->m[2]->up_since = 1000;
    count[0] = count[1] = count[2] = 0;
    for (int i = 0; i < 600; i++) {
        px_member_t *m = px_pick(p, 0, NULL, 0, 2000);
        count[m == p->m[0] ? 0 : m == p->m[1] ? 1 : 2]++;
    }
    ok(count[2] > 40 && count[2] < 80, "slow start: 1 s of 10 gets a tenth of its share (%d of 600)",
       count[2]);
}

static void health(void)
{
    const char *l[] = {"127.0.0.1/1", "127.0.0.1/2", "127.0.0.1/3"};
    int w[] = {1, 1, 1};
    px_pool_t *p = pool_of(BAL_RR, l, w, 3);
    p->m[2]->d.backup = 1;
    int backup = 0;
    for (int i = 0; i < 20; i++)
        backup += px_pick(p, 0, NULL, 0, 1000) == p->m[2];
    ok(!backup, "the backup idles while the others are up");
    p->m[0]->down = 1, p->m[0]->down_until = 5000;
    p->m[1]->check_down = 1;
    ok(px_pick(p, 0, NULL, 0, 1000) == p->m[2], "the backup when the others are out");
    ok(px_pick(p, 0, NULL, 0, 5000) == p->m[0], "down past its time: tried");
    p->m[0]->probing = 1;
    ok(px_pick(p, 0, NULL, 0, 5000) == p->m[2], "... by one request at a time");
    p->m[2]->draining = 1;
    ok(!px_pick(p, 0, NULL, 0, 5000), "nothing usable: none");
}

static void least(void)
{
    const char *l[] = {"127.0.0.1/1", "127.0.0.1/2"};
    int w[] = {1, 2};
    px_pool_t *p = pool_of(BAL_LEAST, l, w, 2);
    p->m[0]->outstanding = 3, p->m[1]->outstanding = 1;
    ok(px_pick(p, 0, NULL, 0, 1000) == p->m[1], "the fewest outstanding");
    p->m[0]->outstanding = 1, p->m[1]->outstanding = 2;
    int a = 0;
    for (int i = 0; i < 10; i++)
        a += px_pick(p, 0, NULL, 0, 1000) == p->m[0];
    ok(a > 0 && a < 10, "per weight: 1 of 1 ties 2 of 2, taken in turn (%d of 10)", a);
}

static void hashing(void)
{
    const char *l[] = {"127.0.0.1/1", "127.0.0.1/2", "127.0.0.1/3"};
    int w[] = {1, 1, 1};
    enum { KEYS = 3000 };
    static px_member_t *before[KEYS];
    static char label_before[KEYS][PX_LABEL_MAX];
    px_pool_t *p = pool_of(BAL_HASH, l, w, 2);
    char key[32];
    int stable = 1;
    for (int i = 0; i < KEYS; i++) {
        int kl = snprintf(key, sizeof key, "/page/%d?x=1", i);
        before[i] = px_pick(p, 0, key, (size_t)kl, 1000);
        snprintf(label_before[i], PX_LABEL_MAX, "%s", before[i]->d.label);
        stable &= px_pick(p, 0, key, (size_t)kl, 1000) == before[i];
    }
    ok(stable, "a key stays at its backend");
    p = pool_of(BAL_HASH, l, w, 3); /* the same two, and a third */
    int moved = 0, elsewhere = 0;
    for (int i = 0; i < KEYS; i++) {
        int kl = snprintf(key, sizeof key, "/page/%d?x=1", i);
        px_member_t *m = px_pick(p, 0, key, (size_t)kl, 1000);
        if (strcmp(m->d.label, label_before[i])) {
            moved++;
            elsewhere += strcmp(m->d.label, "127.0.0.1/3") != 0;
        }
    }
    ok(moved > KEYS / 4 && moved < KEYS * 42 / 100, "a third backend takes about 1/3 of the keys (%d of %d)",
       moved, KEYS);
    ok(!elsewhere, "... and no key moves between the two that stayed");
}

int main(void)
{
    lists();
    pools();
    files();
    round_robin();
    health();
    least();
    hashing();
    return tap_done();
}
