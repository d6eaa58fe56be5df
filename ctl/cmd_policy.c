/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_policy.c - tierctl set/unset/show/list policy: directory policies
 *
 * The user layer is SharedStateDir/users/USER/policies.json, read and
 * written here with the caller's own credentials (the directory is the
 * user's, 0700): written atomically (a unique temporary, fsync, rename;
 * mode 0600) under an advisory lock.  The site layer is read from
 * SitePolicyDir.  What a job gets is what the agent freezes when it
 * starts (agent/policy.c) with the same library and rules; `show policy
 * --job` reads that frozen set.  See doc/policies.md.
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
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/conf.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "policies/files.h"
#include "policies/policy.h"
#include "ctl.h"

#define CMDLINE "command line"

struct layers {
    struct tier_conf *conf;
    char user[64];
    uid_t uid;
    char store[PATH_MAX];       /* the user's policies.json */
    struct tier_policy_set *all;        /* site + user as read */
    json_t *errors;             /* site files skipped */
    struct tier_policy_conf_roots rb;
};

static void layers_fini (struct layers *l)
{
    tier_policy_set_destroy (l->all);
    json_decref (l->errors);
}

static void site_report (void *arg, const char *text)
{
    json_t *errors = arg;

    (void) json_array_append_new (errors, json_string (text));
}

/* Who the layers are for: the caller, or (reading) --user NAME. */
static int who (struct layers *l, const char *user)
{
    struct passwd *pw = user ? getpwnam (user) : getpwuid (getuid ());

    if (!pw) {
        fprintf (stderr, "tierctl: %s: no such user\n",
                 user ? user : "the caller");
        return -1;
    }
    (void) snprintf (l->user, sizeof (l->user), "%s", pw->pw_name);
    l->uid = pw->pw_uid;
    return 0;
}

static int layers_init (struct layers *l, struct ctl *ctl, const char *user)
{
    memset (l, 0, sizeof (*l));
    if (!(l->conf = ctl_conf (ctl)) || who (l, user) < 0)
        return -1;
    if (!(l->all = tier_policy_set_create ())
        || !(l->errors = json_array ())) {
        fprintf (stderr, "tierctl: out of memory\n");
        return -1;
    }
    if (tier_state_user_path (l->conf->shared_state_dir, l->user,
                              TIER_STATE_POLICIES, l->store, sizeof (l->store))
        < 0)
        (void) snprintf (l->store, sizeof (l->store), "user policies");
    tier_policy_roots_from_conf (l->conf, l->user, &l->rb);
    (void) tier_policy_load_site (l->all, l->conf->site_policy_dir,
                                  site_report, l->errors);
    return 0;
}

static void warn_site (struct layers *l)
{
    size_t i;
    json_t *v;

    json_array_foreach (l->errors, i, v)
        fprintf (stderr, "tierctl: warning: site policies: %s\n",
                 json_string_value (v));
}

/* The user's directory; with ensure, ask the agent to make it. */
static int user_dir (struct ctl *ctl, struct layers *l, bool ensure)
{
    tier_error_t error;
    int fd;

    if (!l->conf->shared_state_dir[0]) {
        fprintf (stderr, "tierctl: SharedStateDir is not set in %s: there "
                 "is no place for user policies\n", ctl->conf_path);
        return -1;
    }
    fd = tier_policy_user_dir (l->conf->shared_state_dir, l->user, l->uid,
                               &error);
    if (fd < 0 && errno == ENOENT && ensure) {
        json_t *res = ctl_call (ctl, json_pack ("{s:s}", "op",
                                                "user.ensure"));
        if (!res) {
            fprintf (stderr, "tierctl: %s (the node's agent makes it)\n",
                     error.text);
            return -1;
        }
        json_decref (res);
        fd = tier_policy_user_dir (l->conf->shared_state_dir, l->user,
                                   l->uid, &error);
    }
    if (fd < 0) {
        int e = errno;
        if (e != ENOENT || ensure)
            fprintf (stderr, "tierctl: %s\n", error.text);
        errno = e;
        return -1;
    }
    return fd;
}

/* Read the user's store into l->all.  Returns 0 (also when there is
 * none), or -1 after a message.
 */
