/* HTTP/2's wire format, pure: see h2_frame.h. */
#include "h2_frame.h"
#include "http/http_parse.h"
#include "http/response.h"
#include "site/stats.h"

#include <string.h>

uint32_t h2f_be31(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]) & 0x7fffffff;
}

void h2f_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

h2_frame_hd_t h2f_hd(const uint8_t *p)
{
    return (h2_frame_hd_t){(uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2], p[3], p[4],
                           (int32_t)h2f_be31(p + 5)};
}

void h2f_put_hd(uint8_t *p, size_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    p[0] = (uint8_t)(len >> 16), p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)len;
    p[3] = type, p[4] = flags;
    h2f_put32(p + 5, id);
}

void h2f_setting(const uint8_t *p, uint16_t *k, uint32_t *v)
{
    *k = (uint16_t)(p[0] << 8 | p[1]);
    *v = (uint32_t)p[2] << 24 | (uint32_t)p[3] << 16 | (uint32_t)p[4] << 8 | p[5];
}

void h2f_put_setting(uint8_t *p, uint16_t k, uint32_t v)
{
    p[0] = (uint8_t)(k >> 8), p[1] = (uint8_t)k;
    h2f_put32(p + 2, v);
}

uint32_t h2f_setting_check(uint16_t k, uint32_t v)
{
    if ((k == SET_ENABLE_PUSH || k == SET_NO_RFC7540_PRIORITIES) && v > 1)
        return E_PROTOCOL;
    if (k == SET_INITIAL_WINDOW_SIZE && v > H2_WINDOW_MAX)
        return E_FLOW_CONTROL;
    if (k == SET_MAX_FRAME_SIZE && (v < 16384 || v > 16777215))
        return E_PROTOCOL;
    return 0;
}

size_t h2f_goaway(uint8_t *buf, size_t cap, int32_t last, uint32_t code)
{
    if (cap < H2_FRAME_HD + 8)
        return 0;
    h2f_put_hd(buf, 8, FR_GOAWAY, 0, 0);
    h2f_put32(buf + H2_FRAME_HD, (uint32_t)last);
    h2f_put32(buf + H2_FRAME_HD + 4, code);
    return H2_FRAME_HD + 8;
}

int h2f_flood_kind(const uint8_t *p, uint32_t len, uint8_t type, uint8_t flags)
{
    switch (type) {
    case FR_DATA: { /* with padding only, it is empty too */
        uint32_t pad = flags & FL_PADDED ? (len ? p[0] + 1u : 1u) : 0;
        return len <= pad && !(flags & FL_END_STREAM) ? H2_FLOOD_EMPTY_DATA : -1;
    }
    case FR_SETTINGS: return flags & FL_ACK ? -1 : H2_FLOOD_SETTINGS;
    case FR_PING: return flags & FL_ACK ? -1 : H2_FLOOD_PING;
    case FR_RST_STREAM: return H2_FLOOD_RAPID_RESET;
    case FR_WINDOW_UPDATE: /* by what it buys: the session's (h2.c's window_bought) */
    case FR_HEADERS:
    case FR_PUSH_PROMISE:
    case FR_GOAWAY:
    case FR_CONTINUATION: return -1;
    default: return H2_FLOOD_OTHER; /* PRIORITY, PRIORITY_UPDATE, and what we do not know */
    }
}

void h2f_priority(const uint8_t *v, size_t n, uint8_t *urgency, uint8_t *incremental)
{
    for (size_t i = 0; i < n;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        if (i == n)
            break;
        size_t j = i;
        while (j < n && v[j] != ',')
            j++;
        if (j - i >= 3 && v[i] == 'u' && v[i + 1] == '=' && v[i + 2] >= '0' && v[i + 2] <= '7' &&
            (j - i == 3 || v[i + 3] == ';' || v[i + 3] == ' '))
            *urgency = (uint8_t)(v[i + 2] - '0');
        else if (v[i] == 'i' && (j - i == 1 || v[i + 1] == ';' || v[i + 1] == ' '))
            *incremental = 1;
        else if (j - i >= 4 && !memcmp(v + i, "i=?", 3))
            *incremental = v[i + 3] == '1';
        i = j;
    }
}

