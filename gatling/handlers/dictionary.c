/* Compression dictionaries for static files: see dictionary.h. */
#include "dictionary.h"
#include "hstate.h"
#include "http/dcz.h"
#include "site/dict.h"
#include "site/encoding.h"
#include "site/jobs.h"
#include "site/site.h"
#include "site/vhost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The .dictionary of the directory rel[0..dl) (with its '/'; dl 0: the top)
 * below vfd into text[DICTIONARY_READ_MAX]: its length, or -1 when there is
 * none that anyone may read.
 */
static ssize_t read_rules(int vfd, const fs_at_t *at, const char *rel, size_t dl,
                          const char *root_check, char *text)
{
    char path[4096];
    if (dl + sizeof DICTIONARY_FILE > sizeof path)
        return -1;
    memcpy(path, rel, dl);
    memcpy(path + dl, DICTIONARY_FILE, sizeof DICTIONARY_FILE);
    int fd = fs_open_beneath(vfd, path, root_check);
    if (fd < 0)
        return -1;
    struct stat ds;
    ssize_t got = -1; /* a regular file anyone may read, as for what is served */
    if (fstat(fd, &ds) == 0 && S_ISREG(ds.st_mode) && fs_public(at, path, fd, 0))
        got = read(fd, text, DICTIONARY_READ_MAX);
    close(fd);
    return got;
}

/* The directory part of rel: its length, '/' included (0: none). */
static size_t dir_len(const char *rel)
{
    const char *slash = strrchr(rel, '/');
    return slash ? (size_t)(slash - rel) + 1 : 0;
}

char *dictionary_for(int vfd, const fs_at_t *at, const char *rel, const struct stat *st,
                     const char *root_check)
{
    char dir[DCZ_PATTERN_MAX], text[DICTIONARY_READ_MAX], value[DICTIONARY_USE_MAX];
    size_t dl = dir_len(rel);
    if (st->st_size <= 0 || (uint64_t)st->st_size > DICT_MAX || dl + 2 > sizeof dir)
        return NULL;
    dir[0] = '/';
    memcpy(dir + 1, rel, dl);
    dir[dl + 1] = 0;
    ssize_t got = read_rules(vfd, at, rel, dl, root_check, text);
    if (got <= 0 || !dcz_rule_for(text, (size_t)got, rel + dl, dir, value, sizeof value))
        return NULL;
    return strdup(value);
}

typedef struct dict_xjob {
    ex_job_t xj; /* first: codec/codec.c's job_back frees the whole struct */
    dict_job_t *j;
} dict_xjob_t;

static void xjob_work(job_t *j)
{
    dict_run(((dict_xjob_t *)j)->j);
}

static void xjob_finish(ex_job_t *xj, exchange_t *ex)
{
    (void)ex; /* the request finds the result in the index or cache when dispatched again */
    dict_end(((dict_xjob_t *)xj)->j);
}

/* Let ex wait for j (NULL: declined): 1, or 0 to go on without. */
static int wait_for(exchange_t *ex, fcache_entry_t *f, dict_job_t *j, int tried)
{
    dict_xjob_t *z = j ? calloc(1, sizeof *z) : NULL;
    if (!z) {
        if (j)
            dict_end(j);
        return 0;
    }
    z->j = j;
    z->xj.job.work = xjob_work;
    z->xj.finish = xjob_finish;
    ex->job = &z->xj;
    hslot_req_set(ex, HSLOT_DICT, hslot_req(ex, HSLOT_DICT) | (unsigned)tried);
    ex->file = NULL;
    fcache_release(f);
    return 1;
}

/* A dictionary's scope: the directory that serves t (vhost_dir(): "example.org:80",
   "default", "" for the root), not the Host with its port, so that the same files
   on the plain and the HTTPS port share their dictionaries (issue 55). */
static const char *scope_of(const target_t *t, int which)
{
    return vhost_dir(which, t->vhost);
}

int dictionary_indexed(exchange_t *ex, const target_t *t, fcache_entry_t *f)
{
    const char *scope = scope_of(t, f->vhost_dir);
    dict_t *d = ex->site->dict;
    size_t mn;
    const char *m = f->dict ? dcz_use_match(f->dict, &mn) : NULL;
    if (!d || !m || f->protect)
        return 0;
    if (dict_indexed(d, &f->st, scope))
        return 1;
    if (hslot_req(ex, HSLOT_DICT) & DICT_TRIED_HASH)
        return 0;
    dict_job_t *j = dict_hash_begin(d, f->fd, &f->st, f->rel, scope, m, mn);
    return wait_for(ex, f, j, DICT_TRIED_HASH) ? -1 : 0;
}

/* The dictionary ex offers for path, if it is one this server can use;
 *unknown: a well-formed offer of a hash the index does not hold. */
