/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* evt.c - GEV distribution, maximum-likelihood fit, profile likelihood */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_multimin.h>
#include <gsl/gsl_roots.h>
#include <gsl/gsl_sf_gamma.h>

#include "evt.h"

/* The parameter space.  The likelihood is unbounded for shape < -1
 * (Smith 1985), and, with few or tied block maxima, also as the shape
 * grows and the scale shrinks (k maxima tied at the minimum make it
 * unbounded for shape > (n - k) / k): the fit and the profiles stay in
 * -1 < shape <= 3 (3 has neither mean nor variance, far beyond any
 * completion time) and scale >= 1e-6 standard deviations.  A fit on one
 * of these bounds is flagged.
 */
#define XI_MIN (-1.0)
#define XI_MAX 3.0
#define SIG_MIN 1e-6
#define REFITS_MAX 3

/* What the objective returns outside the support.  Finite, because GSL's
 * simplex refuses non-finite values at its corners; it only compares them.
 */
#define PENALTY 1e100

#define FEW_BLOCKS 20
#define CACHE_MAX 96

/* Work is done on standardised data x = (z - c) / s with parameters
 * (m, sig, xi): loc = c + s m, scale = s sig.  The objective is the mean
 * negative log-likelihood per block, so tolerances do not depend on n:
 *   loglik (z) = -n (nll (x) + log s).
 */
enum prof {
    FULL,           /* v = (m, log sig, xi) */
    PROF_SHAPE,     /* xi = psi;       v = (m, log sig) */
    PROF_SCALE,     /* log sig = psi;  v = (m, xi) */
    PROF_LOC,       /* m = psi;        v = (log sig, xi) */
    PROF_QUANT,     /* quantile = psi; v = (log sig, xi), m follows */
};

struct obj {
    struct tier_evt *e;
    enum prof mode;
    double psi;
    double lny;     /* log y of the quantile, PROF_QUANT */
};

struct cache {
    size_t count;
    double psi[CACHE_MAX];
    double v[CACHE_MAX][2];
};

struct tier_evt {
    size_t n;
    double *z;              /* sorted */
    double *x;              /* standardised, sorted */
    double c, s;

    gsl_multimin_fminimizer *nm[2];         /* dimension 2, 3 */
    gsl_multimin_fdfminimizer *bfgs[2];
    gsl_root_fsolver *root;
    gsl_vector *v[2], *step[2];

    unsigned long evals;
    bool fitted;
    unsigned flags;
    double level;
    double qchi;            /* chi-square (1 df) quantile at level */
    double zq;              /* normal quantile, Wald intervals */
    double best[3];         /* (m, sig, xi) */
    double nll_best;
    unsigned refits;        /* since create: beyond REFITS_MAX, the best
                             * point found is kept */
    bool has_better;        /* a profile found a lower nll */
    double better[3];
    double better_nll;
    struct tier_evt_fit fit;
};

/* Distribution functions.  With y = (z - loc) / scale, u = shape y,
 * L = log1p (u) and h = L / shape (h = y for shape 0):
 *   -log f = log scale + L + h + exp (-h),   F = exp (-exp (-h)).
 * log1p keeps h accurate for every shape near 0, so the Gumbel limit is
 * continuous; only shape == 0 itself takes h = y.
 */

/* dh/dshape at fixed y: (y / t - h) / shape, by its series for small u */
static double h_shape (double y, double u, double t, double h, double xi)
{
    if (fabs (u) < 1e-3) {
        double s = -0.5 + u * (2. / 3 + u * (-3. / 4 + u * (4. / 5
                   + u * (-5. / 6 + u * (6. / 7 - u * 7. / 8)))));
        return y * y * s;
    }
    return (y / t - h) / xi;
}

/* One observation at reduced y: add -log f (without log scale) to *f and,
 * if d is not NULL, the parts of the gradient (see nll_grad).
 * Returns -1 outside the support.
 */
static inline int term (double y, double xi, double *f, double d[3])
{
    double u = xi * y;
    double t, L, h, e;

    if (xi == 0.) {
        t = 1.;
        L = 0.;
        h = y;
    }
    else {
        if (!(u > -1.))
            return -1;
        t = 1. + u;
        L = log1p (u);
        h = L / xi;
    }
    e = exp (-h);
    *f += L + h + e;
    if (d) {
        double a = (1. + xi - e) / t;
        d[0] += a;
        d[1] += y * a;
        d[2] += y / t + h_shape (y, u, t, h, xi) * (1. - e);
    }
    return 0;
}

double tier_gev_score (const struct tier_gev *g, double z, double grad[3])
{
    double f = 0., d[3] = { 0., 0., 0. };
    double sig = g->scale;
    double y;

    if (!(sig > 0.) || !isfinite (sig) || !isfinite (g->loc)
        || !isfinite (g->shape) || isnan (z))
        return -INFINITY;
    y = (z - g->loc) / sig;
    if (term (y, g->shape, &f, grad ? d : NULL) < 0 || !isfinite (f))
        return -INFINITY;
    if (grad) {
        grad[0] = d[0] / sig;
        grad[1] = (-1. + d[1]) / sig;
        grad[2] = -d[2];
    }
    return -log (sig) - f;
}

double tier_gev_logpdf (const struct tier_gev *g, double z)
{
    return tier_gev_score (g, z, NULL);
}

double tier_gev_loglik (const struct tier_gev *g, const double *z, size_t n)
{
    double sum = 0.;

    for (size_t i = 0; i < n; i++) {
        double l = tier_gev_logpdf (g, z[i]);
        if (l == -INFINITY)
            return -INFINITY;
        sum += l;
    }
    return sum;
}

