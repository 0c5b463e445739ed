/*
 * proxy_front — what the rest of the server asks of the proxy's front
 * controllers (proxy_front.c; the proxy's own files call it through
 * proxy_int.h): --check's look at a site's .proxy.
 */
#ifndef GATLING_PROXY_FRONT_H
#define GATLING_PROXY_FRONT_H

struct config;

/* --check's look at the .proxy in dirfd (path names the directory): its
   words (front SCRIPT, front off) said when bad, and a front SCRIPT no
   FastCGI or SCGI rule of cfg's runs.  0, or -1 after printing why to
   stderr. */
int proxy_front_check_file(const struct config *cfg, int dirfd, const char *path);

#endif
