/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_policy.c - the policy model: parse, validate, resolve, freeze;
 * and the policy files' trust rules (policies/files.c, compiled in) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "policies/policy.h"
#include "unit.h"
#include "failalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The policy files' I/O (libtierpolicy_files), with lib/trust and
 * lib/state from libtier. */
#include "policies/files.c"

FAILALLOC_DEFINE

/* Jansson's own allocations go through the wrapped malloc too. */
static void *j_malloc (size_t n)
{
    return malloc (n);
}

static void j_free (void *p)
{
    free (p);
}

static const char *doc =
    "{ \"version\": 1, \"policies\": {\n"
    "  \"/gfs/db\": { \"role\": \"batch\", \"ttl\": \"7d\",\n"
    "               \"revalidate\": 0, \"prefetch\": \"stride\" },\n"
    "  \"/gfs/db/tmp/\": { \"role\": \"none\", \"comment\": \"scratch\" },\n"
    "  \"/gfs/runs\": { \"role\": \"pipeline\", \"size\": \"16M\",\n"
    "                 \"keep\": \"on-failure\" },\n"
    "  \"//gfs//out\": { \"role\": \"endpoint\", \"window\": \"64M\",\n"
    "                  \"block\": \"1M\", \"tier\": \"nvdimm\" }\n"
    "} }\n";

static struct tier_policy_set *parsed (const char *text,
                                       enum tier_policy_layer layer)
{
    struct tier_policy_set *set = tier_policy_set_create ();
    tier_error_t error;

    assert_non_null (set);
    if (tier_policy_parse (set, text, strlen (text), layer, "t.json",
                           &error) < 0)
        fail_msg ("parse: %s", error.text);
    return set;
}

static void test_parse (void **state)
{
    struct tier_policy_set *set = parsed (doc, TIER_LAYER_USER);
    const struct tier_policy *p;

    assert_int_equal (set->n, 4);
    assert_non_null (p = tier_policy_find (set, "/gfs/db", TIER_LAYER_USER));
    assert_int_equal (p->role, TIER_POLICY_BATCH);
    assert_true (p->ttl == 7 * 86400);
    assert_true (p->revalidate == 0 && (p->set & TIER_PA_REVALIDATE));
    assert_int_equal (p->prefetch, TIER_PREFETCH_STRIDE);
    assert_string_equal (p->source, "t.json");
    /* trailing slashes and doubled ones are normalised away */
    assert_non_null (p = tier_policy_find (set, "/gfs/db/tmp",
                                           TIER_LAYER_USER));
    assert_string_equal (p->comment, "scratch");
    assert_non_null (p = tier_policy_find (set, "/gfs/out", TIER_LAYER_USER));
    assert_true (p->window == 64 << 20 && p->block == 1 << 20);
    assert_non_null (p = tier_policy_find (set, "/gfs/runs",
                                           TIER_LAYER_USER));
    assert_true (p->size == 16 << 20);
    assert_int_equal (p->keep, TIER_PKEEP_ON_FAILURE);
    assert_null (tier_policy_find (set, "/gfs/runs", TIER_LAYER_SITE));
    tier_policy_set_destroy (set);
}

static void expect_error (const char *text, enum tier_policy_layer layer,
                          const char *msg)
{
    struct tier_policy_set *set = tier_policy_set_create ();
    tier_error_t error = { { 0 } };

    assert_non_null (set);
    assert_int_equal (tier_policy_parse (set, text, strlen (text), layer,
                                         "/etc/tier/policies.d/x.json",
                                         &error), -1);
    assert_int_equal (errno, EINVAL);
    if (!strstr (error.text, msg))
        fail_msg ("for %s: expected '%s' in '%s'", text, msg, error.text);
    if (!strstr (error.text, "/etc/tier/policies.d/x.json"))
        fail_msg ("the file is not named: %s", error.text);
    assert_int_equal (set->n, 0);       /* all or nothing */
    tier_policy_set_destroy (set);
}

#define P(x) "{\"version\":1,\"policies\":{" x "}}"