double tier_gev_cdf (const struct tier_gev *g, double z)
{
    double y, u;

    if (!(g->scale > 0.) || isnan (z))
        return NAN;
    y = (z - g->loc) / g->scale;
    if (g->shape == 0.)
        return exp (-exp (-y));
    u = g->shape * y;
    if (!(u > -1.))
        return g->shape > 0. ? 0. : 1.;
    return exp (-exp (-log1p (u) / g->shape));
}

/* (y^-xi - 1) / xi with lny = log y; -lny at xi = 0 */
static double qfun (double xi, double lny)
{
    if (xi == 0.)
        return -lny;
    return expm1 (-xi * lny) / xi;
}

/* d qfun / d xi */
static double qfun_shape (double xi, double lny)
{
    double a = xi * lny;

    if (fabs (a) < 1e-4)
        return lny * lny * (0.5 - a / 3. + a * a / 8.);
    return (-lny * exp (-a) * xi - expm1 (-a)) / (xi * xi);
}

double tier_gev_quantile_y (const struct tier_gev *g, double y)
{
    if (!(g->scale > 0.) || isnan (y) || y < 0.)
        return NAN;
    if (y == 0.)        /* p = 1: the upper end point */
        return g->shape < 0. ? g->loc - g->scale / g->shape : INFINITY;
    if (y == INFINITY)  /* p = 0: the lower end point */
        return g->shape > 0. ? g->loc - g->scale / g->shape : -INFINITY;
    return g->loc + g->scale * qfun (g->shape, log (y));
}

double tier_gev_quantile (const struct tier_gev *g, double p)
{
    if (!(p >= 0. && p <= 1.))
        return NAN;
    return tier_gev_quantile_y (g, p == 0. ? INFINITY : -log (p));
}

double tier_evt_y_period (double m)
{
    if (!(m > 1.))
        return NAN;
    return -log1p (-1. / m);
}

double tier_evt_y_nodes (double nodes, double block, double p)
{
    if (!(nodes > 0.) || !(block > 0.) || !(p > 0. && p < 1.))
        return NAN;
    return -log (p) * block / nodes;
}

double tier_gev_return_level (const struct tier_gev *g, double m)
{
    return tier_gev_quantile_y (g, tier_evt_y_period (m));
}

struct tier_gev tier_gev_power (const struct tier_gev *g, double k)
{
    struct tier_gev p = { NAN, NAN, g->shape };
    double lk;

    if (!(k > 0.) || !isfinite (k))
        return p;
    lk = log (k);
    p.scale = g->scale * exp (g->shape * lk);
    p.loc = g->loc + g->scale * (g->shape == 0. ? lk
                                 : expm1 (g->shape * lk) / g->shape);
    return p;
}

/* log Gamma (1 - xi): near 0 by its series gamma xi + sum zeta(k) xi^k / k
 * (gsl_sf_lngamma is accurate only in absolute terms there)
 */
static double lngamma_1m (double xi)
{
    static const double zeta[] = { 1.6449340668482264, 1.2020569031595943,
                                   1.0823232337111382, 1.0369277551433699,
                                   1.0173430619844491, 1.0083492773819228 };
    double s = 0.;

    if (fabs (xi) >= 1e-2)
        return gsl_sf_lngamma (1. - xi);
    for (int k = 7; k >= 2; k--)
        s = xi * (zeta[k - 2] / k + s);
    return xi * (M_EULER + s);
}

double tier_gev_mean (const struct tier_gev *g)
{
    if (!(g->shape < 1.) || !(g->scale > 0.))
        return NAN;
    if (g->shape == 0.)
        return g->loc + g->scale * M_EULER;
    return g->loc + g->scale * expm1 (lngamma_1m (g->shape)) / g->shape;
}

/* The objective and its gradient with respect to (m, sig, xi). */

static double nll (struct tier_evt *e, const double p[3])
{
    double m = p[0], sig = p[1], xi = p[2];
    double f = 0.;

    e->evals++;
    if (!(sig >= SIG_MIN) || !isfinite (sig) || !isfinite (m)
        || !(xi > XI_MIN) || !(xi <= XI_MAX))
        return PENALTY;
    for (size_t i = 0; i < e->n; i++)
        if (term ((e->x[i] - m) / sig, xi, &f, NULL) < 0)
            return PENALTY;
    if (!isfinite (f))
        return PENALTY;
    return log (sig) + f / e->n;
}

static double nll_grad (struct tier_evt *e, const double p[3], double g[3])
{
    double m = p[0], sig = p[1], xi = p[2];
    double f = 0., d[3] = { 0., 0., 0. };
    double n = e->n;

    e->evals++;
    g[0] = g[1] = g[2] = 0.;
    if (!(sig >= SIG_MIN) || !isfinite (sig) || !isfinite (m)
        || !(xi > XI_MIN) || !(xi <= XI_MAX))
        return PENALTY;
    for (size_t i = 0; i < e->n; i++)
        if (term ((e->x[i] - m) / sig, xi, &f, d) < 0)
            return PENALTY;
    if (!isfinite (f) || !isfinite (d[0]) || !isfinite (d[1])
        || !isfinite (d[2]))
        return PENALTY;
    g[0] = -d[0] / (n * sig);
    g[1] = (1. - d[1] / n) / sig;
    g[2] = d[2] / n;
    return log (sig) + f / n;
}

static size_t obj_dim (const struct obj *o)
{
    return o->mode == FULL ? 3 : 2;
}

