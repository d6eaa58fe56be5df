/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* blog.c - the block cache's write log (see blog.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "blog.h"

/* tests/unit/test_blog.c kills a writer at these points */
#ifndef BLOG_HOOK
#define BLOG_HOOK(point) \
    do { \
    } while (0)
#endif

#define BLOG_MAGIC "TIERBLOG"
#define BLOG_VERSION 1
#define REC_MAGIC 0x52424c54u /* "TLBR" */

/* The superblock, at the file's start.  head and tail have cache lines
 * of their own: writers move one, the drain the other. */
struct super {
    char magic[8];
    uint32_t version;
    uint32_t sum; /* of magic, version, capacity */
    uint64_t capacity;
    char pad1[40];
    uint64_t head; /* the writers', under the lock */
    char pad2[56];
    uint64_t tail; /* the drain's */
    char pad3[56];
    pthread_mutex_t lock; /* robust, process-shared */
};

/* A record's header, on the media: 64 bytes. */
struct rec {
    uint64_t seq; /* its position */
    uint32_t magic;
    uint16_t type;
    uint16_t flags;
    uint32_t file;
    int32_t writer;
    uint64_t writer_start;
    uint64_t offset;
    uint64_t length;
    uint32_t sum; /* of the 48 bytes above */
    uint32_t pad;
    uint64_t commit; /* written last */
};

_Static_assert(sizeof (struct rec) == BLOG_ALIGN, "a header is 64 bytes");
_Static_assert(offsetof (struct rec, sum) == 48, "the sum follows 48 bytes");
_Static_assert(sizeof (struct super) <= BLOG_SUPER, "the superblock fits");

enum flush_kind { FLUSH_MSYNC, FLUSH_CLWB, FLUSH_CLFLUSHOPT, FLUSH_CLFLUSH };

struct blog {
    unsigned char *map;
    size_t maplen;
    uint64_t cap;
    enum flush_kind flush;
    bool recover;
    bool (*alive) (pid_t, uint64_t);
    pid_t pid; /* the writer's identity, by process */
    uint64_t start;
};

static struct super *super_of (const struct blog *b)
{
    return (struct super *) (void *) b->map;
}

static unsigned char *ring (const struct blog *b)
{
    return b->map + BLOG_SUPER;
}

/* FNV-1a, 64 bits: a torn header is what it must catch, not an enemy
 * (a user who can write the log can write the GFS file directly). */
