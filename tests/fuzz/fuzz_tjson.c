/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_tjson.c - libFuzzer target: the tjson reader and writer, checked
 * against Jansson in both directions
 *
 * The input is read as a JSON text: tier_jr_validate and every getter
 * run on it, and the verdict must match Jansson's (tier_jr_validate may
 * refuse only what Jansson refuses too, except nesting deeper than
 * TIER_JSON_DEPTH and top-level arrays; it may accept only what Jansson
 * accepts, except numbers Jansson cannot hold).  Values found by the
 * getters must equal Jansson's.  Then the input, split at NUL bytes, is
 * written as keys and strings with tier_jw_* into a buffer of a size the
 * input chooses; what comes out must be valid for both readers.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tjson.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

static size_t depth_of (json_t *v)
{
    size_t d = 0;

    if (json_is_object (v)) {
        const char *k;
        json_t *x;
        json_object_foreach (v, k, x) {
            size_t e = depth_of (x);
            d = e > d ? e : d;
        }
        return d + 1;
    }
    if (json_is_array (v)) {
        size_t i;
        json_t *x;
        json_array_foreach (v, i, x) {
            size_t e = depth_of (x);
            d = e > d ? e : d;
        }
        return d + 1;
    }
    return 0;
}

/* A copy of a text we accepted with every number replaced by 0 (padded
 * with spaces), for Jansson, which refuses numbers it cannot hold.
 */
static char *zero_numbers (const char *text, size_t len)
{
    char *c = malloc (len ? len : 1);
    bool in_string = false;

    CHECK (c);
    memcpy (c, text, len);
    for (size_t i = 0; i < len; i++) {
        if (in_string) {
            if (c[i] == '\\')
                i++;
            else if (c[i] == '"')
                in_string = false;
        }
        else if (c[i] == '"')
            in_string = true;
        else if (c[i] == '-' || (c[i] >= '0' && c[i] <= '9')) {
            c[i] = '0';
            while (i + 1 < len && strchr ("+-.eE0123456789", c[i + 1])
                   && c[i + 1])
                c[++i] = ' ';
        }
    }
    return c;
}