static void test_errors (void **state)
{
    const enum tier_policy_layer U = TIER_LAYER_USER, S = TIER_LAYER_SITE;

    expect_error (P ("\"/g\":{\"role\":\"batch\",\"tll\":\"7d\"}"), U,
                  "policy '/g': key 'tll': unknown key");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"ttl\":\"7x\"}"), U,
                  "key 'ttl': not a duration (e.g. 30s, 10m, 7d)");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"ttl\":0}"), U,
                  "key 'ttl': must be at least 1s");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"ttl\":-1}"), U,
                  "key 'ttl': not a duration");
    expect_error (P ("\"/g\":{\"role\":\"pipeline\",\"size\":\"big\"}"), U,
                  "key 'size': not a size");
    expect_error (P ("\"/g\":{\"role\":\"pipeline\",\"size\":\"0\"}"), U,
                  "key 'size': must be more than 0");
    expect_error (P ("\"/g\":{\"role\":\"pipeline\",\"keep\":\"maybe\"}"), U,
                  "key 'keep': must be one of never, on-failure, always");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"keep\":\"always\"}"), U,
                  "key 'keep': does not apply to role batch (only to "
                  "pipeline)");
    expect_error (P ("\"/g\":{\"role\":\"none\",\"ttl\":\"1d\"}"), U,
                  "key 'ttl': does not apply to role none");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"share\":\"world\"}"), U,
                  "key 'share': is for site policies only");
    expect_error (P ("\"/g\":{\"role\":\"none\",\"locked\":true}"), U,
                  "key 'locked': is for site policies only");
    expect_error (P ("\"/g\":{\"role\":\"none\",\"locked\":\"yes\"}"), S,
                  "key 'locked': must be true or false");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"share\":\"all\"}"), S,
                  "key 'share': must be one of user, world");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"tier\":\"nvdimm\"}"), U,
                  "key 'tier': batch replicas live on the burst buffer");
    expect_error (P ("\"/g\":{\"role\":\"pipeline\",\"tier\":\"bb\"}"), U,
                  "key 'tier': pipeline data lives on the node's NVDIMM");
    expect_error (P ("\"/g\":{\"role\":\"endpoint\",\"tier\":\"ssd\"}"), U,
                  "key 'tier': must be one of bb, nvdimm");
    expect_error (P ("\"/g\":{\"role\":\"endpoint\",\"block\":\"3K\"}"), U,
                  "key 'block': must be a power of two from 4K to 1G");
    expect_error (P ("\"/g\":{\"role\":\"endpoint\",\"window\":\"1M\","
                     "\"block\":\"2M\"}"), U,
                  "key 'window': must be at least one block");
    expect_error (P ("\"/g\":{\"role\":\"endpoint\",\"window\":\"1M\","
                     "\"stage\":\"out\"}"),
                  U, "key 'window': does not apply to an output directory");
    expect_error (P ("\"/g\":{\"role\":\"endpoint\",\"stage\":\"none\"}"), U,
                  "key 'stage': none is for the block cache: it needs a "
                  "window");
    expect_error (P ("\"/g\":{\"role\":\"endpoint\",\"window\":\"1M\","
                     "\"tier\":\"bb\"}"),
                  U,
                  "key 'tier': the block cache's log is on the node's "
                  "NVDIMM tier");
    expect_error (P ("\"/g\":{\"role\":\"batch\",\"prefetch\":\"random\"}"),
                  U, "key 'prefetch': must be one of off, sequential, "
                  "stride");
    expect_error (P ("\"/g\":{\"role\":\"archive\"}"), U,
                  "policy '/g': key 'role': must be one of batch, pipeline, "
                  "endpoint, none");
    expect_error (P ("\"/g\":{\"ttl\":\"1d\"}"), U,
                  "policy '/g': key 'role' is missing");
    expect_error (P ("\"/g\":[]"), U, "policy '/g': must be an object");
    expect_error (P ("\"rel/dir\":{\"role\":\"none\"}"), U,
                  "policy 'rel/dir': the directory is not an absolute path");
    expect_error (P ("\"/a/../etc\":{\"role\":\"none\"}"), U,
                  "the directory must not contain '..'");
    expect_error (P ("\"/\":{\"role\":\"none\"}"), U,
                  "the directory is '/'");
    expect_error (P ("\"/a/b\":{\"role\":\"none\"},"
                     "\"/a/b/\":{\"role\":\"batch\"}"), U,
                  "policy '/a/b': the directory is given twice");
    expect_error (P ("\"/a\":{\"role\":\"none\",\"role\":\"batch\"}"), U,
                  "duplicate object key");
    expect_error ("{\"version\":2,\"policies\":{}}", U,
                  "key 'version': must be 1");
    expect_error ("{\"version\":1,\"polices\":{}}", U,
                  "unknown key 'polices'");
    expect_error ("{\"version\":1,\"policies\":[]}", U,
                  "key 'policies': must be an object");
    expect_error ("[1]", U, "must be a JSON object");
    expect_error ("{\"version\":1,", U, "x.json:1:");
    {
        /* a syntax error names the place, never echoes the file */
        struct tier_policy_set *set = tier_policy_set_create ();
        tier_error_t error;
        const char *secret = "{\"version\":1, SECRETSTUFF }";
        assert_int_equal (tier_policy_parse (set, secret, strlen (secret),
                                             U, "f", &error), -1);
        assert_null (strstr (error.text, "SECRET"));
        assert_int_equal (tier_policy_parse (set, "{}\0{}", 5, U, "f",
                                             &error), -1);
        assert_non_null (strstr (error.text, "NUL byte"));
        tier_policy_set_destroy (set);
    }
    {
        /* a hostile key is clipped and made printable in the message */
        char text[600];
        tier_error_t error;
        struct tier_policy_set *set = tier_policy_set_create ();
        (void) snprintf (text, sizeof (text),
                         P ("\"/g\":{\"role\":\"none\","
                            "\"\\u001b[31m%0300d\":1}"), 0);
        assert_int_equal (tier_policy_parse (set, text, strlen (text), U,
                                             "f", &error), -1);
        assert_null (strchr (error.text, '\033'));
        assert_true (strlen (error.text) < 200);
        tier_policy_set_destroy (set);
    }
}

static void test_set_attr (void **state)
{
    struct tier_policy p;
    tier_error_t error;

    assert_int_equal (tier_policy_init (&p, "/gfs/db/", TIER_POLICY_BATCH,
                                        TIER_LAYER_USER, "command line",
                                        &error), 0);
    assert_string_equal (p.dir, "/gfs/db");
    assert_int_equal (tier_policy_set_attr (&p, "ttl", "1h30m", &error), 0);
    assert_true (p.ttl == 5400);
    assert_int_equal (tier_policy_set_attr (&p, "revalidate", "10m",
                                            &error), 0);
    assert_int_equal (tier_policy_set_attr (&p, "ttl", "soon", &error), -1);
    assert_string_equal (error.text, "command line: policy '/gfs/db': key "
                         "'ttl': not a duration (e.g. 30s, 10m, 7d)");
    assert_int_equal (tier_policy_set_attr (&p, "colour", "red", &error), -1);
    assert_non_null (strstr (error.text, "key 'colour': unknown key"));
    assert_int_equal (tier_policy_validate (&p, &error), 0);
    assert_int_equal (tier_policy_set_attr (&p, "share", "world", &error), 0);
    assert_int_equal (tier_policy_validate (&p, &error), -1);
    assert_non_null (strstr (error.text, "is for site policies only"));
    tier_policy_clear (&p);
    assert_int_equal (tier_policy_init (&p, "relative", TIER_POLICY_BATCH,
                                        TIER_LAYER_USER, "command line",
                                        &error), -1);
    assert_non_null (strstr (error.text, "not an absolute path"));
}