static uint64_t fnv (const void *p, size_t n, uint64_t h)
{
    const unsigned char *c = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

#define FNV_BASIS 14695981039346656037ull

static uint32_t rec_sum (const struct rec *r)
{
    uint64_t h = fnv (r, offsetof (struct rec, sum), FNV_BASIS);

    return (uint32_t) (h ^ (h >> 32));
}

/* Never 0 (0: not committed).  A cancelled record (its writer gave up:
 * never acknowledged) has the other word: odd for committed, even for
 * cancelled, so that the two never meet. */
static uint64_t commit_word (uint64_t seq, uint32_t sum)
{
    uint64_t h = fnv (&seq, sizeof (seq), FNV_BASIS ^ 0xc0ffee);

    return fnv (&sum, sizeof (sum), h) | 1;
}

static uint64_t cancel_word (uint64_t seq, uint32_t sum)
{
    return ((commit_word (seq, sum) ^ 0x5a5a5a5a00000000ull) & ~1ull) | 2;
}

static uint32_t super_sum (const struct super *s)
{
    uint64_t h = fnv (s->magic, sizeof (s->magic), FNV_BASIS);

    h = fnv (&s->version, sizeof (s->version), h);
    h = fnv (&s->capacity, sizeof (s->capacity), h);
    return (uint32_t) (h ^ (h >> 32));
}

static uint64_t align_up (uint64_t n)
{
    return (n + BLOG_ALIGN - 1) & ~(uint64_t) (BLOG_ALIGN - 1);
}

/* ---------------------------------------------------------- persisting */

static enum flush_kind flush_pick (void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;

    if (__get_cpuid_count (7, 0, &a, &b, &c, &d)) {
        if (b & (1u << 24))
            return FLUSH_CLWB;
        if (b & (1u << 23))
            return FLUSH_CLFLUSHOPT;
    }
    return FLUSH_CLFLUSH;
#else
    return FLUSH_MSYNC;
#endif
}

/* Make [p, p + n) of the map durable. */
static int persist (const struct blog *b, const void *p, size_t n)
{
    uintptr_t start = (uintptr_t) p, end = start + n;

    if (n == 0)
        return 0;
#if defined(__x86_64__)
    if (b->flush != FLUSH_MSYNC) {
        for (uintptr_t l = start & ~(uintptr_t) 63; l < end; l += 64) {
            volatile char *c = (volatile char *) l;
            if (b->flush == FLUSH_CLWB)
                __asm__ volatile(".byte 0x66; xsaveopt %0" : "+m"(*c));
            else if (b->flush == FLUSH_CLFLUSHOPT)
                __asm__ volatile(".byte 0x66; clflush %0" : "+m"(*c));
            else
                __asm__ volatile("clflush %0" : "+m"(*c));
        }
        __asm__ volatile("sfence" ::: "memory");
        return 0;
    }
#endif
    {
        uintptr_t page = (uintptr_t) sysconf (_SC_PAGESIZE);
        uintptr_t s = start & ~(page - 1);
        if (msync ((void *) s, end - s, MS_SYNC) < 0) {
            errno = EIO;
            return -1;
        }
    }
    return 0;
}

/* -------------------------------------------------------------- format */

static int lock_init (struct super *s)
{
    pthread_mutexattr_t at;
    int rc;

    if ((rc = pthread_mutexattr_init (&at)) != 0)
        return rc;
    if ((rc = pthread_mutexattr_setpshared (&at, PTHREAD_PROCESS_SHARED)) == 0
        && (rc = pthread_mutexattr_setrobust (&at, PTHREAD_MUTEX_ROBUST)) == 0)
        rc = pthread_mutex_init (&s->lock, &at);
    (void) pthread_mutexattr_destroy (&at);
    return rc;
}

int blog_format (int fd, uint64_t capacity, tier_error_t *error)
{
    struct stat st;
    struct super *s;
    void *map;
    int rc, e;

    if (capacity < BLOG_CAPACITY_MIN || capacity > BLOG_CAPACITY_MAX
        || capacity % BLOG_ALIGN) {
        errno = EINVAL;
        return tier_errprintf (error,
                               "a write log's capacity must be a "
                               "multiple of 64 bytes from %d to %llu, not "
                               "%llu",
                               BLOG_CAPACITY_MIN,
                               (unsigned long long) BLOG_CAPACITY_MAX,
                               (unsigned long long) capacity);
    }
    if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "a write log must be a regular file");
    }
    /* blocks now: a store to the map must never meet a full file system
     * (SIGBUS) */
    rc = ftruncate (fd, 0) < 0
             ? errno
             : posix_fallocate (fd, 0, (off_t) (BLOG_SUPER + capacity));
    if (rc != 0) {
        (void) ftruncate (fd, 0);
        errno = rc;
        return tier_errprintf (error,
                               "cannot allocate a write log of %llu "
                               "bytes: %s",
                               (unsigned long long) (BLOG_SUPER + capacity),
                               strerror (rc));
    }
    map = mmap (NULL, BLOG_SUPER, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return tier_errprintf (error, "cannot map the write log: %s",
                               strerror (errno));
    s = map;
    memset (s, 0, BLOG_SUPER);
    s->version = BLOG_VERSION;
    s->capacity = capacity;
    memcpy (s->magic, BLOG_MAGIC, sizeof (s->magic));
    s->sum = super_sum (s);
    if ((rc = lock_init (s)) != 0 || msync (map, BLOG_SUPER, MS_SYNC) < 0) {
        e = rc ? rc : errno;
        (void) munmap (map, BLOG_SUPER);
        errno = e;
        return tier_errprintf (error, "cannot write the write log: %s",
                               strerror (e));
    }
    (void) munmap (map, BLOG_SUPER);
    return 0;
}

/* ---------------------------------------------------------------- open */

struct blog *blog_open (int fd, unsigned flags, tier_error_t *error)
{
    struct super s;
    struct stat st;
    struct blog *b;
    ssize_t n;