/* Everything the getters say about key must agree with Jansson's v. */
static void compare_member (const char *text, size_t len, const char *key,
                            json_t *v, bool numbers_ok)
{
    const char *raw;
    size_t rawlen;
    int64_t i;
    uint64_t u;
    bool b;

    CHECK (tier_jr_get_raw (text, len, key, &raw, &rawlen) == 0);
    CHECK (raw >= text && raw + rawlen <= text + len && rawlen > 0);
    switch (json_typeof (v)) {
        case JSON_STRING: {
            size_t n = json_string_length (v);
            char *out = malloc (n + 1);
            int rc;

            CHECK (out);
            CHECK (tier_jr_value_type (raw, rawlen) == TIER_JR_STRING);
            rc = tier_jr_get_str (text, len, key, out, n + 1);
            if (memchr (json_string_value (v), '\0', n))
                CHECK (rc == -1 && errno == EINVAL);
            else {
                CHECK (rc == 0);
                CHECK (memcmp (out, json_string_value (v), n + 1) == 0);
                if (n > 0) {
                    CHECK (tier_jr_get_str (text, len, key, out, n) == -1
                           && errno == ERANGE);
                    CHECK (strlen (out) < n);
                    CHECK (memcmp (out, json_string_value (v),
                                   strlen (out)) == 0);
                }
            }
            CHECK (tier_jr_get_int (text, len, key, &i) == -1
                   && errno == EINVAL);
            free (out);
            break;
        }
        case JSON_INTEGER:
            CHECK (tier_jr_value_type (raw, rawlen) == TIER_JR_NUMBER);
            if (numbers_ok) {
                CHECK (tier_jr_get_int (text, len, key, &i) == 0);
                CHECK (i == json_integer_value (v));
                if (i >= 0)
                    CHECK (tier_jr_get_uint (text, len, key, &u) == 0
                           && u == (uint64_t) i);
                else
                    CHECK (tier_jr_get_uint (text, len, key, &u) == -1
                           && errno == ERANGE);
            }
            break;
        case JSON_REAL:
            CHECK (tier_jr_value_type (raw, rawlen) == TIER_JR_NUMBER);
            if (numbers_ok)
                CHECK (tier_jr_get_int (text, len, key, &i) == -1
                       && errno == EINVAL);
            break;
        case JSON_TRUE:
        case JSON_FALSE:
            CHECK (tier_jr_get_bool (text, len, key, &b) == 0);
            CHECK (b == json_is_true (v));
            break;
        case JSON_NULL:
            CHECK (tier_jr_value_type (raw, rawlen) == TIER_JR_NULL);
            CHECK (tier_jr_get_bool (text, len, key, &b) == -1
                   && errno == EINVAL);
            break;
        case JSON_OBJECT: {
            struct tier_jr_iter it;
            size_t count = 0;
            const char *k;
            json_t *x;

            CHECK (tier_jr_value_type (raw, rawlen) == TIER_JR_OBJECT);
            CHECK (tier_jr_validate (raw, rawlen) == 0);
            CHECK (tier_jr_iter_init (&it, raw, rawlen) == 0);
            while (tier_jr_next (&it, NULL, NULL, NULL, NULL) == 1)
                count++;
            CHECK (count >= json_object_size (v));  /* duplicates */
            json_object_foreach (v, k, x)
                compare_member (raw, rawlen, k, x, numbers_ok);
            break;
        }
        case JSON_ARRAY: {
            struct tier_jr_iter it;
            const char *e;
            size_t elen, n = 0;

            CHECK (tier_jr_value_type (raw, rawlen) == TIER_JR_ARRAY);
            CHECK (tier_jr_iter_init (&it, raw, rawlen) == 0);
            while (tier_jr_next (&it, NULL, NULL, &e, &elen) == 1) {
                json_t *x = json_array_get (v, n++);
                CHECK (x);
                if (json_is_true (x) || json_is_false (x))
                    CHECK (tier_jr_value_bool (e, elen, &b) == 0
                           && b == json_is_true (x));
                if (json_is_integer (x) && numbers_ok)
                    CHECK (tier_jr_value_int (e, elen, &i) == 0
                           && i == json_integer_value (x));
                if (json_is_string (x))
                    CHECK (tier_jr_value_type (e, elen) == TIER_JR_STRING);
            }
            CHECK (n == json_array_size (v));
            break;
        }
    }
}

static void read_side (const char *text, size_t len)
{
    static const char *keys[] = { "", "a", "error", "errno", "\xc3\xa9" };
    json_error_t jerr;
    json_t *o;
    bool valid = tier_jr_validate (text, len) == 0;
    bool numbers_ok = true;
    char out[16];
    int64_t i;
    uint64_t u;
    bool b;

    /* the getters never disagree with the validator */
    for (size_t k = 0; k < sizeof (keys) / sizeof (keys[0]); k++) {
        const char *raw;
        size_t rawlen;
        int rc = tier_jr_get_raw (text, len, keys[k], &raw, &rawlen);

        if (!valid) {
            CHECK (rc == -1 && errno == EINVAL);
            CHECK (tier_jr_get_str (text, len, keys[k], out, sizeof (out))
                   == -1 && errno == EINVAL);
            CHECK (tier_jr_get_int (text, len, keys[k], &i) == -1
                   && errno == EINVAL);
            continue;
        }
        CHECK (rc == 0 || errno == ENOENT);
        memset (out, 0, sizeof (out));
        (void) tier_jr_get_str (text, len, keys[k], out, sizeof (out));
        CHECK (strnlen (out, sizeof (out)) < sizeof (out));
        (void) tier_jr_get_str (text, len, keys[k], out, 1);
        (void) tier_jr_get_int (text, len, keys[k], &i);
        (void) tier_jr_get_uint (text, len, keys[k], &u);
        (void) tier_jr_get_bool (text, len, keys[k], &b);
    }
    if (valid) {
        struct tier_jr_iter it;
        const char *k, *v;
        size_t kl, vl;
        CHECK (tier_jr_iter_init (&it, text, len) == 0);
        while (tier_jr_next (&it, &k, &kl, &v, &vl) == 1) {
            char kb[8];
            CHECK (tier_jr_value_type (k, kl) == TIER_JR_STRING);
            CHECK (tier_jr_value_type (v, vl) != TIER_JR_INVALID);
            (void) tier_jr_value_str (k, kl, kb, sizeof (kb));
        }
    }

    o = json_loadb (text, len, JSON_ALLOW_NUL, &jerr);
    if (valid && !o) {
        char *z;

        /* only a number too big for Jansson is an excuse */
        if (json_error_code (&jerr) != json_error_numeric_overflow) {
            fprintf (stderr, "accepted, Jansson refuses: %s\n", jerr.text);
            abort ();
        }
        z = zero_numbers (text, len);
        CHECK (tier_jr_validate (z, len) == 0);
        o = json_loadb (z, len, JSON_ALLOW_NUL, &jerr);
        if (!o) {
            fprintf (stderr, "accepted, Jansson refuses: %s\n", jerr.text);
            abort ();
        }
        free (z);
        numbers_ok = false;
    }
    /* Jansson's json_loadb skips a raw NUL byte after a number or a
     * literal ({"a":1\0}); RFC 8259 does not, neither do we.
     */
    if (!valid && o && json_is_object (o) && !memchr (text, '\0', len)
        && depth_of (o) <= TIER_JSON_DEPTH) {
        fprintf (stderr, "refused, but Jansson accepts\n");
        abort ();
    }
    if (valid && o) {
        const char *k;
        json_t *x;

        CHECK (json_is_object (o));
        json_object_foreach (o, k, x)
            compare_member (text, len, k, x, numbers_ok);
    }
    json_decref (o);
}

