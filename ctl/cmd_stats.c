/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_stats.c - tierctl stats: a batch's (or a job's) counters over all
 * of its nodes, from the snapshots the agents publish in
 * SharedStateDir/users/USER/stats/BATCH/NODE.json (doc/stats.md).
 *
 * The files are read with the caller's own credentials: they sit in the
 * user's 0700 directory, so only the owner (and root) can read them.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/conf.h"
#include "lib/counters.h"
#include "lib/error.h"
#include "lib/state.h"
#include "lib/units.h"
#include "ctl.h"

#define NODES_MAX 4096
#define SNAP_MAX (16 << 20) /* bytes of one node's snapshot */

struct node_snap {
    char node[64];
    struct tier_counters c;
    int running;
    int64_t time;
    json_t *series;
};

struct agg {
    uint32_t batch;
    char user[64];
    struct tier_counters total;
    struct node_snap *nodes;
    int nnodes;
    int jobs, running;
    int64_t updated;
};

static void counters_from_json (json_t *o, struct tier_counters *c)
{
    memset (c, 0, sizeof (*c));
    for (int r = 0; r < TIER_ROLE_COUNT; r++) {
        json_t *role = json_object_get (o, tier_role_name (r));
        for (int k = 0; k < TIER_CTR_COUNT; k++) {
            json_t *v = json_object_get (role, tier_ctr_name (k));
            if (json_is_integer (v) && json_integer_value (v) >= 0)
                c->v[r][k] = (uint64_t) json_integer_value (v);
        }
    }
}

static const char *user_name (struct ctl *ctl, const char *user)
{
    static char buf[64];
    struct passwd *pw;

    if (user)
        return user;
    if (!(pw = getpwuid (getuid ())))
        return NULL;
    (void) snprintf (buf, sizeof (buf), "%s", pw->pw_name);
    return buf;
}

static int stats_dir (struct ctl *ctl, const char *user, char *out,
                      size_t size)
{
    struct tier_conf *conf = ctl_conf (ctl);

    if (!conf)
        return -1;
    if (!conf->shared_state_dir[0]) {
        fprintf (stderr, "tierctl stats: SharedStateDir is not set in %s\n",
                 ctl->conf_path);
        return -1;
    }
    if (tier_state_user_path (conf->shared_state_dir, user, TIER_STATE_STATS,
                              out, size)
        < 0) {
        fprintf (stderr, "tierctl stats: '%s' is not a user name\n", user);
        return -1;
    }
    return 0;
}

/* Read one node's snapshot (JSON); NULL on any problem (reported).  The
 * user's own directory: a FIFO there must not hang root's tierctl
 * (O_NONBLOCK, then only a regular file is read, at most SNAP_MAX
 * bytes), a name must not reach the terminal unescaped. */
static json_t *read_snap (int dirfd, const char *name)
{
    char shown[3 * NAME_MAX];
    json_error_t jerr;
    struct stat st;
    json_t *o;
    int fd = openat (dirfd, name,
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    FILE *f;

    (void) tier_text_escape (name, shown, sizeof (shown));
    if (fd >= 0
        && (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)
            || st.st_size > SNAP_MAX)) {
        fprintf (stderr, "tierctl stats: %s: not a snapshot (%s)\n", shown,
                 S_ISREG (st.st_mode) ? "too large" : "not a regular file");
        close (fd);
        return NULL;
    }
    if (fd < 0 || !(f = fdopen (fd, "r"))) {
        if (fd >= 0)
            close (fd);
        return NULL;
    }
    o = json_loadf (f, 0, &jerr);
    fclose (f);
    if (!o || !json_is_object (o)) {
        /* the contents are never echoed: only the file and the problem */
        fprintf (stderr, "tierctl stats: %s: not a snapshot (line %d)\n", shown,
                 jerr.line);
        json_decref (o);
        return NULL;
    }
    return o;
}

