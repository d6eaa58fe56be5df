/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* evt.h - the extreme-value model: block maxima of per-node completion
 * times, a GEV fit by maximum likelihood with profile-likelihood intervals,
 * return levels, and the slowest node's time at larger node counts.
 * doc/evt.md has the formulas.
 *
 * Why not a library: GSL (used here for minimisation, root finding, the
 * Cholesky inverse and special functions) has Gumbel and Weibull
 * distributions but neither the GEV nor an extreme-value fit; R's evd,
 * whose conventions these follow, is not a C library.
 */
#ifndef TIER_EVT_H
#define TIER_EVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "error.h"

/* A GEV distribution:
 *   F(z) = exp (-[1 + shape (z - loc) / scale]^(-1/shape))
 * where 1 + shape (z - loc) / scale > 0, scale > 0; shape 0 is the Gumbel
 * limit exp (-exp (-(z - loc) / scale)).  shape is xi (evd::fgev's
 * convention; scipy's genextreme uses c = -xi).
 */
struct tier_gev {
    double loc;         /* mu, seconds */
    double scale;       /* sigma > 0, seconds */
    double shape;       /* xi */
};

/* Distribution functions.  logpdf is -INFINITY outside the support;
 * quantile_y takes the reduced variable y = -log p (p the non-exceedance
 * probability), which keeps precision for p close to 1.
 */
double tier_gev_cdf (const struct tier_gev *g, double z);
double tier_gev_logpdf (const struct tier_gev *g, double z);
double tier_gev_quantile (const struct tier_gev *g, double p);
double tier_gev_quantile_y (const struct tier_gev *g, double y);

/* The level exceeded on average once in m blocks (m > 1). */
double tier_gev_return_level (const struct tier_gev *g, double m);

/* The distribution of the maximum of k independent draws of g, F^k (GEV
 * is max-stable): same shape, scale * k^shape, loc + scale (k^shape - 1)
 * / shape.  k > 0 need not be an integer.
 */
struct tier_gev tier_gev_power (const struct tier_gev *g, double k);

/* The mean, loc + scale (Gamma (1 - shape) - 1) / shape; NAN if shape >= 1
 * (no finite mean).
 */
double tier_gev_mean (const struct tier_gev *g);

/* The log-likelihood of n observations (-INFINITY if one lies outside the
 * support or scale <= 0).
 */
double tier_gev_loglik (const struct tier_gev *g, const double *z, size_t n);

/* The log-density of one observation and, if grad is not NULL, its
 * gradient with respect to (loc, scale, shape).  Returns -INFINITY (grad
 * untouched) outside the support.
 */
double tier_gev_score (const struct tier_gev *g, double z, double grad[3]);

/* Reduced variables y = -log p for tier_evt_quantile:
 * the return level of period m blocks (p = 1 - 1/m, m > 1), and the
 * p-quantile of the slowest of `nodes` nodes when one block holds `block`
 * nodes (the maximum of nodes/block blocks has cdf F^(nodes/block), so
 * its p-quantile is F's quantile at p^(block/nodes)).
 */
double tier_evt_y_period (double m);
double tier_evt_y_nodes (double nodes, double block, double p);

/* An estimate with its standard error (delta method; NAN when the
 * observed information is singular) and an interval at the fit's level.
 * An endpoint that did not reach the level inside the parameter space is
 * "open": it is the bound of the space (-1 or 3 for shape, 1e-6 standard
 * deviations of the data for scale,
 * -INFINITY or INFINITY otherwise).
 */
struct tier_evt_estimate {
    double value;
    double se;
    double lo, hi;
    bool lo_open, hi_open;
};

enum {
    TIER_EVT_LOC = 0,
    TIER_EVT_SCALE = 1,
    TIER_EVT_SHAPE = 2,
};

/* Fit flags. */
enum {
    TIER_EVT_WALD = 1,          /* Wald intervals (estimate +- z se) only,
                                 * no profiles (much faster) */
};

/* Warnings of a fit (bits of tier_evt_fit.warn). */
enum {
    TIER_EVT_WARN_FEW = 1,          /* fewer than 20 blocks */
    TIER_EVT_WARN_NONREGULAR = 2,   /* shape < -0.5: standard errors and
                                     * Wald intervals are not valid */
    TIER_EVT_WARN_BOUNDARY = 4,     /* on a bound of the parameter space:
                                     * shape -1 or 3, or scale 1e-6 sd */
    TIER_EVT_WARN_SINGULAR = 8,     /* information not positive definite */
    TIER_EVT_WARN_REFIT = 16,       /* a profile found a higher likelihood
                                     * than the first fit; refitted from it */
    TIER_EVT_WARN_UNSETTLED = 32,   /* it kept rising: the best point found
                                     * is reported */
};

