/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_rpc.c - libFuzzer target: requests into the agent's dispatcher
 *
 * rpc_handle (agent/rpc.c) parses every request a client sends, checks
 * who may make it, and runs the handler of its op.  This target runs the
 * real agent modules (libtierd's sources: the LMDB registry, policies,
 * stage-in, the replica cache, stage-out) on a real LMDB store in a
 * temporary directory (on /dev/shm where it may write), with connections
 * made by the server's own code.
 *
 * Input: up to 16 requests separated by 0x1e (a byte JSON never holds
 * raw), so that one input can register a job and then act on it.  Each
 * request's first byte picks the caller and its descriptors: bits 0-1
 * the caller's uid (root, SlurmUser, a user, another user), bits 2-3 how
 * many descriptors come with it (0..3), bits 4-5 which (a regular file, a
 * directory, /dev/null), bits 6-7 what a child the request starts does
 * (below); the rest is the body.  Every reply must be a
 * JSON object, an error one with a positive errno; no descriptor may be
 * left open by a request.  The state is reset after every input, so that
 * a crash replays from its input alone.
 *
 * Run as root, it first drops to nobody: handlers fork children that act
 * on paths from the input, and the fuzzer must not do that with root's
 * rights.  Code that needs root (tier roots, dropping to a job's user)
 * then fails as it would on a misconfigured node.
 *
 * The children: a fork of this process copies the page tables of all
 * that ASan and libFuzzer hold, and forks were most of an input's time
 * (150-400 inputs a second).  What a child does is not seen by libFuzzer
 * (its coverage counters are the child's copy) and, without root, most
 * could not take their user's uid anyway.  So the agent's forks are
 * linked to __wrap_fork (-Wl,--wrap=fork, fuzz.sh): with bits 6-7 of the
 * request 3 the child is a real fork that does its work; otherwise a
 * vfork that ends at once, the way a child may end in the agent -- 0:
 * as one that could not set up (CHILD_EXIT_SETUP), 1: with 0 and nothing
 * said, 2: killed by SIGKILL.  The agent's side of every spawn, and of
 * its end, runs either way.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/child.h"
#include "lib/clock.h"
#include "lib/log.h"

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

#define NOBODY 65534
#define REQUESTS_MAX 16
#define SEP 0x1e

static struct agent A;
static int child_mode; /* bits 6-7 of the request */
static unsigned long forks_real, forks_quick;
static char top[256];
static char registry[300];
static uid_t uids[4];
static struct stat stdio[3];            /* what fds 0..2 were at start */

static int rm_cb (const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    if (ftw->level > 0)
        (void) remove (path);
    return 0;
}

/* Empty a directory (keep it). */
static void empty_dir (const char *fmt, const char *sub)
{
    char path[512];

    (void) snprintf (path, sizeof (path), fmt, top, sub);
    (void) nftw (path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void rm_top (void)
{
    empty_dir ("%s%s", "");
    (void) rmdir (top);
}

static void make_dir (const char *sub, mode_t mode)
{
    char path[512];

    (void) snprintf (path, sizeof (path), "%s/%s", top, sub);
    CHECK (mkdir (path, mode) == 0 || errno == EEXIST);
}

static int count_fds (void)
{
    DIR *d = opendir ("/proc/self/fd");
    struct dirent *de;
    int n = 0;

    CHECK (d);
    while ((de = readdir (d)))
        if (de->d_name[0] != '.')
            n++;
    closedir (d);
    return n - 1;                       /* the one opendir holds */
}

/* The store is opened once (on tmpfs; built with -DTIER_FUZZING it never
 * syncs, agent/store.c) and emptied after every input: reopening it cost
 * more than most inputs.
 */
static void store_fresh (void)
{
    tier_error_t error;

    if (A.store ? store_clear (A.store, &error) < 0
                : !(A.store = store_open (registry, 64UL << 20, &error))) {
        fprintf (stderr, "fuzz_rpc: %s\n", error.text);
        abort ();
    }
}

#define KIDS_MAX 256

/* The pids of this process's children, from each thread's
 * /proc/self/task/TID/children (one read where a scan of /proc reads
 * every process's stat, on each poll of reap_children); -1 where the
 * kernel has no such file.
 */
static int kids_of_tasks (pid_t *kids)
{
    DIR *d = opendir ("/proc/self/task");
    struct dirent *de;
    char path[300];
    int n = 0;

    if (access ("/proc/thread-self/children", R_OK) < 0) {
        if (d)
            closedir (d);
        return -1;
    }
    CHECK (d);
    while ((de = readdir (d))) {
        FILE *f;
        int pid;

        if (de->d_name[0] == '.')
            continue;
        (void) snprintf (path, sizeof (path), "/proc/self/task/%s/children",
                         de->d_name);
        /* gone: a thread that just ended */
        if (!(f = fopen (path, "re")))
            continue;
        while (n < KIDS_MAX && fscanf (f, "%d", &pid) == 1)
            kids[n++] = pid;
        fclose (f);
    }
    closedir (d);
    return n;
}

/* The same from every process's /proc/PID/stat. */
static int kids_of_proc (pid_t *kids)
{
    DIR *d = opendir ("/proc");
    struct dirent *de;
    char path[300], buf[512];
    ssize_t len;
    int n = 0;

    CHECK (d);
    while (n < KIDS_MAX && (de = readdir (d))) {
        int fd, ppid = 0;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        (void) snprintf (path, sizeof (path), "/proc/%s/stat", de->d_name);
        if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        len = read (fd, buf, sizeof (buf) - 1);
        close (fd);
        buf[len > 0 ? len : 0] = '\0';
        if (strrchr (buf, ')')
            && sscanf (strrchr (buf, ')') + 2, "%*c %d", &ppid) == 1
            && ppid == getpid ())
            kids[n++] = atoi (de->d_name);
    }
    closedir (d);
    return n;
}

/* The agent's children still alive: forks of this process, so they run
 * its executable (the sanitizers' symbolizer, which libFuzzer starts, is
 * another program).  With show, say what each is doing.
 */
static int agent_children (bool show)
{
    char self[PATH_MAX], exe[PATH_MAX], path[300];
    pid_t kids[KIDS_MAX];
    ssize_t n;
    int count = 0, nkids;

    CHECK ((n = readlink ("/proc/self/exe", self, sizeof (self) - 1)) > 0);
    self[n] = '\0';
    if ((nkids = kids_of_tasks (kids)) < 0)
        nkids = kids_of_proc (kids);
    for (int k = 0; k < nkids; k++) {
        (void) snprintf (path, sizeof (path), "/proc/%d/exe", (int) kids[k]);
        if ((n = readlink (path, exe, sizeof (exe) - 1)) > 0) {
            exe[n] = '\0';
            if (strcmp (exe, self))
                continue;
        }
        count++;
        if (!show)
            continue;
        fprintf (stderr, "fuzz_rpc: child %d:", (int) kids[k]);
        for (int i = 0; i < 32; i++) {
            (void) snprintf (path, sizeof (path), "/proc/%d/fd/%d",
                             (int) kids[k], i);
            if ((n = readlink (path, exe, sizeof (exe) - 1)) > 0) {
                exe[n] = '\0';
                fprintf (stderr, " %d=%s", i, exe);
            }
        }
        fprintf (stderr, "\n");
    }
    return count;
}

/* Children the handlers started (stagers, migrators, policy writers)
 * end by themselves: one that has not within 5 s is a finding.  SIGCHLD
 * is blocked (LLVMFuzzerInitialize, as the agent's server_init does) and
 * waited for, at most 100 ms at a time (a signal two children sent at
 * once arrives once).
 */
static void reap_children (void)
{
    uint64_t deadline = tier_now_ms () + 5000, now;
    sigset_t chld;
    int status;
    pid_t pid;

    sigemptyset (&chld);
    sigaddset (&chld, SIGCHLD);
    for (;;) {
        while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
            (void) child_reaped (&A, pid, status);
        if (pid < 0 || agent_children (false) == 0)
            return;
        if ((now = tier_now_ms ()) >= deadline)
            break;
        uint64_t left = deadline - now < 100 ? deadline - now : 100;
        struct timespec ts = { 0, (long) left * 1000000L };
        (void) sigtimedwait (&chld, NULL, &ts);
    }
    fprintf (stderr, "fuzz_rpc: a child did not end within 5 s\n");
    (void) agent_children (true);
    abort ();
}

static void reset (void)
{
    char path[512];

    migrate_fini (&A);                  /* its migrators end */
    reap_children ();
    CHECK (rxfd_wait_idle (5000) == 0); /* descriptors given up, closed */
    store_fresh ();
    empty_dir ("%s/%s", "ns");
    empty_dir ("%s/%s", "shared");
    empty_dir ("%s/%s", "nvdimm");
    (void) snprintf (path, sizeof (path), "%s/state/disabled", top);
    (void) unlink (path);
    A.disabled = false;
    A.npending = 0;
}

static const char conf_fmt[] =
    "SocketDir = %1$s/run\n"
    "StateDir = %1$s/state\n"
    "NamespaceDir = %1$s/ns\n"
    "SharedStateDir = %1$s/shared\n"
    "LogFile = /dev/null\n"
    "LogLevel = debug\n"
    "NvdimmDir = %1$s/nvdimm\n"
    "NvdimmCapacity = 1G\n"
    "BBDir = %1$s/bb\n"
    "BBCapacity = 1G\n"
    "AllowedRoots = %1$s/gfs\n"
    "SlurmUser = daemon\n"
    "SlurmConf = %1$s/slurm.conf\n"
    "SitePolicyDir = %1$s/policies.d\n";

static void cleanup (void)
{
    if (forks_real + forks_quick)
        fprintf (stderr, "fuzz_rpc: %lu real children, %lu quick ones\n",
                 forks_real, forks_quick);
    if (A.store) {
        reap_children ();
        store_close (A.store);
        A.store = NULL;
        rm_top ();
    }
}

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    const char *tmp = access ("/dev/shm", W_OK) == 0 ? "/dev/shm"
                      : getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
    tier_error_t error;
    char text[4096], path[512];
    int fd;

    if (geteuid () == 0) {
        CHECK (setgroups (0, NULL) == 0);
        CHECK (setresgid (NOBODY, NOBODY, NOBODY) == 0);
        CHECK (setresuid (NOBODY, NOBODY, NOBODY) == 0);
    }
    (void) snprintf (top, sizeof (top), "%s/fuzz_rpc.XXXXXX", tmp);
    if (access (tmp, W_OK) < 0 || !mkdtemp (top)) {
        (void) snprintf (top, sizeof (top), "/tmp/fuzz_rpc.XXXXXX");
        CHECK (mkdtemp (top));
    }
    atexit (cleanup);
    for (int i = 0; i < 3; i++)
        if (fstat (i, &stdio[i]) < 0) {
            CHECK (open ("/dev/null", O_RDWR) == i);
            CHECK (fstat (i, &stdio[i]) == 0);
        }
    signal (SIGPIPE, SIG_IGN);          /* as server_init does */
    sigset_t chld;
    sigemptyset (&chld);
    sigaddset (&chld, SIGCHLD);
    CHECK (sigprocmask (SIG_BLOCK, &chld, NULL) == 0);
    umask (022);
    make_dir ("run", 0755);
    make_dir ("state", 0700);
    make_dir ("state/registry", 0700);
    make_dir ("ns", 0700);
    make_dir ("shared", 0755);
    make_dir ("nvdimm", 0700);
    make_dir ("bb", 0711);
    make_dir ("gfs", 0755);
    make_dir ("policies.d", 0755);
    (void) snprintf (path, sizeof (path), "%s/gfs/data", top);
    CHECK ((fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
    CHECK (write (fd, "batch input\n", 12) == 12);
    close (fd);
    (void) snprintf (registry, sizeof (registry), "%s/state/registry", top);

    tier_log_init ("fuzz_rpc", TIER_LOG_FILE, "/dev/null", LOG_DEBUG);
    (void) snprintf (A.node, sizeof (A.node), "fz1");
    A.conf_path = "fuzz.conf";
    A.lockfd = -1;
    CHECK ((A.conf = tier_conf_create (A.node)));
    (void) snprintf (text, sizeof (text), conf_fmt, top);
    if (tier_conf_parse (A.conf, text, "fuzz.conf", &error) < 0) {
        fprintf (stderr, "fuzz_rpc: %s\n", error.text);
        abort ();
    }
    A.slurm_uid = agent_slurm_uid (A.conf);
    CHECK ((A.epfd = epoll_create1 (EPOLL_CLOEXEC)) >= 0);
    A.lfd = A.sigfd = A.timerfd = -1;
    store_fresh ();
    tiers_init (&A);
    A.started_ms = A.last_flush_ms = tier_now_ms ();
    CHECK (replica_init (&A) == 0);
    CHECK (migrate_init (&A) == 0);
    uids[0] = 0;
    uids[1] = A.slurm_uid != (uid_t) -1 ? A.slurm_uid : 1;
    uids[2] = 4242;
    uids[3] = NOBODY;
    (void) argc;
    (void) argv;
    return 0;
}

pid_t __real_fork (void);
pid_t __wrap_fork (void);

pid_t __wrap_fork (void)
{
    pid_t pid;

    if (child_mode == 3) {
        forks_real++;
        return __real_fork ();
    }
    forks_quick++;
    /* the child shares this memory until it ends: system calls only */
    if ((pid = vfork ()) == 0) {
        if (child_mode == 2)
            (void) syscall (SYS_kill, syscall (SYS_getpid), SIGKILL);
        syscall (SYS_exit_group, child_mode == 1 ? 0 : CHILD_EXIT_SETUP);
    }
    return pid;
}

/* A reply: a JSON object; an error reply has a positive errno. */
static void check_reply (const char *reply)
{
    json_error_t jerr;
    json_t *o = json_loads (reply, 0, &jerr), *e;

    CHECK (o && json_is_object (o));
    if (json_object_get (o, "error")) {
        CHECK (json_is_string (json_object_get (o, "error")));
        CHECK ((e = json_object_get (o, "errno")) && json_is_integer (e)
               && json_integer_value (e) > 0);
    }
    json_decref (o);
}

static void one_request (const uint8_t *p, size_t len, uint32_t id)
{
    char path[512];
    struct ucred cred = { .pid = getpid () };
    struct conn *c;
    int sv[2], fds[3], nfds = (p[0] >> 2) & 3, kind = (p[0] >> 4) & 3;
    bool deferred = false;
    char *body, *reply;

    child_mode = p[0] >> 6;
    cred.uid = uids[p[0] & 3];
    cred.gid = cred.uid;
    for (int i = 0; i < nfds; i++) {
        if ((kind + i) % 3 == 0)
            (void) snprintf (path, sizeof (path), "%s/gfs/data", top);
        else if ((kind + i) % 3 == 1)
            (void) snprintf (path, sizeof (path), "%s/gfs", top);
        else
            (void) snprintf (path, sizeof (path), "/dev/null");
        CHECK ((fds[i] = open (path, O_RDONLY | O_CLOEXEC)) >= 0);
    }
    CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       0, sv) == 0);
    CHECK ((c = server_conn_add (&A, sv[0], &cred)));
    c->req_id = id;
    c->spoke = true;
    /* the server hands rpc_handle a NUL-terminated copy of the body */
    CHECK ((body = malloc (len)));
    memcpy (body, p + 1, len - 1);
    body[len - 1] = '\0';
    reply = rpc_handle (&A, c, body, len - 1, fds, nfds, &deferred);
    free (body);
    if (deferred)
        CHECK (!reply);
    else {
        CHECK (reply);
        check_reply (reply);
        free (reply);
    }
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            close (fds[i]);
    server_conn_close (&A, c);          /* drops what it is still owed */
    close (sv[1]);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    int before = count_fds ();
    size_t i = 0;
    uint32_t id = 1;

    while (i < size && id <= REQUESTS_MAX) {
        const uint8_t *end = memchr (data + i, SEP, size - i);
        size_t len = end ? (size_t) (end - (data + i)) : size - i;

        if (len > 0)
            one_request (data + i, len, id++);
        i += len + 1;
    }
    reset ();
    CHECK (A.nconns == 0 && !A.conns);
    CHECK (count_fds () == before);
    for (int k = 0; k < 3; k++) {
        struct stat st;                 /* nobody closed or replaced them */
        CHECK (fstat (k, &st) == 0 && st.st_dev == stdio[k].st_dev
               && st.st_ino == stdio[k].st_ino);
    }
    return 0;
}
