/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_jobs.c - tierctl jobs, tierctl counters, tierctl ping,
 * tierctl enable/disable */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/counters.h"
#include "lib/units.h"
#include "ctl.h"

static int no_args (struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    while ((c = getopt_long (argc, argv, "+j", longopts, NULL)) != -1) {
        if (c == 'j')
            ctl->json = true;
        else
            return -1;
    }
    return optind < argc ? -1 : 0;
}

static void fmt_time (json_int_t t, char *buf, size_t size)
{
    time_t tt = (time_t) t;
    struct tm tm;

    if (t <= 0) {
        (void) snprintf (buf, size, "-");
        return;
    }
    localtime_r (&tt, &tm);
    strftime (buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
}

int cmd_jobs (struct ctl *ctl, int argc, char **argv)
{
    json_t *res, *jobs, *j;
    size_t i;

    if (no_args (ctl, argc, argv) < 0)
        return ctl_usage (ctl_cmd_find ("jobs"));
    if (!(res = ctl_call (ctl, json_pack ("{s:s}", "op", "jobs"))))
        return CTL_ERROR;
    if (ctl->json) {
        ctl_print_json (res);
        json_decref (res);
        return CTL_OK;
    }
    jobs = json_object_get (res, "jobs");
    printf ("%-9s %-3s %-9s %-6s %-10s %-10s %-5s %-19s %-19s\n", "JOBID",
            "RST", "BATCH", "TASK", "USER", "STATE", "STEPS", "REGISTERED",
            "ENDED");
    json_array_foreach (jobs, i, j) {
        char reg[32], end[32], task[16];
        json_t *t = json_object_get (j, "array_task_id");

        fmt_time (json_integer_value (json_object_get (j, "registered")),
                  reg, sizeof (reg));
        fmt_time (json_integer_value (json_object_get (j, "ended")),
                  end, sizeof (end));
        if (json_is_integer (t))
            (void) snprintf (task, sizeof (task), "%lld",
                             (long long) json_integer_value (t));
        else
            (void) snprintf (task, sizeof (task), "-");
        printf ("%-9lld %-3lld %-9lld %-6s %-10s %-10s %-5lld %-19s %-19s\n",
                (long long) json_integer_value (json_object_get (j, "job_id")),
                (long long) json_integer_value (json_object_get (j, "restart")),
                (long long) json_integer_value (json_object_get (j,
                                                                 "batch_id")),
                task,
                json_string_value (json_object_get (j, "user")),
                json_string_value (json_object_get (j, "state")),
                (long long) json_integer_value (json_object_get (j, "steps")),
                reg, end);
    }
    json_decref (res);
    return CTL_OK;
}

int cmd_counters (struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "job", required_argument, NULL, 'J' },
        { "batch", required_argument, NULL, 'b' },
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const char *scope = "node";
    long long id = 0;
    json_t *req, *res, *ctr;
    char *end;
    int c;

    while ((c = getopt_long (argc, argv, "+J:b:j", longopts, NULL)) != -1) {
        switch (c) {
            case 'J':
            case 'b':
                scope = c == 'J' ? "job" : "batch";
                id = strtoll (optarg, &end, 10);
                if (*end || id <= 0 || id > 0xfffffff0LL) {
                    fprintf (stderr, "tierctl counters: '%s' is not a job "
                             "id\n", optarg);
                    return CTL_USAGE;
                }
                break;
            case 'j':
                ctl->json = true;
                break;
            default:
                return ctl_usage (ctl_cmd_find ("counters"));
        }
    }
    if (optind < argc)
        return ctl_usage (ctl_cmd_find ("counters"));
    req = json_pack ("{s:s s:s}", "op", "counters", "scope", scope);
    if (strcmp (scope, "node"))
        json_object_set_new (req, "id", json_integer (id));
    if (!(res = ctl_call (ctl, req)))
        return CTL_ERROR;
    if (ctl->json) {
        ctl_print_json (res);
        json_decref (res);
        return CTL_OK;
    }
    ctr = json_object_get (res, "counters");
    printf ("%s %lld on node %s (raw counters)\n", scope, id,
            json_string_value (json_object_get (res, "node")));
    printf ("%-20s %14s %14s %14s %14s\n", "COUNTER", "endpoint", "pipeline",
            "batch", "total");
    for (int k = 0; k < TIER_CTR_COUNT; k++) {
        const char *n = tier_ctr_name (k);
        printf ("%-20s", n);
        for (int r = 0; r < TIER_ROLE_COUNT; r++)
            printf (" %14lld", (long long) json_integer_value (
                        json_object_get (json_object_get (ctr,
                                                          tier_role_name (r)),
                                         n)));
        printf (" %14lld\n", (long long) json_integer_value (
                    json_object_get (json_object_get (ctr, "total"), n)));
    }
    json_decref (res);
    return CTL_OK;
}