static int read_store (struct layers *l, int ufd)
{
    tier_error_t error;
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (tier_policy_read_at (ufd, TIER_POLICY_USER_FILE, &text, &len,
                             &error) < 0)
        return errno == ENOENT ? 0 : (fprintf (stderr, "tierctl: %s\n",
                                               error.text), -1);
    rc = tier_policy_parse (l->all, text, len, TIER_LAYER_USER, l->store,
                            &error);
    free (text);
    if (rc < 0) {
        fprintf (stderr, "tierctl: %s\n", error.text);
        return -1;
    }
    return 0;
}

/* Load both layers for reading: a missing or unreadable store is
 * reported (unless missing) and the site layer still shown.
 */
static int load_for_reading (struct ctl *ctl, struct layers *l,
                             const char *user)
{
    int ufd;

    if (layers_init (l, ctl, user) < 0)
        return -1;
    if (!l->conf->shared_state_dir[0])
        return 0;
    if ((ufd = user_dir (ctl, l, false)) < 0)
        return errno == ENOENT ? 0 : -1;        /* no store yet: fine */
    if (read_store (l, ufd) < 0) {
        close (ufd);
        return -1;
    }
    close (ufd);
    return 0;
}

/* arg made absolute and normalised; symlinks resolved where the path
 * exists (the deepest existing ancestor otherwise).
 */
static int canon (const char *arg, char *out, size_t size, bool *exists)
{
    char cwd[PATH_MAX], abs[PATH_MAX], tmp[PATH_MAX], real[PATH_MAX];
    size_t cut;

    *exists = false;
    if (!getcwd (cwd, sizeof (cwd)))
        (void) snprintf (cwd, sizeof (cwd), "/");
    if (tier_path_absolute (arg, cwd, abs, sizeof (abs)) < 0) {
        fprintf (stderr, "tierctl: '%s': not a usable path\n", arg);
        return -1;
    }
    (void) snprintf (tmp, sizeof (tmp), "%s", abs);
    cut = strlen (tmp);
    for (;;) {
        if (realpath (tmp, real)) {
            *exists = cut == strlen (abs);
            if (snprintf (out, size, "%s%s", strcmp (real, "/") ? real : "",
                          abs + cut) >= (int) size) {
                fprintf (stderr, "tierctl: '%s': path too long\n", arg);
                return -1;
            }
            if (!out[0])
                (void) snprintf (out, size, "/");
            return 0;
        }
        while (cut > 1 && tmp[cut - 1] != '/')
            cut--;
        if (cut <= 1)
            break;
        tmp[--cut] = '\0';
    }
    (void) snprintf (out, size, "%s", abs);
    return 0;
}

static void attrs_text (json_t *o, char *buf, size_t size)
{
    const char *key;
    size_t n = 0;
    json_t *v;

    buf[0] = '\0';
    json_object_foreach (o, key, v) {
        char val[64];
        if (!strcmp (key, "role") || !strcmp (key, "comment"))
            continue;
        if (json_is_boolean (v))
            (void) snprintf (val, sizeof (val), "%s",
                             json_is_true (v) ? "yes" : "no");
        else
            (void) snprintf (val, sizeof (val), "%s", json_string_value (v)
                             ? json_string_value (v) : "?");
        n += snprintf (buf + n, n < size ? size - n : 0, "%s%s=%s",
                       n ? " " : "", key, val);
    }
}

/* The layer/dir key of every refused policy. */
static bool in_refused (json_t *refused, const struct tier_policy *p,
                        const char **reason)
{
    size_t i;
    json_t *o;

    json_array_foreach (refused, i, o) {
        const char *d = json_string_value (json_object_get (o, "dir"));
        const char *ly = json_string_value (json_object_get (o, "layer"));
        if (d && ly && !strcmp (d, p->dir)
            && tier_policy_layer_parse (ly) == (int) p->layer) {
            if (reason)
                *reason = json_string_value (json_object_get (o, "reason"));
            return true;
        }
    }
    return false;
}

/* Freeze set: the effective one in *out, the refused in *refused. */
static int freeze (struct layers *l, const struct tier_policy_set *set,
                   struct tier_policy_set **out, json_t **refused)
{
    tier_error_t error;

