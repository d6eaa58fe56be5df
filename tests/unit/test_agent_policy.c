/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_agent_policy.c - what the agent takes from a job's frozen set */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/policy.h"
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/conf.h"
#include "policies/policy.h"

static char dir[64];
static struct tier_conf *conf;
static struct agent agent;

static int setup (void **state)
{
    char text[256], sub[128];
    tier_error_t e;

    snprintf (dir, sizeof (dir), "/tmp/test_agent_policy.XXXXXX");
    if (!mkdtemp (dir))
        return -1;
    snprintf (sub, sizeof (sub), "%s/policies", dir);
    if (mkdir (sub, 0700) < 0)
        return -1;
    if (!(conf = tier_conf_create ("n1")))
        return -1;
    snprintf (text, sizeof (text), "StateDir = %s\nAllowedRoots = /gfs\n",
              dir);
    if (tier_conf_parse (conf, text, "tier.conf", &e) < 0)
        return -1;
    agent.conf = conf;
    snprintf (agent.node, sizeof (agent.node), "n1");
    return 0;
}

static int teardown (void **state)
{
    char cmd[128];

    tier_conf_destroy (conf);
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    return system (cmd) == 0 ? 0 : -1;
}

/* Freeze site, user and job layers (job: the registry's options) as the
 * agent does, and keep the result as job id's copy on this node.
 */
static struct store_job frozen (uint32_t id, const char *site,
                                const char *user, const char *options)
{
    const char *allowed[] = { "/gfs" };
    struct tier_policy_roots roots = { .allowed = allowed, .nallowed = 1 };
    struct tier_policy_set *all = tier_policy_set_create ();
    struct tier_policy_set *out = tier_policy_set_create ();
    struct store_job job;
    json_t *refused = json_array (), *opts, *doc;
    char path[256];
    tier_error_t e;

    assert_non_null (all);
    assert_non_null (out);
    if (site && tier_policy_parse (all, site, strlen (site), TIER_LAYER_SITE,
                                   "site", &e) < 0)
        fail_msg ("site: %s", e.text);
    if (user && tier_policy_parse (all, user, strlen (user), TIER_LAYER_USER,
                                   "user", &e) < 0)
        fail_msg ("user: %s", e.text);
    assert_non_null (opts = json_loads (options ? options : "{}", 0, NULL));
    if (tier_policy_from_options (all, opts, &e) < 0)
        fail_msg ("options: %s", e.text);
    json_decref (opts);
    if (tier_policy_freeze (all, &roots, out, refused, &e) < 0)
        fail_msg ("freeze: %s", e.text);
    doc = json_pack ("{s:I s:I s:o s:o}", "job_id", (json_int_t) id,
                     "restart", (json_int_t) 0,
                     "policies", tier_policy_set_to_json (out),
                     "refused", refused);
    assert_non_null (doc);
    snprintf (path, sizeof (path), "%s/policies/%u.0.json", dir, id);
    assert_int_equal (json_dump_file (doc, path, 0), 0);
    json_decref (doc);
    tier_policy_set_destroy (all);
    tier_policy_set_destroy (out);
    memset (&job, 0, sizeof (job));
    job.job_id = id;
    return job;
}

#define DOC(x) "{\"version\":1,\"policies\":{" x "}}"

static void pipeline (uint32_t id, const char *site, const char *user,
                      const char *options, const char *want,
                      uint64_t want_reserve)
{
    struct store_job job = frozen (id, site, user, options);
    char out[4096], refused[1024];
    uint64_t reserve = 1;

    assert_int_equal (policy_job_pipeline (&agent, &job, out, sizeof (out),
                                           &reserve, refused,
                                           sizeof (refused)), 0);
    assert_string_equal (out, want);
    assert_int_equal (reserve, want_reserve);
}

/* Only the entry that decides a directory is mounted, once. */
static void test_pipeline_shadowed (void **state)
{
    /* nothing shadows it */
    pipeline (1, DOC ("\"/gfs/x\":{\"role\":\"pipeline\",\"size\":\"1M\"}"),
              NULL, NULL, "/gfs/x:1048576", 1 << 20);
    /* a user's 'none' over a site pipeline directory: no overlay */
    pipeline (2, DOC ("\"/gfs/x\":{\"role\":\"pipeline\",\"size\":\"1M\"}"),
              DOC ("\"/gfs/x\":{\"role\":\"none\"}"), NULL, "", 0);
    /* --tier-batch over a user's pipeline directory: no overlay */
    pipeline (3, NULL, DOC ("\"/gfs/z\":{\"role\":\"pipeline\"}"),
              "{\"batch\":\"/gfs/z\"}", "", 0);
    /* --tier-scratch and a user's pipeline policy on one directory: one
     * overlay, the job's size */
    pipeline (4, NULL,
              DOC ("\"/gfs/y\":{\"role\":\"pipeline\",\"size\":\"4M\"}"),
              "{\"scratch\":\"/gfs/y:2M\"}", "/gfs/y:2097152", 2 << 20);
    /* site and user pipeline on one directory: the user's */
    pipeline (5, DOC ("\"/gfs/y\":{\"role\":\"pipeline\",\"size\":\"8M\"}"),
              DOC ("\"/gfs/y\":{\"role\":\"pipeline\",\"size\":\"4M\"}"),
              NULL, "/gfs/y:4194304", 4 << 20);
    /* a locked site pipeline stays, whatever the job says */
    pipeline (6, DOC ("\"/gfs/l\":{\"role\":\"pipeline\",\"size\":\"1M\","
                      "\"locked\":true}"),
              NULL, "{\"batch\":\"/gfs/l\"}", "/gfs/l:1048576", 1 << 20);
}

