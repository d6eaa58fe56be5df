/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_tjson.c - the libc-only JSON writer and reader, checked by Jansson */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/tjson.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FAILALLOC_DEFINE

#define S(lit) lit, sizeof (lit) - 1

/* Jansson must read text as an object (flags: JSON_ALLOW_NUL or 0). */
static json_t *jansson_parse (const char *text, size_t len, size_t flags)
{
    json_error_t jerr;
    json_t *o = json_loadb (text, len, flags, &jerr);

    if (!o)
        fail_msg ("Jansson refused '%.*s': %s", (int) len, text, jerr.text);
    assert_true (json_is_object (o));
    return o;
}

static void test_writer_types (void **state)
{
    char buf[512];
    struct tier_jw w;
    int len;

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_str (&w, "s", "v");
    tier_jw_int (&w, "i", -42);
    tier_jw_int (&w, "min", INT64_MIN);
    tier_jw_int (&w, "max", INT64_MAX);
    tier_jw_uint (&w, "u", UINT64_MAX);
    tier_jw_uint (&w, "z", 0);
    tier_jw_bool (&w, "t", true);
    tier_jw_bool (&w, "f", false);
    tier_jw_null (&w, "n");
    tier_jw_str (&w, "sn", NULL);
    tier_jw_obj_begin (&w, "o");
    tier_jw_obj_end (&w);
    tier_jw_arr_begin (&w, "a");
    tier_jw_int (&w, NULL, 1);
    tier_jw_str (&w, NULL, "x");
    tier_jw_obj_begin (&w, NULL);
    tier_jw_arr_begin (&w, "e");
    tier_jw_arr_end (&w);
    tier_jw_obj_end (&w);
    tier_jw_arr_begin (&w, NULL);
    tier_jw_null (&w, NULL);
    tier_jw_arr_end (&w);
    tier_jw_arr_end (&w);
    len = tier_jw_finish (&w);
    assert_int_equal (len, (int) strlen (buf));
    assert_string_equal (buf,
        "{\"s\":\"v\",\"i\":-42,\"min\":-9223372036854775808,"
        "\"max\":9223372036854775807,\"u\":18446744073709551615,\"z\":0,"
        "\"t\":true,\"f\":false,\"n\":null,\"sn\":null,\"o\":{},"
        "\"a\":[1,\"x\",{\"e\":[]},[null]]}");
    assert_int_equal (tier_jr_validate (buf, strlen (buf)), 0);

    tier_jw_init (&w, buf, sizeof (buf));
    assert_int_equal (tier_jw_finish (&w), 2);
    assert_string_equal (buf, "{}");
}

