/*
 * A virtual host's .cache file (route/cache_conf.c): the lines it takes
 * (ttl with and without a path pattern, grace, errors, lock, cookie, purge),
 * the line a bad file is refused at (the error log names it, the cache is
 * off for the host), the micro-cache's seconds per path, who may PURGE, and
 * which Cookie fields leave a request cacheable.
 */
#include "route/cache_conf.h"
#include "tap.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* Parse text; its result, *line the bad line's number (0 when good). */
static int parse(cache_conf_t *k, const char *text, int *line)
{
    static char buf[CACHE_CONF_FILE_MAX];
    size_t n = strlen(text);
    memcpy(buf, text, n);
    *line = 0;
    return cache_conf_parse(k, buf, n, line, NULL);
}

static void test_good(void)
{
    cache_conf_t k;
    int line;
    is_int(parse(&k, "", &line), 0, "an empty file: the cache on with HTTP's rules");
    is_int((int)k.grace, CACHE_GRACE_DEFAULT, "... grace by default");
    is_int((int)k.lock, CACHE_LOCK_DEFAULT, "... lock by default");
    is_int((int)cache_conf_ttl(&k, "/a"), 0, "... no micro-cache");
    cache_conf_free(&k);

    is_int(parse(&k,
                 "# the settings\r\n"
                 "ttl 30 ^/api/\n"
                 "\tttl 5   \\.json$  # json\n"
                 "ttl 1\n"
                 "grace 0\n"
                 "errors 60\n"
                 "lock 60\n"
                 "cookie session\n"
                 "cookie lang\n"
                 "purge 192.0.2.0/24\n"
                 "purge 2001:db8::/32\n"
                 "\n   \n",
                 &line),
           0, "every kind of line, comments, CRLF and blank lines");
    is_int((int)cache_conf_ttl(&k, "/api/x.json"), 30, "the first ttl that matches counts");
    is_int((int)cache_conf_ttl(&k, "/y.json"), 5, "... the second for another path");
    is_int((int)cache_conf_ttl(&k, "/index.html"), 1, "... a ttl without a pattern for the rest");
    is_int((int)k.grace, 0, "grace 0");
    is_int((int)k.errors, 60, "errors 60");
    is_int((int)k.lock, 60, "lock 60 (the most)");

    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "192.0.2.77", &a.sin_addr);
    is_int(cache_conf_purger(&k, (struct sockaddr *)&a), 1, "a purge net's address may PURGE");
    inet_pton(AF_INET, "198.51.100.1", &a.sin_addr);
    is_int(cache_conf_purger(&k, (struct sockaddr *)&a), 0, "... another may not");
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    is_int(cache_conf_purger(&k, (struct sockaddr *)&a), 1, "... loopback always may");

    static const struct {
        const char *v;
        int ok;
    } ck[] = {
        {"session=abc", 1},
        {"session=abc; lang=en", 1},
        {" ;; lang = en ;session=1;", 1},
        {"lang", 1},
        {"", 1},
        {"session=abc; track=1", 0},
        {"sessionx=1", 0},
        {"sess=1", 0},
        {"=x; lang=1", 1},
    };
    for (size_t i = 0; i < sizeof ck / sizeof ck[0]; i++)
        is_int(cache_conf_cookie_ok(&k, ck[i].v, strlen(ck[i].v)), ck[i].ok,
               "Cookie \"%s\": %s", ck[i].v, ck[i].ok ? "all allowed, cacheable" : "not cacheable");
    cache_conf_free(&k);
}

static void test_refused(void)
{
    static const struct {
        const char *text;
        int line;
        const char *why;
    } t[] = {
        {"ttl\n", 1, "ttl without seconds"},
        {"ttl -1\n", 1, "negative seconds"},
        {"ttl 31536001\n", 1, "more than a year"},
        {"ttl 10s\n", 1, "seconds with a unit"},
        {"ttl 99999999999999999999\n", 1, "seconds past a long long"},
        {"grace 1\nttl 5 ^/(a\n", 2, "a pattern regcomp refuses, on line 2"},
        {"ttl 5 (a{1000}){1000}\n", 1, "a pattern past the bound"},
        {"ttl 5 ^/a extra words\n", 1, "four words"},
        {"grace\n", 1, "grace without seconds"},
        {"grace x\n", 1, "grace not a number"},
        {"errors -5\n", 1, "errors negative"},
        {"lock 0\n", 1, "lock 0"},
        {"lock 61\n", 1, "lock over 60"},
        {"lock 5 6\n", 1, "lock with two values"},
        {"cookie a b\n", 1, "two cookie names"},
        {"purge 300.1.1.1\n", 1, "a purge net that is no address"},
        {"#\n\nstore 5\n", 3, "an unknown word, on line 3"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        cache_conf_t k;
        int line;
        is_int(parse(&k, t[i].text, &line), -1, "refused: %s", t[i].why);
        is_int(line, t[i].line, "... at line %d", t[i].line);
        is_int(k.nttl + k.ncookies + k.nnets, 0, "... and nothing of it kept");
    }
    char many[2048] = "";
    for (int i = 0; i <= CACHE_CONF_TTLS; i++)
        strcat(many, "ttl 1 ^/x\n");
    cache_conf_t k;
    int line;
    is_int(parse(&k, many, &line), -1, "one ttl line more than %d: refused", CACHE_CONF_TTLS);
    is_int(line, CACHE_CONF_TTLS + 1, "... at that line");
    many[0] = 0;
    for (int i = 0; i <= CACHE_CONF_COOKIES; i++)
        strcat(many, "cookie c\n");
    is_int(parse(&k, many, &line), -1, "one cookie line more than %d", CACHE_CONF_COOKIES);
    many[0] = 0;
    for (int i = 0; i <= CACHE_CONF_NETS; i++)
        strcat(many, "purge 10.0.0.0/8\n");
    is_int(parse(&k, many, &line), -1, "one purge line more than %d", CACHE_CONF_NETS);
    char longname[200];
    memset(longname, 'c', sizeof longname);
    snprintf(longname + 100, sizeof longname - 100, "\n");
    memcpy(many, "cookie ", 7);
    memcpy(many + 7, longname, strlen(longname) + 1);
    is_int(parse(&k, many, &line), -1, "a cookie name of 100 bytes");
}

int main(void)
{
    test_good();
    test_refused();
    return tap_done();
}