/* The same for output directories and batch directories. */
static void test_endpoint_batch_shadowed (void **state)
{
    struct store_job job;
    char out[4096];

    job = frozen (11, NULL, DOC ("\"/gfs/e\":{\"role\":\"endpoint\"}"),
                  "{\"stage_out\":\"/gfs/e\"}");
    assert_int_equal (policy_job_endpoint (&agent, &job, out, sizeof (out)),
                      0);
    assert_string_equal (out, "/gfs/e");
    job = frozen (12, DOC ("\"/gfs/e\":{\"role\":\"endpoint\"}"),
                  DOC ("\"/gfs/e\":{\"role\":\"none\"}"), NULL);
    assert_int_equal (policy_job_endpoint (&agent, &job, out, sizeof (out)),
                      0);
    assert_string_equal (out, "");
    job = frozen (13, DOC ("\"/gfs/b\":{\"role\":\"batch\"}"),
                  DOC ("\"/gfs/b\":{\"role\":\"batch\"}"),
                  "{\"batch\":\"/gfs/b\"}");
    assert_int_equal (policy_job_batch (&agent, &job, out, sizeof (out)), 0);
    assert_string_equal (out, "/gfs/b");
    job = frozen (14, DOC ("\"/gfs/b\":{\"role\":\"batch\"},"
                           "\"/gfs/b/tmp\":{\"role\":\"none\"}"),
                  DOC ("\"/gfs/b/tmp\":{\"role\":\"none\"}"), NULL);
    assert_int_equal (policy_job_batch (&agent, &job, out, sizeof (out)), 0);
    assert_string_equal (out, "/gfs/b:!/gfs/b/tmp");
    /* a job with no frozen set on this node */
    job.job_id = 99;
    assert_int_equal (policy_job_batch (&agent, &job, out, sizeof (out)), -1);
}

/* Endpoint inputs (stage = in) and outputs go to different lists; the
 * entry that decides a directory decides which. */
static void test_inputs (void **state)
{
    struct store_job job;
    char out[4096];

    job = frozen (21, NULL,
                  DOC ("\"/gfs/in\":{\"role\":\"endpoint\",\"stage\":\"in\"},"
                       "\"/gfs/a,b\":{\"role\":\"endpoint\",\"stage\":\"in\"},"
                       "\"/gfs/res\":{\"role\":\"endpoint\"}"), NULL);
    assert_int_equal (policy_job_inputs (&agent, &job, out, sizeof (out)), 0);
    assert_true (!strcmp (out, "/gfs/in,/gfs/a\\,b")
                 || !strcmp (out, "/gfs/a\\,b,/gfs/in"));
    assert_int_equal (policy_job_endpoint (&agent, &job, out, sizeof (out)),
                      0);
    assert_string_equal (out, "/gfs/res");
    /* --tier-stage-out over a user's input: an output for this job */
    job = frozen (22, NULL,
                  DOC ("\"/gfs/in\":{\"role\":\"endpoint\",\"stage\":\"in\"}"),
                  "{\"stage_out\":\"/gfs/in\"}");
    assert_int_equal (policy_job_inputs (&agent, &job, out, sizeof (out)), 0);
    assert_string_equal (out, "");
    assert_int_equal (policy_job_endpoint (&agent, &job, out, sizeof (out)),
                      0);
    assert_string_equal (out, "/gfs/in");
    /* a user's 'none' over a site input: nothing */
    job = frozen (23, DOC ("\"/gfs/in\":{\"role\":\"endpoint\",\"stage\":\"in\"}"),
                  DOC ("\"/gfs/in\":{\"role\":\"none\"}"), NULL);
    assert_int_equal (policy_job_inputs (&agent, &job, out, sizeof (out)), 0);
    assert_string_equal (out, "");
    job.job_id = 98;
    assert_int_equal (policy_job_inputs (&agent, &job, out, sizeof (out)), -1);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_pipeline_shadowed),
        cmocka_unit_test (test_endpoint_batch_shadowed),
        cmocka_unit_test (test_inputs),
    };

    cmocka_set_message_output (CM_OUTPUT_TAP);
    return cmocka_run_group_tests (tests, setup, teardown);
}
