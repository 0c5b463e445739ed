/*
 * acme_parse — what the client reads from a CA, as pure functions over the
 * bytes it sent (json-c parses; nothing here trusts a field's presence,
 * type or length): the directory, orders, authorizations, problem
 * documents, RFC 9773 renewal information, and the response headers that
 * matter (Replay-Nonce, Location, Retry-After, Link rel="alternate").
 * tests/fuzz/fuzz_acme.c feeds them anything.
 *
 * Each returns 0, or -1 when the text is not JSON, lacks a field the
 * protocol needs, or a field does not fit its buffer (never truncated).
 */
#ifndef GATLING_ACME_PARSE_H
#define GATLING_ACME_PARSE_H

#include <stddef.h>
#include <time.h>

#include "site/acme_chal.h"

#define ACME_URL_MAX 1024
#define ACME_NONCE_MAX 256
#define ACME_ALTS_MAX 4     /* alternate chains looked at */
#define ACME_AUTHZ_MAX 8    /* authorizations of one order */
#define ACME_PROFILES_MAX 8 /* the directory's meta.profiles looked at */
#define ACME_PROFILE_LEN 64
#define ACME_RETRY_AFTER_CAP (400L * 86400) /* Retry-After past this saturates to it */

typedef struct acme_dir {
    char new_nonce[ACME_URL_MAX], new_account[ACME_URL_MAX], new_order[ACME_URL_MAX];
    char renewal_info[ACME_URL_MAX]; /* "" without ARI */
    char profiles[ACME_PROFILES_MAX][ACME_PROFILE_LEN];
    int nprofiles;
} acme_dir_t;

typedef struct acme_order {
    char status[16]; /* pending, ready, processing, valid, invalid */
    char authz[ACME_AUTHZ_MAX][ACME_URL_MAX];
    int nauthz;
    char finalize[ACME_URL_MAX];
    char certificate[ACME_URL_MAX]; /* "" until valid */
    char error[520];                /* its error, "type: detail", or "" */
} acme_order_t;

typedef struct acme_authz {
    char status[16]; /* pending, valid, invalid, ... */
    char ident[256]; /* the identifier's value */
    char http_url[ACME_URL_MAX], http_token[ACME_TOKEN_MAX + 1]; /* "" when not offered */
    char alpn_url[ACME_URL_MAX], alpn_token[ACME_TOKEN_MAX + 1];
    char dns_url[ACME_URL_MAX], dns_token[ACME_TOKEN_MAX + 1]; /* dns-01 (acme_dns.h) */
    char error[520]; /* a challenge's error: "type: detail", or "" */
} acme_authz_t;

typedef struct acme_problem {
    char type[128];
    char detail[384];
} acme_problem_t;

/* The response headers the client uses. */
typedef struct acme_head {
    char nonce[ACME_NONCE_MAX];
    char location[ACME_URL_MAX];
    long retry_after; /* seconds from now, at most ACME_RETRY_AFTER_CAP; -1: none */
    char alt[ACME_ALTS_MAX][ACME_URL_MAX];
    int nalt;
} acme_head_t;

int acme_parse_dir(const char *json, size_t len, acme_dir_t *d);
int acme_parse_order(const char *json, size_t len, acme_order_t *o);
int acme_parse_authz(const char *json, size_t len, acme_authz_t *a);
/* A problem document (RFC 7807): type and detail ("" when absent); -1 when
   not JSON or without a type. */
int acme_parse_problem(const char *json, size_t len, acme_problem_t *p);
/* RFC 9773 4.2: suggestedWindow's start and end (start <= end). */
int acme_parse_ari(const char *json, size_t len, time_t *start, time_t *end);
/* An RFC 3339 time ("2026-11-26T04:00:00.5Z", "...+02:00"): 0 or -1. */
int acme_parse_time(const char *s, time_t *t);

/* One response header line (no CR LF needed), now for Retry-After's date. */
void acme_parse_header(acme_head_t *h, const char *line, size_t len, time_t now);

/* 1 when s is base64url of 1..ACME_TOKEN_MAX characters (a token, safe as a
   file name). */
int acme_token_ok(const char *s);

#endif