static void test_fmt (void **state)
{
    char b[32];

    assert_string_equal (tier_policy_fmt_duration (7 * 86400, b, 32), "7d");
    assert_string_equal (tier_policy_fmt_duration (5400, b, 32), "90m");
    assert_string_equal (tier_policy_fmt_duration (45, b, 32), "45s");
    assert_string_equal (tier_policy_fmt_duration (0, b, 32), "0s");
    assert_string_equal (tier_policy_fmt_size (16 << 20, b, 32), "16M");
    assert_string_equal (tier_policy_fmt_size (1536 << 10, b, 32), "1536K");
    assert_string_equal (tier_policy_fmt_size (100, b, 32), "100");
}

/* resolve path in set: "role layer dir" or "none" */
static const char *res (const struct tier_policy_set *set, const char *path)
{
    static char buf[256];
    struct tier_policy_match m;

    if (tier_policy_resolve (set, path, &m) < 0)
        return "error";
    if (!m.policy)
        return "none";
    (void) snprintf (buf, sizeof (buf), "%s %s %s%s",
                     tier_policy_role_name (m.policy->role),
                     tier_policy_layer_name (m.policy->layer),
                     m.policy->dir, m.lock ? " locked" : "");
    return buf;
}

static void add (struct tier_policy_set *set, const char *text,
                 enum tier_policy_layer layer)
{
    tier_error_t error;

    if (tier_policy_parse (set, text, strlen (text), layer, "t", &error) < 0)
        fail_msg ("parse: %s", error.text);
}

static void test_resolve (void **state)
{
    struct tier_policy_set *set = tier_policy_set_create ();

    add (set, P ("\"/a/b\":{\"role\":\"batch\"},"
                 "\"/a/b/tmp\":{\"role\":\"none\"}"), TIER_LAYER_USER);
    /* component boundaries */
    assert_string_equal (res (set, "/a/b"), "batch user /a/b");
    assert_string_equal (res (set, "/a/b/x"), "batch user /a/b");
    assert_string_equal (res (set, "/a/bc"), "none");
    assert_string_equal (res (set, "/a/bc/x"), "none");
    assert_string_equal (res (set, "/a"), "none");
    /* trailing slashes, "." and ".." */
    assert_string_equal (res (set, "/a/b/"), "batch user /a/b");
    assert_string_equal (res (set, "/a/b//tmp///y"), "none user /a/b/tmp");
    assert_string_equal (res (set, "/a/b/./tmp/y"), "none user /a/b/tmp");
    assert_string_equal (res (set, "/a/b/tmp/../x"), "batch user /a/b");
    assert_string_equal (res (set, "/a/x/../b/y"), "batch user /a/b");
    assert_string_equal (res (set, "/a/b/tmpx"), "batch user /a/b");
    /* lexical: a symlink /a/link -> /a/b is not /a/b (callers resolve) */
    assert_string_equal (res (set, "/a/link/x"), "none");
    assert_string_equal (res (set, "relative"), "error");
    /* layers: job > user > site, whatever the prefix length */
    add (set, P ("\"/a/b/tmp/keep\":{\"role\":\"pipeline\"},"
                 "\"/a\":{\"role\":\"endpoint\"}"), TIER_LAYER_SITE);
    assert_string_equal (res (set, "/a/b/tmp/keep/f"), "none user /a/b/tmp");
    assert_string_equal (res (set, "/a/z"), "endpoint site /a");
    add (set, P ("\"/a/b/tmp\":{\"role\":\"batch\"}"), TIER_LAYER_JOB);
    assert_string_equal (res (set, "/a/b/tmp/y"), "batch job /a/b/tmp");
    assert_string_equal (res (set, "/a/b/y"), "batch user /a/b");
    /* a locked site policy: the site layer alone decides beneath it */
    add (set, P ("\"/a/b\":{\"role\":\"none\",\"locked\":true}"),
         TIER_LAYER_SITE);
    assert_string_equal (res (set, "/a/b/y"), "none site /a/b locked");
    assert_string_equal (res (set, "/a/b/tmp/keep/f"),
                         "pipeline site /a/b/tmp/keep locked");
    assert_string_equal (res (set, "/a/bc"), "endpoint site /a");
    assert_int_equal (tier_policy_remove (set, "/a/b", TIER_LAYER_SITE), 1);
    assert_int_equal (tier_policy_remove (set, "/a/b", TIER_LAYER_SITE), 0);
    assert_string_equal (res (set, "/a/b/y"), "batch user /a/b");
    tier_policy_set_destroy (set);
}

static bool refused_has (json_t *refused, const char *dir, const char *layer,
                         const char *why)
{
    size_t i;
    json_t *o;

    json_array_foreach (refused, i, o) {
        const char *r = json_string_value (json_object_get (o, "reason"));
        if (!strcmp (json_string_value (json_object_get (o, "dir")), dir)
            && !strcmp (json_string_value (json_object_get (o, "layer")),
                        layer)
            && r && strstr (r, why))
            return true;
    }
    return false;
}