/* Aggregate BATCH (job_id 0), or only JOB within it. */
static int load_batch (const char *dir, uint32_t batch, uint32_t job,
                       struct agg *ag)
{
    char path[PATH_MAX];
    struct dirent *de;
    DIR *d;
    int dfd;

    (void) snprintf (path, sizeof (path), "%s/%u", dir, batch);
    if (!(d = opendir (path)))
        return -1;
    dfd = dirfd (d);
    ag->batch = batch;
    while ((de = readdir (d))) {
        size_t n = strlen (de->d_name);
        struct node_snap *ns;
        json_t *o, *jobs, *ctr;
        const char *key;
        json_t *val;

        if (de->d_name[0] == '.' || n < 6 || strcmp (de->d_name + n - 5,
                                                     ".json"))
            continue;
        if (!(o = read_snap (dfd, de->d_name)))
            continue;
        if (ag->nnodes == NODES_MAX) {
            json_decref (o);
            break;
        }
        jobs = json_object_get (o, "jobs");
        if (job) {
            char k[16];
            (void) snprintf (k, sizeof (k), "%u", job);
            if (!(val = json_object_get (jobs, k))) {
                json_decref (o);
                continue;
            }
            ctr = json_object_get (val, "counters");
        }
        else
            ctr = json_object_get (o, "counters");
        ns = &ag->nodes[ag->nnodes++];
        memset (ns, 0, sizeof (*ns));
        {
            char node[NAME_MAX + 1];
            (void) snprintf (node, sizeof (node), "%.*s", (int) (n - 5),
                             de->d_name);
            (void) tier_text_escape (node, ns->node, sizeof (ns->node));
        }
        counters_from_json (ctr, &ns->c);
        tier_counters_merge (&ag->total, &ns->c);
        ns->time = json_integer_value (json_object_get (o, "time"));
        ns->running = (int) json_integer_value (json_object_get (o,
                                                                "running"));
        ns->series = json_incref (json_object_get (o, "series"));
        if (ns->time > ag->updated)
            ag->updated = ns->time;
        json_object_foreach (jobs, key, val) {
            if (job && strtoul (key, NULL, 10) != job)
                continue;
            ag->jobs++;
            if (!strcmp (json_string_value (json_object_get (val, "state"))
                         ? json_string_value (json_object_get (val, "state"))
                         : "", "running"))
                ag->running++;
        }
        json_decref (o);
    }
    closedir (d);
    return 0;
}

/* The batch a job belongs to: search the user's batches for it. */
static int find_job (const char *dir, uint32_t job, uint32_t *batch)
{
    struct dirent *de;
    DIR *d = opendir (dir);
    int found = -1;

    if (!d)
        return -1;
    while (found < 0 && (de = readdir (d))) {
        char path[PATH_MAX + 300];
        struct dirent *ne;
        DIR *nd;
        char *end;
        unsigned long b = strtoul (de->d_name, &end, 10);

        if (*end || b == 0)
            continue;
        (void) snprintf (path, sizeof (path), "%s/%s", dir, de->d_name);
        if (!(nd = opendir (path)))
            continue;
        while (found < 0 && (ne = readdir (nd))) {
            json_t *o;
            char k[16];
            if (ne->d_name[0] == '.')
                continue;
            if (!(o = read_snap (dirfd (nd), ne->d_name)))
                continue;
            (void) snprintf (k, sizeof (k), "%u", job);
            if (json_object_get (json_object_get (o, "jobs"), k)) {
                *batch = (uint32_t) b;
                found = 0;
            }
            json_decref (o);
        }
        closedir (nd);
    }
    closedir (d);
    return found;
}

