/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_streams.c - the node's GFS streams: the cap, fairness between
 * users, worker channels, and the users' shared buckets */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/streams.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/copy.h"

#define ALICE 60001
#define BOB 60002

static void test_pick (void **state)
{
    struct streams_cand c[3] = { { 0 } };

    assert_int_equal (streams_pick (c, 0), -1);
    /* the fewest held first */
    c[0] = (struct streams_cand) { .held = 2, .served = 1, .seq = 1 };
    c[1] = (struct streams_cand) { .held = 0, .served = 9, .seq = 9 };
    c[2] = (struct streams_cand) { .held = 1, .served = 0, .seq = 0 };
    assert_int_equal (streams_pick (c, 3), 1);
    /* then the user served least recently (round robin) */
    c[1].held = 2;
    c[2].held = 2;
    assert_int_equal (streams_pick (c, 3), 2);
    /* then the oldest request */
    c[0].served = c[1].served = c[2].served = 5;
    c[0].seq = 7;
    c[1].seq = 3;
    c[2].seq = 4;
    assert_int_equal (streams_pick (c, 3), 1);
}

struct rec {
    struct agent *a;
    struct stream_ticket *t;
    int who;                    /* an index into order */
    bool go_fails;              /* end the ticket from within go */
};

static int order[32], norder;

static void go (struct agent *a, void *arg)
{
    struct rec *r = arg;

    order[norder++] = r->who;
    if (r->go_fails)
        streams_done (a, &r->t);        /* as a fetch whose fork failed */
}

static int setup (void **state)
{
    static struct agent a;

    memset (&a, 0, sizeof (a));
    a.epfd = epoll_create1 (EPOLL_CLOEXEC);
    a.slurm_uid = (uid_t) -1;
    if (a.epfd < 0 || !(a.conf = tier_conf_create ("n1")))
        return -1;
    a.conf->gfs_streams = 2;
    if (streams_init (&a) < 0)
        return -1;
    norder = 0;
    *state = &a;
    return 0;
}

static int teardown (void **state)
{
    struct agent *a = *state;

    streams_fini (a);
    tier_conf_destroy (a->conf);
    close (a->epfd);
    return 0;
}

/* alice queues five, then bob one: bob gets the next stream that ends,
 * not the sixth; alice's are served in order. */
static void test_fair (void **state)
{
    struct agent *a = *state;
    struct rec r[6];
    json_t *st;

    for (int i = 0; i < 6; i++) {
        r[i] = (struct rec) { .a = a, .who = i };
        streams_want (a, i < 5 ? ALICE : BOB, STREAMS_STAGE_IN, "test", go,
                      &r[i], &r[i].t);
    }
    /* two at once (GfsStreams 2) */
    assert_int_equal (norder, 2);
    assert_int_equal (order[0], 0);
    assert_int_equal (order[1], 1);
    st = streams_status_json (a, 0);
    assert_int_equal (json_integer_value (json_object_get (st, "in_use")), 2);
    assert_int_equal (json_integer_value (json_object_get (st, "waiting")),
                      4);
    json_decref (st);
    streams_done (a, &r[0].t);
    assert_null (r[0].t);
    assert_int_equal (norder, 3);
    assert_int_equal (order[2], 5);     /* bob: he holds none */
    streams_done (a, &r[1].t);
    assert_int_equal (order[3], 2);
    streams_done (a, &r[5].t);
    assert_int_equal (order[4], 3);
    streams_done (a, &r[2].t);
    assert_int_equal (order[5], 4);
    streams_done (a, &r[3].t);
    streams_done (a, &r[4].t);
    assert_int_equal (norder, 6);
    streams_done (a, &r[4].t);          /* twice: nothing */
    st = streams_status_json (a, 0);
    assert_int_equal (json_integer_value (json_object_get (st, "in_use")), 0);
    json_decref (st);
}

/* A ticket given back while it waits frees no stream; a holder whose go
 * ends it at once (a failed fork) passes the stream on. */
static void test_cancel (void **state)
{
    struct agent *a = *state;
    struct rec r[4];

    for (int i = 0; i < 4; i++) {
        r[i] = (struct rec) { .a = a, .who = i };
        r[i].go_fails = i == 2;
        streams_want (a, ALICE, STREAMS_REPLICA, "test", go, &r[i], &r[i].t);
    }
    assert_int_equal (norder, 2);
    streams_done (a, &r[3].t);          /* it waited: gone */
    assert_int_equal (norder, 2);
    streams_done (a, &r[0].t);          /* 2 goes, fails, ends at once */
    assert_int_equal (norder, 3);
    assert_int_equal (order[2], 2);
    assert_null (r[2].t);
    streams_done (a, &r[1].t);
    assert_int_equal (norder, 3);       /* nobody waits */
}

