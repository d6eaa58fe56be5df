/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tjson.h - a tiny JSON writer and reader for clients (libc only)
 *
 * Nothing here allocates, locks or keeps global state: the interposer may
 * use it on its redirect path, inside any intercepted call.
 * Why not Jansson (which tierd uses): it is not libc and it allocates
 * every value, and this code runs in srun and slurmstepd (tier.so) and
 * inside any open() of a job's processes (the interposer).
 *
 * The writer builds one object into a caller buffer.  Keys and strings
 * are escaped: '"' and '\' with a backslash, \b \f \n \r \t by name,
 * other control characters as \u00XX.  Valid UTF-8 passes through as
 * is; every byte that is not part of a valid UTF-8 sequence (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF) is replaced
 * by U+FFFD, so the output is always valid JSON in valid UTF-8 (Jansson
 * refuses anything else).  A NULL string value is written as null.
 * Integers above INT64_MAX (tier_jw_uint) are valid JSON and read back
 * here, but Jansson cannot hold them: do not send them to the agent.
 *
 * The reader is a strict, validating scan (RFC 8259) of a text whose
 * top-level value is an object, with at most TIER_JSON_DEPTH nested
 * objects and arrays (the top-level object counts as one), nothing but
 * whitespace after it, valid UTF-8 and no lone surrogates.  "\u0000" is
 * accepted inside string values (the getters refuse to return it) but
 * not inside keys (Jansson does not support it there either).  A key
 * that appears twice is valid and the LAST one wins, as with Jansson's
 * default json_loads (refusing would cost a quadratic scan without
 * allocating).  The agent refuses duplicates in requests
 * (JSON_REJECT_DUPLICATES) and its replies (json_dumps) have none.  Every
 * getter validates the whole text, so a getter never returns a value
 * from a text tier_jr_validate refuses.
 */
#ifndef TIER_TJSON_H
#define TIER_TJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIER_JSON_DEPTH 32

/* Writer.  Errors are sticky and reported by tier_jw_finish. */
struct tier_jw {
    char *buf;
    size_t size;
    size_t len;                 /* bytes written; buf[len] is NUL */
    int depth;                  /* open containers; the top object is 1 */
    uint32_t array;             /* bit d-1: the container at depth d is [] */
    uint32_t nonempty;          /* bit d-1: it has a member already */
    bool overflow;              /* something did not fit */
    bool misuse;                /* unbalanced, too deep, key where none */
};

/* Start the top-level object in buf (size bytes; buf may be NULL if size
 * is 0).  Nothing is ever written at or past buf[size]; buf is always
 * NUL-terminated when size > 0, even after an overflow.
 */
void tier_jw_init (struct tier_jw *w, char *buf, size_t size);

/* Members: in an object key is the member name; inside an array pass
 * key NULL (anything else is misuse, reported as EINVAL).
 */
void tier_jw_str (struct tier_jw *w, const char *key, const char *val);
void tier_jw_int (struct tier_jw *w, const char *key, int64_t v);
void tier_jw_uint (struct tier_jw *w, const char *key, uint64_t v);
void tier_jw_bool (struct tier_jw *w, const char *key, bool v);
void tier_jw_null (struct tier_jw *w, const char *key);
void tier_jw_obj_begin (struct tier_jw *w, const char *key);
void tier_jw_obj_end (struct tier_jw *w);
void tier_jw_arr_begin (struct tier_jw *w, const char *key);
void tier_jw_arr_end (struct tier_jw *w);

/* Close the top-level object.  Returns the text's length (without the
 * NUL), or -1 with errno EINVAL (unbalanced or misused: this wins) or
 * EMSGSIZE (it did not fit, NUL included).
 */
int tier_jw_finish (struct tier_jw *w);

/* Reader. */
enum tier_jr_type {
    TIER_JR_INVALID = 0,
    TIER_JR_OBJECT,
    TIER_JR_ARRAY,
    TIER_JR_STRING,
    TIER_JR_NUMBER,
    TIER_JR_BOOL,
    TIER_JR_NULL,
};

/* 0 if json (len bytes; no NUL needed) is a valid text as described
 * above, else -1 with errno EINVAL.
 */
int tier_jr_validate (const char *json, size_t len);

/* The top-level member key's value as text: *val points into json, *vlen
 * is its length.  -1 with errno EINVAL (json invalid) or ENOENT.
 */
int tier_jr_get_raw (const char *json, size_t len, const char *key,
                     const char **val, size_t *vlen);

/* A string member, unescaped (\uXXXX and surrogate pairs to UTF-8) into
 * out with a NUL.  -1 with errno ENOENT (absent), EINVAL (json invalid,
 * not a string, or it contains \u0000) or ERANGE (does not fit: out then
 * holds the longest prefix that fits, cut between characters).
 */
int tier_jr_get_str (const char *json, size_t len, const char *key,
                     char *out, size_t size);

/* Integer members: an integer literal (no fraction, no exponent; "-0" is
 * 0).  -1 with errno ENOENT, EINVAL (not an integer) or ERANGE (out of
 * range; for the unsigned getter also any negative value).
 */
int tier_jr_get_int (const char *json, size_t len, const char *key,
                     int64_t *v);
int tier_jr_get_uint (const char *json, size_t len, const char *key,
                      uint64_t *v);

/* true or false; -1 with errno ENOENT or EINVAL. */
int tier_jr_get_bool (const char *json, size_t len, const char *key,
                      bool *v);

/* The same on one value's text (from tier_jr_get_raw or tier_jr_next):
 * the span must be exactly one valid value of that type (EINVAL).
 * A nested object's span is itself an object text: pass it to the
 * tier_jr_get_* functions to look inside.
 */
enum tier_jr_type tier_jr_value_type (const char *val, size_t vlen);
int tier_jr_value_str (const char *val, size_t vlen, char *out, size_t size);
int tier_jr_value_int (const char *val, size_t vlen, int64_t *v);
int tier_jr_value_uint (const char *val, size_t vlen, uint64_t *v);
int tier_jr_value_bool (const char *val, size_t vlen, bool *v);

/* Iterate over an object's members or an array's elements. */
struct tier_jr_iter {
    const char *p;              /* the next member or element */
    const char *end;
    bool object;
    bool done;
};

/* Start on the text of an object or an array (validated; EINVAL). */
int tier_jr_iter_init (struct tier_jr_iter *it, const char *val,
                       size_t vlen);

/* The next member (object: *key and *keylen get the key's string token,
 * quotes included, for tier_jr_value_str; key and keylen may be NULL) or
 * element (array: *key is set to NULL).  Returns 1, 0 at the end, or
 * -1 with errno EINVAL if the text changed since tier_jr_iter_init.
 */
int tier_jr_next (struct tier_jr_iter *it, const char **key, size_t *keylen,
                  const char **val, size_t *vlen);

#endif /* !TIER_TJSON_H */