    *out = tier_policy_set_create ();
    *refused = json_array ();
    if (!*out || !*refused
        || tier_policy_freeze (set, &l->rb.roots, *out, *refused,
                               &error) < 0) {
        fprintf (stderr, "tierctl: out of memory\n");
        tier_policy_set_destroy (*out);
        json_decref (*refused);
        return -1;
    }
    return 0;
}

enum { OPT_TTL = 256, OPT_REVALIDATE, OPT_KEEP, OPT_TIER, OPT_SHARE,
       OPT_SIZE, OPT_WINDOW, OPT_BLOCK, OPT_PREFETCH, OPT_LOCKED,
       OPT_COMMENT, OPT_STAGE, OPT_JOB, OPT_USER, OPT_ALL, OPT_JSON };

static const char *opt_key (int c)
{
    switch (c) {
        case OPT_TTL: return "ttl";
        case OPT_REVALIDATE: return "revalidate";
        case OPT_KEEP: return "keep";
        case OPT_TIER: return "tier";
        case OPT_SHARE: return "share";
        case OPT_SIZE: return "size";
        case OPT_WINDOW: return "window";
        case OPT_BLOCK: return "block";
        case OPT_PREFETCH: return "prefetch";
        case OPT_LOCKED: return "locked";
        case OPT_COMMENT: return "comment";
        case OPT_STAGE: return "stage";
    }
    return NULL;
}

static int check_noun (const struct ctl_cmd *cmd, int argc, char **argv,
                       const char *noun, const char *alt)
{
    if (argc < 2 || (strcmp (argv[1], noun) && (!alt || strcmp (argv[1],
                                                                  alt)))) {
        fprintf (stderr, "tierctl %s: expected '%s'\n", cmd->name, noun);
        return ctl_usage (cmd);
    }
    return 0;
}

/* Write the user layer of l->all to the store. */
static int write_store (struct layers *l, int ufd)
{
    tier_error_t error;
    char *text = tier_policy_dump (l->all, TIER_LAYER_USER);
    int rc;

    if (!text) {
        fprintf (stderr, "tierctl: out of memory\n");
        return -1;
    }
    rc = tier_policy_write_at (ufd, TIER_POLICY_USER_FILE, text, 0600, false,
                               &error);
    free (text);
    if (rc < 0) {
        char dir[PATH_MAX];
        if (tier_state_user_path (l->conf->shared_state_dir, l->user, NULL, dir,
                                  sizeof (dir))
            < 0)
            (void) snprintf (dir, sizeof (dir), "%s", l->user);
        fprintf (stderr, "tierctl: %s/%s\n", dir, error.text);
    }
    return rc;
}

/* What adding (or removing) changed: a policy in force before that is
 * refused after.  Returns the first such policy and its reason.
 */
static const struct tier_policy *newly_refused (struct layers *l,
                                                const struct tier_policy_set
                                                *before_set,
                                                json_t *before,
                                                json_t *after,
                                                const char **reason)
{
    for (int i = 0; i < before_set->n; i++) {
        const struct tier_policy *p = &before_set->v[i];
        if (!in_refused (before, p, NULL) && in_refused (after, p, reason))
            return p;
    }
    (void) l;
    return NULL;
}

/* Parse "set policy DIR ROLE [OPTION]..." into p, with DIR resolved into
 * dir (whether it exists in *exists) and DIR as given in *arg.  Return 0,
 * or the exit code once the problem is reported; p is clear or
 * initialised either way.
 */