static void test_freeze (void **state)
{
    const char *allowed[] = { "/gfs" };
    const char *own[] = { "/gfs/.tier", "/dev/shm/tier" };
    struct tier_policy_roots roots = { allowed, 1, own, 2 };
    struct tier_policy_set *in = tier_policy_set_create ();
    struct tier_policy_set *out = tier_policy_set_create ();
    json_t *refused = json_array ();
    tier_error_t error;

    add (in, P ("\"/gfs/secret\":{\"role\":\"none\",\"locked\":true},"
                "\"/gfs/site-pipe\":{\"role\":\"pipeline\"},"
                "\"/gfs/lockpipe\":{\"role\":\"pipeline\",\"locked\":true},"
                "\"/gfs/tree\":{\"role\":\"batch\"}"), TIER_LAYER_SITE);
    add (in, P ("\"/gfs/secret/mine\":{\"role\":\"batch\"},"
                "\"/gfs/all\":{\"role\":\"pipeline\"},"
                "\"/gfs/all/sub\":{\"role\":\"none\"},"
                "\"/gfs/site-pipe/in\":{\"role\":\"batch\"},"
                "\"/gfs/big\":{\"role\":\"pipeline\"},"
                "\"/gfs/lockpipe/x\":{\"role\":\"none\"},"
                "\"/gfs/tree/tmp\":{\"role\":\"none\"},"
                "\"/gfs\":{\"role\":\"batch\"},"
                "\"/other\":{\"role\":\"batch\"},"
                "\"/gfs/.tier/x\":{\"role\":\"batch\"}"), TIER_LAYER_USER);
    add (in, P ("\"/gfs/big/in\":{\"role\":\"batch\"}"), TIER_LAYER_JOB);
    assert_int_equal (tier_policy_freeze (in, &roots, out, refused, &error),
                      0);
    /* roots */
    assert_true (refused_has (refused, "/other", "user", "AllowedRoots"));
    assert_true (refused_has (refused, "/gfs/.tier/x", "user",
                              "one of tier's own directories"));
    /* locked */
    assert_true (refused_has (refused, "/gfs/secret/mine", "user",
                              "under the locked site policy /gfs/secret"));
    assert_true (refused_has (refused, "/gfs/lockpipe/x", "user",
                              "under the locked site policy"));
    /* nesting: one layer, the inner gives way */
    assert_true (refused_has (refused, "/gfs/all/sub", "user",
                              "lies inside the pipeline directory /gfs/all"));
    /* across layers, the lower layer gives way */
    assert_true (refused_has (refused, "/gfs/site-pipe", "site",
                              "would contain /gfs/site-pipe/in"));
    assert_true (refused_has (refused, "/gfs/big", "user",
                              "would contain /gfs/big/in (job layer"));
    /* nesting inside batch only changes resolution */
    assert_non_null (tier_policy_find (out, "/gfs/tree/tmp",
                                       TIER_LAYER_USER));
    assert_non_null (tier_policy_find (out, "/gfs", TIER_LAYER_USER));
    assert_non_null (tier_policy_find (out, "/gfs/all", TIER_LAYER_USER));
    assert_non_null (tier_policy_find (out, "/gfs/lockpipe",
                                       TIER_LAYER_SITE));
    assert_int_equal ((int) json_array_size (refused), 7);
    assert_int_equal (out->n, in->n - 7);
    assert_string_equal (res (out, "/gfs/big/in/f"), "batch job /gfs/big/in");
    assert_string_equal (res (out, "/gfs/big/f"), "batch user /gfs");
    assert_string_equal (res (out, "/gfs/secret/mine/f"),
                         "none site /gfs/secret locked");
    json_decref (refused);
    tier_policy_set_destroy (out);
    /* a pipeline may not contain tier's own directories; none may */
    out = tier_policy_set_create ();
    refused = json_array ();
    tier_policy_set_destroy (in);
    in = tier_policy_set_create ();
    add (in, P ("\"/gfs\":{\"role\":\"pipeline\"}"), TIER_LAYER_USER);
    add (in, P ("\"/gfs\":{\"role\":\"none\"}"), TIER_LAYER_SITE);
    assert_int_equal (tier_policy_freeze (in, &roots, out, refused, &error),
                      0);
    assert_true (refused_has (refused, "/gfs", "user", "contains /gfs/.tier"));
    assert_int_equal (out->n, 1);
    /* no AllowedRoots: nothing acts */
    json_decref (refused);
    refused = json_array ();
    tier_policy_set_destroy (out);
    out = tier_policy_set_create ();
    roots.nallowed = 0;
    assert_int_equal (tier_policy_freeze (in, &roots, out, refused, &error),
                      0);
    assert_int_equal (out->n, 0);
    assert_true (refused_has (refused, "/gfs", "site",
                              "AllowedRoots is not set"));
    json_decref (refused);
    tier_policy_set_destroy (out);
    tier_policy_set_destroy (in);
}

/* stage = in: an endpoint directory that is an input (staged in as a
 * read-only snapshot), not an output; endpoint only; its own nesting is
 * that of every endpoint directory: nothing inside it, and it inside
 * nothing that mounts (pipeline, output) -- refused, lower layer giving
 * way, in one layer the inner one. */
static void test_window_stage (void **state)
{
    struct tier_policy q;
    tier_error_t error;
    json_t *e;

    (void) state;
    assert_int_equal (tier_policy_init (&q, "/gfs/x", TIER_POLICY_ENDPOINT,
                                        TIER_LAYER_USER, "command line",
                                        &error),
                      0);
    assert_false (tier_policy_is_window (&q));
    assert_true (tier_policy_is_output (&q));
    assert_int_equal (tier_policy_set_attr (&q, "window", "16M", &error), 0);
    assert_int_equal (tier_policy_validate (&q, &error), 0);
    assert_true (tier_policy_is_window (&q));
    assert_false (tier_policy_is_output (&q));
    assert_false (tier_policy_is_input (&q));
    e = tier_policy_effective_json (&q);
    assert_string_equal (json_string_value (json_object_get (e, "stage")),
                         "none");
    assert_string_equal (json_string_value (json_object_get (e, "tier")),
                         "nvdimm");
    json_decref (e);
    assert_int_equal (tier_policy_set_attr (&q, "stage", "none", &error), 0);
    assert_true (tier_policy_is_window (&q));
    assert_int_equal (tier_policy_set_attr (&q, "stage", "out", &error), 0);
    assert_int_equal (tier_policy_validate (&q, &error), -1);
    tier_policy_clear (&q);
}