    if ((n = pread (fd, &s, sizeof (s), 0)) < 0) {
        tier_errprintf (error, "cannot read the write log: %s",
                        strerror (errno));
        return NULL;
    }
    if (n != (ssize_t) sizeof (s) || memcmp (s.magic, BLOG_MAGIC, 8)
        || s.sum != super_sum (&s)) {
        errno = EINVAL;
        tier_errprintf (error, "not a write log (no superblock)");
        return NULL;
    }
    if (s.version != BLOG_VERSION) {
        errno = EINVAL;
        tier_errprintf (error, "a write log of version %u (this is %d)",
                        (unsigned) s.version, BLOG_VERSION);
        return NULL;
    }
    if (s.capacity < BLOG_CAPACITY_MIN || s.capacity > BLOG_CAPACITY_MAX
        || s.capacity % BLOG_ALIGN || fstat (fd, &st) < 0
        || (uint64_t) st.st_size != BLOG_SUPER + s.capacity) {
        errno = EINVAL;
        tier_errprintf (error,
                        "the write log's size does not match its "
                        "capacity (%llu)",
                        (unsigned long long) s.capacity);
        return NULL;
    }
    if (!(b = calloc (1, sizeof (*b)))) {
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    b->cap = s.capacity;
    b->maplen = (size_t) (BLOG_SUPER + s.capacity);
    b->map = mmap (NULL, b->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (b->map == MAP_FAILED) {
        int e = errno;
        free (b);
        errno = e;
        tier_errprintf (error, "cannot map the write log: %s", strerror (e));
        return NULL;
    }
    b->flush = (flags & BLOG_PMEM) ? flush_pick () : FLUSH_MSYNC;
    b->recover = flags & BLOG_RECOVER;
    b->alive = blog_writer_alive;
    if (b->recover) {
        /* nobody holds it: whatever it says (a reboot, a killed holder
         * on another boot) is garbage */
        memset (&super_of (b)->lock, 0, sizeof (super_of (b)->lock));
        if (lock_init (super_of (b)) != 0) {
            blog_close (b);
            errno = EPROTO;
            tier_errprintf (error, "cannot make the write log's lock anew");
            return NULL;
        }
    }
    return b;
}

void blog_close (struct blog *b)
{
    if (!b)
        return;
    (void) munmap (b->map, b->maplen);
    free (b);
}

void blog_set_alive (struct blog *b, bool (*alive) (pid_t, uint64_t))
{
    b->alive = alive ? alive : blog_writer_alive;
}

uint64_t blog_capacity (const struct blog *b)
{
    return b->cap;
}

uint64_t blog_used (const struct blog *b)
{
    const struct super *s = super_of (b);

    return __atomic_load_n (&s->head, __ATOMIC_ACQUIRE)
           - __atomic_load_n (&s->tail, __ATOMIC_ACQUIRE);
}

uint64_t blog_max_payload (const struct blog *b)
{
    return b->cap / 4 - BLOG_ALIGN;
}

/* ---------------------------------------------------------- liveness */

/* pid's state letter and start time from /proc/PID/stat, or -1. */
static int proc_stat (pid_t pid, char *state, uint64_t *start)
{
    char path[64], buf[1024], *p;
    unsigned long long st = 0;
    ssize_t n;
    int fd;

    (void) snprintf (path, sizeof (path), "/proc/%d/stat", (int) pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (fd, buf, sizeof (buf) - 1);
    (void) close (fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* after the command's ")": the state is field 3, starttime field 22 */
    if (!(p = strrchr (buf, ')')) || p[1] != ' ' || !p[2])
        return -1;
    *state = p[2];
    p++;
    for (int field = 2; field < 22 && p; field++)
        p = strchr (p + 1, ' ');
    if (!p || sscanf (p, " %llu", &st) != 1)
        return -1;
    *start = st;
    return 0;
}

uint64_t blog_proc_start (pid_t pid)
{
    uint64_t start;
    char state;

    return proc_stat (pid, &state, &start) < 0 ? 0 : start;
}

/* A zombie (dead, not yet reaped) writes nothing more. */
bool blog_writer_alive (pid_t pid, uint64_t start)
{
    uint64_t now;
    char state;

    return pid > 0 && start != 0 && proc_stat (pid, &state, &now) == 0
           && now == start && state != 'Z' && state != 'X';
}

/* ------------------------------------------------------------- writers */

static int lock (struct blog *b)
{
    int rc = pthread_mutex_lock (&super_of (b)->lock);

    if (rc == EOWNERDEAD) {
        /* its holder died: it left either no record (head did not move)
         * or a whole header -- the ring is consistent */
        (void) pthread_mutex_consistent (&super_of (b)->lock);
        rc = 0;
    }
    if (rc != 0) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

static void rec_fill (struct rec *r, uint64_t seq, enum blog_type type,
                      uint32_t file, uint64_t offset, uint64_t length,
                      const struct blog *b)
{
    r->commit = 0;
    __atomic_thread_fence (__ATOMIC_RELEASE);
    r->seq = seq;
    r->magic = REC_MAGIC;
    r->type = (uint16_t) type;
    r->flags = 0;
    r->file = file;
    r->writer = (int32_t) b->pid;
    r->writer_start = b->start;
    r->offset = offset;
    r->length = length;
    r->sum = rec_sum (r);
    r->pad = 0;
}

int blog_reserve (struct blog *b, enum blog_type type, uint32_t file,
                  uint64_t offset, uint64_t length, struct blog_txn *t)
{
    struct super *s = super_of (b);
    uint64_t head, tail, total, gap, phys;
    struct rec *pad = NULL, *r;
    pid_t me = getpid ();
    int e = 0;

    if (type != BLOG_WRITE && type != BLOG_TRUNCATE) {
        errno = EINVAL;
        return -1;
    }
    if (length > blog_max_payload (b)) {
        errno = EMSGSIZE;
        return -1;
    }
    if (me != b->pid) { /* first, or after a fork */
        b->pid = me;
        b->start = blog_proc_start (me);
    }
    total = BLOG_ALIGN + align_up (length);
    if (lock (b) < 0)
        return -1;
    BLOG_HOOK ("locked");
    head = __atomic_load_n (&s->head, __ATOMIC_RELAXED);
    tail = __atomic_load_n (&s->tail, __ATOMIC_ACQUIRE);
    if (head % BLOG_ALIGN || head - tail > b->cap) {
        e = EPROTO;
        goto out;
    }
    phys = head % b->cap;
    gap = phys + total > b->cap ? b->cap - phys : 0;
    if (head + gap + total - tail > b->cap) {
        e = EAGAIN;
        goto out;
    }
    if (gap) {
        /* a pad to the ring's end, committed at once */
        pad = (struct rec *) (void *) (ring (b) + phys);
        rec_fill (pad, head, BLOG_PAD, 0, 0, gap - BLOG_ALIGN, b);
        pad->commit = commit_word (head, pad->sum);
        head += gap;
        phys = 0;
    }
    r = (struct rec *) (void *) (ring (b) + phys);
    rec_fill (r, head, type, file, offset, length, b);
    if ((pad && persist (b, pad, BLOG_ALIGN) < 0)
        || persist (b, r, BLOG_ALIGN) < 0) {
        e = EIO;
        goto out;
    }
    __atomic_store_n (&s->head, head + total, __ATOMIC_RELEASE);
    if (persist (b, &s->head, sizeof (s->head)) < 0) {
        /* reserved all the same: the drain passes over it */
        __atomic_store_n (&r->commit, cancel_word (head, r->sum),
                          __ATOMIC_RELEASE);
        e = EIO;
    }
    t->seq = head;
    t->rec = r;
    t->payload = (unsigned char *) r + BLOG_ALIGN;
    t->length = length;
    BLOG_HOOK ("reserved");
out:
    (void) pthread_mutex_unlock (&s->lock);
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}

int blog_commit (struct blog *b, struct blog_txn *t)
{
    struct rec *r = t->rec;

    if (persist (b, t->payload, (size_t) t->length) < 0) {
        blog_cancel (b, t);
        errno = EIO;
        return -1;
    }
    __atomic_store_n (&r->commit, commit_word (t->seq, r->sum),
                      __ATOMIC_RELEASE);
    if (persist (b, &r->commit, sizeof (r->commit)) < 0) {
        /* committed where the page cache survives (a process's death),
         * perhaps not on the media: not acknowledged, so not applied */
        blog_cancel (b, t);
        errno = EIO;
        return -1;
    }
    return 0;
}

void blog_cancel (struct blog *b, struct blog_txn *t)
{
    struct rec *r = t->rec;

    __atomic_store_n (&r->commit, cancel_word (t->seq, r->sum),
                      __ATOMIC_RELEASE);
    (void) persist (b, &r->commit, sizeof (r->commit));
}

/* --------------------------------------------------------------- drain */

static enum blog_state damaged (tier_error_t *error, uint64_t at,
                                const char *why)
{
    tier_errprintf (error, "the write log is damaged at %llu: %s",
                    (unsigned long long) at, why);
    return BLOG_DAMAGED;
}

/* The header at tail, checked; BLOG_READY if it is whole. */
static enum blog_state check_at (const struct blog *b, uint64_t tail,
                                 uint64_t head, struct blog_view *v,
                                 tier_error_t *error)
{
    const struct rec *r;
    struct rec copy;
    uint64_t phys = tail % b->cap;

    if (head - tail < BLOG_ALIGN)
        return damaged (error, tail, "head is inside a record");
    r = (const struct rec *) (const void *) (ring (b) + phys);
    memcpy (&copy, r, sizeof (copy)); /* one look: the user may scribble */
    if (copy.magic != REC_MAGIC || copy.sum != rec_sum (&copy))
        return damaged (error, tail, "a header fails its checksum");
    if (copy.seq != tail)
        return damaged (error, tail, "a header names another position");
    if (copy.type != BLOG_PAD && copy.type != BLOG_WRITE
        && copy.type != BLOG_TRUNCATE)
        return damaged (error, tail, "a record of an unknown type");
    if (copy.length > b->cap - BLOG_ALIGN
        || BLOG_ALIGN + align_up (copy.length) > head - tail
        || phys + BLOG_ALIGN + align_up (copy.length) > b->cap)
        return damaged (error, tail, "a record's length leaves the ring");
    v->seq = copy.seq;
    v->type = (enum blog_type) copy.type;
    v->file = copy.file;
    v->offset = copy.offset;
    v->length = copy.length;
    v->payload = (const unsigned char *) r + BLOG_ALIGN;
    v->total = BLOG_ALIGN + align_up (copy.length);
    v->writer = (pid_t) copy.writer;
    v->writer_start = copy.writer_start;
    {
        uint64_t c = __atomic_load_n (&r->commit, __ATOMIC_ACQUIRE);
        if (c == commit_word (copy.seq, copy.sum))
            return BLOG_READY;
        if (c == cancel_word (copy.seq, copy.sum))
            return BLOG_ABANDONED;
    }
    return BLOG_PENDING;
}

enum blog_state blog_peek (struct blog *b, uint64_t pos, struct blog_view *v,
                           tier_error_t *error)
{
    struct super *s = super_of (b);
    uint64_t tail = __atomic_load_n (&s->tail, __ATOMIC_RELAXED);
    uint64_t head = __atomic_load_n (&s->head, __ATOMIC_ACQUIRE);
    enum blog_state st;

    if (tail % BLOG_ALIGN || head % BLOG_ALIGN || head - tail > b->cap)
        return damaged (error, tail, "head and tail do not add up");
    if (pos == head)
        return BLOG_EMPTY;
    if (pos < tail || pos > head || pos % BLOG_ALIGN)
        return damaged (error, pos, "a position outside the records");
    if ((st = check_at (b, pos, head, v, error)) == BLOG_DAMAGED)
        return st;
    if (st == BLOG_PENDING
        && (b->recover || !b->alive (v->writer, v->writer_start)))
        st = BLOG_ABANDONED;
    return st;
}

enum blog_state blog_next (struct blog *b, struct blog_view *v,
                           tier_error_t *error)
{
    for (;;) {
        uint64_t tail = blog_tail (b);
        enum blog_state st = blog_peek (b, tail, v, error);

        if (st == BLOG_EMPTY || st == BLOG_DAMAGED || v->type != BLOG_PAD
            || st == BLOG_PENDING)
            return st;
        if (blog_consume (b, v) < 0)
            return damaged (error, tail, "cannot persist the tail");
    }
}

uint64_t blog_tail (const struct blog *b)
{
    return __atomic_load_n (&super_of (b)->tail, __ATOMIC_ACQUIRE);
}

uint64_t blog_head (const struct blog *b)
{
    return __atomic_load_n (&super_of (b)->head, __ATOMIC_ACQUIRE);
}

int blog_advance (struct blog *b, uint64_t pos)
{
    struct super *s = super_of (b);
    uint64_t tail = __atomic_load_n (&s->tail, __ATOMIC_RELAXED);
    uint64_t head = __atomic_load_n (&s->head, __ATOMIC_ACQUIRE);

    if (pos < tail || pos > head || pos % BLOG_ALIGN) {
        errno = EINVAL;
        return -1;
    }
    __atomic_store_n (&s->tail, pos, __ATOMIC_RELEASE);
    return persist (b, &s->tail, sizeof (s->tail));
}

int blog_consume (struct blog *b, const struct blog_view *v)
{
    struct super *s = super_of (b);

    if (__atomic_load_n (&s->tail, __ATOMIC_RELAXED) != v->seq) {
        errno = EINVAL;
        return -1;
    }
    __atomic_store_n (&s->tail, v->seq + v->total, __ATOMIC_RELEASE);
    return persist (b, &s->tail, sizeof (s->tail));
}