static int set_parse (const struct ctl_cmd *cmd, int argc, char **argv,
                      struct tier_policy *p, char *dir, size_t size,
                      bool *exists, const char **arg)
{
    static const struct option longopts[] = {
        { "ttl", required_argument, NULL, OPT_TTL },
        { "revalidate", required_argument, NULL, OPT_REVALIDATE },
        { "keep", required_argument, NULL, OPT_KEEP },
        { "tier", required_argument, NULL, OPT_TIER },
        { "share", required_argument, NULL, OPT_SHARE },
        { "size", required_argument, NULL, OPT_SIZE },
        { "window", required_argument, NULL, OPT_WINDOW },
        { "block", required_argument, NULL, OPT_BLOCK },
        { "prefetch", required_argument, NULL, OPT_PREFETCH },
        { "locked", no_argument, NULL, OPT_LOCKED },
        { "comment", required_argument, NULL, OPT_COMMENT },
        { "stage", required_argument, NULL, OPT_STAGE },
        { NULL, 0, NULL, 0 },
    };
    struct { const char *key, *value; } given[16];
    int ngiven = 0, c, role;
    tier_error_t error;

    if ((c = check_noun (cmd, argc, argv, "policy", NULL)))
        return c;
    /* getopt sees "policy" as argv[0]; optind 0 reinitialises it (main
     * parsed in REQUIRE_ORDER mode; here options may follow DIR ROLE) */
    argc--;
    argv++;
    optind = 0;
    while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
        if (!opt_key (c) || ngiven == 16)
            return ctl_usage (cmd);
        given[ngiven].key = opt_key (c);
        given[ngiven++].value = c == OPT_LOCKED ? "true" : optarg;
    }
    if (argc - optind != 2)
        return ctl_usage (cmd);
    if ((role = tier_policy_role_parse (argv[optind + 1])) < 0) {
        fprintf (stderr, "tierctl set policy: role '%s' is not one of "
                 "batch, pipeline, endpoint, none\n", argv[optind + 1]);
        return CTL_USAGE;
    }
    *arg = argv[optind];
    if (canon (*arg, dir, size, exists) < 0)
        return CTL_USAGE;
    if (tier_policy_init (p, dir, role, TIER_LAYER_USER, CMDLINE, &error) < 0)
        goto error;
    for (int i = 0; i < ngiven; i++)
        if (tier_policy_set_attr (p, given[i].key, given[i].value, &error) < 0)
            goto error;
    if (tier_policy_validate (p, &error) < 0)
        goto error;
    return 0;
error:
    fprintf (stderr, "tierctl set policy: %s\n", error.text);
    return CTL_USAGE;
}

/* A note when DIR as given (arg) lexically names another directory than
 * the one it resolves to, and a warning when dir is missing or unreadable.
 */
static void note_dir (const char *arg, const char *dir, bool exists)
{
    if (strcmp (dir, arg) && arg[0] == '/' && exists
        && !tier_path_has_dotdot (arg)) {
        char lex[PATH_MAX];
        if (tier_path_normalize (arg, lex, sizeof (lex)) == 0
            && strcmp (lex, dir))
            fprintf (stderr, "tierctl: note: %s resolves to %s; the policy "
                     "is set on %s\n", lex, dir, dir);
    }
    if (!exists)
        fprintf (stderr, "tierctl: warning: %s does not exist (yet)\n", dir);
    else if (access (dir, R_OK | X_OK) < 0)
        fprintf (stderr, "tierctl: warning: you cannot read %s\n", dir);
}

/* Add p to the user's store (open at ufd), unless the result would refuse
 * p or a policy in force before; then write the store back.
 */
static int store_add (struct layers *l, int ufd, struct tier_policy *p)
{
    struct tier_policy_set *out0 = NULL, *out1 = NULL;
    json_t *ref0 = NULL, *ref1 = NULL;
    const struct tier_policy *lost;
    const char *reason = NULL;
    tier_error_t error;
    int rc = -1;

    (void) flock (ufd, LOCK_EX);        /* best effort (NFS may lack it) */
    if (read_store (l, ufd) < 0) {
        fprintf (stderr, "tierctl: fix or remove %s first\n", l->store);
        goto out;
    }
    /* the new policy's source is the store it goes to */
    free (p->source);
    if (!(p->source = strdup (l->store))) {
        fprintf (stderr, "tierctl: out of memory\n");
        goto out;
    }
    if (freeze (l, l->all, &out0, &ref0) < 0)
        goto out;
    if (tier_policy_add (l->all, p, &error) < 0) {
        fprintf (stderr, "tierctl: %s\n", error.text);
        goto out;
    }
    if (freeze (l, l->all, &out1, &ref1) < 0)
        goto out;
    if (in_refused (ref1, p, &reason)) {
        fprintf (stderr, "tierctl set policy: refused: %s\n",
                 reason ? reason : "?");
        goto out;
    }
    if ((lost = newly_refused (l, out0, ref0, ref1, &reason))) {
        fprintf (stderr, "tierctl set policy: refused: the %s policy of %s "
                 "would no longer apply: %s\n",
                 tier_policy_layer_name (lost->layer), lost->dir,
                 reason ? reason : "?");
        goto out;
    }
    rc = write_store (l, ufd);
out:
    tier_policy_set_destroy (out0);
    tier_policy_set_destroy (out1);
    json_decref (ref0);
    json_decref (ref1);
    return rc;
}