uint8_t h2f_pseudo_bit(const uint8_t *name, size_t n)
{
    if (n == 7 && !memcmp(name, ":method", 7))
        return PS_METHOD;
    if (n == 7 && !memcmp(name, ":scheme", 7))
        return PS_SCHEME;
    if (n == 5 && !memcmp(name, ":path", 5))
        return PS_PATH;
    if (n == 10 && !memcmp(name, ":authority", 10))
        return PS_AUTHORITY;
    return 0;
}

/* A pseudo-header: known, before the regular fields, once, not in a
   trailer section; :path not empty. */
static int pseudo_ok(h2f_fields_t *fs, const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen)
{
    uint8_t bit = h2f_pseudo_bit(name, nlen);
    if (fs->trailer || fs->regular || !bit || (fs->pseudo & bit))
        return 0;
    fs->pseudo |= bit;
    /* 8.3.1: the absolute-path (or OPTIONS' "*"), never a URI: a request
       names its authority in :authority alone */
    if (bit == PS_PATH && (!vlen || (value[0] != '/' && !(vlen == 1 && value[0] == '*'))))
        return 0;
    if (bit == PS_METHOD && vlen == 7 && !memcmp(value, "CONNECT", 7))
        fs->connect = 1;
    if (bit == PS_SCHEME && ((vlen == 4 && !memcmp(value, "http", 4)) ||
                             (vlen == 5 && !memcmp(value, "https", 5))))
        fs->web = 1;
    return 1;
}

int h2f_name_ok(const uint8_t *name, size_t nlen)
{
    /* RFC 9110 5.6.2 tchar less the capitals (RFC 9113 8.2.1), as a bit set
       over ASCII; a small letter, most of a name, is passed first */
    static const uint64_t set[2] = {0x03ff6cfa00000000u, 0x57ffffffc0000000u};
    if (nlen && name[0] == ':') /* a pseudo-header's one colon, then a name */
        name++, nlen--;
    if (!nlen)
        return 0;
    for (size_t i = 0; i < nlen; i++) {
        unsigned c = name[i];
        if (c - 'a' > 'z' - 'a' && (c >= 128 || !(set[c >> 6] >> (c & 63) & 1)))
            return 0;
    }
    return 1;
}

int h2f_value_ok(const uint8_t *value, size_t vlen)
{
    if (vlen && (value[0] == ' ' || value[0] == '\t' || value[vlen - 1] == ' ' ||
                 value[vlen - 1] == '\t'))
        return 0;
    return http_value_ok((const char *)value, vlen);
}

int h2f_field_ok(h2f_fields_t *fs, const uint8_t *name, size_t nlen, const uint8_t *value,
                 size_t vlen)
{
    /* our own checks, as nghttp2's (t_h2_frame holds them to it), without
       two calls into the library for every field */
    if (!nlen || !h2f_value_ok(value, vlen))
        return 0;
    if (name[0] == ':') /* only the four names pseudo_ok knows pass it: no check first */
        return pseudo_ok(fs, name, nlen, value, vlen);
    if (!h2f_name_ok(name, nlen))
        return 0;
    fs->regular = 1;
    if (nlen == 4 && !memcmp(name, "host", 4))
        fs->host = 1;
    if (resp_conn_specific((const char *)name, nlen))
        return 0;
    if (nlen == 2 && !memcmp(name, "te", 2))
        return vlen == 8 && !memcmp(value, "trailers", 8);
    return 1;
}

int h2f_fields_complete(const h2f_fields_t *fs)
{
    if (fs->trailer)
        return 1;
    uint8_t need = fs->connect ? PS_METHOD | PS_AUTHORITY : PS_METHOD | PS_SCHEME | PS_PATH;
    if (fs->connect ? fs->pseudo != need : (fs->pseudo & need) != need)
        return 0;
    if (fs->web && !(fs->pseudo & PS_AUTHORITY) && !fs->host)
        return 0; /* 8.3.1: http and https name an authority */
    return 1;
}

int h2f_content_length(const uint8_t *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;
    if (!n || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return 0;
}