static void test_stage (void **state)
{
    const char *allowed[] = { "/gfs" };
    struct tier_policy_roots roots = { allowed, 1, NULL, 0 };
    struct tier_policy_set *set, *out;
    const struct tier_policy *p;
    struct tier_policy q;
    tier_error_t error;
    json_t *refused, *e;
    char *text;

    set = parsed (P ("\"/gfs/in\":{\"role\":\"endpoint\",\"stage\":\"in\"},"
                     "\"/gfs/out\":{\"role\":\"endpoint\"},"
                     "\"/gfs/out2\":{\"role\":\"endpoint\","
                     "\"stage\":\"out\"}"), TIER_LAYER_USER);
    assert_non_null (p = tier_policy_find (set, "/gfs/in", TIER_LAYER_USER));
    assert_int_equal (p->stage, TIER_PSTAGE_IN);
    assert_true (tier_policy_is_input (p));
    assert_false (tier_policy_is_input (tier_policy_find (set, "/gfs/out",
                                                          TIER_LAYER_USER)));
    assert_false (tier_policy_is_input (tier_policy_find (set, "/gfs/out2",
                                                          TIER_LAYER_USER)));
    assert_false (tier_policy_is_input (NULL));
    assert_string_equal (tier_policy_stage_name (TIER_PSTAGE_IN), "in");
    assert_null (tier_policy_stage_name ((enum tier_policy_stage) 7));
    /* effective: an output unless it says so; an input lives on nvdimm */
    e = tier_policy_effective_json (p);
    assert_string_equal (json_string_value (json_object_get (e, "stage")),
                         "in");
    assert_string_equal (json_string_value (json_object_get (e, "tier")),
                         "nvdimm");
    json_decref (e);
    e = tier_policy_effective_json (tier_policy_find (set, "/gfs/out",
                                                      TIER_LAYER_USER));
    assert_string_equal (json_string_value (json_object_get (e, "stage")),
                         "out");
    assert_string_equal (json_string_value (json_object_get (e, "tier")),
                         "bb");
    json_decref (e);
    /* the document keeps it */
    assert_non_null (text = tier_policy_dump (set, TIER_LAYER_USER));
    assert_non_null (strstr (text, "\"stage\": \"in\""));
    free (text);
    tier_policy_set_destroy (set);

    /* errors: another role, a bad value, what an input cannot have */
    assert_int_equal (tier_policy_init (&q, "/gfs/x", TIER_POLICY_BATCH,
                                        TIER_LAYER_USER, "command line",
                                        &error), 0);
    assert_int_equal (tier_policy_set_attr (&q, "stage", "in", &error), 0);
    assert_int_equal (tier_policy_validate (&q, &error), -1);
    assert_non_null (strstr (error.text, "key 'stage': does not apply to "
                             "role batch (only to endpoint)"));
    tier_policy_clear (&q);
    assert_int_equal (tier_policy_init (&q, "/gfs/x", TIER_POLICY_ENDPOINT,
                                        TIER_LAYER_USER, "command line",
                                        &error), 0);
    assert_int_equal (tier_policy_set_attr (&q, "stage", "sideways", &error),
                      -1);
    assert_non_null (strstr (error.text, "key 'stage'"));
    assert_int_equal (tier_policy_set_attr (&q, "stage", "in", &error), 0);
    assert_int_equal (tier_policy_validate (&q, &error), 0);
    assert_int_equal (tier_policy_set_attr (&q, "window", "64M", &error), 0);
    assert_int_equal (tier_policy_validate (&q, &error), -1);
    assert_non_null (strstr (error.text, "key 'window': does not apply to an "
                             "input directory"));
    tier_policy_clear (&q);
    assert_int_equal (tier_policy_init (&q, "/gfs/x", TIER_POLICY_ENDPOINT,
                                        TIER_LAYER_USER, "command line",
                                        &error), 0);
    assert_int_equal (tier_policy_set_attr (&q, "stage", "in", &error), 0);
    assert_int_equal (tier_policy_set_attr (&q, "tier", "bb", &error), 0);
    assert_int_equal (tier_policy_validate (&q, &error), -1);
    assert_non_null (strstr (error.text, "key 'tier': inputs are staged to "
                             "the node's NVDIMM tier"));
    assert_int_equal (tier_policy_set_attr (&q, "tier", "nvdimm", &error),
                      0);
    assert_int_equal (tier_policy_validate (&q, &error), 0);
    tier_policy_clear (&q);

    /* nesting */
    set = tier_policy_set_create ();
    out = tier_policy_set_create ();
    refused = json_array ();
    add (set, P ("\"/gfs/pipe\":{\"role\":\"pipeline\"},"
                 "\"/gfs/pipe/in\":{\"role\":\"endpoint\",\"stage\":\"in\"},"
                 "\"/gfs/res\":{\"role\":\"endpoint\"},"
                 "\"/gfs/res/in\":{\"role\":\"endpoint\",\"stage\":\"in\"},"
                 "\"/gfs/data\":{\"role\":\"endpoint\",\"stage\":\"in\"},"
                 "\"/gfs/data/tmp\":{\"role\":\"pipeline\"},"
                 "\"/gfs/data/out\":{\"role\":\"endpoint\"},"
                 "\"/gfs/data/skip\":{\"role\":\"none\"},"
                 "\"/gfs/db\":{\"role\":\"batch\"},"
                 "\"/gfs/db/in\":{\"role\":\"endpoint\",\"stage\":\"in\"}"),
         TIER_LAYER_USER);
    /* a job's output directory over a user's input gives way the other
     * way round: the higher layer wins */
    add (set, P ("\"/gfs/data2/res\":{\"role\":\"endpoint\"}"),
         TIER_LAYER_JOB);
    add (set, P ("\"/gfs/data2\":{\"role\":\"endpoint\",\"stage\":\"in\"}"),
         TIER_LAYER_USER);
    assert_int_equal (tier_policy_freeze (set, &roots, out, refused, &error),
                      0);
    assert_true (refused_has (refused, "/gfs/pipe/in", "user",
                              "lies inside the pipeline directory /gfs/pipe"));
    assert_true (refused_has (refused, "/gfs/res/in", "user",
                              "lies inside the endpoint directory /gfs/res"));
    assert_true (refused_has (refused, "/gfs/data/tmp", "user",
                              "lies inside the endpoint directory "
                              "/gfs/data"));
    assert_true (refused_has (refused, "/gfs/data/out", "user",
                              "lies inside the endpoint directory "
                              "/gfs/data"));
    assert_true (refused_has (refused, "/gfs/data/skip", "user",
                              "lies inside the endpoint directory"));
    assert_true (refused_has (refused, "/gfs/data2", "user",
                              "would contain /gfs/data2/res (job layer"));
    /* inside a batch tree it only changes resolution */
    assert_non_null (p = tier_policy_find (out, "/gfs/db/in",
                                           TIER_LAYER_USER));
    assert_true (tier_policy_is_input (p));
    assert_non_null (tier_policy_find (out, "/gfs/data", TIER_LAYER_USER));
    assert_int_equal ((int) json_array_size (refused), 6);
    json_decref (refused);
    tier_policy_set_destroy (out);
    tier_policy_set_destroy (set);
}