int cmd_set (struct ctl *ctl, int argc, char **argv)
{
    const struct ctl_cmd *cmd = ctl_cmd_find ("set");
    int rc, ufd = -1;
    struct tier_policy p = { 0 };
    json_t *pj;
    const char *arg = NULL;
    char dir[PATH_MAX], attrs[512];
    struct layers l = { 0 };
    tier_error_t error;
    bool exists;

    if ((rc = set_parse (cmd, argc, argv, &p, dir, sizeof (dir), &exists,
                         &arg)))
        goto out;
    rc = CTL_ERROR;
    if (layers_init (&l, ctl, NULL) < 0)
        goto out;
    note_dir (arg, dir, exists);
    if (tier_policy_check_roots (&p, &l.rb.roots, &error) < 0) {
        fprintf (stderr, "tierctl set policy: refused: %s\n", error.text);
        goto out;
    }
    warn_site (&l);
    if ((ufd = user_dir (ctl, &l, true)) < 0)
        goto out;
    if (store_add (&l, ufd, &p) < 0)
        goto out;
    pj = tier_policy_to_json (&p, false);
    attrs_text (pj, attrs, sizeof (attrs));
    json_decref (pj);
    printf ("%s: %s%s%s (user layer, %s)\n", dir,
            tier_policy_role_name (p.role), attrs[0] ? " " : "", attrs,
            l.store);
    rc = CTL_OK;
out:
    if (ufd >= 0)
        close (ufd);
    tier_policy_clear (&p);
    layers_fini (&l);
    return rc;
}

int cmd_unset (struct ctl *ctl, int argc, char **argv)
{
    const struct ctl_cmd *cmd = ctl_cmd_find ("unset");
    struct tier_policy_set *out0 = NULL, *out1 = NULL;
    json_t *ref0 = NULL, *ref1 = NULL;
    const struct tier_policy *lost;
    const char *reason = NULL;
    char dir[PATH_MAX], lex[PATH_MAX];
    struct layers l = { 0 };
    int c, ufd = -1, rc = CTL_ERROR;
    bool exists;

    if ((c = check_noun (cmd, argc, argv, "policy", NULL)))
        return c;
    if (argc != 3)
        return ctl_usage (cmd);
    if (canon (argv[2], dir, sizeof (dir), &exists) < 0)
        return CTL_USAGE;
    if (layers_init (&l, ctl, NULL) < 0
        || (ufd = user_dir (ctl, &l, false)) < 0)
        goto out;
    (void) flock (ufd, LOCK_EX);
    if (read_store (&l, ufd) < 0) {
        fprintf (stderr, "tierctl: fix or remove %s first\n", l.store);
        goto out;
    }
    if (freeze (&l, l.all, &out0, &ref0) < 0)
        goto out;
    /* the resolved directory, or the name as given when that was set */
    if (!tier_policy_remove (l.all, dir, TIER_LAYER_USER)
        && (argv[2][0] != '/' || tier_path_has_dotdot (argv[2])
            || tier_path_normalize (argv[2], lex, sizeof (lex)) < 0
            || !tier_policy_remove (l.all, lex, TIER_LAYER_USER))) {
        fprintf (stderr, "tierctl unset policy: you have no policy for %s\n",
                 dir);
        goto out;
    }
    if (freeze (&l, l.all, &out1, &ref1) < 0 || write_store (&l, ufd) < 0)
        goto out;
    if ((lost = newly_refused (&l, out0, ref0, ref1, &reason)))
        fprintf (stderr, "tierctl: warning: %s no longer applies: %s\n",
                 lost->dir, reason ? reason : "?");
    printf ("%s: policy removed (user layer, %s)\n", dir, l.store);
    rc = CTL_OK;
out:
    if (ufd >= 0)
        close (ufd);
    tier_policy_set_destroy (out0);
    tier_policy_set_destroy (out1);
    json_decref (ref0);
    json_decref (ref1);
    layers_fini (&l);
    return rc;
}