static void unpack (const struct obj *o, const double *v, double p[3])
{
    switch (o->mode) {
        case FULL:
            p[0] = v[0];
            p[1] = exp (v[1]);
            p[2] = v[2];
            break;
        case PROF_SHAPE:
            p[0] = v[0];
            p[1] = exp (v[1]);
            p[2] = o->psi;
            break;
        case PROF_SCALE:
            p[0] = v[0];
            p[1] = exp (o->psi);
            p[2] = v[1];
            break;
        case PROF_LOC:
            p[0] = o->psi;
            p[1] = exp (v[0]);
            p[2] = v[1];
            break;
        case PROF_QUANT:
            p[1] = exp (v[0]);
            p[2] = v[1];
            p[0] = o->psi - p[1] * qfun (p[2], o->lny);
            break;
    }
}

static void pack (const struct obj *o, const double p[3], double *v)
{
    switch (o->mode) {
        case FULL:
            v[0] = p[0];
            v[1] = log (p[1]);
            v[2] = p[2];
            break;
        case PROF_SHAPE:
            v[0] = p[0];
            v[1] = log (p[1]);
            break;
        case PROF_SCALE:
            v[0] = p[0];
            v[1] = p[2];
            break;
        case PROF_LOC:
        case PROF_QUANT:
            v[0] = log (p[1]);
            v[1] = p[2];
            break;
    }
}

static double obj_value (const struct obj *o, const double *v)
{
    double p[3];

    unpack (o, v, p);
    return nll (o->e, p);
}

static double gsl_f (const gsl_vector *x, void *arg)
{
    const struct obj *o = arg;
    double v[3];

    for (size_t i = 0; i < x->size; i++)
        v[i] = gsl_vector_get (x, i);
    return obj_value (o, v);
}

static void gsl_fdf (const gsl_vector *x, void *arg, double *f,
                     gsl_vector *df)
{
    const struct obj *o = arg;
    double v[3], p[3], g[3], d[3] = { 0., 0., 0. };

    for (size_t i = 0; i < x->size; i++)
        v[i] = gsl_vector_get (x, i);
    unpack (o, v, p);
    *f = nll_grad (o->e, p, g);
    switch (o->mode) {
        case FULL:
            d[0] = g[0];
            d[1] = p[1] * g[1];
            d[2] = g[2];
            break;
        case PROF_SHAPE:
            d[0] = g[0];
            d[1] = p[1] * g[1];
            break;
        case PROF_SCALE:
            d[0] = g[0];
            d[1] = g[2];
            break;
        case PROF_LOC:
            d[0] = p[1] * g[1];
            d[1] = g[2];
            break;
        case PROF_QUANT:
            /* m = psi - sig q (xi) */
            d[0] = p[1] * g[1] - g[0] * p[1] * qfun (p[2], o->lny);
            d[1] = g[2] - g[0] * p[1] * qfun_shape (p[2], o->lny);
            break;
    }
    for (size_t i = 0; i < x->size; i++)
        gsl_vector_set (df, i, d[i]);
}

static void gsl_df (const gsl_vector *x, void *arg, gsl_vector *df)
{
    double f;

    gsl_fdf (x, arg, &f, df);
}

/* Move v into the support: shapes towards 0 (the Gumbel support is the
 * whole line), or a wider scale when the shape is fixed.
 */
static double make_feasible (const struct obj *o, double *v)
{
    double f = obj_value (o, v);
    int xi_at = o->mode == FULL ? 2 : o->mode == PROF_SHAPE ? -1 : 1;
    int ls_at = o->mode == FULL || o->mode == PROF_SHAPE ? 1
                : o->mode == PROF_SCALE ? -1 : 0;

    for (int k = 0; f >= PENALTY && xi_at >= 0 && k < 40; k++) {
        v[xi_at] = k < 39 ? v[xi_at] * 0.5 : 0.;
        f = obj_value (o, v);
    }
    for (int k = 0; f >= PENALTY && ls_at >= 0 && k < 60; k++) {
        v[ls_at] += M_LN2;
        f = obj_value (o, v);
    }
    return f;
}

static double run_simplex (const struct obj *o, double *v, double step,
                           double tol, int maxit)
{
    size_t dim = obj_dim (o);
    gsl_multimin_fminimizer *s = o->e->nm[dim - 2];
    gsl_vector *x = o->e->v[dim - 2], *st = o->e->step[dim - 2];
    gsl_multimin_function fn = { gsl_f, dim, (void *) o };
    double f;

    for (size_t i = 0; i < dim; i++) {
        gsl_vector_set (x, i, v[i]);
        gsl_vector_set (st, i, step);
    }
    if (gsl_multimin_fminimizer_set (s, &fn, x, st) != GSL_SUCCESS)
        return obj_value (o, v);
    for (int it = 0; it < maxit; it++) {
        if (gsl_multimin_fminimizer_iterate (s) != GSL_SUCCESS)
            break;
        if (gsl_multimin_test_size (gsl_multimin_fminimizer_size (s), tol)
            == GSL_SUCCESS)
            break;
    }
    f = gsl_multimin_fminimizer_minimum (s);
    if (f < obj_value (o, v)) {
        for (size_t i = 0; i < dim; i++)
            v[i] = gsl_vector_get (gsl_multimin_fminimizer_x (s), i);
    }
    return obj_value (o, v);
}

/* BFGS on the analytic gradient; keeps v unless it found a lower value.
 * *converged is set when the gradient vanished.
 */
