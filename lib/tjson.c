/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tjson.c - JSON writer into a caller buffer, validating reader; no malloc */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "tjson.h"

_Static_assert (TIER_JSON_DEPTH <= 32, "the writer keeps one bit per level");

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')

/* The length of the valid UTF-8 sequence at p (n bytes available), or 0
 * (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
 */
static size_t utf8_len (const unsigned char *p, size_t n)
{
    unsigned char c = p[0], lo = 0x80, hi = 0xbf;
    size_t len;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;                  /* overlong */
        else if (c == 0xed)
            hi = 0x9f;                  /* surrogates */
    }
    else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;                  /* overlong */
        else if (c == 0xf4)
            hi = 0x8f;                  /* above U+10FFFF */
    }
    else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

static size_t utf8_encode (uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = 0xc0 | (cp >> 6);
        out[1] = 0x80 | (cp & 0x3f);
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = 0xe0 | (cp >> 12);
        out[1] = 0x80 | ((cp >> 6) & 0x3f);
        out[2] = 0x80 | (cp & 0x3f);
        return 3;
    }
    out[0] = 0xf0 | (cp >> 18);
    out[1] = 0x80 | ((cp >> 12) & 0x3f);
    out[2] = 0x80 | ((cp >> 6) & 0x3f);
    out[3] = 0x80 | (cp & 0x3f);
    return 4;
}

/*
 * Writer
 */

static void put (struct tier_jw *w, const char *s, size_t n)
{
    if (w->overflow)
        return;
    if (w->size == 0 || n >= w->size - w->len) {
        w->overflow = true;             /* keep room for the NUL */
        return;
    }
    memcpy (w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void put_string (struct tier_jw *w, const char *str)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *) str;
    size_t n = strlen (str), i = 0, start = 0;

    put (w, "\"", 1);
    while (i < n) {
        unsigned char c = p[i];
        char ubuf[6];
        const char *esc;
        size_t elen = 2, l;

        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0x80 && (l = utf8_len (p + i, n - i)) > 0) {
            i += l;
            continue;
        }
        put (w, str + start, i - start);
        switch (c) {
            case '"': esc = "\\\""; break;
            case '\\': esc = "\\\\"; break;
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            default:
                if (c < 0x20) {
                    memcpy (ubuf, "\\u00", 4);
                    ubuf[4] = hex[c >> 4];
                    ubuf[5] = hex[c & 0xf];
                    esc = ubuf;
                    elen = 6;
                }
                else {
                    esc = "\xef\xbf\xbd";   /* U+FFFD for a bad byte */
                    elen = 3;
                }
                break;
        }
        put (w, esc, elen);
        start = ++i;
    }
    put (w, str + start, i - start);
    put (w, "\"", 1);
}

static void put_number (struct tier_jw *w, uint64_t mag, bool negative)
{
    char tmp[21];
    int i = sizeof (tmp);

    do {
        tmp[--i] = '0' + mag % 10;
        mag /= 10;
    } while (mag);
    if (negative)
        tmp[--i] = '-';
    put (w, tmp + i, sizeof (tmp) - i);
}

/* Start a member: a comma if needed, and the key in an object. */
static bool member (struct tier_jw *w, const char *key)
{
    uint32_t bit;
    bool in_array;

    if (w->misuse)
        return false;
    if (w->depth < 1) {
        w->misuse = true;
        return false;
    }
    bit = 1u << (w->depth - 1);
    in_array = (w->array & bit) != 0;
    if (in_array ? key != NULL : key == NULL) {
        w->misuse = true;
        return false;
    }
    if (w->nonempty & bit)
        put (w, ",", 1);
    w->nonempty |= bit;
    if (!in_array) {
        put_string (w, key);
        put (w, ":", 1);
    }
    return true;
}

void tier_jw_init (struct tier_jw *w, char *buf, size_t size)
{
    memset (w, 0, sizeof (*w));
    w->buf = buf;
    w->size = buf ? size : 0;
    if (w->size > 0)
        buf[0] = '\0';
    w->depth = 1;
    put (w, "{", 1);
}

void tier_jw_str (struct tier_jw *w, const char *key, const char *val)
{
    if (member (w, key)) {
        if (val)
            put_string (w, val);
        else
            put (w, "null", 4);
    }
}

