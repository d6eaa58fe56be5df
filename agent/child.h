/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* child.h - the one way tierd starts a process
 *
 * Every fork in agent/ is made here (the daemon's own double fork
 * included: child_daemonize).  In the new process, in this order:
 *
 *   1. every signal back to its default and unblocked (the agent blocks
 *      them for its signalfd), SIGPIPE ignored (a gone peer is EPIPE);
 *   2. every descriptor closed but 0-2, the channel, the log file
 *      (lib/log.h: tier_log works in children) and spec->keep[];
 *   3. the process name (comm, at most 15 characters: "tierd-mig") and
 *      the full title in argv ("tierd-mig job 42.0 alice"), so that ps
 *      tells the children apart and a match on the agent's command
 *      line never finds them (tests stop the agent by its pid file);
 *   4. the cgroups of the user it works for (lib/usercg.h: spec->for_uid,
 *      else the uid of spec->cred; none for root), then spec->as_root,
 *      for work that needs root before the drop (opening the write
 *      cache's directories);
 *   5. the credentials spec->cred in spec->mode, for good (lib/cred.h:
 *      tier_cred_drop), when spec->cred is set; else it stays root;
 *   6. PR_SET_PDEATHSIG SIGKILL, armed after the last credential change
 *      (the kernel clears it on one), and an exit if the parent changed
 *      meanwhile (it died before the signal was armed) -- unless
 *      spec->outlive: a child whose work others wait for and that reports
 *      through files rather than its channel (the stager: the job's tasks
 *      wait for its status in the job's directory) finishes that work
 *      when the agent dies or restarts;
 *   7. spec->main (arg, channel): its return value is the exit status.
 *
 * The channel is one end of an AF_UNIX stream socketpair with the typed
 * messages of chmsg.h.  In the agent (child_start), child.c watches the
 * other end in the event loop, hands each message to spec->on_msg, and,
 * once the process is reaped and everything it sent was read, calls
 * spec->on_done with its wait status.  child_tick enforces spec->deadline_ms
 * (the whole run) and spec->stall_ms (the progress watchdog: no message
 * for that long); either kills the child with SIGKILL (by its pidfd), and
 * on_done sees why (child_why: ETIMEDOUT, ESTALE, or ECANCELED: stopped).
 *
 * A killed child that has not ended a second later sleeps in the kernel
 * where SIGKILL waits too (D state: a request of a FUSE or network file
 * system that is never answered).  It is abandoned, never waited for:
 * on_done is called at once, with the status of a SIGKILL death and
 * child_abandoned true, its channel is closed and its slot freed; only
 * its pid is kept (at most CHILD_ABANDONED_MAX of them) until the loop
 * reaps it, whenever it ends, and logs that.  While CHILD_ABANDONED_MAX
 * children are abandoned and alive, or CHILD_ABANDONED_PER_UID of those
 * that run with one user's credentials, a new child (of that user)
 * is refused (EAGAIN): a file system that hangs every request costs a
 * bounded number of processes, and one user's (a FUSE mount of theirs)
 * leaves the others room.
 * The agent is the subreaper of its children's children, so that those
 * a child abandons (a stager's copier) are reaped here too.
 *
 * A child of a child (the stager's copier) uses child_spawn, the same
 * steps without the agent's loop.
 */
#ifndef TIER_AGENT_CHILD_H
#define TIER_AGENT_CHILD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/conf.h"
#include "lib/cred.h"
#include "lib/error.h"
#include "chmsg.h"

#define CHILD_MAX 1024              /* children at once */
#define CHILD_KEEP_MAX 8            /* descriptors kept besides 0-2 */
#define CHILD_NAME_MAX 15           /* what comm holds */
#define CHILD_TITLE_MAX 128
#define CHILD_EXIT_SETUP 125        /* as_root or the drop failed */
#define CHILD_ABANDONED_MAX 64      /* abandoned children still alive */
#define CHILD_ABANDONED_PER_UID 8   /* of them with one user's credentials */

struct agent;
struct child;

typedef int (*child_root_f) (void *arg);
typedef int (*child_main_f) (void *arg, int chan);
/* In the agent: one message (body owned by the callee; fds too, closed
 * by child.c if the callee leaves them >= 0). */
typedef void (*child_msg_f) (struct agent *a, struct child *c, int type,
                             json_t *body, int *fds, int nfds, void *owner);
/* In the agent: the child was reaped (status as from waitpid). */
typedef void (*child_done_f) (struct agent *a, struct child *c, int status,
                              void *owner);

struct child_spec {
    const char *name;               /* comm: "tierd-mig" */
    char title[CHILD_TITLE_MAX];    /* the full title; "" = name */
    const struct tier_cred *cred;   /* NULL: stays root */
    uid_t for_uid;                  /* whose work (step 4): 0, cred's */
    enum tier_cred_mode mode;
    int keep[CHILD_KEEP_MAX];       /* descriptors the child keeps */
    int nkeep;
    bool own_pgrp;                  /* its own process group */
    bool outlive;                   /* no parent-death signal (step 6) */
    int deadline_ms;                /* killed after this long (0: never) */
    int stall_ms;                   /* killed after this long without a
                                     * message (0: never) */
    const struct chmsg_proto *proto; /* what the channel carries */
    child_root_f as_root;
    child_main_f main;
    void *arg;                      /* for as_root and main, in the child */
    child_msg_f on_msg;             /* for the agent */
    child_done_f on_done;
    void *owner;                    /* for on_msg and on_done */
};

/* In the agent, once: find (and make) the user cgroups of conf's
 * UserCgroupDir that children join (step 4), removing the empty ones
 * an earlier agent left; how many hierarchies.  Says what it found. */
int child_usercg_init (const struct tier_conf *conf);

/* The agent's command line, whose memory later holds the children's
 * titles (from main, before anything forks). */
void child_title_init (int argc, char **argv);

/* Fork; in the child the steps above, in the parent the pid and *chan,
 * the parent's end of the channel (blocking, close-on-exec).  -1 with
 * errno and a text if the fork or the socketpair failed.
 */
pid_t child_spawn (const struct child_spec *spec, int *chan,
                   tier_error_t *error);

/* In the agent: spawn, and watch the channel in the loop. */
struct child *child_start (struct agent *a, const struct child_spec *spec,
                           tier_error_t *error);

/* In the agent: the answer of a child_ask'd child.  rc 0: its first
 * message (type, body and fd, -1 if none, are the callee's); else none
 * came: rc is ETIMEDOUT, ECANCELED (stopped), ENODATA (it exited) or
 * the reason it could not start, and error says why. */
typedef void (*child_answer_f) (struct agent *a, int rc, int type, json_t *body,
                                int fd, const tier_error_t *error, void *arg);

/* In the agent: start the child (killed after timeout_ms) and hand its
 * first message to done, from the loop -- for short children whose
 * answer the caller needs (the policy freezer, the mirror checker); the
 * loop never waits for one.
 * done is called exactly once: if the child cannot start, before this
 * returns.  spec's on_msg, on_done, owner and deadline_ms are child.c's.
 */
void child_ask (struct agent *a, const struct child_spec *spec, int timeout_ms,
                child_answer_f done, void *arg);

/* In the agent: queue a message for the child (body consumed).  -1 with
 * errno EPIPE once its channel closed, ENOBUFS when more than
 * CHMSG_MAX * 4 bytes wait for it (a child that does not read).
 */
int child_send (struct child *c, int type, json_t *body, const int *fds,
                int nfds);

pid_t child_pid (const struct child *c);
/* Why child.c killed it: 0, ETIMEDOUT (deadline) or ESTALE (no progress). */
int child_why (const struct child *c);
/* In on_done: it did not end when killed (see above). */
bool child_abandoned (const struct child *c);
/* It waits for something that is no stall of its own (a GFS stream):
 * while held, the progress watchdog (stall_ms) does not count; any
 * message starts it again from then. */
void child_hold (struct child *c, bool on);
/* By its pidfd; SIGKILL also arms the abandonment (above). */
void child_kill (struct child *c, int sig);
/* Forget the owner: no more callbacks; the child is still reaped. */
void child_orphan (struct child *c);

/* The loop's hooks (server.c). */
void child_event (struct agent *a, int slot, uint32_t events);
bool child_reaped (struct agent *a, pid_t pid, int status);

/* server.c: child pid was stopped (waitpid WUNTRACED: SIGSTOP and the
 * like, from outside -- a child running as a user can be stopped by that
 * user): killed at once (child_why ECANCELED), so that what it holds (a
 * GFS stream, a job's outputs) comes back now, not after StallTimeout;
 * its owner sees it end as any killed child.  False if it is none of
 * child.c's. */
bool child_stopped (struct agent *a, pid_t pid, int sig);
void child_tick (struct agent *a);
/* Children still running (for tests and tierctl status), and those
 * abandoned and not yet ended. */
int child_count (void);
int child_abandoned_count (void);

/* The daemon's double fork (main.c): returns 0 in the grandchild only,
 * in a new session with stdio on /dev/null; the two processes before it
 * exit 0.  -1 with errno if a fork failed.
 */
int child_daemonize (void);

#endif /* !TIER_AGENT_CHILD_H */