static double run_bfgs (const struct obj *o, double *v, double step,
                        int maxit, bool *converged)
{
    size_t dim = obj_dim (o);
    gsl_multimin_fdfminimizer *s = o->e->bfgs[dim - 2];
    gsl_vector *x = o->e->v[dim - 2];
    gsl_multimin_function_fdf fn = { gsl_f, gsl_df, gsl_fdf, dim,
                                     (void *) o };
    double f0 = obj_value (o, v);
    bool ok = false;

    if (f0 >= PENALTY)
        goto out;
    for (size_t i = 0; i < dim; i++)
        gsl_vector_set (x, i, v[i]);
    if (gsl_multimin_fdfminimizer_set (s, &fn, x, step, 0.1) != GSL_SUCCESS)
        goto out;
    for (int it = 0; it < maxit; it++) {
        if (gsl_multimin_test_gradient (gsl_multimin_fdfminimizer_gradient
                                        (s), 1e-10) == GSL_SUCCESS) {
            ok = true;
            break;
        }
        if (gsl_multimin_fdfminimizer_iterate (s) != GSL_SUCCESS)
            break;
    }
    if (!ok && gsl_multimin_test_gradient (gsl_multimin_fdfminimizer_gradient
                                           (s), 1e-7) == GSL_SUCCESS)
        ok = true;
    if (gsl_multimin_fdfminimizer_minimum (s) <= f0) {
        double w[3];
        gsl_vector *xm = gsl_multimin_fdfminimizer_x (s);
        for (size_t i = 0; i < dim; i++)
            w[i] = gsl_vector_get (xm, i);
        if (obj_value (o, w) <= f0)
            memcpy (v, w, dim * sizeof (double));
        else
            ok = false;
    }
out:
    if (converged)
        *converged = ok;
    return obj_value (o, v);
}

/* Remember a point better than the fit: the fit is then redone from it. */
static void note_better (struct tier_evt *e, const double p[3], double f)
{
    if (e->fitted && e->refits < REFITS_MAX
        && f < e->nll_best - 1e-10 * (1. + fabs (e->nll_best))
        && (!e->has_better || f < e->better_nll)) {
        e->has_better = true;
        memcpy (e->better, p, sizeof (e->better));
        e->better_nll = f;
    }
}

/* Starting points. */

static double lgam (double x)
{
    return gsl_sf_lngamma (x);
}

/* (m, sig, xi) matching the first two L-moments for shape xi < 1 */
static int lmom_start (double l1, double l2, double xi, double p[3])
{
    double k = -xi;

    if (!(xi < 1.) || !(l2 > 0.))
        return -1;
    if (fabs (k) < 1e-6) {
        p[1] = l2 / M_LN2;
        p[0] = l1 - M_EULER * p[1];
    }
    else {
        double g1 = exp (lgam (1. + k));
        p[1] = l2 * k / (g1 * -expm1 (-k * M_LN2));
        p[0] = l1 - p[1] * (1. - g1) / k;
    }
    p[2] = xi;
    return p[1] > 0. && isfinite (p[0]) && isfinite (p[1]) ? 0 : -1;
}

/* Probability-weighted moments (Hosking, Wallis and Wood 1985) and a
 * spread of shapes, each with the L-moment scale and location.
 */
static size_t starts (const struct tier_evt *e, double p[][3], size_t max)
{
    static const double shapes[] = { -0.6, -0.3, 0., 0.3, 0.7 };
    double n = e->n, b0 = 0., b1 = 0., b2 = 0.;
    size_t count = 0;

    for (size_t i = 0; i < e->n; i++) {
        double j = i;   /* 0-based rank in the sorted sample */
        b0 += e->x[i];
        b1 += e->x[i] * j / (n - 1.);
        b2 += e->x[i] * j * (j - 1.) / ((n - 1.) * (n - 2.));
    }
    b0 /= n;
    b1 /= n;
    b2 /= n;
    {
        double cc = (2. * b1 - b0) / (3. * b2 - b0) - M_LN2 / log (3.);
        double xi = -(7.8590 * cc + 2.9554 * cc * cc);
        if (isfinite (xi)) {
            xi = fmax (-0.95, fmin (0.95, xi));
            if (count < max && lmom_start (b0, 2. * b1 - b0, xi, p[count])
                == 0)
                count++;
        }
    }
    for (size_t i = 0; i < sizeof (shapes) / sizeof (shapes[0]); i++)
        if (count < max && lmom_start (b0, 2. * b1 - b0, shapes[i],
                                       p[count]) == 0)
            count++;
    return count;
}

/* Polish v (FULL): BFGS, then a fresh small simplex around the result to
 * step off any saddle or ridge, then BFGS again, until it stops improving.
 */
static double polish (const struct obj *o, double *v)
{
    double f = run_bfgs (o, v, 1e-3, 500, NULL);

    for (int r = 0; r < 5; r++) {
        double f1 = run_simplex (o, v, 0.01, 1e-8, 2000);
        f1 = run_bfgs (o, v, 1e-4, 500, NULL);
        if (!(f1 < f - 1e-13 * (1. + fabs (f)))) {
            f = f1;
            break;
        }
        f = f1;
    }
    return f;
}

static double distance (const double *a, const double *b)
{
    double d = 0.;

    for (int i = 0; i < 3; i++)
        d = fmax (d, fabs (a[i] - b[i]));
    return d;
}

/* A maximum on an edge of the shape's range (-1, 3] is a ridge for the
 * unconstrained minimisers, which stop short of it: near an edge, fit
 * location and scale with the shape on the edge, and keep what is better.
 */
static void edge_polish (struct tier_evt *e)
{
    const double edges[2] = { XI_MIN + 1e-7, XI_MAX };

    for (int k = 0; k < 2; k++) {
        struct obj o = { .e = e, .mode = PROF_SHAPE, .psi = edges[k] };
        double v[2], p[3], f;

        if (!(fabs (e->best[2] - edges[k]) < 0.1))
            continue;
        pack (&o, e->best, v);
        if ((f = make_feasible (&o, v)) >= PENALTY)
            continue;
        f = run_simplex (&o, v, 0.05, 1e-10, 3000);
        f = run_bfgs (&o, v, 1e-3, 500, NULL);
        if (f < e->nll_best) {
            unpack (&o, v, p);
            memcpy (e->best, p, sizeof (p));
            e->nll_best = f;
        }
    }
}

