/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_drain.c - the block cache's drain child over its channel: files
 * registered with their descriptors, a flush answered once its records
 * are on the files, a failing file reported once and drained once its
 * descriptor is replaced, the job's end, the agent gone (the drain goes
 * on alone), and the pacing by fill level
 *
 * The child runs drain_main in a forked process with one end of a
 * socketpair, as child.c would start it; the test speaks the agent's
 * side of the channel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/drain.h"
#include "lib/blog.h"
#include "unit.h"

static char dir[PATH_MAX];
static int logfd = -1, fds[2];
static struct blog *b;
static pid_t child;
static int chan;

static int open_in (const char *name, int flags)
{
    char p[PATH_MAX + 32];

    snprintf (p, sizeof (p), "%s/%s", dir, name);
    return open (p, flags | O_CLOEXEC, 0600);
}

static int setup (void **state)
{
    struct drain_arg da = { .tick_ms = 5, .trickle = 0 };
    tier_error_t e;
    int sv[2];

    (void) state;
    snprintf (dir, sizeof (dir), "%s/test_drain.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (dir) || (logfd = open_in ("log", O_RDWR | O_CREAT)) < 0
        || blog_format (logfd, 65536, &e) < 0 || !(b = blog_open (logfd, 0, &e))
        || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        char name[8];
        snprintf (name, sizeof (name), "f%d", i);
        if ((fds[i] = open_in (name, O_RDWR | O_CREAT)) < 0)
            return -1;
    }
    da.logfd = logfd;
    if ((child = fork ()) == 0) {
        close (sv[0]);
        _exit (drain_main (&da, sv[1]));
    }
    close (sv[1]);
    chan = sv[0];
    return child > 0 ? 0 : -1;
}

static int teardown (void **state)
{
    char cmd[PATH_MAX + 16];

    (void) state;
    if (child > 0) {
        kill (child, SIGKILL);
        waitpid (child, NULL, 0);
    }
    if (chan >= 0)
        close (chan);
    blog_close (b);
    close (logfd);
    close (fds[0]);
    close (fds[1]);
    snprintf (cmd, sizeof (cmd), "rm -rf %s", dir);
    return system (cmd) == 0 ? 0 : -1;
}

static void send_msg (int type, json_t *body, int fd)
{
    tier_error_t e;

    assert_int_equal (chmsg_send (chan, &drmsg_proto, false, type, body,
                                  fd >= 0 ? &fd : NULL, fd >= 0, 2000, &e),
                      0);
}

/* The next message of the given type (others, progress, skipped). */
static json_t *expect (int want)
{
    for (int i = 0; i < 100; i++) {
        json_t *body;
        tier_error_t e;
        int type;

        assert_int_equal (chmsg_recv (chan, &drmsg_proto, &type, &body, NULL,
                                      NULL, 0, 10000, &e),
                          0);
        if (type == want)
            return body;
        json_decref (body);
    }
    fail_msg ("no message %d", want);
    return NULL;
}

static void put (uint32_t file, uint64_t off, const char *text)
{
    struct blog_txn t;

    assert_int_equal (blog_reserve (b, BLOG_WRITE, file, off, strlen (text),
                                    &t),
                      0);
    memcpy (t.payload, text, strlen (text));
    assert_int_equal (blog_commit (b, &t), 0);
}

static void file_is (int i, const char *text)
{
    char buf[64] = { 0 };

    assert_true (pread (fds[i], buf, sizeof (buf) - 1, 0) >= 0);
    assert_string_equal (buf, text);
}