static json_t *role_json (const struct tier_counters *c, int r)
{
    json_t *o = json_object ();
    uint64_t h = r < 0 ? tier_counters_total (c, TIER_CTR_HITS)
                       : c->v[r][TIER_CTR_HITS];
    uint64_t m = r < 0 ? tier_counters_total (c, TIER_CTR_MISSES)
                       : c->v[r][TIER_CTR_MISSES];

    for (int k = 0; k < TIER_CTR_COUNT; k++)
        json_object_set_new (o, tier_ctr_name (k), json_integer (
            (json_int_t) (r < 0 ? tier_counters_total (c, k) : c->v[r][k])));
    json_object_set_new (o, "hit_rate", h + m ? json_real ((double) h
                                                           / (double) (h + m))
                                              : json_null ());
    return o;
}

static json_t *agg_json (const struct agg *ag, uint32_t job)
{
    json_t *o = json_pack ("{s:I s:s s:i s:i s:I}",
                           "batch", (json_int_t) ag->batch,
                           "user", ag->user,
                           "jobs", ag->jobs,
                           "running", ag->running,
                           "updated", (json_int_t) ag->updated);
    json_t *roles = json_object (), *nodes = json_object ();

    if (job)
        json_object_set_new (o, "job", json_integer (job));
    for (int r = 0; r < TIER_ROLE_COUNT; r++)
        json_object_set_new (roles, tier_role_name (r),
                             role_json (&ag->total, r));
    json_object_set_new (o, "roles", roles);
    json_object_set_new (o, "total", role_json (&ag->total, -1));
    for (int i = 0; i < ag->nnodes; i++) {
        json_t *n = role_json (&ag->nodes[i].c, -1);
        json_object_set_new (n, "running", json_integer (ag->nodes[i].running));
        json_object_set_new (n, "updated", json_integer (ag->nodes[i].time));
        json_object_set_new (nodes, ag->nodes[i].node, n);
    }
    json_object_set_new (o, "nodes", nodes);
    return o;
}

static const char *bytes (uint64_t v, char *buf, size_t size)
{
    return tier_size_format (v, buf, size);
}

static const char *rate (uint64_t h, uint64_t m, char *buf, size_t size)
{
    if (h + m == 0)
        return "-";
    (void) snprintf (buf, size, "%.1f%%", 100.0 * (double) h
                                          / (double) (h + m));
    return buf;
}

static void print_row (const char *name, const struct tier_counters *c, int r)
{
#define V(k) (r < 0 ? tier_counters_total (c, k) : c->v[r][k])
    char a[32], b[32], d[32], e[32], f[32], g[32];

    printf ("%-10s %8llu %8llu %8llu %7s %8llu %11s %11s %11s %11s %11s %7llu\n",
            name, (unsigned long long) V (TIER_CTR_OPS),
            (unsigned long long) V (TIER_CTR_HITS),
            (unsigned long long) V (TIER_CTR_MISSES),
            rate (V (TIER_CTR_HITS), V (TIER_CTR_MISSES), a, sizeof (a)),
            (unsigned long long) V (TIER_CTR_FALLTHROUGHS),
            bytes (V (TIER_CTR_BYTES_BB), b, sizeof (b)),
            bytes (V (TIER_CTR_BYTES_NVDIMM), d, sizeof (d)),
            bytes (V (TIER_CTR_GFS_BYTES_READ), e, sizeof (e)),
            bytes (V (TIER_CTR_GFS_BYTES_WRITTEN), f, sizeof (f)),
            bytes (V (TIER_CTR_GFS_BYTES_AVOIDED), g, sizeof (g)),
            (unsigned long long) V (TIER_CTR_GFS_META_OPS));
#undef V
}

static void print_header (const char *first)
{
    printf ("%-10s %8s %8s %8s %7s %8s %11s %11s %11s %11s %11s %7s\n",
            first, "ops", "hits", "misses", "hit%", "fallthr", "BB",
            "NVDIMM", "GFS read", "GFS write", "GFS saved", "meta");
}

