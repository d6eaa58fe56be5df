/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica_index.c - the replica cache's index: what this node knows of,
 * what it fetched, in a hash table and in LMDB (node-local)
 *
 * Owns the records (struct replica) of a->replicas and their LMDB form
 * (store.h's replica records: a key "SCOPE/KEY", a JSON value).  Calls
 * store.c and jansson; nothing else of the agent.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/log.h"
#include "replica.h"

#define FLUSH_BATCH 64

static unsigned hash (const char *s)
{
    unsigned h = 2166136261u;

    while (*s)
        h = (h ^ (unsigned char) *s++) * 16777619u;
    return h % REPLICA_BUCKETS;
}

struct replica *replica_index_find (struct replicas *r, const char *id)
{
    for (struct replica *x = r->tab[hash (id)]; x; x = x->next)
        if (!strcmp (x->id, id))
            return x;
    return NULL;
}

struct replica *replica_index_add (struct replicas *r, const char *id)
{
    struct replica *x = calloc (1, sizeof (*x));
    unsigned h = hash (id);

    if (!x)
        return NULL;
    (void) snprintf (x->id, sizeof (x->id), "%s", id);
    x->next = r->tab[h];
    r->tab[h] = x;
    r->known_files++;
    return x;
}

void replica_index_account (struct replicas *r, struct replica *x, int sign)
{
    if (!x->owner)
        return;
    if (sign > 0) {
        r->owned_bytes += x->size;
        r->owned_files++;
    }
    else {
        r->owned_bytes -= x->size;
        r->owned_files--;
    }
}

void replica_index_unlink (struct replicas *r, struct replica *x)
{
    struct replica **pp = &r->tab[hash (x->id)];

    while (*pp && *pp != x)
        pp = &(*pp)->next;
    if (*pp)
        *pp = x->next;
    replica_index_account (r, x, -1);
    r->known_files--;
    free (x->path);
    free (x);
}

static char *rec_encode (const struct replica *x)
{
    json_t *o = json_pack ("{s:s s:I s:I s:I s:I s:I s:I s:b s:I}", "path",
                           x->path ? x->path : "", "uid", (json_int_t) x->uid,
                           "size", (json_int_t) x->size, "fetched",
                           (json_int_t) x->fetched, "used",
                           (json_int_t) x->used, "expires",
                           (json_int_t) x->expires, "batch",
                           (json_int_t) x->batch, "owner", x->owner, "opens",
                           (json_int_t) x->opens);
    char *s = o ? json_dumps (o, JSON_COMPACT) : NULL;

    json_decref (o);
    return s;
}

json_t *replica_index_json (const struct replica *x)
{
    return json_pack ("{s:s s:s s:I s:I s:I s:I s:I s:b s:I}", "id", x->id,
                      "path", x->path ? x->path : "", "uid",
                      (json_int_t) x->uid, "size", (json_int_t) x->size,
                      "fetched", (json_int_t) x->fetched, "used",
                      (json_int_t) x->used, "expires", (json_int_t) x->expires,
                      "owner", x->owner, "opens", (json_int_t) x->opens);
}

void replica_index_store (struct agent *a, struct replica *x)
{
    struct store_kv kv = { .key = x->id, .val = rec_encode (x) };
    tier_error_t e;

    if (kv.val && store_replica_apply (a->store, &kv, 1, &e) == 0)
        x->dirty = false;
    else
        x->dirty = true;
    free ((char *) kv.val);
}

void replica_index_forget (struct agent *a, struct replica *x)
{
    struct store_kv kv = { .key = x->id, .val = NULL };
    tier_error_t e;

    if (store_replica_apply (a->store, &kv, 1, &e) < 0)
        tier_log (LOG_ERR, "replica index: %s", e.text);
    replica_index_unlink (a->replicas, x);
}

void replica_index_file (const struct replicas *r, const char *id, char *buf,
                         size_t size)
{
    (void) snprintf (buf, size, "%.2048s/replicas/%.200s", r->bb, id);
}

/* Write n records; those written are no longer dirty.  Frees their
 * texts. */
static int flush_batch (struct agent *a, struct store_kv *kv,
                        struct replica **xs, int n)
{
    tier_error_t e;
    int rc = 0;

    if (n && (rc = store_replica_apply (a->store, kv, n, &e)) == 0)
        for (int k = 0; k < n; k++)
            xs[k]->dirty = false;
    for (int k = 0; k < n; k++)
        free ((char *) kv[k].val);
    return rc;
}

int replica_flush (struct agent *a)
{
    struct replicas *r = a->replicas;
    struct store_kv kv[FLUSH_BATCH];
    struct replica *xs[FLUSH_BATCH];
    int n = 0, rc = 0;

    if (!r)
        return 0;
    for (int i = 0; i < REPLICA_BUCKETS; i++)
        for (struct replica *x = r->tab[i]; x; x = x->next) {
            if (!x->dirty)
                continue;
            if (n == FLUSH_BATCH) {
                rc = flush_batch (a, kv, xs, n);
                n = 0;
            }
            kv[n].key = x->id;
            kv[n].val = rec_encode (x);
            xs[n++] = x;
            if (!kv[n - 1].val)
                n--;
        }
    if (n)
        rc = flush_batch (a, kv, xs, n);
    return rc;
}

/* ------------------------------------------------------------- loading */

struct load_ctx {
    struct agent *a;
    struct store_kv *drop;
    int ndrop, cdrop;
};

/* Remember key, to drop it from LMDB after the walk. */
static void load_drop (struct load_ctx *lc, const char *key)
{
    if (lc->ndrop == lc->cdrop) {
        int n = lc->cdrop ? lc->cdrop * 2 : 16;
        struct store_kv *d = realloc (lc->drop, n * sizeof (*d));
        if (!d)
            return;
        lc->drop = d;
        lc->cdrop = n;
    }
    lc->drop[lc->ndrop].key = strdup (key);
    lc->drop[lc->ndrop].val = NULL;
    if (lc->drop[lc->ndrop].key)
        lc->ndrop++;
}

/* Re-verify a record from LMDB: its file must still be there. */
static int load_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct load_ctx *lc = arg;
    struct replicas *r = lc->a->replicas;
    json_error_t jerr;
    json_t *o = json_loadb (val, len, 0, &jerr);
    const char *path = "";
    json_int_t uid = 0, size = 0, fetched = 0, used = 0, expires = 0;
    json_int_t batch = 0, opens = 0;
    int owner = 0;
    char file[PATH_MAX];
    struct replica *x;
    struct stat st;

    replica_index_file (r, key, file, sizeof (file));
    if (!o
        || json_unpack (o, "{s:s s:I s:I s:I s:I s:I s?I s:b s?I}", "path",
                        &path, "uid", &uid, "size", &size, "fetched", &fetched,
                        "used", &used, "expires", &expires, "batch", &batch,
                        "owner", &owner, "opens", &opens)
               < 0
        || lstat (file, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size != size
        || strlen (key) >= REPLICA_ID_MAX) {
        /* gone, or unreadable: forget it */
        load_drop (lc, key);
        json_decref (o);
        return 0;
    }
    if ((x = replica_index_add (r, key))) {
        x->path = strdup (path);
        x->uid = (uint32_t) uid;
        x->size = (uint64_t) size;
        x->fetched = fetched;
        x->used = used;
        x->expires = expires;
        x->batch = (uint32_t) batch;
        x->opens = (uint64_t) opens;
        x->owner = owner;
        replica_index_account (r, x, +1);
    }
    json_decref (o);
    return 0;
}

void replica_index_load (struct agent *a)
{
    struct load_ctx lc = { .a = a };
    tier_error_t e;

    if (store_replica_foreach (a->store, load_cb, &lc, &e) < 0)
        tier_log (LOG_ERR, "replica index: %s", e.text);
    if (lc.ndrop) {
        (void) store_replica_apply (a->store, lc.drop, lc.ndrop, &e);
        tier_log (LOG_INFO,
                  "replica index: %d records without their "
                  "file dropped",
                  lc.ndrop);
    }
    for (int i = 0; i < lc.ndrop; i++)
        free ((char *) lc.drop[i].key);
    free (lc.drop);
}
