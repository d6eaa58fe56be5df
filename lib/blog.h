/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* blog.h - the block cache's write log: a ring of records in a file on
 * the NVDIMM tier (issue 18)
 *
 * One log per job and node.  The job's processes map it shared; their
 * interposers append the job's writes to GFS files as records and
 * acknowledge a write once its record is committed.  The drain (a child
 * of the agent with the job's credentials) applies the records to the
 * GFS in order and frees them.  Layout of the file:
 *
 *   [0, 4096)                the superblock: magic, version, capacity,
 *                            the ring's head and tail, the writers' lock
 *   [4096, 4096 + capacity)  the ring: records, each a 64-byte header
 *                            and its payload padded to 64 bytes
 *
 * Head and tail are logical byte positions (they only grow; the ring
 * offset is the position modulo the capacity).  A record's position is
 * its sequence number: the drain applies records in that order.
 *
 * The commit rule.  A writer, holding the lock, writes the record's
 * header (commit word 0) where head points, persists it, moves head past
 * the record and persists head; without the lock it copies the payload
 * and persists it, then writes the commit word -- a function of the
 * record's sequence and its header's checksum -- and persists that.  Only
 * then is the write acknowledged.  A record whose commit word matches is
 * therefore complete: ordering, not a checksum over the data, keeps torn
 * data out.  A header torn by a power failure fails its checksum; a
 * commit word left from an earlier lap of the ring names another
 * sequence.  A writer killed while holding the lock leaves either no
 * record (head did not move) or a whole header: the lock is robust, and
 * the next writer goes on.
 *
 * The drain looks at tail (blog_next): a committed record is applied,
 * and tail moves past it once its GFS range is durable (blog_consume).
 * A record not committed is waited for while its writer lives, and
 * skipped once it died (kill -9 between reserve and commit: never
 * acknowledged).  A record that would cross the ring's end is preceded
 * by a pad record that fills the rest (sizes are multiples of 64, so one
 * always fits); blog_next passes over pads itself.
 *
 * Every byte of the file may have been written by the job's user (the
 * log is theirs): blog_next checks each field against the ring before it
 * gives a record out, never reads outside the map, and says "damaged"
 * with the reason when something does not add up.
 *
 * Persisting: msync on a DRAM-emulated or file-backed tier; on real
 * persistent memory (BLOG_PMEM) cache-line write-backs (CLWB, else
 * CLFLUSHOPT, else CLFLUSH, chosen by CPUID) and a store fence.  libc
 * only: the interposer links it.
 */
#ifndef TIER_BLOG_H
#define TIER_BLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define BLOG_SUPER 4096 /* the superblock's bytes */
#define BLOG_ALIGN 64   /* records' alignment and header size */
#define BLOG_CAPACITY_MIN 4096
#define BLOG_CAPACITY_MAX (1ULL << 40)

enum blog_type {
    BLOG_PAD = 1,      /* fills the ring's end (no payload) */
    BLOG_WRITE = 2,    /* length bytes at offset of file */
    BLOG_TRUNCATE = 3, /* file's size becomes offset */
};

/* blog_open's flags */
#define BLOG_PMEM 0x1 /* real persistent memory: cache flushes */
#define BLOG_RECOVER \
    0x2 /* no writer is left (a crash, a job end):
                                    * the lock is made anew, and records not
                                    * committed are abandoned at once */

struct blog;

/* A record being written: blog_reserve fills it, blog_commit ends it. */
struct blog_txn {
    uint64_t seq;
    void *payload; /* length bytes, in the map */
    uint64_t length;
    void *rec; /* its header, in the map */
};

/* A record as the drain sees it (pointers into the map). */
struct blog_view {
    uint64_t seq;
    enum blog_type type;
    uint32_t file;
    uint64_t offset, length;
    const void *payload;
    uint64_t total; /* header and padded payload */
    pid_t writer;
    uint64_t writer_start; /* its start time (/proc/PID/stat) */
};