struct tier_evt_fit {
    size_t n;                       /* block maxima */
    struct tier_gev gev;            /* the maximum-likelihood estimate */
    struct tier_evt_estimate par[3];    /* TIER_EVT_LOC, _SCALE, _SHAPE */
    double cov[3][3];               /* inverse observed information */
    double loglik;                  /* at the estimate */
    double level;                   /* of the intervals, e.g. 0.95 */
    double gumbel_lr;               /* likelihood ratio statistic, shape 0 */
    double gumbel_p;                /* its p-value (chi-square, 1 df) */
    bool profile;                   /* intervals are profile likelihood */
    unsigned warn;                  /* TIER_EVT_WARN_* */
    unsigned starts;                /* starting points tried */
    unsigned long evals;            /* likelihood evaluations */
};

struct tier_evt;

/* Copy n block maxima for fitting.  Fails with EINVAL if n < 3 or a value
 * is not finite, EDOM if there are fewer than 3 different values.
 */
struct tier_evt *tier_evt_create (const double *z, size_t n,
                                  tier_error_t *error);
void tier_evt_destroy (struct tier_evt *evt);

/* Fit the GEV by maximum likelihood: several starting points (probability
 * weighted moments and a spread of shapes), GSL's Nelder-Mead simplex,
 * then BFGS on the analytic gradient; the parameters are kept in
 * -1 < shape <= 3, scale >= 1e-6 standard deviations of the data (the
 * likelihood is unbounded below shape -1, and for few or tied maxima as
 * the shape grows and the scale shrinks).  Then
 * standard errors and, unless TIER_EVT_WALD, profile-likelihood intervals
 * at `level` (0 < level < 1); a profile that rises above the fit's
 * likelihood restarts the fit from there.  Returns 0, or -1 with errno.
 * Not thread-safe: GSL's (global) error handler is switched off while the
 * fit and tier_evt_quantile run, and restored after.
 */
int tier_evt_fit (struct tier_evt *evt, double level, unsigned flags,
                  struct tier_evt_fit *fit, tier_error_t *error);

/* The quantile of the fitted GEV at reduced variable y = -log p (see
 * tier_evt_y_period, tier_evt_y_nodes), with its standard error and an
 * interval of the fit's kind (profile likelihood, reparametrising loc by
 * the quantile, or Wald).  Requires a successful tier_evt_fit.
 */
int tier_evt_quantile (struct tier_evt *evt, double y,
                       struct tier_evt_estimate *est, tier_error_t *error);

/* Per-node completion times read from CSV (header run,node,seconds). */
struct tier_evt_run {
    char *name;
    size_t line;            /* line of its first row */
    size_t count;           /* nodes */
    size_t alloc;
    double *seconds;        /* in file order */
    size_t *lines;          /* line of each time */
};

struct tier_evt_times {
    char *file;             /* as named in messages */
    size_t rows;
    size_t last_line;       /* number of lines read */
    size_t nruns;
    struct tier_evt_run *runs;  /* in order of first appearance */
};

#define TIER_EVT_LINE_MAX 4096
#define TIER_EVT_ROWS_MAX 4000000

/* Read times from f, naming it `file` in messages ("file:line: problem").
 * The header names the columns run, node and seconds (any order, any
 * case; other columns are ignored); blank lines and lines starting with
 * '#' are skipped; fields may be double-quoted.  Refused: a bad header,
 * a wrong number of fields, an empty run or node, seconds that are
 * missing, not a number, NaN, infinite or negative, a duplicate
 * (run, node) pair, NUL bytes, lines over TIER_EVT_LINE_MAX bytes, more
 * than TIER_EVT_ROWS_MAX rows, no rows at all.
 */
struct tier_evt_times *tier_evt_times_read (FILE *f, const char *file,
                                            tier_error_t *error);

/* Open path ("-" is stdin) and read it. */
struct tier_evt_times *tier_evt_times_load (const char *path,
                                            tier_error_t *error);
void tier_evt_times_destroy (struct tier_evt_times *t);

struct tier_evt_blocks {
    size_t block;           /* nodes per block */
    size_t n;               /* blocks */
    double *max;            /* block maxima */
    size_t *line;           /* line of each maximum */
    size_t dropped;         /* times in an incomplete last block, unused */
    bool straddle;          /* some block holds nodes of two runs */
};

/* Block maxima.  block 0: one run is one block, and every run must have
 * the same number of nodes.  Otherwise the runs' times are taken in order
 * (runs by first appearance, nodes in file order) in blocks of `block`;
 * an incomplete last block is dropped.  Fails (naming the file and a
 * line) with fewer than 3 blocks, or fewer than 3 different maxima.
 */
int tier_evt_times_blocks (const struct tier_evt_times *t, size_t block,
                           struct tier_evt_blocks *blocks,
                           tier_error_t *error);
void tier_evt_blocks_free (struct tier_evt_blocks *blocks);

#endif /* !TIER_EVT_H */