static void print_agg (const struct agg *ag, uint32_t job, bool per_node)
{
    const struct tier_counters *c = &ag->total;
    char when[32], a[32], b[32];
    time_t t = (time_t) ag->updated;
    struct tm tm;

    localtime_r (&t, &tm);
    strftime (when, sizeof (when), "%Y-%m-%d %H:%M:%S", &tm);
    if (job)
        printf ("job %u of batch %u (%s): %d node(s), %s, updated %s\n",
                job, ag->batch, ag->user, ag->nnodes,
                ag->running ? "running" : "ended", when);
    else
        printf ("batch %u (%s): %d job(s) on %d node(s), %d running, "
                "updated %s\n", ag->batch, ag->user, ag->jobs, ag->nnodes,
                ag->running, when);
    print_header ("role");
    for (int r = 0; r < TIER_ROLE_COUNT; r++)
        print_row (tier_role_name (r), c, r);
    print_row ("total", c, -1);
    printf ("stage-in:  %llu files, %s, %.1f s    stage-out: %llu files, %s, "
            "%.1f s\n",
            (unsigned long long) tier_counters_total (c,
                                                      TIER_CTR_STAGE_IN_FILES),
            bytes (tier_counters_total (c, TIER_CTR_STAGE_IN_BYTES), a,
                   sizeof (a)),
            tier_counters_total (c, TIER_CTR_STAGE_IN_MS) / 1000.0,
            (unsigned long long) tier_counters_total (c,
                                                      TIER_CTR_STAGE_OUT_FILES),
            bytes (tier_counters_total (c, TIER_CTR_STAGE_OUT_BYTES), b,
                   sizeof (b)),
            tier_counters_total (c, TIER_CTR_STAGE_OUT_MS) / 1000.0);
    printf ("migrations: %llu pending, %llu failed, %llu conflicts\n",
            (unsigned long long) tier_counters_total (
                c, TIER_CTR_MIGRATIONS_PENDING),
            (unsigned long long) tier_counters_total (
                c, TIER_CTR_MIGRATIONS_FAILED),
            (unsigned long long) tier_counters_total (c, TIER_CTR_CONFLICTS));
    printf ("scratch:   %llu files, %s at job end, peak %s, %llu copy-ups\n",
            (unsigned long long) tier_counters_total (c,
                                                      TIER_CTR_SCRATCH_FILES),
            bytes (tier_counters_total (c, TIER_CTR_SCRATCH_BYTES), a,
                   sizeof (a)),
            bytes (tier_counters_total (c, TIER_CTR_SCRATCH_PEAK), b,
                   sizeof (b)),
            (unsigned long long) tier_counters_total (c, TIER_CTR_COPYUPS));
    if (per_node) {
        printf ("\n");
        print_header ("node");
        for (int i = 0; i < ag->nnodes; i++)
            print_row (ag->nodes[i].node, &ag->nodes[i].c, -1);
    }
}

int stats_svg (const struct agg *ag, const char *path);

static void agg_free (struct agg *ag)
{
    for (int i = 0; i < ag->nnodes; i++)
        json_decref (ag->nodes[i].series);
    free (ag->nodes);
}

static int list_batches (const char *dir, const char *user, bool json)
{
    struct dirent *de;
    DIR *d = opendir (dir);
    json_t *arr = json_array ();

    if (!d) {
        fprintf (stderr, "tierctl stats: %s: %s\n", dir, strerror (errno));
        json_decref (arr);
        return CTL_ERROR;
    }
    if (!json)
        printf ("%-10s %6s %6s %8s %8s %8s %11s\n", "BATCH", "NODES", "JOBS",
                "RUNNING", "HITS", "MISSES", "GFS saved");
    while ((de = readdir (d))) {
        struct agg ag = { 0 };
        char *end, b[32];
        unsigned long id = strtoul (de->d_name, &end, 10);

        if (*end || id == 0)
            continue;
        if (!(ag.nodes = calloc (NODES_MAX, sizeof (*ag.nodes))))
            break;
        (void) snprintf (ag.user, sizeof (ag.user), "%s", user);
        if (load_batch (dir, (uint32_t) id, 0, &ag) == 0) {
            if (json)
                json_array_append_new (arr, agg_json (&ag, 0));
            else
                printf ("%-10lu %6d %6d %8d %8llu %8llu %11s\n", id,
                        ag.nnodes, ag.jobs, ag.running,
                        (unsigned long long) tier_counters_total (
                            &ag.total, TIER_CTR_HITS),
                        (unsigned long long) tier_counters_total (
                            &ag.total, TIER_CTR_MISSES),
                        bytes (tier_counters_total (
                            &ag.total, TIER_CTR_GFS_BYTES_AVOIDED), b,
                            sizeof (b)));
        }
        agg_free (&ag);
    }
    closedir (d);
    if (json)
        ctl_print_json (arr);
    json_decref (arr);
    return CTL_OK;
}