enum blog_state {
    BLOG_EMPTY,     /* nothing to drain */
    BLOG_READY,     /* a committed record: apply, consume */
    BLOG_PENDING,   /* being written by a live process */
    BLOG_ABANDONED, /* cancelled, or its writer died before
                                    * the commit: never acknowledged;
                                    * consume it */
    BLOG_DAMAGED,   /* the ring does not add up (error) */
};

/* Make fd (a regular file, opened read-write) a log whose ring holds
 * capacity bytes (a multiple of 64 within BLOG_CAPACITY_MIN..MAX): its
 * blocks are allocated at once (a write to the map never meets a full
 * file system), head = tail = 0.  0, or -1 with errno and error. */
int blog_format (int fd, uint64_t capacity, tier_error_t *error);

/* Map the log in fd (read-write).  NULL with errno (EINVAL: not a log,
 * or not one of this version; ENOMEM) and error. */
struct blog *blog_open (int fd, unsigned flags, tier_error_t *error);

void blog_close (struct blog *b);

uint64_t blog_capacity (const struct blog *b);

/* Bytes reserved and not yet consumed (head - tail). */
uint64_t blog_used (const struct blog *b);

/* The largest payload one record may carry (a quarter of the ring less
 * a header: a record always fits once the ring has drained). */
uint64_t blog_max_payload (const struct blog *b);

/* Reserve a record (the calling process is its writer).  0; or -1 with
 * errno EAGAIN (not enough room until the drain frees some: the caller
 * waits, or writes to the GFS directly once the file's records have
 * drained), EMSGSIZE (length above blog_max_payload), EINVAL (type),
 * EIO (a persist failed), EPROTO (the log is damaged, or its lock). */
int blog_reserve (struct blog *b, enum blog_type type, uint32_t file,
                  uint64_t offset, uint64_t length, struct blog_txn *t);

/* Persist t's payload, then commit it.  0 (acknowledge the write), or
 * -1 with errno EIO (the record is cancelled: do not acknowledge). */
int blog_commit (struct blog *b, struct blog_txn *t);

/* Give t up (its payload could not be copied): the drain passes over
 * it, never applying it. */
void blog_cancel (struct blog *b, struct blog_txn *t);

/* The record at tail (the drain's).  Pads are consumed on the way.  For
 * BLOG_DAMAGED, error says what. */
enum blog_state blog_next (struct blog *b, struct blog_view *v,
                           tier_error_t *error);

/* Free v (READY once applied and durable, or ABANDONED): tail moves past
 * it, persisted.  0, or -1 with errno EINVAL (v is not at tail) or EIO. */
int blog_consume (struct blog *b, const struct blog_view *v);

/* The record at pos, a position from tail up to head (the drain walks a
 * batch ahead of tail with it, v->seq + v->total being the next); pads
 * come out as BLOG_READY with type BLOG_PAD.  BLOG_EMPTY at head. */
enum blog_state blog_peek (struct blog *b, uint64_t pos, struct blog_view *v,
                           tier_error_t *error);

uint64_t blog_tail (const struct blog *b);
uint64_t blog_head (const struct blog *b);

/* Free every record before pos (a batch applied and durable): tail moves
 * to pos, persisted.  0, or -1 with errno EINVAL (pos is not a record's
 * position from tail to head) or EIO. */
int blog_advance (struct blog *b, uint64_t pos);

/* Whether process pid started at start (clock ticks after boot) lives:
 * how blog_next tells PENDING from ABANDONED, unless blog_set_alive gave
 * the log another test. */
bool blog_writer_alive (pid_t pid, uint64_t start);
void blog_set_alive (struct blog *b, bool (*alive) (pid_t, uint64_t));

/* This process's start time, as blog_writer_alive reads it (0 if not
 * known). */
uint64_t blog_proc_start (pid_t pid);

#endif /* !TIER_BLOG_H */