/* The effective policy of path in set, as JSON. */
static json_t *match_json (const struct tier_policy_set *set,
                           const char *path)
{
    struct tier_policy_match m;
    json_t *o, *attrs;

    if (tier_policy_resolve (set, path, &m) < 0)
        return NULL;
    if (!m.policy)
        return json_pack ("{s:s s:s s:s s:n s:n s:b s:{}}", "path", path,
                          "role", "none", "layer", "default", "dir",
                          "source", "locked", 0, "attributes");
    if (!(attrs = tier_policy_effective_json (m.policy)))
        return NULL;
    json_object_del (attrs, "role");
    o = json_pack ("{s:s s:s s:s s:s s:s s:b s:o}", "path", path,
                   "role", tier_policy_role_name (m.policy->role),
                   "layer", tier_policy_layer_name (m.policy->layer),
                   "dir", m.policy->dir,
                   "source", m.policy->source ? m.policy->source : "?",
                   "locked", m.lock != NULL, "attributes", attrs);
    if (o && m.lock && m.lock != m.policy)
        (void) json_object_set_new (o, "locked_by",
                                    json_string (m.lock->dir));
    if (o && m.policy->comment)
        (void) json_object_set_new (o, "comment",
                                    json_string (m.policy->comment));
    return o;
}

static void print_match (json_t *o)
{
    const char *layer = json_string_value (json_object_get (o, "layer"));
    char attrs[512];

    printf ("%s: %s\n", json_string_value (json_object_get (o, "path")),
            json_string_value (json_object_get (o, "role")));
    if (!strcmp (layer, "default")) {
        printf ("  no policy applies (the default: the plain GFS)\n");
        return;
    }
    printf ("  from the %s layer: the policy of %s in %s\n", layer,
            json_string_value (json_object_get (o, "dir")),
            json_string_value (json_object_get (o, "source")));
    attrs_text (json_object_get (o, "attributes"), attrs, sizeof (attrs));
    if (attrs[0])
        printf ("  %s\n", attrs);
    if (json_is_true (json_object_get (o, "locked")))
        printf ("  locked by the site%s%s: users cannot override it\n",
                json_object_get (o, "locked_by") ? " policy of " : "",
                json_object_get (o, "locked_by")
                ? json_string_value (json_object_get (o, "locked_by")) : "");
    if (json_object_get (o, "comment"))
        printf ("  # %s\n", json_string_value (json_object_get (o,
                                                                "comment")));
}

/* The frozen set of a job: the user's shared copy, else the agent's. */
static json_t *job_frozen (struct ctl *ctl, struct layers *l, long long id)
{
    tier_error_t error;
    json_error_t jerr;
    json_t *doc = NULL, *res;
    char *text = NULL;
    int ufd, jfd;

    if (l->conf->shared_state_dir[0]
        && (ufd = user_dir (ctl, l, false)) >= 0) {
        if ((jfd = tier_policy_subdir (ufd, TIER_STATE_JOBS, false, &error))
            >= 0) {
            DIR *d = fdopendir (jfd);
            struct dirent *de;
            long long best = -1;
            char name[64];
            while (d && (de = readdir (d))) {
                long long j, r;
                char tail;
                if (sscanf (de->d_name, "%lld.%lld%c", &j, &r, &tail) == 2
                    && j == id && r > best)
                    best = r;
            }
            if (best >= 0) {
                int sub;
                tier_state_job_name ((uint32_t) id, (uint32_t) best, name,
                                     sizeof (name));
                if ((sub = tier_policy_subdir (dirfd (d), name, false,
                                               &error)) >= 0) {
                    if (tier_policy_read_at (sub, TIER_POLICY_FROZEN_FILE,
                                             &text, NULL, &error) == 0)
                        doc = json_loads (text, 0, &jerr);
                    close (sub);
                }
            }
            if (d)
                closedir (d);
            else
                close (jfd);
        }
        close (ufd);
        free (text);
        if (doc)
            return doc;
    }
    if (!(res = ctl_call (ctl, json_pack ("{s:s s:I}", "op", "job.policy",
                                          "job_id", (json_int_t) id))))
        return NULL;
    if (json_object_get (res, "error")) {
        fprintf (stderr, "tierctl: %s\n",
                 json_string_value (json_object_get (res, "error")));
        json_decref (res);
        return NULL;
    }
    doc = json_incref (json_object_get (res, "frozen"));
    json_decref (res);
    return doc;
}