int cmd_ping (struct ctl *ctl, int argc, char **argv)
{
    json_t *res;

    if (no_args (ctl, argc, argv) < 0)
        return ctl_usage (ctl_cmd_find ("ping"));
    if (!(res = ctl_call (ctl, json_pack ("{s:s}", "op", "ping"))))
        return CTL_ERROR;
    if (ctl->json)
        ctl_print_json (res);
    else
        printf ("tierd %s on node %s: pid %lld, up %llds, tier %s\n",
                json_string_value (json_object_get (res, "version")),
                json_string_value (json_object_get (res, "node")),
                (long long) json_integer_value (json_object_get (res, "pid")),
                (long long) json_integer_value (json_object_get (res,
                                                                 "uptime")),
                json_is_true (json_object_get (res, "enabled"))
                ? "enabled" : "disabled");
    json_decref (res);
    return CTL_OK;
}

static int set_enabled (struct ctl *ctl, int argc, char **argv, bool on)
{
    json_t *res;

    if (no_args (ctl, argc, argv) < 0)
        return ctl_usage (ctl_cmd_find (on ? "enable" : "disable"));
    if (!(res = ctl_call (ctl, json_pack ("{s:s s:b}", "op", "node.enable",
                                          "enable", on))))
        return CTL_ERROR;
    if (ctl->json)
        ctl_print_json (res);
    else
        printf ("tier %s on node %s\n", on ? "enabled" : "disabled",
                json_string_value (json_object_get (res, "node")));
    json_decref (res);
    return CTL_OK;
}

int cmd_enable (struct ctl *ctl, int argc, char **argv)
{
    return set_enabled (ctl, argc, argv, true);
}

int cmd_disable (struct ctl *ctl, int argc, char **argv)
{
    return set_enabled (ctl, argc, argv, false);
}

static void print_tier (const char *name, const char *used, json_t *t)
{
    char a[32], b[32], c[32];
    json_int_t cap = json_integer_value (json_object_get (t, "capacity"));

    printf ("  %-7s %s\n", name,
            json_string_value (json_object_get (t, "path")));
    if (json_object_get (t, "pmem"))
        printf ("          %s%s\n",
                json_is_true (json_object_get (t, "pmem"))
                ? "persistent memory (libpmem)" : "not persistent memory",
                json_is_true (json_object_get (t, "emulated"))
                ? ", DRAM-emulated (tmpfs)" : "");
    printf ("          capacity %s, %s %s, file system free %s\n",
            cap ? tier_size_format ((uint64_t) cap, a, sizeof (a))
                : "unlimited", used,
            tier_size_format ((uint64_t) json_integer_value (
                json_object_get (t, "used")), b, sizeof (b)),
            tier_size_format ((uint64_t) json_integer_value (
                json_object_get (t, "fs_free")), c, sizeof (c)));
    if (json_object_get (t, "reserved"))
        printf ("          reserved by running jobs %s\n",
                tier_size_format ((uint64_t) json_integer_value (
                    json_object_get (t, "reserved")), a, sizeof (a)));
    if (json_object_get (t, "scratch_used"))
        printf ("          scratch in use %s by %lld running job(s)\n",
                tier_size_format ((uint64_t) json_integer_value (
                    json_object_get (t, "scratch_used")), a, sizeof (a)),
                (long long) json_integer_value (
                    json_object_get (t, "scratch_jobs")));
}