static void test_roundtrip (void **state)
{
    struct tier_policy_set *set = parsed (doc, TIER_LAYER_USER);
    struct tier_policy_set *back = tier_policy_set_create ();
    struct tier_policy_set *fro = tier_policy_set_create ();
    tier_error_t error;
    char *text, *text2;
    json_t *arr;

    add (set, P ("\"/gfs/apps\":{\"role\":\"batch\",\"share\":\"world\","
                 "\"locked\":true}"), TIER_LAYER_SITE);
    assert_non_null (text = tier_policy_dump (set, TIER_LAYER_USER));
    add (back, text, TIER_LAYER_USER);
    assert_non_null (text2 = tier_policy_dump (back, TIER_LAYER_USER));
    assert_string_equal (text, text2);
    assert_int_equal (back->n, 4);
    free (text);
    free (text2);
    /* a frozen set keeps each policy's layer and source */
    assert_non_null (arr = tier_policy_set_to_json (set));
    assert_int_equal (tier_policy_set_from_json (fro, arr, "frozen", &error),
                      0);
    json_decref (arr);
    assert_int_equal (fro->n, 5);
    assert_true (tier_policy_find (fro, "/gfs/apps", TIER_LAYER_SITE)->locked);
    assert_string_equal (tier_policy_find (fro, "/gfs/db",
                                           TIER_LAYER_USER)->source,
                         "t.json");
    assert_string_equal (res (fro, "/gfs/apps/blast"),
                         "batch site /gfs/apps locked");
    /* a frozen set is checked as strictly as a file */
    arr = json_loads ("[{\"dir\":\"/g\",\"layer\":\"user\",\"source\":\"s\","
                      "\"role\":\"batch\",\"locked\":true}]", 0, NULL);
    assert_int_equal (tier_policy_set_from_json (fro, arr, "frozen", &error),
                      -1);
    assert_non_null (strstr (error.text, "is for site policies only"));
    json_decref (arr);
    arr = json_loads ("[{\"dir\":\"/g\",\"role\":\"batch\"}]", 0, NULL);
    assert_int_equal (tier_policy_set_from_json (fro, arr, "frozen", &error),
                      -1);
    json_decref (arr);
    assert_int_equal (fro->n, 5);
    tier_policy_set_destroy (fro);
    tier_policy_set_destroy (back);
    tier_policy_set_destroy (set);
}

static void test_options (void **state)
{
    struct tier_policy_set *set = tier_policy_set_create ();
    const struct tier_policy *p;
    tier_error_t error;
    json_t *o = json_loads ("{\"cache\":\"auto\",\"keep\":\"always\","
                            "\"scratch\":\"/gfs/run:16M,/gfs/run2,"
                            "/gfs/x\\\\,upperdir=/etc:keep=never\","
                            "\"batch\":\"/gfs/db,/gfs/db2/\","
                            "\"stage_in\":\"/gfs/q%a.fa\","
                            "\"stage_out\":\"/gfs/res,/gfs/out-%a,"
                            "/gfs/obj=s3://bkt/o/%a/\"}",
                            0, NULL);

    assert_int_equal (tier_policy_from_options (set, o, &error), 0);
    assert_int_equal (set->n, 7);
    /* DIR=URL: DIR is an output directory */
    assert_non_null (p = tier_policy_find (set, "/gfs/obj", TIER_LAYER_JOB));
    assert_int_equal (p->role, TIER_POLICY_ENDPOINT);
    assert_non_null (p = tier_policy_find (set, "/gfs/run", TIER_LAYER_JOB));
    assert_true (p->size == 16 << 20 && p->keep == TIER_PKEEP_ALWAYS);
    assert_string_equal (p->source, "--tier-scratch");
    /* an escaped ',' is part of the name; the item's keep= wins */
    assert_non_null (p = tier_policy_find (set, "/gfs/x,upperdir=/etc",
                                           TIER_LAYER_JOB));
    assert_true (p->keep == TIER_PKEEP_NEVER && (p->set & TIER_PA_KEEP));
    assert_non_null (p = tier_policy_find (set, "/gfs/db2", TIER_LAYER_JOB));
    assert_int_equal (p->role, TIER_POLICY_BATCH);
    assert_non_null (p = tier_policy_find (set, "/gfs/res", TIER_LAYER_JOB));
    assert_int_equal (p->role, TIER_POLICY_ENDPOINT);
    assert_null (tier_policy_find (set, "/gfs/out-%a", TIER_LAYER_JOB));
    json_decref (o);
    o = json_loads ("{\"batch\":\"relative\"}", 0, NULL);
    assert_int_equal (tier_policy_from_options (set, o, &error), -1);
    assert_non_null (strstr (error.text, "--tier-batch"));
    assert_int_equal (set->n, 7);
    json_decref (o);
    assert_int_equal (tier_policy_from_options (set, NULL, &error), 0);
    tier_policy_set_destroy (set);
}