static void print_table (const struct tier_policy_set *set, json_t *refused,
                         bool status)
{
    printf ("%-32s %-9s %-5s %s\n", "DIRECTORY", "ROLE", "LAYER",
            status ? "ATTRIBUTES / STATUS / SOURCE" : "ATTRIBUTES / SOURCE");
    for (int i = 0; i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        json_t *pj = tier_policy_to_json (p, false);
        const char *reason = NULL;
        char attrs[512];

        attrs_text (pj, attrs, sizeof (attrs));
        json_decref (pj);
        printf ("%-32s %-9s %-5s %s%s", p->dir, tier_policy_role_name (p->role),
                tier_policy_layer_name (p->layer), attrs, attrs[0] ? " " : "");
        if (status) {
            struct tier_policy_match m;
            if (in_refused (refused, p, &reason))
                printf ("[refused: %s] ", reason ? reason : "?");
            else if (tier_policy_resolve (set, p->dir, &m) == 0
                     && m.policy != p && m.policy)
                printf ("[overridden by the %s policy of %s] ",
                        tier_policy_layer_name (m.policy->layer),
                        m.policy->dir);
            else
                printf ("[in force] ");
        }
        printf ("(%s)\n", p->source ? p->source : "?");
    }
}

static json_t *list_json (const struct tier_policy_set *set, json_t *refused,
                          bool status)
{
    json_t *arr = json_array ();

    for (int i = 0; arr && i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        json_t *o = tier_policy_to_json (p, true);
        struct tier_policy_match m;
        const char *reason = NULL;

        if (!o)
            continue;
        if (status) {
            if (in_refused (refused, p, &reason)) {
                json_object_set_new (o, "status", json_string ("refused"));
                json_object_set_new (o, "reason", json_string (reason
                                                               ? reason
                                                               : "?"));
            }
            else if (tier_policy_resolve (set, p->dir, &m) == 0
                     && m.policy != p && m.policy) {
                json_object_set_new (o, "status",
                                     json_string ("overridden"));
                json_object_set_new (o, "overridden_by",
                                     json_string (m.policy->dir));
            }
            else
                json_object_set_new (o, "status", json_string ("in force"));
        }
        json_array_append_new (arr, o);
    }
    return arr;
}

static int show_job (struct ctl *ctl, struct layers *l, long long id,
                     const char *path)
{
    struct tier_policy_set *set = tier_policy_set_create ();
    json_t *doc, *o;
    tier_error_t error;
    char name[64];
    int rc = CTL_ERROR;

    if (!(doc = job_frozen (ctl, l, id)))
        goto out;
    (void) snprintf (name, sizeof (name), "job %lld's frozen policy set",
                     id);
    if (!set || tier_policy_set_from_json (set, json_object_get (doc,
                                                                 "policies"),
                                           name, &error) < 0) {
        fprintf (stderr, "tierctl: %s\n", set ? error.text : "no memory");
        goto out;
    }
    if (!path) {
        if (ctl->json)
            ctl_print_json (doc);
        else {
            size_t i;
            json_t *v;
            printf ("job %lld: %d policies, frozen on node %s\n", id, set->n,
                    json_string_value (json_object_get (doc, "node"))
                    ? json_string_value (json_object_get (doc, "node"))
                    : "?");
            print_table (set, NULL, false);
            json_array_foreach (json_object_get (doc, "refused"), i, v)
                printf ("refused: %s\n", json_string_value (
                        json_object_get (v, "reason")));
            json_array_foreach (json_object_get (doc, "errors"), i, v)
                printf ("error: %s\n", json_string_value (v));
        }
        rc = CTL_OK;
        goto out;
    }
    if (!(o = match_json (set, path))) {
        fprintf (stderr, "tierctl: %s: not a usable path\n", path);
        goto out;
    }
    json_object_set_new (o, "job_id", json_integer (id));
    if (ctl->json)
        ctl_print_json (o);
    else {
        printf ("job %lld, ", id);
        print_match (o);
    }
    json_decref (o);
    rc = CTL_OK;
out:
    json_decref (doc);
    tier_policy_set_destroy (set);
    return rc;
}