void tier_jw_int (struct tier_jw *w, const char *key, int64_t v)
{
    if (member (w, key))
        put_number (w, v < 0 ? (uint64_t) 0 - (uint64_t) v : (uint64_t) v,
                    v < 0);
}

void tier_jw_uint (struct tier_jw *w, const char *key, uint64_t v)
{
    if (member (w, key))
        put_number (w, v, false);
}

void tier_jw_bool (struct tier_jw *w, const char *key, bool v)
{
    if (member (w, key))
        put (w, v ? "true" : "false", v ? 4 : 5);
}

void tier_jw_null (struct tier_jw *w, const char *key)
{
    if (member (w, key))
        put (w, "null", 4);
}

static void begin (struct tier_jw *w, const char *key, bool array)
{
    uint32_t bit;

    if (!w->misuse && w->depth >= TIER_JSON_DEPTH) {
        w->misuse = true;               /* the reader would refuse it */
        return;
    }
    if (!member (w, key))
        return;
    bit = 1u << w->depth++;
    if (array)
        w->array |= bit;
    else
        w->array &= ~bit;
    w->nonempty &= ~bit;
    put (w, array ? "[" : "{", 1);
}

static void end (struct tier_jw *w, bool array)
{
    if (w->misuse)
        return;
    if (w->depth <= 1
        || ((w->array & (1u << (w->depth - 1))) != 0) != array) {
        w->misuse = true;
        return;
    }
    w->depth--;
    put (w, array ? "]" : "}", 1);
}

void tier_jw_obj_begin (struct tier_jw *w, const char *key)
{
    begin (w, key, false);
}

void tier_jw_obj_end (struct tier_jw *w)
{
    end (w, false);
}

void tier_jw_arr_begin (struct tier_jw *w, const char *key)
{
    begin (w, key, true);
}

void tier_jw_arr_end (struct tier_jw *w)
{
    end (w, true);
}

int tier_jw_finish (struct tier_jw *w)
{
    if (w->misuse || w->depth != 1) {
        w->misuse = true;
        errno = EINVAL;
        return -1;
    }
    put (w, "}", 1);
    w->depth = 0;
    if (w->overflow || w->len > INT_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    return (int) w->len;
}

/*
 * Reader
 */

struct scan {
    const unsigned char *p;
    const unsigned char *end;
};

static void skip_ws (struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n'
                             || *s->p == '\r'))
        s->p++;
}

static int hex4 (const unsigned char *p, uint32_t *v)
{
    uint32_t x = 0;

    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];

        x <<= 4;
        if (IS_DIGIT (c))
            x |= c - '0';
        else if (c >= 'a' && c <= 'f')
            x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            x |= c - 'A' + 10;
        else
            return -1;
    }
    *v = x;
    return 0;
}

/* A \u escape at s->p (s->p[0..1] is "\u"), with a surrogate pair. */
static int str_unicode (struct scan *s, unsigned char *out, size_t *n)
{
    uint32_t cp, lo;

    if (s->end - s->p < 6 || hex4 (s->p + 2, &cp) < 0)
        return -1;
    s->p += 6;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return -1;                      /* a lone low surrogate */
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u'
            || hex4 (s->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
            return -1;                  /* a lone high surrogate */
        s->p += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    *n = utf8_encode (cp, out);
    return 1;
}

/* The next character inside a string: 1 with its UTF-8 bytes in out[]
 * (*n of them), 0 at the closing quote (consumed), -1 if malformed.
 */
static int str_next (struct scan *s, unsigned char out[4], size_t *n)
{
    unsigned char c;
    size_t l;

    if (s->p >= s->end)
        return -1;                      /* unterminated */
    c = *s->p;
    if (c == '"') {
        s->p++;
        return 0;
    }
    if (c < 0x20)
        return -1;                      /* raw control character */
    if (c != '\\') {
        if (!(l = utf8_len (s->p, s->end - s->p)))
            return -1;
        memcpy (out, s->p, l);
        *n = l;
        s->p += l;
        return 1;
    }
    if (s->end - s->p < 2)
        return -1;
    switch (s->p[1]) {
        case '"': out[0] = '"'; break;
        case '\\': out[0] = '\\'; break;
        case '/': out[0] = '/'; break;
        case 'b': out[0] = '\b'; break;
        case 'f': out[0] = '\f'; break;
        case 'n': out[0] = '\n'; break;
        case 'r': out[0] = '\r'; break;
        case 't': out[0] = '\t'; break;
        case 'u': return str_unicode (s, out, n);
        default: return -1;
    }
    s->p += 2;
    *n = 1;
    return 1;
}

/* A string token at s->p (a '"'). */
static int scan_string (struct scan *s, bool is_key)
{
    unsigned char c[4];
    size_t n;
    int rc;

    s->p++;
    while ((rc = str_next (s, c, &n)) == 1)
        if (is_key && n == 1 && c[0] == '\0')
            return -1;                  /* "\u0000" in a key */
    return rc;
}

static int scan_number (struct scan *s)
{
    const unsigned char *p = s->p, *e = s->end;

    if (p < e && *p == '-')
        p++;
    if (p >= e)
        return -1;
    if (*p == '0')
        p++;                            /* no leading zeros: "01" fails */
    else if (*p >= '1' && *p <= '9') {
        while (p < e && IS_DIGIT (*p))
            p++;
    }
    else
        return -1;
    if (p < e && *p == '.') {
        if (++p >= e || !IS_DIGIT (*p))
            return -1;
        while (p < e && IS_DIGIT (*p))
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !IS_DIGIT (*p))
            return -1;
        while (p < e && IS_DIGIT (*p))
            p++;
    }
    s->p = p;
    return 0;
}

