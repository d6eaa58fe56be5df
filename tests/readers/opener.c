/* opener.c - open a file again and again, from several threads, in a
 * forked child and in an exec'ed copy of itself, through every entry
 * point the interposer wraps (open, openat, open64, fopen, freopen,
 * freopen64); check every open reads the same bytes.  For the interposer
 * tests: prints "first BYTES HASH" (FNV-1a of the first 4 KiB read, to
 * compare with the file's) and "ok N" (opens made), or fails.
 *
 *   opener FILE OPENS THREADS
 *
 * Opens: 1 + OPENS x THREADS in the process, as many in a forked child,
 * 1 + OPENS x THREADS in the exec'ed copy.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *file;
static int opens;
static char first[4096];
static ssize_t first_len;
static int failures;

static ssize_t head (int how, char *buf)
{
    ssize_t n = -1;
    int fd = -1;
    FILE *f;

    switch (how % 6) {
        case 0: fd = open (file, O_RDONLY | O_CLOEXEC); break;
        case 1: fd = openat (AT_FDCWD, file, O_RDONLY); break;
        case 2: fd = open64 (file, O_RDONLY); break;
        case 3:
        case 4:
        case 5:
            if (how % 6 == 3)
                f = fopen (file, "re");
            else if (!(f = fopen ("/dev/null", "r")))
                return -1;
            else if (how % 6 == 4)
                f = freopen (file, "re", f);    /* closes it on failure */
            else
                f = freopen64 (file, "r", f);
            if (!f)
                return -1;
            n = (ssize_t) fread (buf, 1, 4096, f);
            fclose (f);
            return n;
    }
    if (fd < 0)
        return -1;
    n = read (fd, buf, 4096);
    close (fd);
    return n;
}

static void *run (void *arg)
{
    char buf[4096];

    for (int i = 0; i < opens; i++) {
        ssize_t n = head (i + (int) (long) arg, buf);
        if (n != first_len || memcmp (buf, first, (size_t) n))
            __atomic_add_fetch (&failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int all (int nthreads)
{
    pthread_t th[64];

    for (int t = 0; t < nthreads; t++)
        pthread_create (&th[t], NULL, run, (void *) (long) t);
    for (int t = 0; t < nthreads; t++)
        pthread_join (th[t], NULL);
    return failures;
}

int main (int argc, char **argv)
{
    int nthreads, status;
    pid_t pid;

    if (argc < 4)
        return 2;
    file = argv[1];
    opens = atoi (argv[2]);
    nthreads = atoi (argv[3]);
    if (nthreads < 1 || nthreads > 64 || (first_len = head (0, first)) < 0) {
        perror (file);
        return 1;
    }
    if (argc == 5)                      /* the exec'ed copy */
        return all (nthreads) ? 1 : 0;
    if (all (nthreads))
        return 1;
    if ((pid = fork ()) == 0) {
        /* the child opens too, then runs an exec'ed copy, then exits
         * normally (so that every process reports its cached opens) */
        pid_t g;
        if (all (nthreads))
            exit (1);
        if ((g = fork ()) == 0) {
            execl ("/proc/self/exe", argv[0], file, argv[2], argv[3], "exec",
                   (char *) NULL);
            _exit (3);
        }
        exit (waitpid (g, &status, 0) == g && WIFEXITED (status)
              ? WEXITSTATUS (status) : 4);
    }
    if (waitpid (pid, &status, 0) < 0 || !WIFEXITED (status)
        || WEXITSTATUS (status) != 0) {
        fprintf (stderr, "child failed (%d)\n", status);
        return 1;
    }
    {
        uint64_t h = 14695981039346656037ULL;
        for (ssize_t k = 0; k < first_len; k++)
            h = (h ^ (unsigned char) first[k]) * 1099511628211ULL;
        printf ("first %zd %016llx\n", first_len, (unsigned long long) h);
    }
    printf ("ok %d\n", 2 + 3 * opens * nthreads);
    return 0;
}