int cmd_stats (struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "batch", required_argument, NULL, 'b' },
        { "job", required_argument, NULL, 'J' },
        { "user", optional_argument, NULL, 'u' },
        { "nodes", no_argument, NULL, 'n' },
        { "svg", required_argument, NULL, 's' },
        { "json", no_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const struct ctl_cmd *me = ctl_cmd_find ("stats");
    const char *user = NULL, *svg = NULL;
    uint32_t batch = 0, job = 0;
    bool per_node = false, list = false;
    char dir[PATH_MAX];
    struct agg ag = { 0 };
    int c, rc = CTL_OK;

    while ((c = getopt_long (argc, argv, "+b:J:u::ns:j", longopts, NULL))
           != -1) {
        char *end;
        unsigned long v;
        switch (c) {
            case 'b':
            case 'J':
                v = strtoul (optarg, &end, 10);
                if (*end || v == 0 || v > 0xfffffff0UL) {
                    fprintf (stderr, "tierctl stats: '%s' is not a job id\n",
                             optarg);
                    return CTL_USAGE;
                }
                if (c == 'b')
                    batch = (uint32_t) v;
                else
                    job = (uint32_t) v;
                break;
            case 'u':
                user = optarg;
                list = true;
                break;
            case 'n': per_node = true; break;
            case 's': svg = optarg; break;
            case 'j': ctl->json = true; break;
            default: return ctl_usage (me);
        }
    }
    if (optind < argc || (!batch && !job && !list) || (batch && job))
        return ctl_usage (me);
    if (!(user = user_name (ctl, user))) {
        fprintf (stderr, "tierctl stats: who are you?\n");
        return CTL_ERROR;
    }
    if (stats_dir (ctl, user, dir, sizeof (dir)) < 0)
        return CTL_ERROR;
    if (list && !batch && !job)
        return list_batches (dir, user, ctl->json);
    if (job && find_job (dir, job, &batch) < 0) {
        fprintf (stderr, "tierctl stats: job %u: no statistics for %s (not "
                 "%s's job, or too old)\n", job, user, user);
        return CTL_ERROR;
    }
    if (!(ag.nodes = calloc (NODES_MAX, sizeof (*ag.nodes))))
        return CTL_ERROR;
    (void) snprintf (ag.user, sizeof (ag.user), "%s", user);
    if (load_batch (dir, batch, job, &ag) < 0 || ag.nnodes == 0) {
        if (errno == EACCES)
            fprintf (stderr, "tierctl stats: batch %u: permission denied\n",
                     batch);
        else
            fprintf (stderr, "tierctl stats: batch %u: no statistics for %s "
                     "(not %s's batch, or too old)\n", batch, user, user);
        agg_free (&ag);
        return CTL_ERROR;
    }
    if (ctl->json) {
        json_t *o = agg_json (&ag, job);
        ctl_print_json (o);
        json_decref (o);
    }
    else
        print_agg (&ag, job, per_node);
    if (svg && stats_svg (&ag, svg) < 0) {
        fprintf (stderr, "tierctl stats: %s: %s\n", svg, strerror (errno));
        rc = CTL_ERROR;
    }
    agg_free (&ag);
    return rc;
}

