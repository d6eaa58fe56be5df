/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage.c - stage-in: copy a job's endpoint inputs to the node's fast tier
 *
 * The plugin asks (job.stage_in, root only) as early as it can: from the
 * prolog (with PrologFlags=Alloc at allocation, on every node), else when
 * the first step registers.  The agent starts a stager per part of the
 * job's stage-in (stage_child.c: root, its own process group, so that
 * scancel can stop it), which copies each input, as the user, into
 * NvdimmDir/JOBID/stage/K/ and writes the progress and the outcome to
 * NamespaceDir/JOBID/stage.status, which the plugin polls before the
 * tasks start; it then binds each copy read-only over its GFS path
 * inside the job's namespace.  A snapshot: later changes on the GFS are
 * not seen by the job.
 *
 * An item URL=PATH (s3://, https://, http://) is fetched too
 * (stage_url.c); where PATH does not exist an empty file is made there as
 * the mount point, listed in NamespaceDir/JOBID/stage.made, and removed
 * at job end (as the user again) if it still is that empty file.  URLs
 * skip the node's stage cache (the library exposes no ETag to key it by).
 *
 * A job's items come in parts: those of the first request (the prolog's
 * or the first step's), then what a later one adds (endpoint policies
 * with stage = in, known once the first step registered).  Each part has
 * its own stager and files (stage.status, stage.1.status, ...);
 * NamespaceDir/JOBID/stage.items lists every item in the order of the
 * stage directories.
 *
 * This file is the agent's side: the plan, op_stage_in, and at job end
 * stopping what still runs, counting it, and dropping the made files and
 * the user's stage cache.  Calls stage_child.c (the stager's main),
 * stage_url.c (the mount point remover's), agent/child.h to start both,
 * streams.c for the copier's GFS stream channel and bandwidth, the store
 * and ctr.c.  Module map: stage.h.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "lib/units.h"
#include "lib/url.h"
#include "agent.h"
#include "child.h"
#include "stage_msg.h"
#include "streams.h"
#include "stage.h"

/* How long the mount point remover may take (the GFS answering). */
#define UNMAKE_TIMEOUT_MS 5000

/* How often a part's stager is started again after it ended unfinished
 * (op_stage_restart). */
#define STAGE_RESTARTS_MAX 2

/* ------------------------------------------------------- the plan */

/* NamespaceDir/JOBID/stage.items: {"items": [...], "parts": N}, every
 * item of the job's stage-in in the order of its stage directories
 * (stage/K/ holds item K), and how many parts started. */
static json_t *plan_load (const struct tier_conf *conf, uint32_t job)
{
    static char buf[STAGE_ITEMS_MAX * (2 * PATH_MAX + 8) + 64];
    json_error_t jerr;
    json_t *o;

    if (tier_ns_read (conf->namespace_dir, job, TIER_NS_STAGE_ITEMS, buf,
                      sizeof (buf)) < 0
        || !(o = json_loads (buf, 0, &jerr)))
        return NULL;
    if (!json_is_array (json_object_get (o, "items"))
        || !json_is_integer (json_object_get (o, "parts"))) {
        json_decref (o);
        return NULL;
    }
    return o;
}

/* The stage directory of request item i (a string of items): one known
 * already (in known, or earlier in this request), or -1. */
static json_int_t known_index (json_t *known, json_t *items, json_t *index,
                               size_t i, bool legacy)
{
    const char *s = json_string_value (json_array_get (items, i));
    json_int_t k = legacy ? (json_int_t) i : -1;
    size_t j;
    json_t *v;

    json_array_foreach (known, j, v) if (json_is_string (v)
                                         && !strcmp (json_string_value (v), s))
        k = (json_int_t) j;
    /* the same item twice in one request: one directory */
    for (size_t m = 0; k < 0 && m < i; m++)
        if (!strcmp (json_string_value (json_array_get (items, m)), s))
            k = json_integer_value (json_array_get (index, m));
    return k;
}

/* Which of the request's items (parsed into r, in the order of the
 * request's array items) are staged already: the reply's index (the
 * stage directory of each); r keeps only the new ones, which go to
 * directories after the known ones (r->base) as part r->part. */
static json_t *stage_plan (struct stage_req *r, json_t *items,
                           tier_error_t *error)
{
    const struct tier_conf *conf = r->conf;
    json_t *plan = plan_load (conf, r->job_id), *known, *index;
    size_t nknown, i;
    int n = 0, fresh = 0;
    char buf[64], name[TIER_NS_NAME_MAX];
    bool legacy;

    known = plan ? json_object_get (plan, "items") : NULL;
    nknown = known ? json_array_size (known) : 0;
    r->part = plan ? (int) json_integer_value (json_object_get (plan,
                                                                "parts"))
                   : 0;
    /* a stage-in without a plan: an older agent's, items unknown (as
     * before: once per job, the items in request order) */
    tier_ns_part_name (0, TIER_NS_STAGE_STATUS, name, sizeof (name));
    legacy = !plan && tier_ns_read (conf->namespace_dir, r->job_id, name,
                                    buf, sizeof (buf)) == 0;
    r->base = (int) nknown;
    if (!(index = json_array ()))
        goto nomem;
    for (i = 0; i < json_array_size (items); i++) {
        json_int_t k = known_index (known, items, index, i, legacy);

        if (k < 0) {
            k = (json_int_t) (nknown + (size_t) fresh);
            if (n != (int) i) {
                memmove (r->items[n], r->items[i], PATH_MAX);
                memmove (r->urls[n], r->urls[i], PATH_MAX);
            }
            n++;
            fresh++;
        }
        if (json_array_append_new (index, json_integer (k)) < 0)
            goto nomem;
    }
    json_decref (plan);
    if (nknown + (size_t) fresh > STAGE_ITEMS_MAX) {
        json_decref (index);
        errno = E2BIG;
        tier_errprintf (error, "a job stages at most %d items",
                        STAGE_ITEMS_MAX);
        return NULL;
    }
    r->nitems = n;
    if (legacy)
        r->part = 1;
    return index;
nomem:
    json_decref (plan);
    json_decref (index);
    errno = ENOMEM;
    tier_errprintf (error, "out of memory");
    return NULL;
}

/* Record the new part before its stager starts. */
static int stage_plan_commit (const struct stage_req *r, json_t *items,
                              json_t *index, tier_error_t *error)
{
    json_t *plan = plan_load (r->conf, r->job_id), *all;
    json_t *old_bases = NULL, *old_restarts = NULL;
    char *text;
    size_t i;

    all = plan ? json_incref (json_object_get (plan, "items")) : json_array ();
    if (plan) {
        old_bases = json_incref (json_object_get (plan, "bases"));
        old_restarts = json_incref (json_object_get (plan, "restarts"));
    }
    json_decref (plan);
    if (!all)
        goto nomem;
    for (i = 0; i < json_array_size (items); i++) {
        json_int_t k = json_integer_value (json_array_get (index, i));
        if ((size_t) k == json_array_size (all)
            && json_array_append (all, json_array_get (items, i)) < 0) {
            json_decref (all);
            json_decref (old_bases);
            json_decref (old_restarts);
            goto nomem;
        }
    }
    /* each part's first stage directory, and how often its stager was
     * started again (op_stage_restart); a plan of an older agent has
     * none, and its parts are not started again */
    if (!json_is_array (old_bases) || !json_is_array (old_restarts)
        || json_array_size (old_bases) != (size_t) r->part
        || json_array_size (old_restarts) != (size_t) r->part) {
        json_decref (old_bases);
        json_decref (old_restarts);
        old_bases = r->part == 0 ? json_array () : NULL;
        old_restarts = r->part == 0 ? json_array () : NULL;
    }
    if (old_bases
        && (json_array_append_new (old_bases, json_integer (r->base)) < 0
            || json_array_append_new (old_restarts, json_integer (0)) < 0)) {
        json_decref (old_bases);
        json_decref (old_restarts);
        old_bases = old_restarts = NULL;
    }
    plan = json_pack ("{s:o s:i s:I s:I s:s}", "items", all, "parts",
                      r->part + 1, "uid", (json_int_t) r->uid, "gid",
                      (json_int_t) r->gid, "user", r->user);
    if (plan && old_bases) {
        int rc = json_object_set_new (plan, "bases", old_bases);

        if ((json_object_set_new (plan, "restarts", old_restarts) | rc) < 0) {
            json_decref (plan);
            plan = NULL;
        }
    }
    else if (!plan) {
        json_decref (old_bases);
        json_decref (old_restarts);
    }
    text = plan ? json_dumps (plan, JSON_COMPACT) : NULL;
    json_decref (plan);
    if (!text)
        goto nomem;
    (void) tier_ns_write (r->conf->namespace_dir, r->job_id,
                          TIER_NS_STAGE_ITEMS, text);
    free (text);
    return 0;
nomem:
    errno = ENOMEM;
    return tier_errprintf (error, "out of memory");
}

/* ------------------------------------------------------- op_stage_in */

/* The request's items into r: absolute paths, or URL=PATH (the URL an
 * input's: one object, no secrets in it; PATH as any other). */
static int parse_items (struct stage_req *r, json_t *items, tier_error_t *error)
{
    size_t i;
    json_t *it;

    json_array_foreach (items, i, it) {
        const char *s = json_string_value (it);
        char target[PATH_MAX], *url = r->urls[r->nitems];

        if (s && tier_url_item_is_url (s)) {
            struct tier_url *u;
            tier_error_t e;

            if (tier_url_item_split (s, url, PATH_MAX, target, sizeof (target))
                < 0) {
                errno = EINVAL;
                return tier_errprintf (error,
                                       "stage-in item %zu is not "
                                       "URL=PATH",
                                       i);
            }
            if (!(u = tier_url_parse_input (url, &e))) {
                errno = EINVAL;
                return tier_errprintf (error, "stage-in item %zu: %s", i,
                                       e.text);
            }
            tier_url_destroy (u);
            s = target;
        }
        if (!s || s[0] != '/' || tier_path_has_dotdot (s)
            || tier_path_normalize (s, r->items[r->nitems], PATH_MAX) < 0
            || !strcmp (r->items[r->nitems], "/")) {
            errno = EINVAL;
            return tier_errprintf (error,
                                   "stage-in item %zu is not an "
                                   "absolute path",
                                   i);
        }
        r->nitems++;
    }
    return 0;
}

/* The user the request names, and the copier's credentials: the job's
 * group list when the agent has the job, else the user's groups. */
static int stage_cred (struct agent *a, struct stage_req *r, const char *user,
                       tier_error_t *error)
{
    struct store_job job;
    struct passwd *pw;
    tier_error_t e;

    if (!(pw = getpwuid (r->uid)) || strcmp (pw->pw_name, user)
        || strlen (user) >= sizeof (r->user)) {
        errno = EINVAL;
        return tier_errprintf (error, "uid %u is not %s", (unsigned) r->uid,
                               user);
    }
    (void) snprintf (r->user, sizeof (r->user), "%s", user);
    if (store_job_latest (a->store, r->job_id, &job, &e) == 0
        && job.uid == r->uid && job.gid == r->gid
        && jobs_cred (&job, &r->cred) == 0)
        return 0;
    tier_cred_init (&r->cred, r->uid, r->gid);
    if (tier_cred_lookup (&r->cred, r->user) < 0) {
        if (errno == E2BIG)
            return tier_errprintf (error, "too many groups for %s", user);
        return tier_errprintf (error, "the groups of %s: %s", user,
                               strerror (errno));
    }
    return 0;
}

/* The stager's lines for the log. */
static void on_stager_msg (struct agent *a, struct child *c, int type,
                           json_t *body, int *fds, int nfds, void *owner)
{
    struct stagemsg m;
    tier_error_t e;

    (void) a;
    (void) fds;
    (void) nfds;
    (void) owner;
    if (stagemsg_unpack (type, body, &m, &e) < 0)
        tier_log (LOG_WARNING, "stager %d: %s", (int) child_pid (c), e.text);
    else if (m.type == STAGEMSG_LOG)
        tier_log (m.level, "%s", m.text);
    json_decref (body);
}

/* What the agent keeps of a running part. */
struct part {
    uint32_t job_id;
    int part;
    uint64_t ticket; /* the copier's GFS stream (streams.c), or 0 */
};

/* The stager ended: so did its copier, or it was stuck and abandoned
 * (stage_child.c: the part failed saying so), or the stager was stopped
 * at job end with the copier stuck -- whose GFS stream then no longer
 * counts. */
static void on_stager_done (struct agent *a, struct child *c, int status,
                            void *owner)
{
    struct part *p = owner;
    char why[128];

    (void) c;
    (void) status;
    (void) snprintf (why, sizeof (why),
                     "the stage-in of job %u ended, its copier is stuck "
                     "(abandoned)",
                     p->job_id);
    (void) streams_revoke (a, p->ticket, why);
    free (p);
}

struct held_ctx {
    struct agent *a;
    uint32_t except_job;
    int except_part;
    uint64_t sum;
};

static int held_cb (const struct store_job *j, void *arg)
{
    struct held_ctx *h = arg;
    char buf[1024], name[TIER_NS_NAME_MAX];

    if (j->state != STORE_JOB_RUNNING)
        return 0;
    for (int p = 0; p < STAGE_ITEMS_MAX; p++) {
        json_error_t jerr;
        json_t *o;

        tier_ns_part_name (p, TIER_NS_STAGE_STATUS, name, sizeof (name));
        if (tier_ns_read (h->a->conf->namespace_dir, j->job_id, name, buf,
                          sizeof (buf))
            < 0)
            break;
        if (j->job_id == h->except_job && p == h->except_part)
            continue;
        if ((o = json_loads (buf, 0, &jerr))) {
            json_int_t t = json_integer_value (json_object_get (o, "total"));
            if (t > 0)
                h->sum = tier_size_add (h->sum, (uint64_t) t);
            json_decref (o);
        }
    }
    return 0;
}

uint64_t stage_bytes_held (struct agent *a, uint32_t except_job,
                           int except_part)
{
    struct held_ctx h = { .a = a,
                          .except_job = except_job,
                          .except_part = except_part };
    tier_error_t e;

    (void) store_job_foreach (a->store, held_cb, &h, &e);
    return h.sum;
}

/* What part r may stage: NvdimmCapacity less the scratch reservations
 * of running jobs and what their other stage-ins hold (stage-in data is
 * on the NVDIMM tier as scratch is). */
static void stage_room (struct agent *a, struct stage_req *r)
{
    uint64_t cap = a->conf->nvdimm_capacity;

    r->capacity = cap;
    r->taken = 0;
    r->room = 0;
    if (!cap)
        return;
    r->taken = tier_size_add (agent_reserved (a),
                              stage_bytes_held (a, r->job_id, r->part));
    r->taken = tier_size_add (r->taken, migrate_held_ended (a, (uid_t) -1));
    /* nothing left is still a bound: 1 byte */
    r->room = r->taken < cap ? cap - r->taken : 1;
}

/* The part's stager; its pid in stage[.P].pid for stage_job_end. */
static int start_stager (struct agent *a, struct stage_req *r,
                         tier_error_t *error)
{
    struct stage_status st = { .state = "queued" };
    struct child_spec spec = {
        .name = "tierd-stage",
        .own_pgrp = true,
        .outlive = true,
        .proto = &stagemsg_stager_proto,
        .main = stager_main,
        .arg = r,
        .on_msg = on_stager_msg,
        .on_done = on_stager_done,
    };
    char what[64], name[TIER_NS_NAME_MAX], pidbuf[48];
    struct part *p;
    struct child *c;

    stage_status_write (a->conf, r->job_id, r->part, &st);
    stage_room (a, r);
    /* its copies take GFS streams and the user's bandwidth (streams.c):
     * the channel and the bucket exist before the stager is forked */
    (void) snprintf (what, sizeof (what), "stage-in of job %u", r->job_id);
    r->limit = streams_limit (a, r->uid, r->user);
    if (!(p = calloc (1, sizeof (*p)))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    p->job_id = r->job_id;
    p->part = r->part;
    r->streamfd = streams_client_id (a, r->uid, r->user, STREAMS_STAGE_IN, what,
                                     &p->ticket);
    spec.keep[spec.nkeep++] = r->streamfd;
    spec.owner = p;
    spec.for_uid = r->uid;
    (void) snprintf (spec.title, sizeof (spec.title),
                     "tierd-stage job %u "
                     "%s",
                     r->job_id, r->user);
    c = child_start (a, &spec, error);
    if (r->streamfd >= 0)
        close (r->streamfd); /* the copier's alone */
    if (!c) {
        (void) streams_revoke (a, p->ticket, NULL);
        free (p);
        st.state = "failed";
        st.error = error->text[0] ? error->text : "fork failed";
        stage_status_write (a->conf, r->job_id, r->part, &st);
        return -1;
    }
    /* with its start time: a pid alone may name another process by the
     * time it is read (part_stop, op_stage_restart, the tasks) */
    (void) snprintf (pidbuf, sizeof (pidbuf), "%d %llu\n", (int) child_pid (c),
                     tier_proc_start (child_pid (c)));
    tier_ns_part_name (r->part, TIER_NS_STAGE_PID, name, sizeof (name));
    (void) tier_ns_write (a->conf->namespace_dir, r->job_id, name, pidbuf);
    return 0;
}

json_t *op_stage_in (struct agent *a, struct conn *c, json_t *req,
                     tier_error_t *error)
{
    static struct stage_req r;
    json_int_t job_id = 0, uid = -1, gid = -1;
    const char *user = NULL;
    json_t *items = NULL, *index;
    char path[PATH_MAX];

    (void) c;
    memset (&r, 0, sizeof (r));
    if (json_unpack (req, "{s:I s:I s:I s:s s:o}", "job_id", &job_id, "uid",
                     &uid, "gid", &gid, "user", &user, "items", &items)
            < 0
        || job_id <= 0 || job_id > 0xfffffff0LL || uid < 0 || gid < 0
        || !json_is_array (items) || json_array_size (items) == 0
        || json_array_size (items) > STAGE_ITEMS_MAX) {
        errno = EINVAL;
        tier_errprintf (error,
                        "job.stage_in needs job_id, uid, gid, user "
                        "and 1..%d items",
                        STAGE_ITEMS_MAX);
        return NULL;
    }
    r.conf = a->conf;
    r.job_id = (uint32_t) job_id;
    r.uid = (uid_t) uid;
    r.gid = (gid_t) gid;
    if (parse_items (&r, items, error) < 0)
        return NULL;
    /* once per job and item: a later request (another step, the prolog
     * and then the first step) finds what is staged already; what it
     * adds (the endpoint policies' inputs) is a part of its own */
    if (!(index = stage_plan (&r, items, error)))
        return NULL;
    if (r.nitems == 0)
        return json_pack ("{s:I s:b s:o s:i}", "job_id", job_id, "started",
                          0, "index", index, "parts", r.part);
    if (stage_cred (a, &r, user, error) < 0)
        goto error;
    (void) snprintf (path, sizeof (path), "%s/%u", a->conf->namespace_dir,
                     r.job_id);
    (void) mkdir (path, 0700);
    if (stage_plan_commit (&r, items, index, error) < 0
        || start_stager (a, &r, error) < 0)
        goto error;
    tier_log (LOG_INFO, "job %u: staging in %d item(s)%s", r.job_id, r.nitems,
              r.part ? " more" : "");
    return json_pack ("{s:I s:b s:o s:i}", "job_id", job_id, "started", 1,
                      "index", index, "parts", r.part + 1);
error:
    json_decref (index);
    return NULL;
}

/* ------------------------------------------------------- restart */

/* Part part's stager as its pid file names it: pid and start time. */
static int part_pid_read (struct agent *a, uint32_t job_id, int part,
                          pid_t *pid, unsigned long long *start)
{
    char buf[64], name[TIER_NS_NAME_MAX];
    long p = 0;

    tier_ns_part_name (part, TIER_NS_STAGE_PID, name, sizeof (name));
    if (tier_ns_read (a->conf->namespace_dir, job_id, name, buf, sizeof (buf))
            < 0
        || sscanf (buf, "%ld %llu", &p, start) != 2 || p <= 1
        || p > INT32_MAX) {
        errno = ENOENT;
        return -1;
    }
    *pid = (pid_t) p;
    return 0;
}

/* Is pid, started at start, the stager (alive, not a zombie, named
 * tierd-stage)?  A pid the kernel gave again has another start. */
static bool stager_alive (pid_t pid, unsigned long long start)
{
    char path[64], buf[512], *p;
    ssize_t n;
    int fd;

    if (start == 0 || tier_proc_start (pid) != start)
        return false;
    (void) snprintf (path, sizeof (path), "/proc/%d/stat", (int) pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return errno != ENOENT && errno != ESRCH;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* "PID (COMM) S ...": the comm may hold anything, the state follows
     * its last ')' */
    if (!(p = strrchr (buf, ')')) || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
        return false;
    *p = '\0';
    return (p = strchr (buf, '(')) && !strcmp (p + 1, "tierd-stage");
}

/* Part p of the plan as the request it was: its items (from the plan's
 * items, between its base and the next part's), user and credentials. */
static int part_req (struct agent *a, json_t *plan, int p, struct stage_req *r,
                     tier_error_t *error)
{
    json_t *bases = json_object_get (plan, "bases");
    json_t *all = json_object_get (plan, "items"), *items;
    json_int_t base = json_integer_value (json_array_get (bases, (size_t) p));
    json_int_t end = (size_t) p + 1 < json_array_size (bases)
                         ? json_integer_value (json_array_get (bases,
                                                               (size_t) p + 1))
                         : (json_int_t) json_array_size (all);
    const char *user = json_string_value (json_object_get (plan, "user"));
    json_int_t uid = json_integer_value (json_object_get (plan, "uid"));
    json_int_t gid = json_integer_value (json_object_get (plan, "gid"));
    int rc;

    if (base < 0 || end <= base || end > (json_int_t) json_array_size (all)
        || !user || uid < 0 || gid < 0 || !(items = json_array ())) {
        errno = EPROTO;
        return tier_errprintf (error,
                               "the stage-in plan of job %u is not "
                               "valid",
                               r->job_id);
    }
    for (json_int_t k = base; k < end; k++)
        (void) json_array_append (items, json_array_get (all, (size_t) k));
    r->conf = a->conf;
    r->uid = (uid_t) uid;
    r->gid = (gid_t) gid;
    r->part = p;
    r->base = (int) base;
    rc = json_array_size (items) == (size_t) (end - base)
             ? parse_items (r, items, error)
             : (errno = ENOMEM, tier_errprintf (error, "out of memory"));
    json_decref (items);
    if (rc == 0)
        rc = stage_cred (a, r, user, error);
    return rc;
}

/* The plan with part p started once more. */
static int plan_count_restart (const struct tier_conf *conf, uint32_t job,
                               json_t *plan, int p)
{
    json_t *restarts = json_object_get (plan, "restarts");
    json_int_t n = json_integer_value (json_array_get (restarts, (size_t) p));
    char *text;

    if (json_array_set_new (restarts, (size_t) p, json_integer (n + 1)) < 0
        || !(text = json_dumps (plan, JSON_COMPACT)))
        return -1;
    (void) tier_ns_write (conf->namespace_dir, job, TIER_NS_STAGE_ITEMS, text);
    free (text);
    return 0;
}

/* job.stage_restart {job_id, part, pid}: the tasks waiting for part's
 * copies found its stager (pid, read from stage[.P].pid) gone with the
 * part unfinished -- killed (the OOM killer, an admin), or ended for a
 * fresh start because its copier was: start it again, from the plan, at
 * most STAGE_RESTARTS_MAX times a part.  Asked again (another task, an
 * agent restarting meanwhile) once the part has a new stager, or is
 * done or failed, it only says so: the tasks then read its status. */
json_t *op_stage_restart (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error)
{
    static struct stage_req r;
    char buf[1024], name[TIER_NS_NAME_MAX];
    json_int_t job_id = 0, part = -1, pid = 0, restarts;
    unsigned long long start;
    struct store_job job;
    const char *state = NULL;
    pid_t was;
    json_t *plan = NULL, *st;
    json_error_t jerr;
    tier_error_t e;

    (void) c;
    if (json_unpack (req, "{s:I s:I s:I}", "job_id", &job_id, "part", &part,
                     "pid", &pid)
            < 0
        || job_id <= 0 || job_id > 0xfffffff0LL || part < 0
        || part >= STAGE_ITEMS_MAX || pid <= 1 || pid > INT32_MAX) {
        errno = EINVAL;
        tier_errprintf (error,
                        "job.stage_restart needs job_id, part "
                        "(0..%d) and the stager's pid",
                        STAGE_ITEMS_MAX - 1);
        return NULL;
    }
    memset (&r, 0, sizeof (r));
    r.job_id = (uint32_t) job_id;
    if (store_job_latest (a->store, r.job_id, &job, &e) < 0
        || job.state != STORE_JOB_RUNNING) {
        errno = ESRCH;
        tier_errprintf (error, "job %u is not running on this node", r.job_id);
        return NULL;
    }
    if (!(plan = plan_load (a->conf, r.job_id))
        || part >= json_integer_value (json_object_get (plan, "parts"))) {
        json_decref (plan);
        errno = ENOENT;
        tier_errprintf (error, "job %u has no stage-in part %d on this node",
                        r.job_id, (int) part);
        return NULL;
    }
    tier_ns_part_name ((int) part, TIER_NS_STAGE_STATUS, name, sizeof (name));
    st = tier_ns_read (a->conf->namespace_dir, r.job_id, name, buf,
                       sizeof (buf))
                 == 0
             ? json_loads (buf, 0, &jerr)
             : NULL;
    state = json_string_value (json_object_get (st, "state"));
    if (state && (!strcmp (state, "done") || !strcmp (state, "failed"))) {
        json_t *o = json_pack ("{s:b s:s}", "restarted", 0, "state", state);
        json_decref (st);
        json_decref (plan);
        return o;
    }
    json_decref (st);
    if (part_pid_read (a, r.job_id, (int) part, &was, &start) < 0 || was != pid
        || stager_alive (was, start)) {
        json_decref (plan);
        return json_pack ("{s:b}", "restarted", 0); /* a stager runs */
    }
    restarts = json_integer_value (json_array_get (json_object_get (plan,
                                                                    "restarts"),
                                                   (size_t) part));
    if (json_array_size (json_object_get (plan, "restarts")) <= (size_t) part) {
        json_decref (plan);
        errno = EPROTO;
        tier_errprintf (error, "its stage-in was started by an older agent");
        return NULL;
    }
    if (restarts >= STAGE_RESTARTS_MAX) {
        json_decref (plan);
        errno = EAGAIN;
        tier_errprintf (error, "it was started again %d times already",
                        STAGE_RESTARTS_MAX);
        return NULL;
    }
    r.job_id = (uint32_t) job_id;
    if (part_req (a, plan, (int) part, &r, error) < 0
        || (plan_count_restart (a->conf, r.job_id, plan, (int) part) < 0
            && (errno = ENOMEM, tier_errprintf (error, "out of memory")))
        || start_stager (a, &r, error) < 0) {
        json_decref (plan);
        return NULL;
    }
    json_decref (plan);
    tier_log (LOG_NOTICE,
              "job %u: stage-in%s: its stager (pid %d) ended "
              "unfinished; started again (%d of %d)",
              r.job_id, part ? " (more)" : "", (int) pid, (int) restarts + 1,
              STAGE_RESTARTS_MAX);
    return json_pack ("{s:b s:i}", "restarted", 1, "restarts",
                      (int) restarts + 1);
}

/* ------------------------------------------------------- job end */

struct uid_ctx {
    uid_t uid;
    uint32_t except;
    bool found;
};

static int uid_cb (const struct store_job *j, void *arg)
{
    struct uid_ctx *uc = arg;

    if (j->state == STORE_JOB_RUNNING && j->uid == uc->uid
        && j->job_id != uc->except) {
        uc->found = true;
        return 1;
    }
    return 0;
}

/* The user's stage cache goes when their last job on the node ends (the
 * jobs' own stage directories hold their hard links until then). */
static void drop_cache (struct agent *a, const struct store_job *job)
{
    struct uid_ctx uc = { .uid = job->uid, .except = job->job_id };
    tier_error_t error;
    char path[PATH_MAX], name[32];
    int fd;

    if (!a->conf->nvdimm_dir[0]
        || store_job_foreach (a->store, uid_cb, &uc, &error) < 0 || uc.found)
        return;
    (void) snprintf (path, sizeof (path), "%s/.stagecache",
                     a->conf->nvdimm_dir);
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
        < 0)
        return;
    (void) snprintf (name, sizeof (name), "%u", (unsigned) job->uid);
    (void) tier_rmtree_at (fd, name, &error);
    close (fd);
}

/* The remover's answer, logged: how many of the n empty files it
 * removed. */
struct unmaking {
    uint32_t job_id;
    size_t n;
};

static void on_unmade (struct agent *a, int rc, int type, json_t *body, int fd,
                       const tier_error_t *e, void *arg)
{
    struct unmaking *k = arg;
    struct stagemsg m;
    tier_error_t error;

    (void) a;
    if (fd >= 0)
        close (fd);
    if (rc || stagemsg_unpack (type, body, &m, &error) < 0)
        tier_log (LOG_WARNING,
                  "job %u: the empty files made as mount points for URL "
                  "inputs could not be removed: %s",
                  k->job_id, rc ? e->text : error.text);
    else if ((size_t) m.removed < k->n)
        tier_log (LOG_INFO,
                  "job %u: %zu of the empty file(s) made as mount "
                  "points for URL inputs kept (used by another job, changed "
                  "or gone)",
                  k->job_id, k->n - (size_t) m.removed);
    else
        tier_log (LOG_INFO,
                  "job %u: removed the %d empty file(s) made as "
                  "mount points for URL inputs",
                  k->job_id, m.removed);
    json_decref (body);
    free (k);
}

/* The empty files made as mount points for URL inputs go at job end:
 * the remover runs with the job's credentials, off the loop (the user's
 * directories on the GFS may not answer), and its answer is logged. */
static void drop_made (struct agent *a, const struct store_job *job,
                       int part)
{
    static char buf[STAGE_ITEMS_MAX * (PATH_MAX + 96)];
    char path[PATH_MAX], name[TIER_NS_NAME_MAX];
    struct stage_unmake u = { .conf = a->conf, .job = job };
    struct child_spec spec = {
        .name = "tierd-unmake",
        .mode = TIER_CRED_DATA,
        .proto = &stagemsg_unmake_proto,
        .main = stage_unmake_main,
        .arg = &u,
    };
    struct unmaking *k = NULL;
    struct tier_cred cred;
    json_error_t jerr;
    json_t *made;

    tier_ns_part_name (part, TIER_NS_STAGE_MADE, name, sizeof (name));
    if (tier_ns_read (a->conf->namespace_dir, job->job_id, name, buf,
                      sizeof (buf)) < 0)
        return;
    if (!(made = json_loads (buf, 0, &jerr)) || !json_is_array (made)
        || json_array_size (made) == 0)
        goto out;
    if (jobs_cred (job, &cred) < 0 || !(k = calloc (1, sizeof (*k)))) {
        tier_log (LOG_WARNING,
                  "job %u: the empty files made as mount points "
                  "for URL inputs could not be removed",
                  job->job_id);
        goto out;
    }
    k->job_id = job->job_id;
    k->n = json_array_size (made);
    u.made = made;
    spec.cred = &cred;
    (void) snprintf (spec.title, sizeof (spec.title), "tierd-unmake job %u %s",
                     job->job_id, job->user);
    child_ask (a, &spec, UNMAKE_TIMEOUT_MS, on_unmade, k);
out:
    json_decref (made);
    (void) snprintf (path, sizeof (path), "%s/%u/%s",
                     a->conf->namespace_dir, job->job_id, name);
    (void) unlink (path);
}

/* A part still running at job end (scancel): stop its stager's process
 * group -- only if the pid file's pid is still that stager (its start
 * time, checked with a pidfd held: the kernel cannot give the pid to
 * another process meanwhile, nor its group id while the stager lives). */
static void part_stop (struct agent *a, const struct store_job *job, int part)
{
    unsigned long long start;
    pid_t pid;
    int pfd;

    if (part_pid_read (a, job->job_id, part, &pid, &start) < 0
        || (pfd = (int) syscall (SYS_pidfd_open, pid, 0)) < 0)
        return;
    if (!stager_alive (pid, start))
        tier_log (LOG_DEBUG,
                  "job %u: stage-in part %d: pid %d is no more "
                  "its stager: not signalled",
                  job->job_id, part, (int) pid);
    else if (kill (-pid, SIGKILL) == 0)
        tier_log (LOG_NOTICE, "job %u ended during stage-in: copies stopped",
                  job->job_id);
    close (pfd);
}

static void part_count (struct agent *a, const struct store_job *job, json_t *o)
{
    static const struct {
        enum tier_ctr ctr;
        const char *key;
    } from[] = {
        { TIER_CTR_STAGE_IN_FILES, "files" },
        { TIER_CTR_STAGE_IN_BYTES, "done" },
        { TIER_CTR_STAGE_IN_MS, "ms" },
        { TIER_CTR_GFS_BYTES_READ, "gfs" },
        { TIER_CTR_OPS, "files" },
        { TIER_CTR_GFS_META_OPS, "meta" },
    };

    for (size_t i = 0; i < sizeof (from) / sizeof (from[0]); i++)
        ctr_add (a, job, TIER_ROLE_ENDPOINT, from[i].ctr,
                 json_integer_value (json_object_get (o, from[i].key)));
}

/* At job end, each part of the stage-in: stop it if it still runs
 * (scancel), count it; false if there is no such part. */
static bool part_end (struct agent *a, const struct store_job *job, int part)
{
    char buf[1024], name[TIER_NS_NAME_MAX];
    json_error_t jerr;
    const char *state;
    json_t *o;

    tier_ns_part_name (part, TIER_NS_STAGE_STATUS, name, sizeof (name));
    if (tier_ns_read (a->conf->namespace_dir, job->job_id, name, buf,
                      sizeof (buf)) < 0)
        return false;
    if (!(o = json_loads (buf, 0, &jerr)))
        return true;
    state = json_string_value (json_object_get (o, "state"));
    if (!state || (strcmp (state, "done") && strcmp (state, "failed")))
        part_stop (a, job, part);
    drop_made (a, job, part);
    if (state && !strcmp (state, "done"))
        part_count (a, job, o);
    else
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_FAILURES, 1);
    json_decref (o);
    return true;
}

void stage_job_end (struct agent *a, const struct store_job *job)
{
    int part = 0;

    while (part < STAGE_ITEMS_MAX && part_end (a, job, part))
        part++;
    if (part > 0)
        drop_cache (a, job);
}