static void test_effective (void **state)
{
    struct tier_policy_set *set = parsed (doc, TIER_LAYER_USER);
    json_t *e = tier_policy_effective_json (tier_policy_find (set, "/gfs/db",
                                            TIER_LAYER_USER));

    assert_string_equal (json_string_value (json_object_get (e, "tier")),
                         "bb");
    assert_string_equal (json_string_value (json_object_get (e, "share")),
                         "user");
    assert_string_equal (json_string_value (json_object_get (e, "block")),
                         "1M");
    assert_string_equal (json_string_value (json_object_get (e,
                                                             "revalidate")),
                         "0s");
    json_decref (e);
    e = tier_policy_effective_json (tier_policy_find (set, "/gfs/runs",
                                                      TIER_LAYER_USER));
    assert_string_equal (json_string_value (json_object_get (e, "tier")),
                         "nvdimm");
    json_decref (e);
    tier_policy_set_destroy (set);
}

/* Every allocation may fail: no crash, no leak, all or nothing. */
static void test_failalloc (void **state)
{
    json_set_alloc_funcs (j_malloc, j_free);
    for (int n = 1; n < 5000; n++) {
        struct tier_policy_set *set, *out;
        tier_error_t error;
        json_t *refused, *arr;
        char *text;

        failalloc_arm (n);
        set = tier_policy_set_create ();
        out = tier_policy_set_create ();
        refused = json_array ();
        if (set && out && refused
            && tier_policy_parse (set, doc, strlen (doc), TIER_LAYER_USER,
                                  "t", &error) == 0
            && tier_policy_freeze (set, NULL, out, refused, &error) == 0
            && (text = tier_policy_dump (out, TIER_LAYER_USER))) {
            free (text);
            if ((arr = tier_policy_set_to_json (out))) {
                (void) tier_policy_set_from_json (set, arr, "f", &error);
                json_decref (arr);
            }
        }
        else if (set && failalloc_failed)
            assert_true (set->n == 0 || set->n == 4);
        json_decref (refused);
        tier_policy_set_destroy (out);
        tier_policy_set_destroy (set);
        if (!failalloc_failed)
            break;
    }
    failalloc_arm (-1);
    json_set_alloc_funcs (malloc, free);
}

#ifndef PRESETS_DIR
#define PRESETS_DIR "../../policies/presets"
#endif