/* An SVG of the batch over time: per node, cumulative hits and misses
 * (top), and bytes held on the BB and NVDIMM tiers (bottom).
 */
int stats_svg (const struct agg *ag, const char *path)
{
    static const char *colors[] = { "#1f77b4", "#d62728", "#2ca02c",
                                    "#ff7f0e", "#9467bd", "#8c564b" };
    const int W = 900, H = 300, L = 70, R = 160, T = 30, B = 40;
    int64_t t0 = INT64_MAX, t1 = 0;
    double ymax[2] = { 1, 1 };
    FILE *f;

    for (int i = 0; i < ag->nnodes; i++) {
        size_t j;
        json_t *row;
        json_array_foreach (ag->nodes[i].series, j, row) {
            int64_t t = json_integer_value (json_array_get (row, 0));
            double hm = (double) (json_integer_value (json_array_get (row, 1))
                                  + json_integer_value (json_array_get (row,
                                                                        2)));
            double by = (double) (json_integer_value (json_array_get (row, 3))
                                  + json_integer_value (json_array_get (row,
                                                                        4)));
            if (t < t0) t0 = t;
            if (t > t1) t1 = t;
            if (hm > ymax[0]) ymax[0] = hm;
            if (by > ymax[1]) ymax[1] = by;
        }
    }
    if (t0 == INT64_MAX)
        t0 = t1 = 0;
    if (t1 <= t0)
        t1 = t0 + 1;
    if (!(f = fopen (path, "we")))
        return -1;
    fprintf (f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
             "height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n",
             W, 2 * H);
    fprintf (f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    for (int p = 0; p < 2; p++) {
        int y0 = p * H;
        fprintf (f, "<text x=\"%d\" y=\"%d\" font-size=\"14\">batch %u: %s"
                 "</text>\n", L, y0 + 18, ag->batch,
                 p == 0 ? "hits (solid) and misses (dashed) per node"
                        : "bytes on the BB (solid) and NVDIMM (dashed) tiers "
                          "per node");
        fprintf (f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                 "fill=\"none\" stroke=\"#888\"/>\n", L, y0 + T, W - L - R,
                 H - T - B);
        fprintf (f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>"
                 "\n<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>\n",
                 L - 5, y0 + T + 10, ymax[p], L - 5, y0 + H - B);
        fprintf (f, "<text x=\"%d\" y=\"%d\">0 s</text><text x=\"%d\" "
                 "y=\"%d\" text-anchor=\"end\">%lld s</text>\n", L,
                 y0 + H - B + 15, W - R, y0 + H - B + 15,
                 (long long) (t1 - t0));
        for (int i = 0; i < ag->nnodes; i++) {
            const char *col = colors[i % 6];
            for (int line = 0; line < 2; line++) {
                size_t j;
                json_t *row;
                int idx = p == 0 ? 1 + line : 3 + line;
                fprintf (f, "<polyline fill=\"none\" stroke=\"%s\" "
                         "stroke-width=\"2\"%s points=\"", col,
                         line ? " stroke-dasharray=\"6,3\"" : "");
                json_array_foreach (ag->nodes[i].series, j, row) {
                    double x = L + (double) (json_integer_value (
                        json_array_get (row, 0)) - t0) * (W - L - R)
                        / (double) (t1 - t0);
                    double y = y0 + H - B - (double) json_integer_value (
                        json_array_get (row, idx)) * (H - T - B) / ymax[p];
                    fprintf (f, "%.1f,%.1f ", x, y);
                }
                fprintf (f, "\"/>\n");
            }
            fprintf (f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n",
                     W - R + 10, y0 + T + 15 + 15 * i, col,
                     ag->nodes[i].node);
        }
    }
    fprintf (f, "</svg>\n");
    return fclose (f) == 0 ? 0 : -1;
}