static int scan_literal (struct scan *s, const char *lit, size_t n)
{
    if ((size_t) (s->end - s->p) < n || memcmp (s->p, lit, n) != 0)
        return -1;
    s->p += n;
    return 0;
}

/* Does the (valid) string token at q equal key? */
static bool key_equal (const unsigned char *q, const unsigned char *end,
                       const char *key)
{
    struct scan t = { .p = q + 1, .end = end };
    const unsigned char *k = (const unsigned char *) key;
    unsigned char c[4];
    size_t n;
    int rc;

    while ((rc = str_next (&t, c, &n)) == 1) {
        for (size_t i = 0; i < n; i++) {
            if (*k == '\0' || *k != c[i])
                return false;
            k++;
        }
    }
    return rc == 0 && *k == '\0';
}

static int scan_value (struct scan *s, int depth);

/* An object at s->p (a '{') at nesting level depth.  With key, *found
 * and *flen get the span of the last member named key.
 */
static int scan_object (struct scan *s, int depth, const char *key,
                        const unsigned char **found, size_t *flen)
{
    if (depth > TIER_JSON_DEPTH)
        return -1;
    s->p++;
    skip_ws (s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *k, *v;

        skip_ws (s);
        if (s->p >= s->end || *s->p != '"')
            return -1;
        k = s->p;
        if (scan_string (s, true) < 0)
            return -1;
        skip_ws (s);
        if (s->p >= s->end || *s->p != ':')
            return -1;
        s->p++;
        skip_ws (s);
        v = s->p;
        if (scan_value (s, depth) < 0)
            return -1;
        if (key && key_equal (k, s->end, key)) {
            *found = v;                 /* the last one wins */
            *flen = s->p - v;
        }
        skip_ws (s);
        if (s->p >= s->end)
            return -1;
        if (*s->p == '}') {
            s->p++;
            return 0;
        }
        if (*s->p++ != ',')
            return -1;
    }
}

static int scan_array (struct scan *s, int depth)
{
    if (depth > TIER_JSON_DEPTH)
        return -1;
    s->p++;
    skip_ws (s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 0;
    }
    for (;;) {
        skip_ws (s);
        if (scan_value (s, depth) < 0)
            return -1;
        skip_ws (s);
        if (s->p >= s->end)
            return -1;
        if (*s->p == ']') {
            s->p++;
            return 0;
        }
        if (*s->p++ != ',')
            return -1;
    }
}

/* A value inside a container at level depth (0: a standalone value). */
static int scan_value (struct scan *s, int depth)
{
    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
        case '{': return scan_object (s, depth + 1, NULL, NULL, NULL);
        case '[': return scan_array (s, depth + 1);
        case '"': return scan_string (s, false);
        case 't': return scan_literal (s, "true", 4);
        case 'f': return scan_literal (s, "false", 5);
        case 'n': return scan_literal (s, "null", 4);
        default: return scan_number (s);
    }
}

