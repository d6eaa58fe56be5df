/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_policy.c - libFuzzer target: the policy parser and resolution
 *
 * The first byte picks what the rest is: 'F' a frozen set (a JSON array,
 * tier_policy_set_from_json), 'O' job options (tier_policy_from_options),
 * anything else a layer document (tier_policy_parse, as the site layer
 * when the byte is odd, else the user layer).  Whatever parses must hold
 * only valid, normalised policies; print and parse back to the same text;
 * resolve each directory to a policy covering it; and freeze into a set
 * that, with what was refused, accounts for every policy.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/paths.h"
#include "policies/policy.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

static void check_set (const struct tier_policy_set *set)
{
    tier_error_t error;

    for (int i = 0; i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        char norm[PATH_MAX];
        CHECK (p->dir && p->dir[0] == '/' && strcmp (p->dir, "/"));
        CHECK (tier_path_normalize (p->dir, norm, sizeof (norm)) == 0);
        CHECK (!strcmp (norm, p->dir));
        CHECK (p->source);
        CHECK (tier_policy_validate (p, &error) == 0);
        CHECK (tier_policy_role_name (p->role));
    }
}

static void check_resolve (const struct tier_policy_set *set)
{
    for (int i = 0; i < set->n && i < 64; i++) {
        const struct tier_policy *p = &set->v[i];
        struct tier_policy_match m;
        char path[PATH_MAX + 8];

        if (strlen (p->dir) > PATH_MAX - 16)
            continue;               /* the path would be too long */
        (void) snprintf (path, sizeof (path), "%s/./x/", p->dir);
        CHECK (tier_policy_resolve (set, path, &m) == 0);
        CHECK (m.policy);
        CHECK (tier_path_under (p->dir, m.policy->dir)
               || m.policy->layer >= p->layer || m.lock);
        CHECK (!m.lock || m.policy->layer == TIER_LAYER_SITE);
        (void) snprintf (path, sizeof (path), "%sx", p->dir);
        CHECK (tier_policy_resolve (set, path, &m) == 0);
        if (m.policy)
            CHECK (tier_path_under (path, m.policy->dir));
    }
}

static void check_roundtrip (const struct tier_policy_set *set)
{
    struct tier_policy_set *back = tier_policy_set_create ();
    tier_error_t error;
    json_t *arr;

    CHECK (back);
    if ((arr = tier_policy_set_to_json (set))) {
        CHECK (tier_policy_set_from_json (back, arr, "back", &error) == 0);
        CHECK (back->n == set->n);
        json_decref (arr);
    }
    for (int l = 0; l < TIER_LAYER_COUNT; l++) {
        struct tier_policy_set *one = tier_policy_set_create ();
        char *t1 = tier_policy_dump (set, l), *t2;
        CHECK (one && t1);
        CHECK (tier_policy_parse (one, t1, strlen (t1), l, "dump",
                                  &error) == 0);
        CHECK ((t2 = tier_policy_dump (one, l)));
        CHECK (!strcmp (t1, t2));
        free (t1);
        free (t2);
        tier_policy_set_destroy (one);
    }
    tier_policy_set_destroy (back);
}

static void check_freeze (const struct tier_policy_set *set)
{
    static const char *allowed[] = { "/a", "/g", "/gfs" };
    static const char *own[] = { "/gfs/.tier", "/a/b/tmp" };
    struct tier_policy_roots roots = { allowed, 3, own, 2 };
    struct tier_policy_set *out = tier_policy_set_create ();
    json_t *refused = json_array ();
    tier_error_t error;

    CHECK (out && refused);
    CHECK (tier_policy_freeze (set, &roots, out, refused, &error) == 0);
    CHECK (out->n + (int) json_array_size (refused) == set->n);
    /* nothing nests inside a mount in what is in force, per directory */
    for (int i = 0; i < out->n; i++) {
        struct tier_policy_match m;
        CHECK (tier_policy_resolve (out, out->v[i].dir, &m) == 0);
    }
    check_set (out);
    json_decref (refused);
    tier_policy_set_destroy (out);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct tier_policy_set *set;
    tier_error_t error = { { 0 } };
    const char *text = (const char *) data + 1;
    int rc = -1;

    if (size < 1)
        return 0;
    if (!(set = tier_policy_set_create ()))
        return 0;
    if (data[0] == 'F' || data[0] == 'O') {
        json_error_t jerr;
        json_t *j = json_loadb (text, size - 1, 0, &jerr);
        if (j)
            rc = data[0] == 'F'
                 ? tier_policy_set_from_json (set, j, "fuzz", &error)
                 : tier_policy_from_options (set, j, &error);
        json_decref (j);
    }
    else
        rc = tier_policy_parse (set, text, size - 1,
                                (data[0] & 1) ? TIER_LAYER_SITE
                                              : TIER_LAYER_USER,
                                "fuzz.json", &error);
    if (rc == 0) {
        check_set (set);
        check_resolve (set);
        check_roundtrip (set);
        check_freeze (set);
    }
    else if (error.text[0]) {
        CHECK (memchr (error.text, '\0', sizeof (error.text)));
        CHECK (!strchr (error.text, '\n'));
    }
    else
        CHECK (data[0] == 'F' || data[0] == 'O');      /* not JSON at all */
    tier_policy_set_destroy (set);
    return 0;
}
