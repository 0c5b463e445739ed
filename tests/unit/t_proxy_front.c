/*
 * Front controllers (handlers/proxy_front.c), the pure parts: a .proxy's
 * words (front SCRIPT, front off, comments; the line a bad file is refused
 * at), a rule's front=SCRIPT; prefix, and which rules run a script as a
 * whole (a FastCGI or SCGI rule whose expression matches it to its end).
 */
#include "handlers/proxy_int.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

/* Parse text as a .proxy: its result; *line the bad line's number. */
static int parse(const char *text, char *front, int *line, const char **why)
{
    static char buf[PX_FRONT_FILE_MAX + 1];
    size_t n = strlen(text);
    memcpy(buf, text, n);
    *why = "";
    return px_front_conf_parse(buf, n, front, line, why);
}

static void test_conf(void)
{
    char front[PX_FRONT_MAX];
    int line;
    const char *why;
    is_int(parse("", front, &line, &why), 0, "an empty .proxy says nothing (the switch alone)");
    is_int(parse("# just the switch\n\n", front, &line, &why), 0, "comments and blank lines");
    is_int(parse("front /index.php\n", front, &line, &why), 1, "front /index.php");
    is_str(front, "/index.php", "... its script");
    is_int(parse("  front\t/app/front.php  # Symfony\r\n", front, &line, &why), 1,
           "spaces, a tab, a comment, CR LF");
    is_str(front, "/app/front.php", "... its script");
    is_int(parse("front /index.php\nfront off\n", front, &line, &why), 2,
           "the last word counts: off");
    is_int(parse("front /index.php", front, &line, &why), 1, "no newline at the end");

    static const char *const bad[][2] = {
        {"front index.php\n", "not a script's path"}, /* no leading slash */
        {"front /\n", "not a script's path"},
        {"front /wp/\n", "not a script's path"},
        {"front /.hidden.php\n", "not a script's path"},
        {"front /a//b.php\n", "not a script's path"},
        {"front /a b.php x\n", "more than two words"},
        {"front /a?.php\n", "not a script's path"},
        {"front\n", "one value"},
        {"try_files /index.php\n", "not a setting"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "refused: %s", bad[i][0]);
        is_int(parse(bad[i][0], front, &line, &why), -1, name);
        ok(strstr(why, bad[i][1]) != NULL, "... why: %s", why);
        is_str(front, "", "... no script kept");
    }
    is_int(parse("# ok\nfront /index.php\nfront\n", front, &line, &why), -1, "a bad third line");
    is_int(line, 3, "... named");

    char longer[PX_FRONT_MAX + 16] = "front /";
    memset(longer + 7, 'a', PX_FRONT_MAX);
    longer[7 + PX_FRONT_MAX] = 0;
    is_int(parse(longer, front, &line, &why), -1, "a script of 256 bytes or more: refused");
}

static void test_prefix(void)
{
    char front[PX_FRONT_MAX];
    const char *why = "", *rest;
    rest = px_front_prefix("F/unix:/x.sock:\\.php$", front, sizeof front, &why);
    ok(rest && !strcmp(rest, "F/unix:/x.sock:\\.php$") && !front[0], "no prefix: the rule as it is");
    rest = px_front_prefix("front=/index.php;F/unix:/x.sock:\\.php$", front, sizeof front, &why);
    ok(rest && !strcmp(rest, "F/unix:/x.sock:\\.php$"), "front=/index.php; stepped over");
    is_str(front, "/index.php", "... its script");
    ok(!px_front_prefix("front=/index.php", front, sizeof front, &why), "no ';': refused");
    ok(!px_front_prefix("front=index.php;F/x", front, sizeof front, &why), "not a path: refused");
    ok(!px_front_prefix("front=;F/x", front, sizeof front, &why), "empty: refused");
    ok(strstr(why, "front=SCRIPT;") != NULL, "... why: %s", why);
}

static void test_takes(void)
{
    px_rule_t r;
    const char *why;
    memset(&r, 0, sizeof r);
    ok(!regcomp(&r.re, "\\.php$", REG_EXTENDED | REG_NOSUB), "\\.php$ compiled");
    is_int(px_front_check(&r, PX_FCGI, &why), 0, "no front=: nothing to check");
    strcpy(r.front, "/index.php");
    is_int(px_front_check(&r, PX_FCGI, &why), 0, "a FastCGI rule for \\.php$ runs /index.php");
    ok(px_front_takes(&r, "/index.php"), "... takes it");
    ok(!px_front_takes(&r, "/index.phps"), "... not /index.phps");
    r.kind = PX_SCGI;
    ok(px_front_takes(&r, "/index.php"), "an SCGI rule too");
    r.kind = PX_HTTP;
    ok(!px_front_takes(&r, "/index.php"), "an HTTP rule runs no script");
    regfree(&r.re);

    memset(&r, 0, sizeof r);
    ok(!regcomp(&r.re, "^/app/", REG_EXTENDED | REG_NOSUB), "^/app/ compiled");
    strcpy(r.front, "/app/index.php");
    is_int(px_front_check(&r, PX_FCGI, &why), 0, "^/app/ runs /app/index.php (the whole path)");
    strcpy(r.front, "/index.php");
    is_int(px_front_check(&r, PX_FCGI, &why), -1,
           "... not /index.php: front= refused (its expression freed)");
    ok(strstr(why, "front= needs") != NULL, "... why: %s", why);
}

int main(void)
{
    test_conf();
    test_prefix();
    test_takes();
    return tap_done();
}