/* Validate a whole text; with key, find its last top-level member. */
static int scan_doc (const char *json, size_t len, const char *key,
                     const unsigned char **found, size_t *flen)
{
    struct scan s;

    if (!json)
        goto inval;
    s.p = (const unsigned char *) json;
    s.end = s.p + len;
    skip_ws (&s);
    if (s.p >= s.end || *s.p != '{'
        || scan_object (&s, 1, key, found, flen) < 0)
        goto inval;
    skip_ws (&s);
    if (s.p != s.end)
        goto inval;
    return 0;
inval:
    errno = EINVAL;
    return -1;
}

/* A span that must be exactly one value (whitespace around allowed):
 * *tok gets the value's own bytes.
 */
static int span_value (const char *val, size_t vlen, struct scan *tok)
{
    struct scan s;

    if (!val)
        goto inval;
    s.p = (const unsigned char *) val;
    s.end = s.p + vlen;
    skip_ws (&s);
    tok->p = s.p;
    if (scan_value (&s, 0) < 0)
        goto inval;
    tok->end = s.p;
    skip_ws (&s);
    if (s.p != s.end)
        goto inval;
    return 0;
inval:
    errno = EINVAL;
    return -1;
}

int tier_jr_validate (const char *json, size_t len)
{
    return scan_doc (json, len, NULL, NULL, NULL);
}

int tier_jr_get_raw (const char *json, size_t len, const char *key,
                     const char **val, size_t *vlen)
{
    const unsigned char *found = NULL;
    size_t flen = 0;

    if (!key) {
        errno = EINVAL;
        return -1;
    }
    if (scan_doc (json, len, key, &found, &flen) < 0)
        return -1;
    if (!found) {
        errno = ENOENT;
        return -1;
    }
    if (val)
        *val = (const char *) found;
    if (vlen)
        *vlen = flen;
    return 0;
}

enum tier_jr_type tier_jr_value_type (const char *val, size_t vlen)
{
    struct scan tok;
    int saved = errno;

    if (span_value (val, vlen, &tok) < 0) {
        errno = saved;
        return TIER_JR_INVALID;
    }
    switch (*tok.p) {
        case '{': return TIER_JR_OBJECT;
        case '[': return TIER_JR_ARRAY;
        case '"': return TIER_JR_STRING;
        case 't':
        case 'f': return TIER_JR_BOOL;
        case 'n': return TIER_JR_NULL;
        default: return TIER_JR_NUMBER;
    }
}

int tier_jr_value_str (const char *val, size_t vlen, char *out, size_t size)
{
    struct scan tok, t;
    unsigned char c[4];
    size_t n, o = 0;
    bool full = false, nul = false;

    if (span_value (val, vlen, &tok) < 0)
        return -1;
    if (*tok.p != '"' || (size > 0 && !out)) {
        errno = EINVAL;
        return -1;
    }
    t.p = tok.p + 1;
    t.end = tok.end;
    while (str_next (&t, c, &n) == 1) {
        if (n == 1 && c[0] == '\0')
            nul = true;
        if (!full && n < size - o) {
            memcpy (out + o, c, n);
            o += n;
        }
        else
            full = true;
    }
    if (o >= size)
        full = true;                    /* no room for the NUL */
    if (size > 0)
        out[nul ? 0 : o] = '\0';
    if (nul || full) {
        errno = nul ? EINVAL : ERANGE;
        return -1;
    }
    return 0;
}

/* The integer token at tok: its sign and magnitude. */
static int integer_of (const struct scan *tok, bool *negative,
                       uint64_t *mag)
{
    const unsigned char *p = tok->p;
    uint64_t m = 0;

    if (*p == '"' || *p == '{' || *p == '[' || *p == 't' || *p == 'f'
        || *p == 'n')
        goto inval;
    for (const unsigned char *q = p; q < tok->end; q++)
        if (*q == '.' || *q == 'e' || *q == 'E')
            goto inval; /* integers only */
    if ((*negative = *p == '-'))
        p++;
    for (; p < tok->end; p++) {
        unsigned int d = *p - '0';
        if (m > (UINT64_MAX - d) / 10) {
            errno = ERANGE;
            return -1;
        }
        m = m * 10 + d;
    }
    *mag = m;
    return 0;
inval:
    errno = EINVAL;
    return -1;
}

