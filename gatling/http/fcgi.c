/* FastCGI records: see fcgi.h. */
#include "fcgi.h"

#include <string.h>

/* A complete header was collected: start its record.  0, or FCGI_MALFORMED. */
static int header_done(fcgi_parser_t *st)
{
    const unsigned char *h = st->hdr;
    if (h[0] != 1)
        return FCGI_MALFORMED;
    st->type = h[1];
    st->id = (unsigned)h[2] << 8 | h[3];
    st->left = (uint32_t)h[4] << 8 | h[5];
    st->pad = h[6];
    st->hlen = 0;
    st->blen = 0;
    if (st->type == FCGI_END_REQUEST && st->left != 8)
        return FCGI_MALFORMED;
    return 0;
}

/* END_REQUEST's content is whole: report it. */
static void end_request(fcgi_parser_t *st, fcgi_piece_t *pc)
{
    const unsigned char *b = st->body;
    pc->type = FCGI_END_REQUEST;
    pc->id = st->id;
    pc->app_status = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    pc->proto_status = b[4];
}

long fcgi_next(fcgi_parser_t *st, const char *buf, size_t len, fcgi_piece_t *pc)
{
    size_t i = 0;
    memset(pc, 0, sizeof *pc);
    while (i < len) {
        if (!st->type) { /* a header, maybe across calls */
            size_t k = FCGI_HEADER_LEN - st->hlen;
            k = k < len - i ? k : len - i;
            memcpy(st->hdr + st->hlen, buf + i, k);
            st->hlen += (unsigned)k, i += k;
            if (st->hlen == FCGI_HEADER_LEN && header_done(st) < 0)
                return FCGI_MALFORMED;
            continue;
        }
        if (st->left) {
            size_t k = st->left < len - i ? st->left : len - i;
            const char *p = buf + i;
            st->left -= (uint32_t)k, i += k;
            if (st->type == FCGI_STDOUT || st->type == FCGI_STDERR) {
                pc->type = st->type, pc->id = st->id, pc->p = p, pc->n = k;
                if (!st->left && !st->pad)
                    st->type = 0;
                return (long)i;
            }
            if (st->type == FCGI_END_REQUEST) { /* 8 bytes, checked in header_done */
                memcpy(st->body + st->blen, p, k);
                st->blen += (unsigned)k;
            }
        } else if (st->pad) {
            size_t k = st->pad < len - i ? st->pad : len - i;
            st->pad -= (unsigned)k, i += k;
        }
        if (!st->left && !st->pad) { /* the record is over */
            int t = st->type;
            st->type = 0;
            if (t == FCGI_END_REQUEST) {
                end_request(st, pc);
                return (long)i;
            }
        }
    }
    return (long)i;
}

void fcgi_header(unsigned char *out, int type, unsigned id, unsigned clen, unsigned pad)
{
    out[0] = 1;
    out[1] = (unsigned char)type;
    out[2] = (unsigned char)(id >> 8), out[3] = (unsigned char)id;
    out[4] = (unsigned char)(clen >> 8), out[5] = (unsigned char)clen;
    out[6] = (unsigned char)pad;
    out[7] = 0;
}

void fcgi_begin(unsigned char *out, unsigned id, int keep_conn)
{
    fcgi_header(out, FCGI_BEGIN_REQUEST, id, 8, 0);
    memset(out + 8, 0, 8);
    out[9] = FCGI_RESPONDER;
    out[10] = keep_conn ? FCGI_KEEP_CONN : 0;
}

/* A pair's length: one byte below 128, else four with the top bit set. */
static size_t put_len(unsigned char *out, size_t n)
{
    if (n < 128) {
        out[0] = (unsigned char)n;
        return 1;
    }
    out[0] = (unsigned char)(0x80 | (n >> 24 & 0x7f));
    out[1] = (unsigned char)(n >> 16), out[2] = (unsigned char)(n >> 8), out[3] = (unsigned char)n;
    return 4;
}

size_t fcgi_pair(unsigned char *out, const char *name, size_t nl, const char *value, size_t vl)
{
    size_t k = put_len(out, nl);
    k += put_len(out + k, vl);
    memcpy(out + k, name, nl);
    memcpy(out + k + nl, value, vl);
    return k + nl + vl;
}