/* Write the NUL-separated pieces of data as members; check the text. */
static void write_side (const uint8_t *data, size_t size)
{
    char *copy, *buf;
    size_t cap, npieces = 0;
    const char *pieces[64];
    struct tier_jw w;
    int len;

    if (size < 1)
        return;
    cap = (size_t) data[0] * 4;
    if (!(copy = malloc (size)) || !(buf = malloc (cap ? cap : 1))) {
        free (copy);
        return;
    }
    memcpy (copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    for (char *p = copy; p < copy + size && npieces < 64;
         p += strlen (p) + 1)
        pieces[npieces++] = p;
    tier_jw_init (&w, cap ? buf : NULL, cap);
    for (size_t k = 0; k + 1 < npieces; k += 2)
        tier_jw_str (&w, pieces[k], pieces[k + 1]);
    tier_jw_arr_begin (&w, "\x01list");
    for (size_t k = 0; k < npieces; k++)
        tier_jw_str (&w, NULL, pieces[k]);
    tier_jw_int (&w, NULL, -(int64_t) size);
    tier_jw_arr_end (&w);
    len = tier_jw_finish (&w);
    if (len < 0) {
        CHECK (errno == EMSGSIZE);
        if (cap > 0)
            CHECK (strlen (buf) < cap);
    }
    else {
        json_error_t jerr;
        json_t *o;

        CHECK ((size_t) len < cap && buf[len] == '\0');
        CHECK (tier_jr_validate (buf, len) == 0);
        if (!(o = json_loadb (buf, len, 0, &jerr))) {
            fprintf (stderr, "Jansson refuses the writer's output: %s\n",
                     jerr.text);
            abort ();
        }
        for (size_t k = 0; k + 1 < npieces; k += 2) {
            json_t *t = json_string (pieces[k]);    /* NULL: not UTF-8 */
            json_t *v = json_object_get (o, pieces[k]);
            size_t n;
            char *out;

            json_decref (t);
            if (!t || !strcmp (pieces[k], "\x01list"))
                continue;               /* stored under another name */
            CHECK (json_is_string (v));
            n = json_string_length (v);
            CHECK ((out = malloc (n + 1)));
            CHECK (tier_jr_get_str (buf, len, pieces[k], out, n + 1) == 0);
            CHECK (strcmp (out, json_string_value (v)) == 0);
            free (out);
        }
        CHECK (json_array_size (json_object_get (o, "\x01list"))
               == npieces + 1);
        json_decref (o);
    }
    free (buf);
    free (copy);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    read_side ((const char *) data, size);
    write_side (data, size);
    return 0;
}