static char *slurp (const char *path)
{
    FILE *f = fopen (path, "r");
    char *buf;
    long n = 0;

    if (!f)
        fail_msg ("%s: %s", path, strerror (errno));
    if (fseek (f, 0, SEEK_END) < 0 || (n = ftell (f)) < 0
        || fseek (f, 0, SEEK_SET) < 0)
        fail_msg ("%s: %s", path, strerror (errno));
    assert_non_null (buf = malloc ((size_t) n + 1));
    if (fread (buf, 1, (size_t) n, f) != (size_t) n)
        fail_msg ("%s: short read", path);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

/* Every shipped preset parses: site-*.json in the site layer (share and
 * locked are site-only), the others in the user layer, where users copy
 * them with tierctl.
 */
static void test_presets (void **state)
{
    const char *dir = getenv ("TIER_PRESETS_DIR");
    struct dirent *de;
    int files = 0;
    DIR *d;

    if (!dir || !*dir)
        dir = PRESETS_DIR;
    if (!(d = opendir (dir)))
        fail_msg ("%s: %s", dir, strerror (errno));
    while ((de = readdir (d))) {
        size_t len = strlen (de->d_name);
        enum tier_policy_layer layer;
        struct tier_policy_set *set;
        char path[4096], *text;
        tier_error_t error;

        if (len < 6 || strcmp (de->d_name + len - 5, ".json"))
            continue;
        (void) snprintf (path, sizeof (path), "%s/%s", dir, de->d_name);
        layer = strncmp (de->d_name, "site", 4) ? TIER_LAYER_USER
                                                 : TIER_LAYER_SITE;
        text = slurp (path);
        assert_non_null (set = tier_policy_set_create ());
        if (tier_policy_parse (set, text, strlen (text), layer, path,
                               &error) < 0)
            fail_msg ("%s: %s", path, error.text);
        if (set->n < 1)
            fail_msg ("%s: no policies", path);
        if (!strcmp (de->d_name, "blast.json")) {
            const struct tier_policy *p
                = tier_policy_find (set, "/gfs/proj/runs", layer);
            assert_non_null (p);
            assert_int_equal (p->role, TIER_POLICY_PIPELINE);
            assert_int_equal (p->keep, TIER_PKEEP_ON_FAILURE);
        }
        tier_policy_set_destroy (set);
        free (text);
        files++;
    }
    closedir (d);
    /* blast.json, pipeline-only.json, site-example.json at least */
    assert_true (files >= 3);
}

/* ------------------------------------------------- the files' trust rules */

static char top[64];

static int files_setup (void **state)
{
    (void) snprintf (top, sizeof (top), "/tmp/test_policy.XXXXXX");
    return mkdtemp (top) ? 0 : -1;
}

static int files_teardown (void **state)
{
    char cmd[128];

    (void) snprintf (cmd, sizeof (cmd), "rm -rf '%s'", top);
    return system (cmd) == 0 ? 0 : -1;
}

static void put_file (const char *dir, const char *name, const char *text,
                      mode_t mode)
{
    char path[256];
    FILE *f;

    (void) snprintf (path, sizeof (path), "%s/%s", dir, name);
    assert_non_null (f = fopen (path, "w"));
    assert_true (fputs (text, f) >= 0);
    assert_int_equal (fclose (f), 0);
    assert_int_equal (chmod (path, mode), 0);
}

struct reports {
    char text[2048];
};

static void collect (void *arg, const char *text)
{
    struct reports *r = arg;
    size_t o = strlen (r->text);

    (void) snprintf (r->text + o, sizeof (r->text) - o, "%s\n", text);
}

/* SitePolicyDir: root's files in root's directory (as root: the owner
 * rules need someone to own the files). */
static void test_site_trust (void **state)
{
    char site[128], link[160];
    struct tier_policy_set *set;
    struct reports r = { "" };

    if (geteuid () != 0)
        skip ();
    (void) snprintf (site, sizeof (site), "%s/site", top);
    assert_int_equal (mkdir (site, 0755), 0);
    put_file (site, "10-ok.json", doc, 0644);
    put_file (site, "20-open.json", doc, 0666);
    put_file (site, "30-theirs.json", doc, 0644);
    (void) snprintf (link, sizeof (link), "%s/30-theirs.json", site);
    assert_int_equal (chown (link, 4001, 4001), 0);
    (void) snprintf (link, sizeof (link), "%s/40-link.json", site);
    assert_int_equal (symlink ("10-ok.json", link), 0);

    assert_non_null (set = tier_policy_set_create ());
    assert_int_equal (tier_policy_load_site (set, site, collect, &r), 3);
    assert_int_equal (set->n, 4); /* 10-ok.json's four */
    assert_non_null (strstr (r.text, "20-open.json: must be owned by root "
                                     "and writable by root only; skipped"));
    assert_non_null (strstr (r.text,
                             "30-theirs.json: must be owned by "
                             "root and writable by root only; skipped"));
    assert_non_null (strstr (r.text, "40-link.json: a symlink; skipped"));
    assert_null (strstr (r.text, "10-ok.json"));
    tier_policy_set_destroy (set);

    /* a directory others may write: none of it */
    r.text[0] = '\0';
    assert_int_equal (chmod (site, 0775), 0);
    assert_non_null (set = tier_policy_set_create ());
    assert_int_equal (tier_policy_load_site (set, site, collect, &r), 1);
    assert_int_equal (set->n, 0);
    assert_non_null (strstr (r.text, "writable by group or others"));
    assert_non_null (strstr (r.text, "; no site policies"));
    tier_policy_set_destroy (set);

    /* nor one beneath a directory someone else owns */
    r.text[0] = '\0';
    assert_int_equal (chmod (site, 0755), 0);
    assert_int_equal (chown (top, 4001, 4001), 0);
    assert_non_null (set = tier_policy_set_create ());
    assert_int_equal (tier_policy_load_site (set, site, collect, &r), 1);
    assert_int_equal (set->n, 0);
    assert_non_null (strstr (r.text, "a directory above it"));
    assert_int_equal (chown (top, 0, 0), 0);
    tier_policy_set_destroy (set);

    /* missing: no policies, nothing to say */
    r.text[0] = '\0';
    (void) snprintf (link, sizeof (link), "%s/none", top);
    assert_non_null (set = tier_policy_set_create ());
    assert_int_equal (tier_policy_load_site (set, link, collect, &r), 0);
    assert_string_equal (r.text, "");
    tier_policy_set_destroy (set);
}

/* The user's directory in SharedStateDir: the user's own, 0700. */
static void test_user_dir_trust (void **state)
{
    char root[128], path[192];
    tier_error_t error;
    int fd;

    if (geteuid () != 0)
        skip ();
    (void) snprintf (root, sizeof (root), "%s/state", top);
    assert_int_equal (mkdir (root, 0755), 0);
    errno = 0;
    assert_int_equal (tier_policy_user_dir (root, "alice", 4001, &error), -1);
    assert_int_equal (errno, ENOENT); /* tierctl asks the agent */
    (void) snprintf (path, sizeof (path), "%s/users", root);
    assert_int_equal (mkdir (path, 0755), 0);
    (void) snprintf (path, sizeof (path), "%s/users/alice", root);
    assert_int_equal (mkdir (path, 0700), 0);
    assert_int_equal (chown (path, 4001, 4001), 0);
    assert_true ((fd = tier_policy_user_dir (root, "alice", 4001, &error))
                 >= 0);
    close (fd);
    /* someone else's */
    errno = 0;
    assert_int_equal (tier_policy_user_dir (root, "alice", 4002, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "users/alice"));
    /* open to others */
    assert_int_equal (chmod (path, 0750), 0);
    assert_int_equal (tier_policy_user_dir (root, "alice", 4001, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_int_equal (chmod (path, 0700), 0);
    /* a symlink to it */
    (void) snprintf (path, sizeof (path), "%s/users/bob", root);
    assert_int_equal (symlink ("alice", path), 0);
    assert_int_equal (tier_policy_user_dir (root, "bob", 4001, &error), -1);
    assert_int_equal (errno, EPERM);
    /* a users/ others may write */
    (void) snprintf (path, sizeof (path), "%s/users", root);
    assert_int_equal (chmod (path, 0777), 0);
    assert_int_equal (tier_policy_user_dir (root, "alice", 4001, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_int_equal (chmod (path, 0755), 0);
    /* names that are no user's */
    assert_int_equal (tier_policy_user_dir (root, "../alice", 4001, &error),
                      -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_policy_user_dir (root, ".alice", 4001, &error), -1);
    assert_int_equal (tier_policy_user_dir ("relative", "alice", 4001, &error),
                      -1);
    assert_int_equal (errno, EINVAL);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse),
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_set_attr),
        cmocka_unit_test (test_fmt),
        cmocka_unit_test (test_resolve),
        cmocka_unit_test (test_freeze),
        cmocka_unit_test (test_stage),
        cmocka_unit_test (test_window_stage),
        cmocka_unit_test (test_roundtrip),
        cmocka_unit_test (test_options),
        cmocka_unit_test (test_effective),
        cmocka_unit_test (test_failalloc),
        cmocka_unit_test (test_presets),
        cmocka_unit_test_setup_teardown (test_site_trust, files_setup,
                                         files_teardown),
        cmocka_unit_test_setup_teardown (test_user_dir_trust, files_setup,
                                         files_teardown),
    };

    return UNIT_RUN (tests);
}
