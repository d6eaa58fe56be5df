/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_outputs.c - tierctl outputs, flush, wait: a job's stage-out */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/conf.h"
#include "lib/units.h"
#include "ctl.h"

/* --job ID [--timeout SECONDS]: the job id (and the timeout) of argv. */
static int job_arg (struct ctl *ctl, const char *cmd, int argc, char **argv,
                    long *job, long *timeout)
{
    static const struct option longopts[] = {
        { "job", required_argument, NULL, 'J' },
        { "timeout", required_argument, NULL, 't' },
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    char *end;
    int c;

    *job = 0;
    while ((c = getopt_long (argc, argv, "+J:t:j", longopts, NULL)) != -1) {
        if (c == 'J') {
            *job = strtol (optarg, &end, 10);
            if (*end || *job <= 0 || *job > 0xfffffff0L) {
                fprintf (stderr, "tierctl %s: '%s' is not a job id\n", cmd,
                         optarg);
                return -1;
            }
        }
        else if (c == 'j')
            ctl->json = true;
        else if (c == 't' && timeout) {
            *timeout = strtol (optarg, &end, 10);
            if (*end || *timeout < 0) {
                fprintf (stderr, "tierctl %s: '%s' is not a number of "
                         "seconds\n", cmd, optarg);
                return -1;
            }
        }
        else
            return -1;
    }
    return *job && optind == argc ? 0 : -1;
}

int cmd_outputs (struct ctl *ctl, int argc, char **argv)
{
    json_t *res, *v;
    size_t i;
    long job;
    char a[32];

    if (job_arg (ctl, "outputs", argc, argv, &job, NULL) < 0)
        return ctl_usage (ctl_cmd_find ("outputs"));
    if (!(res = ctl_call (ctl, json_pack ("{s:s s:i}", "op", "job.outputs",
                                          "job_id", (int) job))))
        return CTL_ERROR;
    if (ctl->json) {
        ctl_print_json (res);
        json_decref (res);
        return CTL_OK;
    }
    printf ("job %ld on node %s: %lld on the GFS, %lld pending, %lld "
            "failed, %lld in conflict%s\n", job,
            json_string_value (json_object_get (res, "node")),
            (long long) json_integer_value (json_object_get (res, "done")),
            (long long) json_integer_value (json_object_get (res, "pending")),
            (long long) json_integer_value (json_object_get (res, "failed")),
            (long long) json_integer_value (json_object_get (res,
                                                             "conflicts")),
            json_is_true (json_object_get (res, "in_flight"))
            ? "" : " (migrations finished)");
    if (json_is_true (json_object_get (res, "late")))
        printf ("late: the job ended before these were all on the GFS; its "
                "dependents may have started without them\n");
    json_array_foreach (json_object_get (res, "outputs"), i, v) {
        const char *st = json_string_value (json_object_get (v, "state"));
        const char *path = json_string_value (json_object_get (v, "url"));
        const char *parts = "";
        char pbuf[64];
        const char *file = json_string_value (json_object_get (v, "file"));
        const char *sha = json_string_value (json_object_get (v, "sha256"));
        const char *err = json_string_value (json_object_get (v, "error"));
        if (!path)      /* a GFS output; an object output shows its URL */
            path = json_string_value (json_object_get (v, "path"));
        if (st && !strcmp (st, "uploading")
            && json_object_get (v, "parts")) {
            (void) snprintf (pbuf, sizeof (pbuf), "  (part %lld of %lld "
                             "done)", (long long) json_integer_value (
                                 json_object_get (v, "parts_done")),
                             (long long) json_integer_value (
                                 json_object_get (v, "parts")));
            parts = pbuf;
        }
        printf ("%-9s %10s  %s%s%s%s\n", st ? st : "?",
                json_object_get (v, "size")
                ? tier_size_format ((uint64_t) json_integer_value (
                      json_object_get (v, "size")), a, sizeof (a)) : "-",
                path ? path : file ? file : "?",
                sha ? "  sha256:" : err ? "  " : "",
                sha ? sha : err ? err : "", parts);
    }
    json_decref (res);
    return CTL_OK;
}

/* flush (retry now, wait briefly) and wait (until everything is on the
 * GFS, or --timeout): the job's outputs on this node.
 */
static int sync_cmd (struct ctl *ctl, const char *cmd, int argc,
                     char **argv, long timeout, bool flush)
{
    struct tier_conf *conf;
    json_t *res;
    long job;
    int pending, failed, conflicts;

    if (job_arg (ctl, cmd, argc, argv, &job, &timeout) < 0)
        return ctl_usage (ctl_cmd_find (cmd));
    if (!(conf = ctl_conf (ctl)))
        return CTL_ERROR;
    /* the agent answers within the timeout: let the call last longer */
    conf->agent_timeout_ms = (uint64_t) (timeout + 30) * 1000;
    if (!(res = ctl_call (ctl, json_pack ("{s:s s:i s:I s:b s:b}", "op",
                                          "job.stageout_sync", "job_id",
                                          (int) job, "timeout_ms",
                                          (json_int_t) timeout * 1000,
                                          "wait", 1, "flush", flush))))
        return CTL_ERROR;
    pending = (int) json_integer_value (json_object_get (res, "pending"));
    failed = (int) json_integer_value (json_object_get (res, "failed"));
    conflicts = (int) json_integer_value (json_object_get (res,
                                                           "conflicts"));
    if (ctl->json)
        ctl_print_json (res);
    else if (pending || failed) {
        const char *fp = json_string_value (json_object_get (res,
                                                             "first_path"));
        const char *fe = json_string_value (json_object_get (res,
                                                             "first_error"));
        printf ("job %ld on node %s: %d output file(s) not on the GFS yet "
                "(%d failed, %d in conflict); see tierctl outputs --job %ld\n",
                job, conf->node, pending + failed, failed, conflicts, job);
        if (fp)
            printf ("  first failed: %s: %s\n", fp, fe ? fe : "");
    }
    else
        printf ("job %ld on node %s: every output is on the GFS%s\n", job,
                conf->node, conflicts ? " (but some are in conflict: see "
                "tierctl outputs)" : "");
    json_decref (res);
    return pending || failed ? CTL_ERROR : CTL_OK;
}

int cmd_flush (struct ctl *ctl, int argc, char **argv)
{
    return sync_cmd (ctl, "flush", argc, argv, 30, true);
}

int cmd_wait (struct ctl *ctl, int argc, char **argv)
{
    return sync_cmd (ctl, "wait", argc, argv, 86400, false);
}