#define I(o, k) ((long long) json_integer_value (json_object_get ((o), (k))))

/* What the node's migrators hold: per job, and for the caller's own jobs
 * the files that failed, with the reason.
 */
static void print_migrations (json_t *m)
{
    json_t *jobs = json_object_get (m, "jobs"), *j;
    size_t i;

    printf ("migrations: %lld pending, %lld failed, %lld in conflict; "
            "%lld migrator(s) stalled (StallTimeout)\n",
            I (m, "pending"), I (m, "failed"), I (m, "conflicts"),
            I (m, "stalled_migrators"));
    json_array_foreach (jobs, i, j) {
        json_t *fails = json_object_get (j, "failures"), *f;
        size_t n;
        printf ("  job %lld (%s): %lld pending, %lld failed, %lld in "
                "conflict\n", I (j, "job_id"),
                json_is_true (json_object_get (j, "ended")) ? "ended"
                                                            : "running",
                I (j, "pending"), I (j, "failed"), I (j, "conflicts"));
        if (I (j, "stalled"))
            printf ("    %lld migrator(s) stalled%s\n", I (j, "stalled"),
                    I (j, "stuck_migrator") ? "; one is stuck in a GFS "
                                              "request: outputs wait for it"
                                            : "");
        json_array_foreach (fails, n, f)
            printf ("    failed: %s: %s\n",
                    json_string_value (json_object_get (f, "path")),
                    json_string_value (json_object_get (f, "error")));
        if (json_is_array (fails) && I (j, "failed") > (long long) n)
            printf ("    ... %lld more: tierctl outputs --job %lld\n",
                    I (j, "failed") - (long long) n, I (j, "job_id"));
    }
}

/* The node's block cache write logs (doc/block-cache.md): per job, its
 * window, what it holds not yet on the GFS, what it drained, and a
 * failure's file and reason. */
static void print_block_cache (json_t *b)
{
    json_t *j, *f;
    size_t i;
    char w[32], p[32], d[32];

    json_array_foreach (b, i, j)
    {
        printf ("block cache: job %lld (%s): window %s, %s pending, %lld "
                "records (%s) drained, %lld file(s)%s\n",
                I (j, "job_id"),
                json_string_value (json_object_get (j, "user"))
                    ? json_string_value (json_object_get (j, "user"))
                    : "?",
                tier_size_format ((uint64_t) I (j, "window"), w, sizeof (w)),
                tier_size_format ((uint64_t) I (j, "pending"), p, sizeof (p)),
                I (j, "records"),
                tier_size_format ((uint64_t) I (j, "bytes"), d, sizeof (d)),
                I (j, "files"),
                json_is_true (json_object_get (j, "draining"))
                    ? ""
                    : ", no drain running");
        if ((f = json_object_get (j, "failed")))
            printf ("    failed: %s (kept, retried)\n",
                    json_string_value (json_object_get (f, "error")));
        if (json_object_get (j, "damaged"))
            printf ("    damaged: %s\n",
                    json_string_value (json_object_get (j, "damaged")));
    }
}

/* The node's GFS streams (GfsStreams) and each user's share
 * (UserBandwidth), with the bandwidth limit's own accounting. */
static void print_streams (json_t *s)
{
    json_t *users = json_object_get (s, "users"), *u;
    json_int_t rate = I (s, "user_bandwidth");
    char a[32], b[32];
    size_t i;

    if (!json_is_object (s) || !json_object_get (s, "max"))
        return;
    printf ("GFS streams: %lld of %lld in use, %lld waiting; UserBandwidth "
            "%s%s\n", I (s, "in_use"), I (s, "max"), I (s, "waiting"),
            rate ? tier_size_format ((uint64_t) rate, a, sizeof (a))
                 : "unlimited", rate ? "/s" : "");
    json_array_foreach (users, i, u) {
        json_t *bw = json_object_get (u, "bandwidth");
        printf ("  %s: %lld held, %lld waiting, %lld granted (%lld after a "
                "wait, %lld ms in all); %s moved, held back %.1f s\n",
                json_string_value (json_object_get (u, "user")),
                I (u, "held"), I (u, "waiting"), I (u, "grants"),
                I (u, "queued"), I (u, "wait_ms"),
                tier_size_format ((uint64_t) I (bw, "bytes"), b, sizeof (b)),
                (double) I (bw, "stall_ns") / 1e9);
    }
}