static void test_flush_end (void **state)
{
    json_t *o;
    int status;

    (void) state;
    send_msg (DRMSG_FILE, json_pack ("{s:i}", "file", 0), fds[0]);
    send_msg (DRMSG_FILE, json_pack ("{s:i}", "file", 1), fds[1]);
    put (0, 0, "hello ");
    put (1, 0, "other");
    put (0, 6, "world");
    send_msg (DRMSG_FLUSH, json_pack ("{s:i}", "id", 7), -1);
    o = expect (DRMSG_FLUSHED);
    assert_int_equal (json_integer_value (json_object_get (o, "id")), 7);
    assert_int_equal (json_integer_value (json_object_get (o, "tail")),
                      (json_int_t) blog_head (b));
    json_decref (o);
    file_is (0, "hello world");
    file_is (1, "other");
    put (1, 5, "!");
    send_msg (DRMSG_END, NULL, -1);
    o = expect (DRMSG_ENDED);
    assert_int_equal (json_integer_value (json_object_get (o, "records")), 4);
    json_decref (o);
    assert_int_equal (waitpid (child, &status, 0), child);
    child = 0;
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    file_is (1, "other!");
    assert_int_equal (blog_used (b), 0);
}

static void test_failure (void **state)
{
    int full = open ("/dev/full", O_WRONLY | O_CLOEXEC);
    json_t *o;

    (void) state;
    assert_true (full >= 0);
    send_msg (DRMSG_FILE, json_pack ("{s:i}", "file", 0), full);
    put (0, 0, "data");
    o = expect (DRMSG_FAILED);
    assert_int_equal (json_integer_value (json_object_get (o, "file")), 0);
    assert_int_equal (json_integer_value (json_object_get (o, "errno")),
                      ENOSPC);
    assert_non_null (strstr (json_string_value (json_object_get (o, "error")),
                             strerror (ENOSPC)));
    json_decref (o);
    assert_true (blog_used (b) > 0); /* kept */
    /* the file's descriptor replaced: it drains */
    send_msg (DRMSG_FILE, json_pack ("{s:i}", "file", 0), fds[0]);
    send_msg (DRMSG_FLUSH, json_pack ("{s:i}", "id", 1), -1);
    json_decref (expect (DRMSG_FLUSHED));
    file_is (0, "data");
    close (full);
}

/* The agent dies: the drain goes on with what it has. */
static void test_agent_gone (void **state)
{
    (void) state;
    send_msg (DRMSG_FILE, json_pack ("{s:i}", "file", 0), fds[0]);
    /* the file message is read before the channel closes */
    send_msg (DRMSG_FLUSH, json_pack ("{s:i}", "id", 1), -1);
    json_decref (expect (DRMSG_FLUSHED));
    close (chan);
    chan = -1;
    put (0, 0, "alone");
    for (int i = 0; i < 500 && blog_used (b); i++)
        usleep (10000);
    assert_int_equal (blog_used (b), 0);
    file_is (0, "alone");
    assert_int_equal (kill (child, 0), 0); /* still there, for a new agent */
}

static void test_pace (void **state)
{
    struct drain_pace p = { 0 };

    (void) state;
    /* below the high watermark: a trickle (1 MiB/s, 10 ms ticks) */
    assert_int_equal (drain_budget (&p, 10, 100, false, 1 << 20, 10),
                      (1 << 20) / 1000 * 10);
    /* at 50 %: full speed, until below 45 % */
    assert_int_equal (drain_budget (&p, 50, 100, false, 1 << 20, 10), 0);
    assert_int_equal (drain_budget (&p, 46, 100, false, 1 << 20, 10), 0);
    assert_int_equal (drain_budget (&p, 44, 100, false, 1 << 20, 10),
                      (1 << 20) / 1000 * 10);
    /* a flush, or no trickle configured: everything */
    assert_int_equal (drain_budget (&p, 1, 100, true, 1 << 20, 10), 0);
    assert_int_equal (drain_budget (&p, 1, 100, false, 0, 10), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_flush_end, setup, teardown),
        cmocka_unit_test_setup_teardown (test_failure, setup, teardown),
        cmocka_unit_test_setup_teardown (test_agent_gone, setup, teardown),
        cmocka_unit_test (test_pace),
    };
    return UNIT_RUN (tests);
}