static const dict_entry_t *offered(exchange_t *ex, dict_t *d, const char *scope, const char *path,
                                   int *unknown)
{
    *unknown = 0;
    const http_request_t *req = ex->req;
    const http_str_t *av = http_header(req, "Available-Dictionary");
    if (!av || http_header_count(req, "Available-Dictionary") != 1)
        return NULL;
    const http_str_t *ae = http_header(req, "Accept-Encoding");
    uint8_t hash[DCZ_HASH_LEN];
    if (!ae || http_header_count(req, "Accept-Encoding") != 1 || !dcz_accepted(ae->p, ae->n) ||
        dcz_parse_available(av->p, av->n, hash) < 0)
        return NULL;
    const dict_entry_t *e = dict_find(d, hash);
    *unknown = !e;
    if (!e || strcmp(e->scope, scope) || !dcz_match(e->match, strlen(e->match), path, strlen(path)))
        return NULL;
    return e;
}

/* "<inode>-<size>-<mtime>-dcz-<the dictionary's hash, 8 hex>", quoted. */
static void dcz_etag(char *etag, const fcache_entry_t *f, const uint8_t *hash)
{
    snprintf(etag, ENC_ETAG_MAX, "\"%llx-%llx-%llx-dcz-%02x%02x%02x%02x\"",
             (unsigned long long)f->st.st_ino, (unsigned long long)f->st.st_size,
             (unsigned long long)f->st.st_mtim.tv_sec, hash[0], hash[1], hash[2], hash[3]);
}

/* The job that makes f's delta against e, or NULL: e's file is opened
   again and must still be the version hashed (else e is forgotten). */
static dict_job_t *delta_job(exchange_t *ex, const dict_entry_t *e, fcache_entry_t *f)
{
    site_t *s = ex->site;
    int vfd = target_dir(ex, NULL);
    int dfd = vfd < 0 ? -1 : fs_open_beneath(vfd, e->rel, site_root_check(s));
    struct stat st;
    dict_job_t *j = NULL;
    if (dfd >= 0 && fstat(dfd, &st) == 0 && st.st_dev == e->st.st_dev &&
        st.st_ino == e->st.st_ino && st.st_size == e->st.st_size &&
        st.st_mtim.tv_sec == e->st.st_mtim.tv_sec && st.st_mtim.tv_nsec == e->st.st_mtim.tv_nsec)
        j = dict_delta_begin(s->dict, e, dfd, f->fd, &f->st);
    else if (dfd >= 0 || errno == ENOENT)
        dict_forget(s->dict, e); /* changed, replaced or gone since it was hashed */
    if (dfd >= 0)
        close(dfd);
    return j;
}

/*
 * The job that hashes the dictionaries of f's directory whose match fits
 * t's path (a hash this process never saw: it restarted, or another -W
 * worker served the dictionary), or NULL: the directory is unchanged since
 * its last scan, or cannot be read.
 */
static dict_job_t *scan_job(exchange_t *ex, const target_t *t, const fcache_entry_t *f)
{
    site_t *s = ex->site;
    char text[DICTIONARY_READ_MAX];
    int which, vfd = target_dir(ex, &which);
    if (vfd < 0)
        return NULL;
    fs_at_t at = site_at(s, vhost_dir(which, t->vhost));
    size_t dl = dir_len(f->rel);
    char *dir = strndup(f->rel, dl);
    int dfd = !dir ? -1 : dl ? fs_open_beneath(vfd, dir, site_root_check(s)) : dup(vfd);
    ssize_t got = dfd < 0 ? -1 : read_rules(vfd, &at, f->rel, dl, site_root_check(s), text);
    struct stat st;
    dict_job_t *j = NULL;
    if (got > 0 && fstat(dfd, &st) == 0)
        j = dict_scan_begin(s->dict, dfd, &st, dir, scope_of(t, which), text, (size_t)got,
                            t->p.path);
    if (dfd >= 0)
        close(dfd);
    free(dir);
    return j;
}

int dictionary_delta(exchange_t *ex, const target_t *t, fcache_entry_t *f, body_t *b, char *etag)
{
    dict_t *d = ex->site->dict;
    if (!d || f->protect || (uint64_t)f->st.st_size > DICT_TARGET_MAX || !f->st.st_size)
        return 0;
    int unknown;
    const dict_entry_t *e = offered(ex, d, scope_of(t, f->vhost_dir), t->p.path, &unknown);
    if (!e && unknown && f->dict && !(hslot_req(ex, HSLOT_DICT) & DICT_TRIED_SCAN))
        return wait_for(ex, f, scan_job(ex, t, f), DICT_TRIED_SCAN) ? -1 : 0;
    if (!e)
        return 0;
    size_t len;
    uint8_t *p = dict_delta_copy(d, e->hash, &f->st, &len);
    if (!p) {
        if (errno != ENOENT || (hslot_req(ex, HSLOT_DICT) & DICT_TRIED_DELTA))
            return 0;
        return wait_for(ex, f, delta_job(ex, e, f), DICT_TRIED_DELTA) ? -1 : 0;
    }
    if (ex_own(ex, p) < 0) {
        free(p);
        return 0;
    }
    dict_counters_t *c = dict_counters(d);
    ex->log_notes |= EX_LOG_DCZ;
    c->hits++;
    c->bytes_saved += (uint64_t)f->st.st_size - len;
    dcz_etag(etag, f, e->hash);
    *b = (body_t){.fd = -1, .buf = (const char *)p, .size = len};
    return 1;
}