/* Users that hold the same number are served in turn. */
static void test_round_robin (void **state)
{
    struct agent *a = *state;
    struct rec r[8];

    a->conf->gfs_streams = 1;
    for (int i = 0; i < 8; i++) {
        r[i] = (struct rec) { .a = a, .who = i };
        /* alice 0-3, bob 4-7, alice asked first */
        streams_want (a, i < 4 ? ALICE : BOB, STREAMS_STAGE_OUT, "test", go,
                      &r[i], &r[i].t);
    }
    for (int i = 0; i < 8; i++) {
        int k;
        assert_int_equal (norder, i + 1);
        k = order[i];
        streams_done (a, &r[k].t);
    }
    /* 0 (alice), then bob and alice in turn */
    {
        static const int want[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
        for (int i = 0; i < 8; i++)
            assert_int_equal (order[i], want[i]);
    }
}

static void put (int fd, char c)
{
    if (write (fd, &c, 1) != 1)
        _exit (3);
}

static int note_fd = -1;
static bool note_seen;

static void note (void *arg, bool on)
{
    if (on)
        note_seen = true;
    put (note_fd, on ? 'q' : 'e');
}

/* Drive the agent's side until fd has something to read. */
static void pump (struct agent *a, int ms)
{
    struct epoll_event ev[8];
    int n = epoll_wait (a->epfd, ev, 8, ms);

    for (int i = 0; i < n; i++)
        streams_event (a, (int) (ev[i].data.u64 - AGENT_EV_STREAM0));
}

/* Workers over their channels: one holds the only stream, the second is
 * told to wait, gets it when the first dies holding it (EOF), and the
 * user's shared bucket counts what both moved. */
static void test_workers (void **state)
{
    struct agent *a = *state;
    struct tier_copy_limit *lim;
    struct tier_copy_limit_stats st;
    int fd1, fd2, p1[2], p2[2], k1[2], status;
    pid_t w1, w2;
    char c;
    json_t *js;

    a->conf->gfs_streams = 1;
    assert_non_null ((lim = streams_limit (a, BOB, "bob")));
    assert_true (lim == streams_limit (a, BOB, NULL));
    assert_true ((fd1 = streams_client (a, BOB, "bob", STREAMS_STAGE_IN,
                                        "stage-in of job 1")) >= 0);
    /* p1, p2: from the workers (the test polls them); k1: to w1 */
    assert_int_equal (pipe2 (p1, O_NONBLOCK), 0);
    assert_int_equal (pipe (k1), 0);
    if ((w1 = fork ()) == 0) {
        streams_close_agent_ends (a);
        streams_worker_init (fd1, lim);
        if (streams_take (NULL, NULL) != 0)
            _exit (2);
        (void) tier_copy_limit_take (streams_worker_limit (), 1000, NULL);
        put (p1[1], 'g');
        if (read (k1[0], &c, 1) != 1)   /* until told: then die holding */
            _exit (3);
        _exit (0);
    }
    close (fd1);
    while (read (p1[0], &c, 1) != 1)
        pump (a, 100);
    assert_int_equal (c, 'g');
    assert_true ((fd2 = streams_client (a, BOB, "bob", STREAMS_STAGE_OUT,
                                        "stage-out of job 2")) >= 0);
    assert_int_equal (pipe2 (p2, O_NONBLOCK), 0);
    if ((w2 = fork ()) == 0) {
        streams_close_agent_ends (a);
        streams_worker_init (fd2, lim);
        /* told to wait first ('Q'), then granted */
        note_fd = p2[1];
        if (streams_take (note, NULL) != 0 || !note_seen)
            _exit (2);
        (void) tier_copy_limit_take (streams_worker_limit (), 2000, NULL);
        streams_give ();
        streams_give ();                /* twice: nothing */
        _exit (0);
    }
    close (fd2);
    while (read (p2[0], &c, 1) != 1)
        pump (a, 100);
    assert_int_equal (c, 'q');
    js = streams_status_json (a, 0);
    assert_int_equal (json_integer_value (json_object_get (js, "waiting")),
                      1);
    json_decref (js);
    put (k1[1], 'x');                   /* w1 dies holding the stream */
    assert_int_equal (waitpid (w1, &status, 0), w1);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    while (waitpid (w2, &status, WNOHANG) == 0)
        pump (a, 100);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    for (int i = 0; i < 5; i++)
        pump (a, 20);                   /* w2's EOF */
    tier_copy_limit_stats (lim, &st);
    assert_int_equal (st.bytes, 3000);
    js = streams_status_json (a, 0);
    assert_int_equal (json_integer_value (json_object_get (js, "in_use")), 0);
    assert_int_equal (json_integer_value (json_object_get (js, "waiting")),
                      0);
    json_decref (js);
    /* another user sees only herself */
    js = streams_status_json (a, ALICE);
    assert_int_equal (json_array_size (json_object_get (js, "users")), 0);
    json_decref (js);
    js = streams_status_json (a, BOB);
    assert_int_equal (json_array_size (json_object_get (js, "users")), 1);
    json_decref (js);
    close (p1[0]);
    close (p1[1]);
    close (p2[0]);
    close (p2[1]);
    close (k1[0]);
    close (k1[1]);
}

/* A worker without an agent goes on without a stream. */
static void test_no_agent (void **state)
{
    int sv[2];

    streams_worker_init (-1, NULL);
    assert_int_equal (streams_take (NULL, NULL), 1);
    streams_give ();
    assert_int_equal (socketpair (AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    close (sv[0]);
    streams_worker_init (sv[1], NULL);
    assert_int_equal (streams_take (NULL, NULL), 1);
    assert_null (streams_worker_limit ());
}

/* A worker stuck for good (it keeps its end open and never answers) is
 * revoked: its stream goes to the next at once; a worker that ended is
 * not revoked. */
static void test_revoke (void **state)
{
    struct agent *a = *state;
    uint64_t id1 = 0, id2 = 0, id3 = 0;
    int fd1, fd2, fd3;
    char c;
    json_t *js;

    a->conf->gfs_streams = 1;
    assert_true ((fd1 = streams_client_id (a, ALICE, "alice", STREAMS_STAGE_IN,
                                           "stage-in of job 1", &id1))
                 >= 0);
    assert_true ((fd2 = streams_client_id (a, BOB, "bob", STREAMS_STAGE_IN,
                                           "stage-in of job 2", &id2))
                 >= 0);
    assert_true (id1 != 0 && id2 != 0 && id1 != id2);
    put (fd1, 'A');
    while (recv (fd1, &c, 1, MSG_DONTWAIT) != 1)
        pump (a, 100);
    assert_int_equal (c, 'G');
    put (fd2, 'A');
    while (recv (fd2, &c, 1, MSG_DONTWAIT) != 1)
        pump (a, 100);
    assert_int_equal (c, 'Q');
    /* alice's worker is stuck: bob is granted without waiting for it */
    assert_true (streams_revoke (a, id1, "stuck"));
    assert_int_equal (recv (fd2, &c, 1, MSG_DONTWAIT), 1);
    assert_int_equal (c, 'G');
    assert_int_equal (recv (fd1, &c, 1, MSG_DONTWAIT), 0); /* closed */
    assert_false (streams_revoke (a, id1, "again"));
    js = streams_status_json (a, 0);
    assert_int_equal (json_integer_value (json_object_get (js, "in_use")), 1);
    assert_int_equal (json_integer_value (json_object_get (js, "revoked")), 1);
    json_decref (js);
    /* one that closed its end is freed without a word */
    assert_true ((fd3 = streams_client_id (a, ALICE, "alice", STREAMS_REPLICA,
                                           "x", &id3))
                 >= 0);
    close (fd3);
    assert_false (streams_revoke (a, id3, "gone"));
    assert_false (streams_revoke (a, 0, "none"));
    js = streams_status_json (a, 0);
    assert_int_equal (json_integer_value (json_object_get (js, "revoked")), 1);
    json_decref (js);
    close (fd1);
    close (fd2);
    for (int i = 0; i < 3; i++)
        pump (a, 20);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_pick),
        cmocka_unit_test_setup_teardown (test_fair, setup, teardown),
        cmocka_unit_test_setup_teardown (test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown (test_round_robin, setup, teardown),
        cmocka_unit_test_setup_teardown (test_workers, setup, teardown),
        cmocka_unit_test_setup_teardown (test_revoke, setup, teardown),
        cmocka_unit_test (test_no_agent),
    };
    return UNIT_RUN (tests);
}