/* Coarse simplexes from every start; then the best, and every other
 * distinct candidate within one log-likelihood unit of it, are polished.
 */
static int fit_mle (struct tier_evt *e, unsigned *nstarts)
{
    struct obj o = { .e = e, .mode = FULL };
    double sp[10][3], cand[10][3], fc[10], done[10][3];
    size_t ns, nc = 0, nd = 0, ib = 0;

    ns = starts (e, sp, 8);
    if (e->has_better && ns < 10) {
        memcpy (sp[ns++], e->better, sizeof (sp[0]));
        e->has_better = false;
    }
    for (size_t i = 0; i < ns; i++) {
        double v[3];
        pack (&o, sp[i], v);
        if (make_feasible (&o, v) >= PENALTY)
            continue;
        fc[nc] = run_simplex (&o, v, 0.1, 1e-4, 2000);
        memcpy (cand[nc++], v, sizeof (v));
    }
    *nstarts = ns;
    if (nc == 0) {
        errno = EDOM;
        return -1;
    }
    for (size_t i = 1; i < nc; i++)
        if (fc[i] < fc[ib])
            ib = i;
    {
        double limit = fc[ib] + 1. / e->n;
        size_t order[10], no = 0;

        order[no++] = ib;
        for (size_t i = 0; i < nc; i++)
            if (i != ib && fc[i] <= limit)
                order[no++] = i;
        for (size_t k = 0; k < no; k++) {
            size_t i = order[k];
            bool seen = false;
            for (size_t j = 0; j < nd; j++)
                if (distance (cand[i], done[j]) < 0.05)
                    seen = true;
            if (seen)
                continue;
            fc[i] = polish (&o, cand[i]);
            memcpy (done[nd++], cand[i], sizeof (done[0]));
            if (fc[i] < fc[ib])
                ib = i;
        }
    }
    unpack (&o, cand[ib], e->best);
    e->nll_best = fc[ib];
    edge_polish (e);
    return 0;
}

/* The profile: the minimum over the nuisance parameters for fixed psi,
 * warm-started from the nearest point computed so far.
 */
static double profile_at (struct tier_evt *e, enum prof mode, double lny,
                          struct cache *c, double psi)
{
    struct obj o = { .e = e, .mode = mode, .psi = psi, .lny = lny };
    double v[2], w[2], p[3], f, fw;
    size_t near = 0;
    bool ok;

    for (size_t i = 1; i < c->count; i++)
        if (fabs (c->psi[i] - psi) < fabs (c->psi[near] - psi))
            near = i;
    memcpy (v, c->v[near], sizeof (v));
    if ((f = make_feasible (&o, v)) < PENALTY)
        f = run_bfgs (&o, v, 1e-2, 300, &ok);
    if (f >= PENALTY || !ok) {
        /* from the fit's own nuisance values, by the simplex */
        pack (&o, e->best, w);
        if ((fw = make_feasible (&o, w)) < PENALTY) {
            fw = run_simplex (&o, w, 0.05, 1e-9, 3000);
            fw = run_bfgs (&o, w, 1e-3, 300, NULL);
        }
        if (fw < f) {
            f = fw;
            memcpy (v, w, sizeof (v));
        }
    }
    if (f < PENALTY) {
        unpack (&o, v, p);
        note_better (e, p, f);
        if (c->count < CACHE_MAX) {
            c->psi[c->count] = psi;
            memcpy (c->v[c->count], v, sizeof (v));
            c->count++;
        }
    }
    return f;
}

struct root_arg {
    struct tier_evt *e;
    enum prof mode;
    double lny;
    struct cache *c;
};

/* deviance minus its critical value */
static double excess (struct tier_evt *e, enum prof mode, double lny,
                      struct cache *c, double psi)
{
    double f = profile_at (e, mode, lny, c, psi);

    if (f >= PENALTY)
        return 1e10;
    return 2. * e->n * (f - e->nll_best) - e->qchi;
}

static double root_f (double psi, void *arg)
{
    struct root_arg *a = arg;

    return excess (a->e, a->mode, a->lny, a->c, psi);
}

/* One end of the profile interval of psi (working scale) around est,
 * in direction dir; bound is the edge of the parameter space.
 */
static double profile_end (struct tier_evt *e, enum prof mode, double lny,
                           struct cache *c, double est, double d, int dir,
                           double bound, bool *open)
{
    struct root_arg a = { e, mode, lny, c };
    gsl_function fn = { root_f, &a };
    double lo = est, hi, g;
    double step = d;
    int k;

    *open = false;
    for (k = 0; k < 40; k++) {
        hi = lo + dir * step;
        if (isfinite (bound) && (dir < 0 ? hi <= bound : hi >= bound)) {
            double edge = bound - dir * 1e-7 * (1. + fabs (bound));
            if (dir < 0 ? lo <= edge : lo >= edge) {
                *open = true;
                return bound;
            }
            hi = edge;
        }
        g = excess (e, mode, lny, c, hi);
        if (e->has_better)
            return NAN;
        if (g >= 0.)
            break;
        lo = hi;
        step *= 2.;
    }
    if (k == 40) {
        *open = true;
        return isfinite (bound) ? bound : dir * INFINITY;
    }
    {
        double x0 = fmin (lo, hi), x1 = fmax (lo, hi), r = 0.5 * (x0 + x1);
        if (gsl_root_fsolver_set (e->root, &fn, x0, x1) != GSL_SUCCESS)
            return hi;
        for (int it = 0; it < 100; it++) {
            if (gsl_root_fsolver_iterate (e->root) != GSL_SUCCESS)
                break;
            r = gsl_root_fsolver_root (e->root);
            x0 = gsl_root_fsolver_x_lower (e->root);
            x1 = gsl_root_fsolver_x_upper (e->root);
            if (e->has_better)
                return NAN;
            if (gsl_root_test_interval (x0, x1, 1e-6 * d, 1e-10)
                == GSL_SUCCESS)
                break;
        }
        return r;
    }
}