static void test_writer_escape (void **state)
{
    char buf[512];
    struct tier_jw w;

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_str (&w, "q\"k\\", "a\"b\\c/d");
    tier_jw_str (&w, "c", "\b\f\n\r\t\x01\x1f\x7f");
    tier_jw_str (&w, "u", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    assert_true (tier_jw_finish (&w) > 0);
    assert_string_equal (buf,
        "{\"q\\\"k\\\\\":\"a\\\"b\\\\c/d\","
        "\"c\":\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\","
        "\"u\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}");

    /* Every byte that is not valid UTF-8 becomes U+FFFD. */
    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_str (&w, "ff", "a\xff" "b");
    tier_jw_str (&w, "overlong", "\xc0\xaf");
    tier_jw_str (&w, "surrogate", "\xed\xa0\x80");
    tier_jw_str (&w, "big", "\xf4\x90\x80\x80");
    tier_jw_str (&w, "cut", "\xe2\x82");
    tier_jw_str (&w, "lone", "\x80x");
    tier_jw_str (&w, "\xfe", "k");
    assert_true (tier_jw_finish (&w) > 0);
    assert_string_equal (buf,
        "{\"ff\":\"a\xef\xbf\xbd" "b\","
        "\"overlong\":\"\xef\xbf\xbd\xef\xbf\xbd\","
        "\"surrogate\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\","
        "\"big\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\","
        "\"cut\":\"\xef\xbf\xbd\xef\xbf\xbd\","
        "\"lone\":\"\xef\xbf\xbdx\","
        "\"\xef\xbf\xbd\":\"k\"}");
    assert_int_equal (tier_jr_validate (buf, strlen (buf)), 0);
}

static void expect_misuse (struct tier_jw *w)
{
    errno = 0;
    assert_int_equal (tier_jw_finish (w), -1);
    assert_int_equal (errno, EINVAL);
}

static void test_writer_misuse (void **state)
{
    char buf[256];
    struct tier_jw w;

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_int (&w, NULL, 1);          /* no key in an object */
    expect_misuse (&w);

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_arr_begin (&w, "a");
    tier_jw_int (&w, "k", 1);           /* a key in an array */
    tier_jw_arr_end (&w);
    expect_misuse (&w);

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_obj_begin (&w, "o");        /* never closed */
    expect_misuse (&w);

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_obj_end (&w);               /* closes the top level */
    expect_misuse (&w);

    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_arr_begin (&w, "a");
    tier_jw_obj_end (&w);               /* the wrong kind */
    tier_jw_arr_end (&w);
    expect_misuse (&w);

    tier_jw_init (&w, buf, sizeof (buf));
    assert_int_equal (tier_jw_finish (&w), 2);
    expect_misuse (&w);                 /* finished twice */

    /* 32 levels are fine, the 33rd is refused like the reader does */
    tier_jw_init (&w, buf, sizeof (buf));
    for (int i = 1; i < TIER_JSON_DEPTH; i++)
        tier_jw_arr_begin (&w, i == 1 ? "a" : NULL);
    for (int i = 1; i < TIER_JSON_DEPTH; i++)
        tier_jw_arr_end (&w);
    assert_true (tier_jw_finish (&w) > 0);
    assert_int_equal (tier_jr_validate (buf, strlen (buf)), 0);
    tier_jw_init (&w, buf, sizeof (buf));
    for (int i = 1; i <= TIER_JSON_DEPTH; i++)
        tier_jw_arr_begin (&w, i == 1 ? "a" : NULL);
    for (int i = 1; i <= TIER_JSON_DEPTH; i++)
        tier_jw_arr_end (&w);
    expect_misuse (&w);

    /* misuse wins over overflow */
    tier_jw_init (&w, buf, 3);
    tier_jw_str (&w, "long", "value");
    tier_jw_obj_begin (&w, "o");
    expect_misuse (&w);
}

static void build_sample (struct tier_jw *w)
{
    tier_jw_str (w, "op", "stage-in");
    tier_jw_uint (w, "job", 4242);
    tier_jw_int (w, "neg", -7);
    tier_jw_str (w, "path", "/gfs/a \"b\"\n\xc3\xa9");
    tier_jw_arr_begin (w, "files");
    tier_jw_str (w, NULL, "x");
    tier_jw_bool (w, NULL, true);
    tier_jw_obj_begin (w, NULL);
    tier_jw_null (w, "n");
    tier_jw_obj_end (w);
    tier_jw_arr_end (w);
    tier_jw_str (w, "bad", "\xff");
}

/* At every buffer size the writer stays inside the buffer, keeps it
 * NUL-terminated with a prefix of the full text, and reports EMSGSIZE.
 */
static void test_writer_overflow (void **state)
{
    char ref[512], buf[600];
    struct tier_jw w;
    int full;

    tier_jw_init (&w, ref, sizeof (ref));
    build_sample (&w);
    full = tier_jw_finish (&w);
    assert_true (full > 20);
    for (int size = 0; size <= full + 1; size++) {
        memset (buf, 0xaa, sizeof (buf));
        tier_jw_init (&w, size ? buf : NULL, size);
        build_sample (&w);
        errno = 0;
        if (size <= full) {
            assert_int_equal (tier_jw_finish (&w), -1);
            assert_int_equal (errno, EMSGSIZE);
        }
        else {
            assert_int_equal (tier_jw_finish (&w), full);
            assert_string_equal (buf, ref);
        }
        for (size_t i = size; i < sizeof (buf); i++)
            if ((unsigned char) buf[i] != 0xaa)
                fail_msg ("size %d: byte %zu written", size, i);
        if (size > 0) {
            size_t n = strnlen (buf, size);
            assert_true (n < (size_t) size);
            assert_memory_equal (buf, ref, n);
        }
    }
}

static void test_writer_jansson (void **state)
{
    char buf[1024], key[8];
    struct tier_jw w;
    json_t *o, *a;
    int len;

    tier_jw_init (&w, buf, sizeof (buf));
    build_sample (&w);
    tier_jw_int (&w, "min", INT64_MIN);
    tier_jw_str (&w, "ctl", "\x01\x02\x1f\x7f\t");
    key[0] = '\x1b';
    strcpy (key + 1, "[0m");
    tier_jw_str (&w, key, "esc");
    assert_true ((len = tier_jw_finish (&w)) > 0);
    o = jansson_parse (buf, len, 0);
    assert_string_equal (json_string_value (json_object_get (o, "op")),
                         "stage-in");
    assert_int_equal (json_integer_value (json_object_get (o, "job")), 4242);
    assert_int_equal (json_integer_value (json_object_get (o, "neg")), -7);
    assert_true (json_integer_value (json_object_get (o, "min"))
                 == INT64_MIN);
    assert_string_equal (json_string_value (json_object_get (o, "path")),
                         "/gfs/a \"b\"\n\xc3\xa9");
    assert_string_equal (json_string_value (json_object_get (o, "bad")),
                         "\xef\xbf\xbd");
    assert_string_equal (json_string_value (json_object_get (o, "ctl")),
                         "\x01\x02\x1f\x7f\t");
    assert_string_equal (json_string_value (json_object_get (o, key)),
                         "esc");
    a = json_object_get (o, "files");
    assert_int_equal (json_array_size (a), 3);
    assert_true (json_is_true (json_array_get (a, 1)));
    assert_true (json_is_null (json_object_get (json_array_get (a, 2),
                                                "n")));
    json_decref (o);
}

static const char sample[] =
    " {\"s\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20AC\\ud83d\\ude00\","
    " \"i\": -123, \"big\": 18446744073709551615, \"neg0\": -0,"
    " \"t\": true, \"f\": false, \"n\": null, \"r\": 1.5e3,"
    " \"o\": {\"x\": {\"y\": [1, 2]}, \"s\": \"in\"},"
    " \"a\": [ 1, \"two\", [3], {\"four\": 4}, null ],"
    " \"e\": \"\", \"utf\": \"\xc3\xa9\xf0\x9f\x98\x80\", \"\xc3\xa9\": 1,"
    " \"k\\u00e9y\": 2, \"nul\": \"a\\u0000b\" } \n";

static void test_reader_types (void **state)
{
    size_t len = strlen (sample), vlen;
    char out[128];
    const char *val;
    int64_t i;
    uint64_t u;
    bool b;

    assert_int_equal (tier_jr_validate (sample, len), 0);
    assert_int_equal (tier_jr_get_str (sample, len, "s", out, sizeof (out)),
                      0);
    assert_string_equal (out, "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xe2\x82\xac"
                         "\xf0\x9f\x98\x80");
    assert_int_equal (tier_jr_get_int (sample, len, "i", &i), 0);
    assert_true (i == -123);
    assert_int_equal (tier_jr_get_uint (sample, len, "big", &u), 0);
    assert_true (u == UINT64_MAX);
    assert_int_equal (tier_jr_get_int (sample, len, "neg0", &i), 0);
    assert_true (i == 0);
    assert_int_equal (tier_jr_get_uint (sample, len, "neg0", &u), 0);
    assert_true (u == 0);
    assert_int_equal (tier_jr_get_bool (sample, len, "t", &b), 0);
    assert_true (b);
    assert_int_equal (tier_jr_get_bool (sample, len, "f", &b), 0);
    assert_false (b);
    assert_int_equal (tier_jr_get_str (sample, len, "e", out, sizeof (out)),
                      0);
    assert_string_equal (out, "");
    assert_int_equal (tier_jr_get_str (sample, len, "utf", out, 128), 0);
    assert_string_equal (out, "\xc3\xa9\xf0\x9f\x98\x80");
    /* keys are compared unescaped, with raw UTF-8 or \u escapes */
    assert_int_equal (tier_jr_get_int (sample, len, "\xc3\xa9", &i), 0);
    assert_true (i == 1);
    assert_int_equal (tier_jr_get_int (sample, len, "k\xc3\xa9y", &i), 0);
    assert_true (i == 2);

    /* raw spans and types */
    assert_int_equal (tier_jr_get_raw (sample, len, "n", &val, &vlen), 0);
    assert_int_equal (tier_jr_value_type (val, vlen), TIER_JR_NULL);
    assert_int_equal (tier_jr_get_raw (sample, len, "r", &val, &vlen), 0);
    assert_int_equal (vlen, 5);
    assert_memory_equal (val, "1.5e3", 5);
    assert_int_equal (tier_jr_value_type (val, vlen), TIER_JR_NUMBER);
    assert_int_equal (tier_jr_get_raw (sample, len, "s", &val, &vlen), 0);
    assert_int_equal (tier_jr_value_type (val, vlen), TIER_JR_STRING);
    assert_int_equal (tier_jr_get_raw (sample, len, "t", &val, &vlen), 0);
    assert_int_equal (tier_jr_value_type (val, vlen), TIER_JR_BOOL);
    assert_int_equal (tier_jr_value_type ("x", 1), TIER_JR_INVALID);
    assert_int_equal (tier_jr_value_type (" [1] ", 5), TIER_JR_ARRAY);

    /* a nested object's span is an object text of its own */
    assert_int_equal (tier_jr_get_raw (sample, len, "o", &val, &vlen), 0);
    assert_int_equal (tier_jr_value_type (val, vlen), TIER_JR_OBJECT);
    assert_int_equal (tier_jr_get_str (val, vlen, "s", out, 16), 0);
    assert_string_equal (out, "in");
    {
        const char *x, *y;
        size_t xl, yl;
        assert_int_equal (tier_jr_get_raw (val, vlen, "x", &x, &xl), 0);
        assert_int_equal (tier_jr_get_raw (x, xl, "y", &y, &yl), 0);
        assert_int_equal (yl, 6);
        assert_memory_equal (y, "[1, 2]", 6);
    }
}

static void test_reader_iter (void **state)
{
    size_t len = strlen (sample), vlen, klen;
    struct tier_jr_iter it;
    const char *val, *v, *k;
    char out[32];
    int64_t i;
    int n = 0;

    assert_int_equal (tier_jr_get_raw (sample, len, "a", &val, &vlen), 0);
    assert_int_equal (tier_jr_iter_init (&it, val, vlen), 0);
    while (tier_jr_next (&it, &k, &klen, &v, &vlen) == 1) {
        assert_null (k);
        switch (n++) {
            case 0:
                assert_int_equal (tier_jr_value_int (v, vlen, &i), 0);
                assert_true (i == 1);
                break;
            case 1:
                assert_int_equal (tier_jr_value_str (v, vlen, out, 32), 0);
                assert_string_equal (out, "two");
                break;
            case 2:
                assert_int_equal (tier_jr_value_type (v, vlen),
                                  TIER_JR_ARRAY);
                break;
            case 3:
                assert_int_equal (tier_jr_get_int (v, vlen, "four", &i), 0);
                assert_true (i == 4);
                break;
            case 4:
                assert_int_equal (tier_jr_value_type (v, vlen),
                                  TIER_JR_NULL);
                break;
        }
    }
    assert_int_equal (n, 5);
    assert_int_equal (tier_jr_next (&it, NULL, NULL, &v, &vlen), 0);

    /* the members of an object, keys as string tokens */
    assert_int_equal (tier_jr_iter_init (&it, sample, len), 0);
    n = 0;
    while (tier_jr_next (&it, &k, &klen, NULL, NULL) == 1) {
        assert_int_equal (tier_jr_value_str (k, klen, out, 32), 0);
        if (n == 0)
            assert_string_equal (out, "s");
        if (n == 13)
            assert_string_equal (out, "k\xc3\xa9y");
        n++;
    }
    assert_int_equal (n, 15);

    /* empty containers; not a container */
    assert_int_equal (tier_jr_iter_init (&it, "[ ]", 3), 0);
    assert_int_equal (tier_jr_next (&it, NULL, NULL, &v, &vlen), 0);
    assert_int_equal (tier_jr_iter_init (&it, "{}", 2), 0);
    assert_int_equal (tier_jr_next (&it, NULL, NULL, &v, &vlen), 0);
    errno = 0;
    assert_int_equal (tier_jr_iter_init (&it, "1", 1), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_jr_iter_init (&it, "[1,]", 4), -1);
}

static void expect_fail (int rc, int err)
{
    assert_int_equal (rc, -1);
    assert_int_equal (errno, err);
}

static void test_reader_errors (void **state)
{
    size_t len = strlen (sample);
    char out[8];
    int64_t i;
    uint64_t u;
    bool b;

    /* missing keys */
    expect_fail (tier_jr_get_str (sample, len, "nope", out, 8), ENOENT);
    expect_fail (tier_jr_get_int (sample, len, "S", &i), ENOENT);
    expect_fail (tier_jr_get_raw (sample, len, "x", NULL, NULL), ENOENT);
    expect_fail (tier_jr_get_raw (sample, len, NULL, NULL, NULL), EINVAL);
    /* only top-level members are looked up */
    expect_fail (tier_jr_get_int (sample, len, "four", &i), ENOENT);
    /* type mismatches */
    expect_fail (tier_jr_get_str (sample, len, "i", out, 8), EINVAL);
    expect_fail (tier_jr_get_str (sample, len, "n", out, 8), EINVAL);
    expect_fail (tier_jr_get_int (sample, len, "s", &i), EINVAL);
    expect_fail (tier_jr_get_int (sample, len, "r", &i), EINVAL);
    expect_fail (tier_jr_get_uint (sample, len, "t", &u), EINVAL);
    expect_fail (tier_jr_get_bool (sample, len, "n", &b), EINVAL);
    expect_fail (tier_jr_get_bool (sample, len, "i", &b), EINVAL);
    expect_fail (tier_jr_get_int (sample, len, "o", &i), EINVAL);
    /* ranges */
    expect_fail (tier_jr_get_int (sample, len, "big", &i), ERANGE);
    expect_fail (tier_jr_get_uint (sample, len, "i", &u), ERANGE);
    expect_fail (tier_jr_get_int (S ("{\"a\":9223372036854775808}"), "a", &i),
                 ERANGE);
    assert_int_equal (tier_jr_get_int (S ("{\"a\":-9223372036854775808}"), "a",
                                       &i), 0);
    assert_true (i == INT64_MIN);
    expect_fail (tier_jr_get_int (S ("{\"a\":-9223372036854775809}"), "a", &i),
                 ERANGE);
    expect_fail (tier_jr_get_uint (S ("{\"a\":18446744073709551616}"), "a",
                                   &u), ERANGE);
    expect_fail (tier_jr_get_uint (S ("{\"a\":99999999999999999999999}"), "a",
                                   &u), ERANGE);
    assert_int_equal (tier_jr_get_int (S ("{\"a\":9223372036854775807}"), "a",
                                       &i), 0);
    assert_true (i == INT64_MAX);
    /* \u0000 is valid JSON, but no C string can hold it */
    expect_fail (tier_jr_get_str (sample, len, "nul", out, 8), EINVAL);
    /* a string that does not fit: the prefix, cut between characters */
    expect_fail (tier_jr_get_str (sample, len, "s", out, 8), ERANGE);
    assert_string_equal (out, "a\"b\\c/d");
    expect_fail (tier_jr_get_str (sample, len, "utf", out, 3), ERANGE);
    assert_string_equal (out, "\xc3\xa9");
    expect_fail (tier_jr_get_str (sample, len, "utf", out, 2), ERANGE);
    assert_string_equal (out, "");
    expect_fail (tier_jr_get_str (sample, len, "e", NULL, 0), ERANGE);
    /* an invalid text yields nothing, even keys before the problem */
    expect_fail (tier_jr_get_int (S ("{\"a\":1,}"), "a", &i), EINVAL);
    expect_fail (tier_jr_get_int (S ("{\"a\":1} x"), "a", &i), EINVAL);
    expect_fail (tier_jr_validate (NULL, 0), EINVAL);
    /* value spans must be exactly one value */
    expect_fail (tier_jr_value_int (S ("1 2"), &i), EINVAL);
    expect_fail (tier_jr_value_str (S ("\"a\" x"), out, 8), EINVAL);
    assert_int_equal (tier_jr_value_int (S (" 17 "), &i), 0);
    assert_true (i == 17);
}

/* Duplicate keys: valid, and the last one wins (as in Jansson). */
static void test_reader_duplicates (void **state)
{
    const char text[] = "{\"a\":1,\"b\":{\"a\":5},\"a\":\"two\",\"a\":3}";
    json_t *o;
    int64_t i;

    assert_int_equal (tier_jr_validate (S (text)), 0);
    assert_int_equal (tier_jr_get_int (S (text), "a", &i), 0);
    assert_true (i == 3);
    o = jansson_parse (S (text), 0);
    assert_int_equal (json_integer_value (json_object_get (o, "a")), 3);
    json_decref (o);
    /* "\u0061" is "a" too */
    assert_int_equal (tier_jr_get_int (S ("{\"a\":1,\"\\u0061\":2}"), "a", &i),
                      0);
    assert_true (i == 2);
}

static char *nested (int depth, char *buf, size_t size)
{
    size_t o = 0;

    buf[o++] = '{';
    buf[o++] = '"';
    buf[o++] = 'a';
    buf[o++] = '"';
    buf[o++] = ':';
    for (int i = 1; i < depth; i++)
        buf[o++] = '[';
    buf[o++] = '1';
    for (int i = 1; i < depth; i++)
        buf[o++] = ']';
    buf[o++] = '}';
    buf[o] = '\0';
    assert_true (o < size);
    return buf;
}

struct bad_text {
    const char *text;
    size_t len;                 /* 0: strlen */
    bool jansson_accepts;       /* a documented difference */
};

static const struct bad_text bad[] = {
    { "", 0, false },
    { " \n\t", 0, false },
    { "[]", 0, true },                  /* the top level must be an object */
    { "\"s\"", 0, false },
    { "1", 0, false },
    { "null", 0, false },
    { "{", 0, false },
    { "}", 0, false },
    { "{\"a\":1,}", 0, false },         /* trailing commas */
    { "{\"a\" : 1 , }", 0, false },
    { "{\"a\":[1,2,]}", 0, false },
    { "{,}", 0, false },
    { "{\"a\":[,1]}", 0, false },
    { "{\"a\" 1}", 0, false },
    { "{\"a\":}", 0, false },
    { "{a:1}", 0, false },
    { "{'a':1}", 0, false },
    { "{\"a\":1 \"b\":2}", 0, false },
    { "{\"a\":[1 2]}", 0, false },
    { "{\"a\":{\"b\"}}", 0, false },
    { "{\"a\":[}", 0, false },
    { "{\"a\":\"\\x\"}", 0, false },    /* bad escapes */
    { "{\"a\":\"\\U0041\"}", 0, false },
    { "{\"a\":\"\\u12\"}", 0, false },
    { "{\"a\":\"\\u12g4\"}", 0, false },
    { "{\"a\":\"\\\"}", 0, false },
    { "{\"a\":\"\\ud800\"}", 0, false }, /* lone surrogates */
    { "{\"a\":\"\\udc00\"}", 0, false },
    { "{\"a\":\"\\ud800\\u0041\"}", 0, false },
    { "{\"a\":\"\\ud800\\ud800\"}", 0, false },
    { "{\"a\":\"\\ude00\\ud83d\"}", 0, false },
    { "{\"a\":01}", 0, false },          /* numbers */
    { "{\"a\":-01}", 0, false },
    { "{\"a\":00}", 0, false },
    { "{\"a\":NaN}", 0, false },
    { "{\"a\":Infinity}", 0, false },
    { "{\"a\":-Infinity}", 0, false },
    { "{\"a\":-}", 0, false },
    { "{\"a\":1.}", 0, false },
    { "{\"a\":.5}", 0, false },
    { "{\"a\":1e}", 0, false },
    { "{\"a\":1e+}", 0, false },
    { "{\"a\":+1}", 0, false },
    { "{\"a\":0x10}", 0, false },
    { "{\"a\":-a}", 0, false },
    { "{\"a\":\"abc}", 0, false },      /* unterminated strings */
    { "{\"a\":\"abc", 0, false },
    { "{\"abc", 0, false },
    { "{\"a\":1} x", 0, false },        /* garbage after the object */
    { "{\"a\":1}{}", 0, false },
    { "{\"a\":1}\0", 8, false },
    { "{\"a\":1}}", 0, false },
    { "{\"a\":tru}", 0, false },        /* literals */
    { "{\"a\":True}", 0, false },
    { "{\"a\":nul}", 0, false },
    { "{\"a\":truex}", 0, false },
    { "{\"a\":\"tab\there\"}", 0, false }, /* raw control characters */
    { "{\"a\":\"\x01\"}", 0, false },
    { "{\"a\":\"x\0y\"}", 11, false },
    { "{\"a\":\"\xff\"}", 0, false },   /* invalid UTF-8 */
    { "{\"a\":\"\xc0\xaf\"}", 0, false },
    { "{\"a\":\"\xed\xa0\x80\"}", 0, false },
    { "{\"a\":\"\xf4\x90\x80\x80\"}", 0, false },
    { "{\"a\":\"\xe2\x82\"}", 0, false },
    { "{\"a\":\"\x80\"}", 0, false },
    { "{\"\\u0000\":1}", 0, false },    /* NUL in a key */
    { "\xef\xbb\xbf{}", 0, false },     /* a byte order mark */
    { "{\"a\":// c\n1}", 0, false },    /* comments */
    { "{\"a\":1 /* c */}", 0, false },
    { "{\"a\":\x0b" "1}", 0, false },   /* not JSON whitespace */
};

static void test_reader_invalid (void **state)
{
    char deep[128];
    struct bad_text extra[] = {
        { nested (TIER_JSON_DEPTH + 1, deep, sizeof (deep)), 0, true },
    };

    assert_true (sizeof (bad) / sizeof (bad[0]) >= 40);
    for (size_t k = 0; k < sizeof (bad) / sizeof (bad[0]) + 1; k++) {
        const struct bad_text *b = k < sizeof (bad) / sizeof (bad[0])
                                   ? &bad[k] : &extra[0];
        size_t len = b->len ? b->len : strlen (b->text);
        json_error_t jerr;
        json_t *o;
        int64_t i;

        errno = 0;
        if (tier_jr_validate (b->text, len) != -1 || errno != EINVAL)
            fail_msg ("accepted: '%.*s'", (int) len, b->text);
        errno = 0;
        if (tier_jr_get_int (b->text, len, "a", &i) != -1 || errno != EINVAL)
            fail_msg ("get accepted: '%.*s'", (int) len, b->text);
        o = json_loadb (b->text, len, 0, &jerr);
        if ((o != NULL) != b->jansson_accepts)
            fail_msg ("Jansson %s '%.*s'", o ? "accepts" : "refuses",
                      (int) len, b->text);
        json_decref (o);
    }
}

static void test_reader_valid (void **state)
{
    char deep[128];
    const struct {
        const char *text;
        size_t flags;           /* what Jansson needs to accept it */
        bool jansson_overflow;  /* Jansson cannot hold the number */
    } good[] = {
        { "{}", 0, false },
        { " \t\r\n{ \n}\r\n", 0, false },
        { "{\"\":0}", 0, false },
        { "{\"a\":[]}", 0, false },
        { "{\"a\":{}}", 0, false },
        { "{\"a\":-0}", 0, false },
        { "{\"a\":-0.0e-0}", 0, false },
        { "{\"a\":0.5E+3}", 0, false },
        { "{\"a\":1e-400}", 0, false },
        { "{\"a\":\"\\/\\\\\\\"\"}", 0, false },
        { "{\"a\":\"\\uD83D\\uDE00\\u00E9\\u0041\"}", 0, false },
        { "{\"\xc3\xa9\":\"\xe2\x82\xac\xf4\x8f\xbf\xbf\"}", 0, false },
        { "{\"a\":\"\x7f\"}", 0, false },
        { "{\"a\":[true,false,null,\"x\",{\"b\":[[]]},-1.5]}", 0, false },
        { "{\"a\":\"x\\u0000y\"}", JSON_ALLOW_NUL, false },
        { "{\"a\":123456789012345678901234567890}", 0, true },
        { "{\"a\":1e400}", 0, true },
        { nested (TIER_JSON_DEPTH, deep, sizeof (deep)), 0, false },
    };

    for (size_t k = 0; k < sizeof (good) / sizeof (good[0]); k++) {
        size_t len = strlen (good[k].text);
        json_error_t jerr;
        json_t *o;

        if (tier_jr_validate (good[k].text, len) != 0)
            fail_msg ("refused: '%s'", good[k].text);
        o = json_loadb (good[k].text, len, good[k].flags, &jerr);
        if (good[k].jansson_overflow) {
            assert_null (o);
            assert_int_equal (json_error_code (&jerr),
                              json_error_numeric_overflow);
        }
        else if (!o)
            fail_msg ("Jansson refused '%s': %s", good[k].text, jerr.text);
        json_decref (o);
    }
}

/* Writer to reader: every byte value survives, invalid UTF-8 as U+FFFD. */
static void test_roundtrip (void **state)
{
    char in[512], buf[4096], out[1024];
    struct tier_jw w;
    size_t n = 0;
    int len;
    int64_t i;
    uint64_t u;
    bool b;

    for (int c = 1; c < 0x80; c++)
        in[n++] = c;
    memcpy (in + n, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    n += 9;
    in[n] = '\0';
    tier_jw_init (&w, buf, sizeof (buf));
    tier_jw_str (&w, in, in);
    tier_jw_int (&w, "min", INT64_MIN);
    tier_jw_uint (&w, "max", UINT64_MAX);
    tier_jw_bool (&w, "b", true);
    tier_jw_str (&w, "bad", "x\xc3(\xff");
    assert_true ((len = tier_jw_finish (&w)) > 0);
    assert_int_equal (tier_jr_get_str (buf, len, in, out, sizeof (out)), 0);
    assert_string_equal (out, in);
    assert_int_equal (tier_jr_get_int (buf, len, "min", &i), 0);
    assert_true (i == INT64_MIN);
    assert_int_equal (tier_jr_get_uint (buf, len, "max", &u), 0);
    assert_true (u == UINT64_MAX);
    assert_int_equal (tier_jr_get_bool (buf, len, "b", &b), 0);
    assert_true (b);
    assert_int_equal (tier_jr_get_str (buf, len, "bad", out, 64), 0);
    assert_string_equal (out, "x\xef\xbf\xbd(\xef\xbf\xbd");
}

/* Nothing in tjson allocates: the interposer's redirect path uses it. */
static void test_no_alloc (void **state)
{
    char buf[1024], out[64];
    struct tier_jw w;
    struct tier_jr_iter it;
    const char *v;
    size_t vlen;
    int64_t i;

    failalloc_arm (-1);
    tier_jw_init (&w, buf, sizeof (buf));
    build_sample (&w);
    assert_true (tier_jw_finish (&w) > 0);
    assert_int_equal (tier_jr_validate (sample, strlen (sample)), 0);
    assert_int_equal (tier_jr_get_str (sample, strlen (sample), "s", out,
                                       sizeof (out)), 0);
    assert_int_equal (tier_jr_get_int (sample, strlen (sample), "i", &i), 0);
    assert_int_equal (tier_jr_iter_init (&it, sample, strlen (sample)), 0);
    while (tier_jr_next (&it, NULL, NULL, &v, &vlen) == 1)
        (void) tier_jr_value_type (v, vlen);
    assert_int_equal (failalloc_count, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_writer_types),
        cmocka_unit_test (test_writer_escape),
        cmocka_unit_test (test_writer_misuse),
        cmocka_unit_test (test_writer_overflow),
        cmocka_unit_test (test_writer_jansson),
        cmocka_unit_test (test_reader_types),
        cmocka_unit_test (test_reader_iter),
        cmocka_unit_test (test_reader_errors),
        cmocka_unit_test (test_reader_duplicates),
        cmocka_unit_test (test_reader_invalid),
        cmocka_unit_test (test_reader_valid),
        cmocka_unit_test (test_roundtrip),
        cmocka_unit_test (test_no_alloc),
    };
    return UNIT_RUN (tests);
}