int tier_jr_value_int (const char *val, size_t vlen, int64_t *v)
{
    struct scan tok;
    bool negative;
    uint64_t mag;

    if (span_value (val, vlen, &tok) < 0
        || integer_of (&tok, &negative, &mag) < 0)
        return -1;
    if (mag > (uint64_t) INT64_MAX + (negative ? 1 : 0)) {
        errno = ERANGE;
        return -1;
    }
    if (negative)
        *v = mag == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) mag;
    else
        *v = (int64_t) mag;
    return 0;
}

int tier_jr_value_uint (const char *val, size_t vlen, uint64_t *v)
{
    struct scan tok;
    bool negative;
    uint64_t mag;

    if (span_value (val, vlen, &tok) < 0
        || integer_of (&tok, &negative, &mag) < 0)
        return -1;
    if (negative && mag != 0) {
        errno = ERANGE;
        return -1;
    }
    *v = mag;
    return 0;
}

int tier_jr_value_bool (const char *val, size_t vlen, bool *v)
{
    struct scan tok;

    if (span_value (val, vlen, &tok) < 0)
        return -1;
    if (*tok.p != 't' && *tok.p != 'f') {
        errno = EINVAL;
        return -1;
    }
    *v = *tok.p == 't';
    return 0;
}

int tier_jr_get_str (const char *json, size_t len, const char *key,
                     char *out, size_t size)
{
    const char *val;
    size_t vlen;

    if (tier_jr_get_raw (json, len, key, &val, &vlen) < 0)
        return -1;
    return tier_jr_value_str (val, vlen, out, size);
}

int tier_jr_get_int (const char *json, size_t len, const char *key,
                     int64_t *v)
{
    const char *val;
    size_t vlen;

    if (tier_jr_get_raw (json, len, key, &val, &vlen) < 0)
        return -1;
    return tier_jr_value_int (val, vlen, v);
}

int tier_jr_get_uint (const char *json, size_t len, const char *key,
                      uint64_t *v)
{
    const char *val;
    size_t vlen;

    if (tier_jr_get_raw (json, len, key, &val, &vlen) < 0)
        return -1;
    return tier_jr_value_uint (val, vlen, v);
}

int tier_jr_get_bool (const char *json, size_t len, const char *key,
                      bool *v)
{
    const char *val;
    size_t vlen;

    if (tier_jr_get_raw (json, len, key, &val, &vlen) < 0)
        return -1;
    return tier_jr_value_bool (val, vlen, v);
}

int tier_jr_iter_init (struct tier_jr_iter *it, const char *val,
                       size_t vlen)
{
    struct scan tok;

    if (span_value (val, vlen, &tok) < 0)
        return -1;
    if (*tok.p != '{' && *tok.p != '[') {
        errno = EINVAL;
        return -1;
    }
    it->object = *tok.p == '{';
    it->p = (const char *) tok.p + 1;
    it->end = (const char *) tok.end;
    it->done = false;
    return 0;
}

int tier_jr_next (struct tier_jr_iter *it, const char **key, size_t *keylen,
                  const char **val, size_t *vlen)
{
    struct scan s = {
        .p = (const unsigned char *) it->p,
        .end = (const unsigned char *) it->end,
    };
    const unsigned char *k = NULL, *kend = NULL, *v;

    if (it->done)
        return 0;
    skip_ws (&s);
    if (s.p >= s.end)
        goto inval;
    if (*s.p == (it->object ? '}' : ']')) {
        it->done = true;
        return 0;
    }
    if (it->object) {
        k = s.p;
        if (*s.p != '"' || scan_string (&s, true) < 0)
            goto inval;
        kend = s.p;
        skip_ws (&s);
        if (s.p >= s.end || *s.p++ != ':')
            goto inval;
        skip_ws (&s);
    }
    v = s.p;
    if (scan_value (&s, 1) < 0)
        goto inval;
    if (val)
        *val = (const char *) v;
    if (vlen)
        *vlen = s.p - v;
    if (key)
        *key = (const char *) k;
    if (keylen)
        *keylen = k ? (size_t) (kend - k) : 0;
    skip_ws (&s);
    if (s.p < s.end && *s.p == ',')
        s.p++;
    it->p = (const char *) s.p;
    return 1;
inval:
    it->done = true;
    errno = EINVAL;
    return -1;
}