/* The profile interval of psi; est and se on the working scale. */
static int profile_interval (struct tier_evt *e, enum prof mode, double lny,
                             double est, double se, double bound_lo,
                             double bound_hi, double *lo, double *hi,
                             bool *lo_open, bool *hi_open)
{
    struct obj o = { .e = e, .mode = mode, .psi = est, .lny = lny };
    struct cache *c;
    double d = isfinite (se) && se > 0. ? se : 0.1;

    if (!(c = malloc (sizeof (*c))))
        return -1;
    c->count = 1;
    c->psi[0] = est;
    pack (&o, e->best, c->v[0]);
    d = fmin (d, mode == PROF_SHAPE ? 0.25 : 1.);
    *lo = profile_end (e, mode, lny, c, est, d, -1, bound_lo, lo_open);
    if (!e->has_better)
        *hi = profile_end (e, mode, lny, c, est, d, 1, bound_hi, hi_open);
    free (c);
    return 0;
}

/* Observed information by central differences of the analytic gradient;
 * cov is its inverse in (m, sig, xi) units.
 */
static int information (struct tier_evt *e, double cov[3][3])
{
    double h[3], H[3][3];
    gsl_matrix_view mv;
    int rc;

    h[0] = 1e-5;
    h[1] = 1e-5 * e->best[1];
    h[2] = 1e-5;
    for (int j = 0; j < 3; j++) {
        double pp[3], pm[3], gp[3], gm[3];
        memcpy (pp, e->best, sizeof (pp));
        memcpy (pm, e->best, sizeof (pm));
        pp[j] += h[j];
        pm[j] -= h[j];
        if (nll_grad (e, pp, gp) >= PENALTY
            || nll_grad (e, pm, gm) >= PENALTY)
            return -1;
        for (int i = 0; i < 3; i++)
            H[i][j] = e->n * (gp[i] - gm[i]) / (2. * h[j]);
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            cov[i][j] = 0.5 * (H[i][j] + H[j][i]);
    mv = gsl_matrix_view_array (&cov[0][0], 3, 3);
    if ((rc = gsl_linalg_cholesky_decomp1 (&mv.matrix)) != GSL_SUCCESS
        || (rc = gsl_linalg_cholesky_invert (&mv.matrix)) != GSL_SUCCESS)
        return -1;
    for (int i = 0; i < 3; i++)
        if (!(cov[i][i] > 0.) || !isfinite (cov[i][i]))
            return -1;
    return 0;
}

/* A profile interval that misses its own estimate has failed (a profile
 * far out of the range of double precision): report it unbounded.
 */
static void check_interval (struct tier_evt_estimate *est, double lo_bound)
{
    if (!(est->lo <= est->value && est->value <= est->hi)) {
        est->lo = lo_bound;
        est->hi = INFINITY;
        est->lo_open = est->hi_open = true;
    }
}

static void set_wald (struct tier_evt_estimate *est, double zq)
{
    if (isfinite (est->se)) {
        est->lo = est->value - zq * est->se;
        est->hi = est->value + zq * est->se;
    }
    else {
        est->lo = -INFINITY;
        est->hi = INFINITY;
        est->lo_open = est->hi_open = true;
    }
}

/* The point estimate in the data's units, its log-likelihood and the
 * warnings it alone raises.
 */
static void fit_point (const struct tier_evt *e, struct tier_evt_fit *fit)
{
    double s = e->s;

    fit->n = e->n;
    fit->gev.loc = e->c + s * e->best[0];
    fit->gev.scale = s * e->best[1];
    fit->gev.shape = e->best[2];
    fit->loglik = -(double) e->n * (e->nll_best + log (s));
    fit->level = e->level;
    fit->profile = !(e->flags & TIER_EVT_WALD);
    fit->warn = 0;
    if (e->n < FEW_BLOCKS)
        fit->warn |= TIER_EVT_WARN_FEW;
    if (e->best[2] < -0.5)
        fit->warn |= TIER_EVT_WARN_NONREGULAR;
    if (e->best[2] < XI_MIN + 1e-3 || e->best[2] > XI_MAX - 1e-3
        || e->best[1] < 10. * SIG_MIN)
        fit->warn |= TIER_EVT_WARN_BOUNDARY;
}

/* The covariance from the observed information (NAN if singular), the
 * parameters' standard errors and their Wald intervals.
 */
static void fit_wald (struct tier_evt *e, struct tier_evt_fit *fit)
{
    double cov[3][3];
    double s = e->s;
    const double scl[3] = { s, s, 1. };
    struct tier_evt_estimate *par = fit->par;

    if (information (e, cov) < 0) {
        fit->warn |= TIER_EVT_WARN_SINGULAR;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                fit->cov[i][j] = NAN;
    }
    else {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                fit->cov[i][j] = cov[i][j] * scl[i] * scl[j];
    }
    par[TIER_EVT_LOC].value = fit->gev.loc;
    par[TIER_EVT_SCALE].value = fit->gev.scale;
    par[TIER_EVT_SHAPE].value = fit->gev.shape;
    for (int i = 0; i < 3; i++) {
        par[i].se = sqrt (fit->cov[i][i]);
        par[i].lo_open = par[i].hi_open = false;
        set_wald (&par[i], e->zq);
    }
}

/* The likelihood ratio test of the Gumbel limit, and a coarse look along
 * the shape for a higher likelihood; -1 as fit_derived.
 */
static int fit_gumbel (struct tier_evt *e, struct tier_evt_fit *fit)
{
    struct cache *c = malloc (sizeof (*c));
    struct obj o = { .e = e, .mode = PROF_SHAPE, .psi = 0. };
    double f0;

    if (!c)
        return -1;
    c->count = 1;
    c->psi[0] = e->best[2];
    pack (&o, e->best, c->v[0]);
    f0 = profile_at (e, PROF_SHAPE, 0., c, 0.);
    fit->gumbel_lr = f0 >= PENALTY ? INFINITY
                                   : fmax (0., 2. * e->n * (f0 - e->nll_best));
    fit->gumbel_p = isfinite (fit->gumbel_lr)
                        ? gsl_cdf_chisq_Q (fit->gumbel_lr, 1.)
                        : 0.;
    for (double xi = -0.9; xi < 2.; xi += 0.3)
        (void) profile_at (e, PROF_SHAPE, 0., c, xi);
    free (c);
    if (e->has_better)
        return -1;
    return 0;
}

/* The parameters' profile-likelihood intervals; -1 as fit_derived. */
static int fit_profiles (struct tier_evt *e, struct tier_evt_fit *fit)
{
    struct tier_evt_estimate *p;
    double s = e->s;
    double lo, hi;
    bool lo_open, hi_open;

    p = &fit->par[TIER_EVT_LOC];
    if (profile_interval (e, PROF_LOC, 0., e->best[0], p->se / s, -INFINITY,
                          INFINITY, &lo, &hi, &lo_open, &hi_open)
        < 0)
        return -1;
    if (e->has_better)
        return -1;
    p->lo = lo_open ? -INFINITY : e->c + s * lo;
    p->hi = hi_open ? INFINITY : e->c + s * hi;
    p->lo_open = lo_open;
    p->hi_open = hi_open;
    check_interval (p, -INFINITY);

    p = &fit->par[TIER_EVT_SCALE];
    if (profile_interval (e, PROF_SCALE, 0., log (e->best[1]), p->se / p->value,
                          log (SIG_MIN), INFINITY, &lo, &hi, &lo_open, &hi_open)
        < 0)
        return -1;
    if (e->has_better)
        return -1;
    p->lo = lo_open ? s * SIG_MIN : s * exp (lo);
    p->hi = hi_open ? INFINITY : s * exp (hi);
    p->lo_open = lo_open;
    p->hi_open = hi_open;
    check_interval (p, s * SIG_MIN);

    p = &fit->par[TIER_EVT_SHAPE];
    if (profile_interval (e, PROF_SHAPE, 0., e->best[2], p->se, XI_MIN, XI_MAX,
                          &lo, &hi, &lo_open, &hi_open)
        < 0)
        return -1;
    if (e->has_better)
        return -1;
    p->lo = lo;
    p->hi = hi;
    p->lo_open = lo_open;
    p->hi_open = hi_open;
    check_interval (p, XI_MIN);
    return 0;
}

/* Everything after the point estimate; -1 with has_better set means
 * "start again from e->better".
 */
static int fit_derived (struct tier_evt *e, struct tier_evt_fit *fit)
{
    fit_point (e, fit);
    fit_wald (e, fit);
    if (fit_gumbel (e, fit) < 0)
        return -1;
    if (!fit->profile)
        return 0;
    return fit_profiles (e, fit);
}

static int cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y ? 1 : 0;
}

