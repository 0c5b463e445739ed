/*
 * check — what --check looks at that the start-up itself leaves to the
 * first request: the files a site's directories may hold, below the
 * document root, each by the code that reads it when serving: .dictionary
 * (handlers/dictionary.h) by dcz_rule_parse, .cache (route/cache_conf.h) by
 * cache_conf_parse, .htaccess (handlers/htaccess.h) by htaccess_line,
 * .early-hints (handlers/hints.h) by hints_line, .proxy's words (a front
 * controller: handlers/proxy_front.h) by the proxy's own parser, and a
 * site's _redirects and _headers (the root's and its virtual hosts'
 * directories': route/sitefiles.h) by the parser the router's entry uses.
 * The rest of --check is the start-up's own code (main.c's check_run), so
 * that a check and a start cannot disagree.
 */
#ifndef GATLING_CHECK_H
#define GATLING_CHECK_H

struct config;

#define CHECK_DIRS_MAX 10000 /* directories walked at most */
#define CHECK_DEPTH_MAX 16   /* and that deep */

/*
 * Walk the current directory (the document root) for .dictionary, .cache,
 * .htaccess, .early-hints and .proxy files (and in it and its children
 * _redirects and _headers) and parse each; every bad line is said on stderr as
 * "gatling: PATH:LINE: ...".  Directories and files whose names begin with
 * a dot are not served and not walked; a .proxy's front SCRIPT must be one
 * of cfg's -P rules runs.  0, or -1 if a line was bad.
 */
int check_dictionaries(const struct config *cfg);

#endif