int cmd_show (struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "job", required_argument, NULL, OPT_JOB },
        { "user", required_argument, NULL, OPT_USER },
        { "json", no_argument, NULL, OPT_JSON },
        { NULL, 0, NULL, 0 },
    };
    const struct ctl_cmd *cmd = ctl_cmd_find ("show");
    struct tier_policy_set *out = NULL;
    const char *user = NULL;
    long long job = 0;
    json_t *ref = NULL, *o;
    char path[PATH_MAX], *end;
    struct layers l = { 0 };
    int c, rc = CTL_ERROR;
    bool exists;

    if ((c = check_noun (cmd, argc, argv, "policy", NULL)))
        return c;
    argc--;
    argv++;
    optind = 0;
    while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
            case OPT_JOB:
                job = strtoll (optarg, &end, 10);
                if (*end || job <= 0 || job > 0xfffffff0LL) {
                    fprintf (stderr, "tierctl show policy: '%s' is not a job "
                             "id\n", optarg);
                    return CTL_USAGE;
                }
                break;
            case OPT_USER:
                user = optarg;
                break;
            case OPT_JSON:
                ctl->json = true;
                break;
            default:
                return ctl_usage (cmd);
        }
    }
    if (argc - optind > 1)
        return ctl_usage (cmd);
    if (canon (argc > optind ? argv[optind] : ".", path, sizeof (path),
               &exists) < 0)
        return CTL_USAGE;
    if (job) {
        if (layers_init (&l, ctl, user) < 0)
            goto out;
        rc = show_job (ctl, &l, job, argc > optind ? path : NULL);
        goto out;
    }
    if (load_for_reading (ctl, &l, user) < 0)
        goto out;
    warn_site (&l);
    if (freeze (&l, l.all, &out, &ref) < 0)
        goto out;
    if (!(o = match_json (out, path))) {
        fprintf (stderr, "tierctl: %s: not a usable path\n", path);
        goto out;
    }
    if (ctl->json)
        ctl_print_json (o);
    else
        print_match (o);
    json_decref (o);
    rc = CTL_OK;
out:
    tier_policy_set_destroy (out);
    json_decref (ref);
    layers_fini (&l);
    return rc;
}

int cmd_list (struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "all-layers", no_argument, NULL, OPT_ALL },
        { "user", required_argument, NULL, OPT_USER },
        { "json", no_argument, NULL, OPT_JSON },
        { NULL, 0, NULL, 0 },
    };
    const struct ctl_cmd *cmd = ctl_cmd_find ("list");
    struct tier_policy_set *out = NULL;
    const char *user = NULL;
    struct layers l = { 0 };
    json_t *ref = NULL;
    bool all = false;
    int c, rc = CTL_ERROR;

    if ((c = check_noun (cmd, argc, argv, "policies", "policy")))
        return c;
    argc--;
    argv++;
    optind = 0;
    while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
            case OPT_ALL:
                all = true;
                break;
            case OPT_USER:
                user = optarg;
                break;
            case OPT_JSON:
                ctl->json = true;
                break;
            default:
                return ctl_usage (cmd);
        }
    }
    if (optind != argc)
        return ctl_usage (cmd);
    if (load_for_reading (ctl, &l, user) < 0
        || freeze (&l, l.all, &out, &ref) < 0)
        goto out;
    if (ctl->json) {
        json_t *o = json_pack ("{s:s s:o}", "user", l.user, "policies",
                               list_json (all ? l.all : out, ref, all));
        if (o && all) {
            json_object_set (o, "refused", ref);
            json_object_set (o, "errors", l.errors);
        }
        ctl_print_json (o);
        json_decref (o);
    }
    else {
        size_t i;
        json_t *v;
        print_table (all ? l.all : out, ref, all);
        if (all)
            json_array_foreach (l.errors, i, v)
                printf ("site file skipped: %s\n", json_string_value (v));
        else
            warn_site (&l);
    }
    rc = CTL_OK;
out:
    tier_policy_set_destroy (out);
    json_decref (ref);
    layers_fini (&l);
    return rc;
}