void tier_evt_destroy (struct tier_evt *e)
{
    if (e) {
        int saved = errno;
        for (int i = 0; i < 2; i++) {
            if (e->nm[i])
                gsl_multimin_fminimizer_free (e->nm[i]);
            if (e->bfgs[i])
                gsl_multimin_fdfminimizer_free (e->bfgs[i]);
            if (e->v[i])
                gsl_vector_free (e->v[i]);
            if (e->step[i])
                gsl_vector_free (e->step[i]);
        }
        if (e->root)
            gsl_root_fsolver_free (e->root);
        free (e->z);
        free (e->x);
        free (e);
        errno = saved;
    }
}

struct tier_evt *tier_evt_create (const double *z, size_t n,
                                  tier_error_t *error)
{
    struct tier_evt *e;
    gsl_error_handler_t *old;
    double ss = 0., big;

    if (!z || n < 3) {
        errno = EINVAL;
        tier_errprintf (error, "%zu block maxima; at least 3 are needed", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite (z[i])) {
            errno = EINVAL;
            tier_errprintf (error, "block maximum %zu is not finite", i + 1);
            return NULL;
        }
    }
    if (!(e = calloc (1, sizeof (*e))))
        goto nomem;
    e->n = n;
    if (!(e->z = malloc (n * sizeof (double)))
        || !(e->x = malloc (n * sizeof (double))))
        goto nomem;
    memcpy (e->z, z, n * sizeof (double));
    qsort (e->z, n, sizeof (double), cmp_double);
    if (e->z[0] == e->z[n - 1]) {
        tier_evt_destroy (e);
        errno = EDOM;
        tier_errprintf (error, "all %zu block maxima are equal (%g)", n,
                        z[0]);
        return NULL;
    }
    {
        size_t distinct = 1;
        for (size_t i = 1; i < n; i++)
            distinct += e->z[i] != e->z[i - 1];
        if (distinct < 3) {
            tier_evt_destroy (e);
            errno = EDOM;
            tier_errprintf (error, "only 2 different values among the %zu "
                            "block maxima; a GEV needs at least 3", n);
            return NULL;
        }
    }
    /* centre on the median, scale by the standard deviation about it,
     * computed relative to the largest deviation so that nothing overflows
     */
    e->c = n % 2 ? e->z[n / 2] : e->z[n / 2 - 1] / 2. + e->z[n / 2] / 2.;
    big = fmax (e->c - e->z[0], e->z[n - 1] - e->c);
    for (size_t i = 0; i < n && isfinite (big); i++)
        ss += ((e->z[i] - e->c) / big) * ((e->z[i] - e->c) / big);
    e->s = big * sqrt (ss / (n - 1));
    if (!isfinite (e->s) || !(e->s > 0.)) {
        tier_errprintf (error, "the block maxima span too wide a range "
                        "(%g to %g)", e->z[0], e->z[n - 1]);
        tier_evt_destroy (e);
        errno = EDOM;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        e->x[i] = (e->z[i] - e->c) / e->s;

    old = gsl_set_error_handler_off ();
    for (int i = 0; i < 2; i++) {
        e->nm[i] = gsl_multimin_fminimizer_alloc
                   (gsl_multimin_fminimizer_nmsimplex2, i + 2);
        e->bfgs[i] = gsl_multimin_fdfminimizer_alloc
                     (gsl_multimin_fdfminimizer_vector_bfgs2, i + 2);
        e->v[i] = gsl_vector_alloc (i + 2);
        e->step[i] = gsl_vector_alloc (i + 2);
    }
    e->root = gsl_root_fsolver_alloc (gsl_root_fsolver_brent);
    gsl_set_error_handler (old);
    for (int i = 0; i < 2; i++)
        if (!e->nm[i] || !e->bfgs[i] || !e->v[i] || !e->step[i])
            goto nomem;
    if (!e->root)
        goto nomem;
    return e;
nomem:
    tier_evt_destroy (e);
    errno = ENOMEM;
    tier_errprintf (error, "out of memory");
    return NULL;
}

int tier_evt_fit (struct tier_evt *e, double level, unsigned flags,
                  struct tier_evt_fit *fit, tier_error_t *error)
{
    gsl_error_handler_t *old;
    unsigned refits = 0, nstarts = 0, total_starts = 0;
    int rc = -1;

    if (!e || !fit || !(level > 0. && level < 1.)) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid argument");
    }
    old = gsl_set_error_handler_off ();
    e->fitted = false;
    e->flags = flags;
    e->level = level;
    e->qchi = gsl_cdf_chisq_Pinv (level, 1.);
    e->zq = gsl_cdf_ugaussian_Pinv (0.5 + 0.5 * level);
    e->evals = 0;
    for (;;) {
        memset (fit, 0, sizeof (*fit));
        if (fit_mle (e, &nstarts) < 0) {
            tier_errprintf (error, "no starting point inside the support");
            goto out;
        }
        total_starts += nstarts;
        e->fitted = true;
        e->has_better = false;
        if (fit_derived (e, fit) == 0)
            break;
        if (!e->has_better) {
            errno = ENOMEM;
            tier_errprintf (error, "out of memory");
            goto out;
        }
        /* after REFITS_MAX, note_better stops asking for more */
        e->refits++;
        refits++;
        e->fitted = false;
    }
    if (refits)
        fit->warn |= TIER_EVT_WARN_REFIT;
    if (e->refits >= REFITS_MAX)
        fit->warn |= TIER_EVT_WARN_UNSETTLED;
    fit->starts = total_starts;
    fit->evals = e->evals;
    e->fit = *fit;
    rc = 0;
out:
    gsl_set_error_handler (old);
    return rc;
}