#undef I

int cmd_status (struct ctl *ctl, int argc, char **argv)
{
    json_t *res, *tiers, *jobs;

    if (no_args (ctl, argc, argv) < 0)
        return ctl_usage (ctl_cmd_find ("status"));
    if (!(res = ctl_call (ctl, json_pack ("{s:s}", "op", "status"))))
        return CTL_ERROR;
    if (ctl->json) {
        ctl_print_json (res);
        json_decref (res);
        return CTL_OK;
    }
    tiers = json_object_get (res, "tiers");
    jobs = json_object_get (res, "jobs");
    printf ("node %s: tierd %s, pid %lld, up %llds, tier %s\n",
            json_string_value (json_object_get (res, "node")),
            json_string_value (json_object_get (res, "version")),
            (long long) json_integer_value (json_object_get (res, "pid")),
            (long long) json_integer_value (json_object_get (res, "uptime")),
            json_is_true (json_object_get (res, "enabled")) ? "enabled"
                                                            : "disabled");
    printf ("tiers:\n");
    if (json_object_get (tiers, "nvdimm"))
        print_tier ("nvdimm", "file system used",
                    json_object_get (tiers, "nvdimm"));
    if (json_object_get (tiers, "bb"))
        print_tier ("bb", "this node's replicas",
                    json_object_get (tiers, "bb"));
    {
        json_t *r = json_object_get (res, "replicas");
        char x[32], y[32], z[32];
        if (!json_is_true (json_object_get (r, "enabled")))
            printf ("replicas: no batch replica cache: %s\n",
                    json_string_value (json_object_get (r, "why")));
        else {
            json_int_t budget = json_integer_value (json_object_get (r,
                                                                     "budget"));
            printf ("replicas: %lld files, %s of %s (fetched by this node; "
                    "%lld known), %lld fetching, %lld queued, BB free %s\n",
                    (long long) json_integer_value (json_object_get (r,
                                                                    "files")),
                    tier_size_format ((uint64_t) json_integer_value (
                        json_object_get (r, "bytes")), x, sizeof (x)),
                    budget ? tier_size_format ((uint64_t) budget, y,
                                               sizeof (y)) : "unlimited",
                    (long long) json_integer_value (json_object_get (r,
                                                                    "known")),
                    (long long) json_integer_value (json_object_get (
                        r, "fetching")),
                    (long long) json_integer_value (json_object_get (
                        r, "queued")),
                    tier_size_format ((uint64_t) json_integer_value (
                        json_object_get (r, "free")), z, sizeof (z)));
        }
    }
    printf ("jobs: %lld running, %lld registered\n",
            (long long) json_integer_value (json_object_get (jobs, "running")),
            (long long) json_integer_value (json_object_get (jobs,
                                                             "registered")));
    print_migrations (json_object_get (res, "migrations"));
    print_streams (json_object_get (res, "streams"));
    print_block_cache (json_object_get (res, "block_cache"));
    {
        json_t *cl = json_object_get (res, "clients");
        if (cl)
            printf ("clients: %lld connections, %lld requests waiting for "
                    "an answer (%lld yours)\n",
                    (long long)
                        json_integer_value (json_object_get (cl,
                                                             "connections")),
                    (long long)
                        json_integer_value (json_object_get (cl, "waiting")),
                    (long long)
                        json_integer_value (json_object_get (cl,
                                                             "yours_waiting")));
    }
    {
        /* clients' descriptors whose close has not returned (a file
         * system that does not answer: rxfd.c) */
        json_t *cl = json_object_get (res, "closing");
        json_t *u = json_object_get (cl, "users");
        json_int_t n = json_integer_value (json_object_get (cl, "descriptors"));
        if (n)
            printf ("closing: %lld client descriptors of %lld users not "
                    "closed yet (their file system does not answer)\n",
                    (long long) n, (long long) json_integer_value (u));
    }
    json_decref (res);
    return CTL_OK;
}
