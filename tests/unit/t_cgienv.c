/* cgienv_script: where the script part of a path ends, for -w's patterns
   (any match) and for a FastCGI or SCGI rule (a match that needs the part's
   last character). */
#include "cgienv.h"
#include "tap.h"

#include <stdio.h>

/* The script part of path for pattern pat, as a string ("" for none). */
static void part(const char *pat, const char *path, int flags, const char *want)
{
    regex_t re;
    if (regcomp(&re, pat, REG_EXTENDED | REG_NOSUB)) {
        ok(0, "compile %s", pat);
        return;
    }
    char got[EX_PATH_CAP];
    size_t n = cgienv_script(&re, 1, path, strlen(path), flags);
    snprintf(got, sizeof got, "%.*s", (int)n, path);
    is_str(got, want, "%s %s %s -> \"%s\"", flags ? "at end" : "any", pat, path, want);
    regfree(&re);
}

/* A path of depth directories "/d" and then "/x.php/info": is "/x.php" found? */
static void deep(int depth, int found)
{
    char path[EX_PATH_CAP], want[EX_PATH_CAP];
    size_t n = 0;
    for (int i = 0; i < depth; i++)
        n += (size_t)snprintf(path + n, sizeof path - n, "/d");
    snprintf(path + n, sizeof path - n, "/x.php/info");
    snprintf(want, sizeof want, "%.*s%s", found ? (int)n : 0, path, found ? "/x.php" : "");
    part("\\.php$", path, CGIENV_AT_END, want);
}

int main(void)
{
    /* a FastCGI or SCGI rule: the shortest part the match ends with */
    part("\\.php$", "/index.php", CGIENV_AT_END, "/index.php");
    part("\\.php$", "/index.php/blog/2026", CGIENV_AT_END, "/index.php");
    part("\\.php", "/index.php/blog/2026", CGIENV_AT_END, "/index.php");
    part("\\.php(/|$)", "/index.php/", CGIENV_AT_END, "/index.php");
    part("\\.php$", "/index.php/a b/", CGIENV_AT_END, "/index.php");
    part("\\.php$", "/sub/app.php/x", CGIENV_AT_END, "/sub/app.php");
    part("\\.php$", "/a.php/b.php/c", CGIENV_AT_END, "/a.php"); /* the first, as Apache, lighttpd */
    part("^/.*\\.php", "/a.php/b.php/c", CGIENV_AT_END, "/a.php");
    part("\\.php$", "/uploads/x.jpg/y.php", CGIENV_AT_END, "/uploads/x.jpg/y.php");
    part("\\.php$", "/index.phps/x", CGIENV_AT_END, "");
    part("\\.php$", "/dir/", CGIENV_AT_END, "");
    /* a mount point, and the rules whose match needs no segment's end */
    part("^/app(/|$)", "/app/x/y", CGIENV_AT_END, "/app");
    part("^/app(/|$)", "/app", CGIENV_AT_END, "/app");
    part("^/app(/|$)", "/apple/x", CGIENV_AT_END, "");
    part("^/", "/sub/app.php", CGIENV_AT_END, "/sub/app.php");
    part("^/", "/index.php/blog", CGIENV_AT_END, "/index.php/blog");
    part("^/scgi/", "/scgi/x/y", CGIENV_AT_END, "/scgi/x/y");
    part("^/scgi/", "/scgi", CGIENV_AT_END, "");
    part("^/", "/", CGIENV_AT_END, "/");
    /* -w: any part the pattern matches (the file system then decides) */
    part("^/cgi-bin/", "/cgi-bin/x.sh/info", CGIENV_ANY, "/cgi-bin/x.sh");
    part("\\.cgi$", "/a/t.cgi/p/q", CGIENV_ANY, "/a/t.cgi");
    part("\\.cgi$", "/a/t.txt", CGIENV_ANY, "");
    /* the depth looked into: 32 segment ends, then only the whole path */
    deep(30, 1); /* the script is the 31st segment */
    deep(31, 1); /* the 32nd */
    deep(32, 0); /* the 33rd: not looked at, and the whole path is no script */
    /* several patterns (-w's): any of them */
    regex_t re[2];
    regcomp(&re[0], "\\.pl$", REG_EXTENDED | REG_NOSUB);
    regcomp(&re[1], "\\.py$", REG_EXTENDED | REG_NOSUB);
    is_int((int)cgienv_script(re, 2, "/t.py/x", 7, CGIENV_ANY), 5, "the second pattern");
    is_int((int)cgienv_script(re, 2, "/t.rb/x", 7, CGIENV_ANY), 0, "neither pattern");
    regfree(&re[0]), regfree(&re[1]);
    /* a path as long as the exchange holds: no part, and no overrun */
    static char huge[EX_PATH_CAP + 1];
    memset(huge, 'a', sizeof huge - 1);
    huge[0] = '/';
    is_int((int)cgienv_script(NULL, 0, huge, sizeof huge - 1, CGIENV_ANY), 0, "too long: none");
    /* the extensions a pattern names (issue 92, 3): a program by its file */
    char ext[64];
    cgienv_exts("^/w/(index|load|api)\\.php$", ext, sizeof ext);
    is_str(ext, "php|", "a narrowed rule still names .php");
    cgienv_exts("\\.(php|phtml|ph-ar)$|[.]cgi$", ext, sizeof ext);
    is_str(ext, "php|phtml|ph-ar|cgi|", "a group's words and [.]");
    cgienv_exts("^/app(/|$)", ext, sizeof ext);
    is_str(ext, "", "no extension: none");
    is_int(cgienv_exts("\\.aaaaaaaaaa|\\.bbbbbbbbbb", ext, 12), -1, "too many: -1, and \"\"");
    is_str(ext, "", "... empty");
    is_int(cgienv_ext_in("php|phtml|", "/w/LocalSettings.php", 20), 1, "a .php");
    is_int(cgienv_ext_in("php|phtml|", "/w/X.PHTML", 10), 1, "case aside");
    is_int(cgienv_ext_in("php|", "/w/x.php5", 9), 0, "another extension");
    is_int(cgienv_ext_in("php|", "/a.php/readme", 13), 0, "the last segment's only");
    is_int(cgienv_ext_in("php|", "/php", 4), 0, "no dot");
    return tap_done();
}