int tier_evt_quantile (struct tier_evt *e, double y,
                       struct tier_evt_estimate *est, tier_error_t *error)
{
    const struct tier_evt_fit *fit;
    gsl_error_handler_t *old;
    double lny, g[3], var = 0.;

    if (!e || !est || !(y > 0.) || !isfinite (y)) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid argument");
    }
    if (!e->fitted) {
        errno = EINVAL;
        return tier_errprintf (error, "no fit");
    }
    fit = &e->fit;
    lny = log (y);
    memset (est, 0, sizeof (*est));
    est->value = tier_gev_quantile_y (&fit->gev, y);
    g[0] = 1.;
    g[1] = qfun (fit->gev.shape, lny);
    g[2] = fit->gev.scale * qfun_shape (fit->gev.shape, lny);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            var += g[i] * fit->cov[i][j] * g[j];
    est->se = var > 0. ? sqrt (var) : NAN;
    set_wald (est, e->zq);
    if (!fit->profile)
        return 0;
    old = gsl_set_error_handler_off ();
    {
        double zs = (est->value - e->c) / e->s, lo, hi;
        bool lo_open, hi_open;
        int rc = profile_interval (e, PROF_QUANT, lny, zs, est->se / e->s,
                                   -INFINITY, INFINITY, &lo, &hi, &lo_open,
                                   &hi_open);
        gsl_set_error_handler (old);
        if (rc < 0) {
            errno = ENOMEM;
            return tier_errprintf (error, "out of memory");
        }
        if (e->has_better) {
            e->fitted = false;
            errno = EAGAIN;
            return tier_errprintf (error, "profiling found a higher "
                                   "likelihood: fit again");
        }
        est->lo = lo_open ? -INFINITY : e->c + e->s * lo;
        est->hi = hi_open ? INFINITY : e->c + e->s * hi;
        est->lo_open = lo_open;
        est->hi_open = hi_open;
        check_interval (est, -INFINITY);
    }
    return 0;
}
