/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_evt.c - the extreme-value model: distribution, fit, intervals,
 * reference fits (evd, scipy), input errors
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/evt.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_multimin.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

FAILALLOC_DEFINE

#ifndef EVT_FIXTURES
#define EVT_FIXTURES "fixtures/evt"
#endif

#define NTABLE 12

struct gev_case {
    char name[64];
    struct tier_gev g;
};

static const char *fixtures (void)
{
    const char *d = getenv ("TIER_EVT_FIXTURES");

    return d && *d ? d : EVT_FIXTURES;
}

static FILE *open_fixture (const char *name)
{
    char path[4096];
    FILE *f;

    if (snprintf (path, sizeof (path), "%s/%s", fixtures (), name)
        >= (int) sizeof (path))
        fail_msg ("fixture path too long");
    if (!(f = fopen (path, "r")))
        fail_msg ("%s: %s", path, strerror (errno));
    return f;
}

/* Split a CSV line (no quotes) in place. */
static size_t split (char *line, char **f, size_t max)
{
    size_t n = 0;
    char *p = line;

    line[strcspn (line, "\r\n")] = '\0';
    while (n < max) {
        f[n++] = p;
        if (!(p = strchr (p, ',')))
            break;
        *p++ = '\0';
    }
    return n;
}

/* The 12 fitted distributions of the paper's Table 3. */
static size_t read_table3 (struct gev_case *c, size_t max)
{
    FILE *f = open_fixture ("table3.csv");
    char line[512], *fl[8];
    size_t n = 0;
    bool header = false;

    while (fgets (line, sizeof (line), f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (!header) {
            header = true;
            continue;
        }
        assert_int_equal (split (line, fl, 8), 5);
        assert_true (n < max);
        snprintf (c[n].name, sizeof (c[n].name), "%s-%s", fl[0], fl[1]);
        c[n].g.shape = strtod (fl[2], NULL);
        c[n].g.scale = strtod (fl[3], NULL);
        c[n].g.loc = strtod (fl[4], NULL);
        n++;
    }
    fclose (f);
    return n;
}

static void draw (gsl_rng *r, const struct tier_gev *g, double *z, size_t n)
{
    for (size_t i = 0; i < n; i++)
        z[i] = tier_gev_quantile (g, gsl_rng_uniform_pos (r));
}

/* The distribution functions. */

static void test_distribution (void **state)
{
    const struct tier_gev gs[] = {
        { 566.95, 154.47, -0.16 }, { 100., 20., 0.3 }, { 10., 2., 0. },
        { 126.54, 36.71, -0.46 }, { 5., 1., 1e-13 },
    };

    for (size_t k = 0; k < sizeof (gs) / sizeof (gs[0]); k++) {
        const struct tier_gev *g = &gs[k];
        for (double p = 0.001; p < 1.; p += 0.0737) {
            double z = tier_gev_quantile (g, p);
            assert_true (fabs (tier_gev_cdf (g, z) - p) < 1e-12);
        }
        /* the return-level formula, z_m = mu - sigma/xi [1 -
         * (-log (1 - 1/m))^-xi] (mu - sigma log (-log (1 - 1/m)) at 0)
         */
        for (double m = 2.; m < 1e5; m *= 3.7) {
            double y = -log (1. - 1. / m);
            /* near 0 the xi formula cancels: compare with the limit */
            double want = fabs (g->shape) < 1e-8
                          ? g->loc - g->scale * log (y)
                          : g->loc - g->scale / g->shape
                            * (1. - pow (y, -g->shape));
            assert_true (fabs (tier_gev_return_level (g, m) - want)
                         < 1e-9 * fabs (want));
        }
        /* max-stability: F^k = cdf of tier_gev_power (k) */
        for (double kk = 0.5; kk < 40.; kk *= 2.) {
            struct tier_gev pk = tier_gev_power (g, kk);
            for (double p = 0.05; p < 1.; p += 0.1) {
                double z = tier_gev_quantile (g, p);
                assert_true (fabs (tier_gev_cdf (&pk, z) - pow (p, kk))
                             < 1e-12);
            }
            /* the nodes mapping: the median of the slowest of N = kk b
             * nodes is F's quantile at 0.5^(1/kk)
             */
            assert_true (fabs (tier_gev_quantile_y
                               (g, tier_evt_y_nodes (kk * 8., 8., 0.5))
                               - tier_gev_quantile (&pk, 0.5))
                         < 1e-9 * fabs (g->loc) + 1e-9);
        }
        /* the score: central differences of the log-density */
        {
            double z = tier_gev_quantile (g, 0.37), grad[3];
            double l = tier_gev_score (g, z, grad);
            assert_true (isfinite (l));
            assert_true (fabs (l - tier_gev_logpdf (g, z)) < 1e-15);
            for (int i = 0; i < 3; i++) {
                struct tier_gev a = *g, b = *g;
                double *pa = i == 0 ? &a.loc : i == 1 ? &a.scale : &a.shape;
                double *pb = i == 0 ? &b.loc : i == 1 ? &b.scale : &b.shape;
                double h = 1e-6 * (i == 2 ? 1. : g->scale);
                *pa += h;
                *pb -= h;
                double fd = (tier_gev_logpdf (&a, z) - tier_gev_logpdf (&b, z))
                            / (2. * h);
                assert_true (fabs (fd - grad[i]) < 1e-6 * (1. + fabs (fd)));
            }
        }
    }
    /* the Gumbel limit is continuous: shape 1e-14 and 0 agree */
    {
        struct tier_gev a = { 10., 2., 0. }, b = { 10., 2., 1e-14 };
        for (double z = -5.; z < 40.; z += 1.3) {
            double ga[3], gb[3];
            double la = tier_gev_score (&a, z, ga);
            /* they differ by about 1e-14 y^2 exp (-y) / 2 */
            assert_true (fabs (la - tier_gev_score (&b, z, gb))
                         < 1e-12 * (1. + fabs (la)));
            for (int i = 0; i < 3; i++)
                assert_true (fabs (ga[i] - gb[i]) < 1e-9 * (1 + fabs (ga[i])));
        }
        /* the mean: loc + scale * Euler's gamma in the limit */
        assert_true (fabs (tier_gev_mean (&a) - (10. + 2. * 0.5772156649015329))
                     < 1e-12);
        assert_true (fabs (tier_gev_mean (&a) - tier_gev_mean (&b)) < 1e-10);
    }
    /* support: outside it, -inf and the end points */
    {
        struct tier_gev w = { 0., 1., -0.5 }, fr = { 0., 1., 0.5 };
        assert_true (tier_gev_logpdf (&w, 2.5) == -INFINITY);
        assert_true (tier_gev_cdf (&w, 2.5) == 1.);
        assert_true (tier_gev_logpdf (&fr, -2.5) == -INFINITY);
        assert_true (tier_gev_cdf (&fr, -2.5) == 0.);
        assert_true (fabs (tier_gev_quantile (&w, 1.) - 2.) < 1e-15);
        assert_true (isnan (tier_gev_mean (&(struct tier_gev) { 0., 1., 1. })));
        assert_true (isnan (tier_gev_return_level (&w, 1.)));
    }
}

/* The expected (Fisher) information of one observation, by quadrature of
 * the outer product of the score over the reduced variable y = -log F,
 * which has density exp (-y) on (0, inf).
 */
struct info_arg {
    const struct tier_gev *g;
    int i, j;
};

static double info_integrand (double y, void *arg)
{
    struct info_arg *a = arg;
    double grad[3];
    double z = tier_gev_quantile_y (a->g, y);

    if (tier_gev_score (a->g, z, grad) == -INFINITY)
        return 0.;
    return grad[a->i] * grad[a->j] * exp (-y);
}

/* standard errors at the truth for n observations */
static void expected_se (const struct tier_gev *g, size_t n, double se[3])
{
    gsl_integration_workspace *w = gsl_integration_workspace_alloc (2000);
    double I[9];
    gsl_matrix_view mv = gsl_matrix_view_array (I, 3, 3);
    gsl_error_handler_t *old = gsl_set_error_handler_off ();

    assert_non_null (w);
    for (int i = 0; i < 3; i++) {
        for (int j = i; j < 3; j++) {
            struct info_arg a = { g, i, j };
            gsl_function fn = { info_integrand, &a };
            double v0, v1, err;
            gsl_integration_qags (&fn, 0., 1., 0., 1e-9, 2000, w, &v0, &err);
            gsl_integration_qagiu (&fn, 1., 0., 1e-9, 2000, w, &v1, &err);
            I[3 * i + j] = I[3 * j + i] = n * (v0 + v1);
        }
    }
    assert_int_equal (gsl_linalg_cholesky_decomp1 (&mv.matrix), 0);
    assert_int_equal (gsl_linalg_cholesky_invert (&mv.matrix), 0);
    for (int i = 0; i < 3; i++)
        se[i] = sqrt (I[4 * i]);
    gsl_set_error_handler (old);
    gsl_integration_workspace_free (w);
}

/* 100 block maxima from each of the 12 GEVs: the estimates lie within 4
 * standard errors (expected information at the truth) of it.
 */
static void test_recovery (void **state)
{
    struct gev_case c[NTABLE];
    size_t nc = read_table3 (c, NTABLE);
    gsl_rng *r = gsl_rng_alloc (gsl_rng_mt19937);
    double z[100], worst = 0.;

    assert_int_equal (nc, NTABLE);
    for (size_t k = 0; k < nc; k++) {
        struct tier_evt_fit fit;
        tier_error_t error;
        struct tier_evt *e;
        double se[3];
        const double truth[3] = { c[k].g.loc, c[k].g.scale, c[k].g.shape };

        gsl_rng_set (r, 20260311 + k);
        draw (r, &c[k].g, z, 100);
        expected_se (&c[k].g, 100, se);
        assert_non_null (e = tier_evt_create (z, 100, &error));
        assert_int_equal (tier_evt_fit (e, 0.95, 0, &fit, &error), 0);
        /* the fit is a maximum: better than the truth and the PWM-ish
         * starts, and no profile rose above it
         */
        assert_true (fit.loglik >= tier_gev_loglik (&c[k].g, z, 100));
        for (int i = 0; i < 3; i++) {
            double dz = fabs (fit.par[i].value - truth[i]) / se[i];
            worst = fmax (worst, dz);
            if (dz > 4.)
                fail_msg ("%s: parameter %d = %g, truth %g, %.1f se", c[k].name,
                          i, fit.par[i].value, truth[i], dz);
            /* the observed-information standard error is close to the
             * expected one (they differ by sampling noise, and for
             * shapes near -0.5 the asymptotics are slow)
             */
            assert_true (fit.par[i].se > 0.5 * se[i]
                         && fit.par[i].se < 2. * se[i]);
            assert_true (fit.par[i].lo < fit.par[i].value
                         && fit.par[i].value < fit.par[i].hi);
        }
        tier_evt_destroy (e);
    }
    print_message ("# recovery: worst |estimate - truth| = %.2f se "
                   "(tolerance 4)\n", worst);
    gsl_rng_free (r);
}

/* Is k successes in n draws at p = 0.95 unlikely (two-sided, at most
 * alpha), by the exact binomial distribution?
 */
static bool coverage_off (int k, int n, double alpha)
{
    return gsl_cdf_binomial_P ((unsigned) k, 0.95, (unsigned) n) < alpha / 2
           || (k > 0 && gsl_cdf_binomial_Q ((unsigned) k - 1, 0.95,
                                            (unsigned) n) < alpha / 2);
}

/* Over many seeds, the 95% intervals cover the truth about 95% of the
 * time, for each of the 12 distributions of the table: the coverage of
 * each parameter and of the 100-block return level, per distribution and
 * over all 12, must pass an exact binomial test at a family-wise level of
 * 1% (Bonferroni): per distribution it catches an interval that fails for
 * one shape, over all (720 draws) a small bias.  Each distribution gets
 * its own seeds: the fit is equivariant in location and scale, so shared
 * seeds would repeat one test for equal shapes.
 */
static void test_coverage (void **state)
{
    struct gev_case c[NTABLE];
    const int seeds = 60, nall = seeds * NTABLE;
    const char *what[4] = { "location", "scale", "shape", "rl100" };
    const double alpha = 0.01 / (4 * (NTABLE + 1));
    gsl_rng *r = gsl_rng_alloc (gsl_rng_mt19937);
    double z[100];
    int all[4] = { 0 };

    assert_int_equal (read_table3 (c, NTABLE), NTABLE);
    for (size_t ci = 0; ci < NTABLE; ci++) {
        const struct tier_gev *g = &c[ci].g;
        const double truth[3] = { g->loc, g->scale, g->shape };
        double rl_truth = tier_gev_return_level (g, 100.);
        int prof[4] = { 0 }, wald[4] = { 0 };

        for (int s = 0; s < seeds; s++) {
            struct tier_evt_fit fit;
            struct tier_evt_estimate rl;
            tier_error_t error;
            struct tier_evt *e;

            gsl_rng_set (r, 1000 + 1000 * ci + s);
            draw (r, g, z, 100);
            assert_non_null (e = tier_evt_create (z, 100, &error));
            assert_int_equal (tier_evt_fit (e, 0.95, 0, &fit, &error), 0);
            assert_int_equal (tier_evt_quantile (e, tier_evt_y_period (100.),
                                                 &rl, &error), 0);
            for (int i = 0; i < 3; i++) {
                const struct tier_evt_estimate *p = &fit.par[i];
                prof[i] += p->lo <= truth[i] && truth[i] <= p->hi;
                wald[i] += fabs (p->value - truth[i]) <= 1.96 * p->se;
            }
            prof[3] += rl.lo <= rl_truth && rl_truth <= rl.hi;
            wald[3] += fabs (rl.value - rl_truth) <= 1.96 * rl.se;
            tier_evt_destroy (e);
        }
        print_message ("# coverage %s, %d seeds: profile loc %.3f scale %.3f "
                       "shape %.3f rl100 %.3f; wald %.3f %.3f %.3f %.3f\n",
                       c[ci].name, seeds, prof[0] / (double) seeds,
                       prof[1] / (double) seeds, prof[2] / (double) seeds,
                       prof[3] / (double) seeds, wald[0] / (double) seeds,
                       wald[1] / (double) seeds, wald[2] / (double) seeds,
                       wald[3] / (double) seeds);
        for (int i = 0; i < 4; i++) {
            all[i] += prof[i];
            if (coverage_off (prof[i], seeds, alpha))
                fail_msg ("%s: profile coverage of the %s is %.3f",
                          c[ci].name, what[i], prof[i] / (double) seeds);
        }
    }
    print_message ("# coverage of all %d, %d draws: profile loc %.3f "
                   "scale %.3f shape %.3f rl100 %.3f\n", NTABLE, nall,
                   all[0] / (double) nall, all[1] / (double) nall,
                   all[2] / (double) nall, all[3] / (double) nall);
    for (int i = 0; i < 4; i++)
        if (coverage_off (all[i], nall, alpha))
            fail_msg ("profile coverage of the %s over all is %.3f", what[i],
                      all[i] / (double) nall);
    gsl_rng_free (r);
}

/* Reference fits. */

struct ref {
    char name[64], impl[16];
    double shape, scale, loc, se[3], loglik;
    double ci[3][2];            /* loc, scale, shape */
    double rl[2], rl_ci[2][2];  /* periods 10, 100 */
};

static double num (const char *s)
{
    return strcmp (s, "NA") ? strtod (s, NULL) : NAN;
}

static size_t read_refs (const char *file, struct ref *refs, size_t max)
{
    FILE *f = open_fixture (file);
    char line[4096], *fl[32];
    char *names[32];
    char header[4096];
    size_t n = 0, nh = 0;

    while (fgets (line, sizeof (line), f)) {
        size_t nf;
        if (line[0] == '#')
            continue;
        if (!nh) {
            strcpy (header, line);
            nh = split (header, names, 32);
            continue;
        }
        nf = split (line, fl, 32);
        assert_int_equal (nf, nh);
        assert_true (n < max);
        struct ref *r = &refs[n++];
        for (int k = 0; k < 3; k++) {
            r->se[k] = r->ci[k][0] = r->ci[k][1] = NAN;
        }
        r->rl[0] = r->rl[1] = NAN;
        for (size_t i = 0; i < nf; i++) {
            const char *h = names[i];
            double v = num (fl[i]);
            if (!strcmp (h, "name"))
                snprintf (r->name, sizeof (r->name), "%s", fl[i]);
            else if (!strcmp (h, "impl"))
                snprintf (r->impl, sizeof (r->impl), "%s", fl[i]);
            else if (!strcmp (h, "shape"))
                r->shape = v;
            else if (!strcmp (h, "scale"))
                r->scale = v;
            else if (!strcmp (h, "location"))
                r->loc = v;
            else if (!strcmp (h, "loglik"))
                r->loglik = v;
            else if (!strcmp (h, "se_location"))
                r->se[0] = v;
            else if (!strcmp (h, "se_scale"))
                r->se[1] = v;
            else if (!strcmp (h, "se_shape"))
                r->se[2] = v;
            else if (!strcmp (h, "location_lo"))
                r->ci[0][0] = v;
            else if (!strcmp (h, "location_hi"))
                r->ci[0][1] = v;
            else if (!strcmp (h, "scale_lo"))
                r->ci[1][0] = v;
            else if (!strcmp (h, "scale_hi"))
                r->ci[1][1] = v;
            else if (!strcmp (h, "shape_lo"))
                r->ci[2][0] = v;
            else if (!strcmp (h, "shape_hi"))
                r->ci[2][1] = v;
            else if (!strcmp (h, "rl10"))
                r->rl[0] = v;
            else if (!strcmp (h, "rl10_lo"))
                r->rl_ci[0][0] = v;
            else if (!strcmp (h, "rl10_hi"))
                r->rl_ci[0][1] = v;
            else if (!strcmp (h, "rl100"))
                r->rl[1] = v;
            else if (!strcmp (h, "rl100_lo"))
                r->rl_ci[1][0] = v;
            else if (!strcmp (h, "rl100_hi"))
                r->rl_ci[1][1] = v;
        }
    }
    fclose (f);
    return n;
}

/* The optimiser tolerance of each reference, as a log-likelihood
 * difference: optim's reltol (evd: 1e-8 by default, 1e-14 tight) times
 * |loglik|, scipy's fmin ftol 1e-4 (absolute).
 */
static double ref_tol (const struct ref *r)
{
    if (!strcmp (r->impl, "evd"))
        return 1e-8 * fabs (r->loglik);
    if (!strcmp (r->impl, "evd-tight"))
        return 1e-14 * fabs (r->loglik);
    return 1e-4;
}

static void test_reference (void **state)
{
    struct ref refs[80];
    size_t n = read_refs ("reference-evd.csv", refs, 80);
    size_t agree = 0, better = 0;
    double max_gain = 0., worst_rel = -1., worst_par = 0., worst_ci = 0.;
    double worst_rl = 0.;
    char gain_at[160] = "";

    n += read_refs ("reference-scipy.csv", refs + n, 80 - n);
    assert_true (n >= 3 * 18);
    for (size_t k = 0; k < n; k++) {
        const struct ref *r = &refs[k];
        char file[4200];
        tier_error_t error;
        struct tier_evt_times *t;
        struct tier_evt_blocks b;
        struct tier_evt *e;
        struct tier_evt_fit fit;
        double d, rel, margin;

        if (snprintf (file, sizeof (file), "%s/data/%s.csv", fixtures (),
                      r->name) >= (int) sizeof (file))
            fail_msg ("fixture path too long");
        if (!(t = tier_evt_times_load (file, &error)))
            fail_msg ("%s", error.text);
        assert_int_equal (tier_evt_times_blocks (t, 0, &b, &error), 0);
        assert_non_null (e = tier_evt_create (b.max, b.n, &error));
        assert_int_equal (tier_evt_fit (e, 0.95, 0, &fit, &error), 0);

        /* our log-likelihood is never below the reference's */
        d = fit.loglik - r->loglik;
        rel = d / fabs (r->loglik);
        worst_rel = worst_rel < 0. ? rel : fmin (worst_rel, rel);
        margin = 1e-6 * fabs (r->loglik);
        if (d < -margin)
            fail_msg ("%s %s: loglik %.10f < reference %.10f", r->name,
                      r->impl, fit.loglik, r->loglik);
        if (d > max_gain) {
            max_gain = d;
            snprintf (gain_at, sizeof (gain_at), "%.64s %.16s", r->name,
                      r->impl);
        }
        if (d > margin) {
            better++;
        }
        else {
            /* equal within the margin: the parameters agree within what
             * the reference's stopping rule allows.  In the quadratic
             * approximation a point with log-likelihood D below the
             * maximum lies within sqrt (2 D) standard errors of it.
             */
            const double p[3] = { r->loc, r->scale, r->shape };
            double D = fmax (d, ref_tol (r)) + 1e-10 * fabs (r->loglik);
            agree++;
            for (int i = 0; i < 3; i++) {
                double dz = fabs (fit.par[i].value - p[i]) / fit.par[i].se;
                double tol = 2. * sqrt (2. * D);
                worst_par = fmax (worst_par, dz / tol);
                if (dz > tol)
                    fail_msg ("%s %s: parameter %d: %.10g vs %.10g (%.2g se,"
                              " tolerance %.2g)", r->name, r->impl, i,
                              fit.par[i].value, p[i], dz, tol);
            }
        }
        if (!strcmp (r->impl, "evd-tight")) {
            /* standard errors: evd differentiates numerically (optim) */
            for (int i = 0; i < 3; i++)
                if (fabs (fit.par[i].se / r->se[i] - 1.) > 0.01)
                    fail_msg ("%s: se %d %.6g vs evd %.6g", r->name, i,
                              fit.par[i].se, r->se[i]);
            /* profile intervals: evd's profile is a grid with a mesh of
             * se/40, read by spline interpolation
             */
            for (int i = 0; i < 3; i++) {
                for (int j = 0; j < 2; j++) {
                    double ours = j ? fit.par[i].hi : fit.par[i].lo;
                    double dz = fabs (ours - r->ci[i][j]) / fit.par[i].se;
                    worst_ci = fmax (worst_ci, dz);
                    if (dz > 0.02)
                        fail_msg ("%s: interval %d.%d %.6g vs evd %.6g",
                                  r->name, i, j, ours, r->ci[i][j]);
                }
            }
            /* return levels and their profile intervals (root finding on
             * a multi-start profile in R)
             */
            for (int m = 0; m < 2; m++) {
                struct tier_evt_estimate q;
                double period = m ? 100. : 10.;
                assert_int_equal (tier_evt_quantile
                                  (e, tier_evt_y_period (period), &q,
                                   &error), 0);
                double dz = fabs (q.value - r->rl[m]) / q.se;
                worst_rl = fmax (worst_rl, dz);
                if (dz > 0.01)
                    fail_msg ("%s: rl%g %.8g vs %.8g", r->name, period,
                              q.value, r->rl[m]);
                for (int j = 0; j < 2; j++) {
                    double ours = j ? q.hi : q.lo;
                    dz = fabs (ours - r->rl_ci[m][j]) / q.se;
                    worst_rl = fmax (worst_rl, dz);
                    if (dz > 0.01)
                        fail_msg ("%s: rl%g interval %d: %.8g vs %.8g",
                                  r->name, period, j, ours, r->rl_ci[m][j]);
                }
            }
        }
        tier_evt_destroy (e);
        tier_evt_blocks_free (&b);
        tier_evt_times_destroy (t);
    }
    print_message ("# reference: %zu fits; %zu equal within 1e-6 "
                   "(parameters at worst %.2f of tolerance), %zu where ours "
                   "is higher (at most by %.4g, %s); smallest relative "
                   "difference %.3g\n", n, agree, worst_par, better, max_gain,
                   gain_at, worst_rel);
    print_message ("# reference: intervals within %.4f se of evd's profile, "
                   "return levels within %.4f se\n", worst_ci, worst_rl);
}

/* Input. */

static struct tier_evt_times *parse (const char *text, tier_error_t *error)
{
    FILE *f = fmemopen ((void *) text, strlen (text), "r");
    struct tier_evt_times *t;

    assert_non_null (f);
    t = tier_evt_times_read (f, "t.csv", error);
    fclose (f);
    return t;
}

static void expect_error (const char *text, size_t block, const char *msg)
{
    tier_error_t error = { { 0 } };
    struct tier_evt_times *t = parse (text, &error);
    struct tier_evt_blocks b;

    if (t) {
        if (tier_evt_times_blocks (t, block, &b, &error) == 0) {
            tier_evt_blocks_free (&b);
            tier_evt_times_destroy (t);
            fail_msg ("no error for '%s' (expected '%s')", text, msg);
        }
        tier_evt_times_destroy (t);
    }
    if (!strstr (error.text, msg))
        fail_msg ("for '%.60s': expected '%s' in '%s'", text, msg, error.text);
}

#define H "run,node,seconds\n"

static void test_input_errors (void **state)
{
    expect_error ("", 0, "t.csv:0: no header");
    expect_error ("# only a comment\n\n", 0, "t.csv:2: no header");
    expect_error ("a,b,c\n1,1,1\n", 0, "t.csv:1: bad header: no 'run' column");
    expect_error ("run,node\n1,1\n", 0, "t.csv:1: bad header: no 'seconds'");
    expect_error ("run,node,seconds,run\n", 0, "column 'run' appears twice");
    expect_error (H, 0, "t.csv:1: no times after the header");
    expect_error (H "1,1,\n", 0, "t.csv:2: seconds is missing");
    expect_error (H "1,1,2\n1,2,nan\n", 0, "t.csv:3: seconds is NaN");
    expect_error (H "1,1,NaN\n", 0, "t.csv:2: seconds is NaN");
    expect_error (H "1,1,inf\n", 0, "t.csv:2: seconds is infinite");
    expect_error (H "1,1,-Infinity\n", 0, "seconds is infinite");
    expect_error (H "1,1,-1.5\n", 0, "t.csv:2: seconds is negative (-1.5)");
    expect_error (H "1,1,abc\n", 0, "t.csv:2: seconds 'abc' is not a number");
    expect_error (H "1,1,0x10\n", 0, "is not a number");
    expect_error (H "1,1,1.5s\n", 0, "seconds '1.5s' is not a number");
    expect_error (H "1,1,1e999\n", 0, "t.csv:2: seconds '1e999' is out of");
    expect_error (H "1,1\n", 0, "t.csv:2: expected 3 fields, found 2");
    expect_error (H "1,1,2,3\n", 0, "t.csv:2: expected 3 fields, found 4");
    expect_error (H ",1,2\n", 0, "t.csv:2: run is empty");
    expect_error (H "1, ,2\n", 0, "t.csv:2: node is empty");
    expect_error (H "1,1,2\n2,1,3\n1,1,4\n", 0,
                  "t.csv:4: duplicate time for run '1' node '1' (first on "
                  "line 2)");
    expect_error (H "1,\"a,2\n", 0, "t.csv:2: unterminated quoted field");
    expect_error (H "1,a\"b,2\n", 0, "a quote inside an unquoted field");
    expect_error (H "1,\"a\"b,2\n", 0, "text after a quoted field");
    {
        static const char nul[] = H "1,1,2\n1,2\0,3\n";
        FILE *f = fmemopen ((void *) nul, sizeof (nul) - 1, "r");
        tier_error_t error;
        assert_null (tier_evt_times_read (f, "t.csv", &error));
        assert_non_null (strstr (error.text, "t.csv:3: NUL byte"));
        fclose (f);
    }
    {
        char *big = malloc (TIER_EVT_LINE_MAX + 100);
        assert_non_null (big);
        strcpy (big, H "1,");
        memset (big + strlen (big), '7', TIER_EVT_LINE_MAX);
        strcpy (big + strlen (H) + 2 + TIER_EVT_LINE_MAX, ",1\n");
        expect_error (big, 0, "t.csv:2: line longer than 4096 bytes");
        free (big);
    }
    /* blocks */
    expect_error (H "1,1,2\n1,2,3\n2,1,4\n2,2,5\n", 0,
                  "t.csv:5: 2 blocks of 2 nodes in the file; at least 3");
    expect_error (H "1,1,2\n2,1,3\n", 0, "t.csv:3: 2 blocks of 1 node");
    expect_error (H "1,1,2\n1,2,3\n1,3,4\n1,4,5\n1,5,1\n", 2,
                  "t.csv:6: 2 blocks of 2 nodes");
    expect_error (H "1,1,5\n2,1,5\n3,1,5\n4,1,5\n", 0,
                  "t.csv:2: all 4 block maxima are 5 s");
    expect_error (H "1,1,5\n2,1,6\n3,1,5\n4,1,6\n", 0,
                  "t.csv:2: the 4 block maxima take only 2 values (5 and 6");
    expect_error (H "1,a,1\n1,b,5\n2,a,5\n3,a,5\n", 0,
                  "t.csv:4: run '2' has 1 node but run '1' (line 2) has 2");
    expect_error (H "\x01\x02,1,2\n\x01\x02,1,3\n", 0,
                  "duplicate time for run '?" "?' node '1'");
}

static void test_input_ok (void **state)
{
    tier_error_t error;
    struct tier_evt_blocks b;
    struct tier_evt_times *t;

    /* BOM, CRLF, comments, blanks, quotes, other columns, any order */
    t = parse ("\xef\xbb\xbf# written by bench\r\n"
               "Seconds , host, RUN ,Node\r\n"
               "\r\n"
               "1.5,x,r1,n1\r\n"
               "\"2\",x,r1,\"n,2\"\r\n"
               "  3e0 ,x, r2 ,n1\n"
               "4,x,r2,n2\n"
               "0,x,r3,n1\n"
               "-0,x,r3,\"n\"\"2\"\n", &error);
    if (!t)
        fail_msg ("%s", error.text);
    assert_int_equal (t->rows, 6);
    assert_int_equal (t->nruns, 3);
    assert_string_equal (t->runs[0].name, "r1");
    assert_int_equal (t->runs[1].line, 6);
    assert_int_equal (tier_evt_times_blocks (t, 0, &b, &error), 0);
    assert_int_equal (b.n, 3);
    assert_int_equal (b.block, 2);
    assert_true (b.max[0] == 2. && b.max[1] == 4. && b.max[2] == 0.);
    assert_int_equal (b.line[0], 5);
    assert_false (b.straddle);
    tier_evt_blocks_free (&b);
    /* blocks of 4 across runs: one full block, two times dropped -> too
     * few; blocks of 1: six
     */
    assert_int_equal (tier_evt_times_blocks (t, 1, &b, &error), 0);
    assert_int_equal (b.n, 6);
    tier_evt_blocks_free (&b);
    assert_int_equal (tier_evt_times_blocks (t, 4, &b, &error), -1);
    tier_evt_times_destroy (t);

    /* runs of 3 in blocks of 2: blocks span runs, the rest is dropped */
    t = parse (H "1,1,1\n1,2,2\n1,3,3\n2,1,4\n2,2,5\n2,3,6\n3,1,7\n", &error);
    assert_non_null (t);
    assert_int_equal (tier_evt_times_blocks (t, 2, &b, &error), 0);
    assert_int_equal (b.n, 3);
    assert_int_equal (b.dropped, 1);
    assert_true (b.straddle);
    assert_true (b.max[1] == 4.);
    tier_evt_blocks_free (&b);
    tier_evt_times_destroy (t);

    /* a missing file names itself */
    assert_null (tier_evt_times_load ("/nonexistent/t.csv", &error));
    assert_non_null (strstr (error.text, "/nonexistent/t.csv: No such file"));
    assert_null (tier_evt_times_load ("/", &error));
    assert_non_null (strstr (error.text, "/:1: read error"));
}

static void test_degenerate_fit (void **state)
{
    tier_error_t error;
    struct tier_evt_fit fit;
    struct tier_evt *e;
    const double two[] = { 1., 2. };
    const double nan3[] = { 1., NAN, 2. };
    const double same[] = { 3., 3., 3., 3. };
    const double wide[] = { 1e-300, 1., 1e300, 5. };
    const double steps[] = { 10., 10., 10., 11., 11., 11., 10., 11. };
    const double three[] = { 10., 10., 10., 11., 11., 11., 10., 12. };
    const double five[] = { 4., 6., 9., 7., 5.5 };

    assert_null (tier_evt_create (two, 2, &error));
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (error.text, "at least 3"));
    assert_null (tier_evt_create (nan3, 3, &error));
    assert_non_null (strstr (error.text, "block maximum 2 is not finite"));
    assert_null (tier_evt_create (same, 4, &error));
    assert_int_equal (errno, EDOM);
    assert_non_null (strstr (error.text, "all 4 block maxima are equal"));
    /* absurd but finite data: a fit, no crash */
    assert_non_null (e = tier_evt_create (wide, 4, &error));
    assert_int_equal (tier_evt_fit (e, 0.95, 0, &fit, &error), 0);
    tier_evt_destroy (e);
    /* two values only */
    assert_null (tier_evt_create (steps, 8, &error));
    assert_int_equal (errno, EDOM);
    assert_non_null (strstr (error.text, "only 2 different values"));
    /* heavy ties, few blocks: the likelihood rises to the edge of the
     * parameter space; a flagged fit, no error
     */
    assert_non_null (e = tier_evt_create (three, 8, &error));
    assert_int_equal (tier_evt_fit (e, 0.95, 0, &fit, &error), 0);
    assert_true (isfinite (fit.loglik));
    assert_true (fit.warn & TIER_EVT_WARN_FEW);
    assert_true (fit.warn & TIER_EVT_WARN_BOUNDARY);
    tier_evt_destroy (e);
    assert_non_null (e = tier_evt_create (five, 5, &error));
    assert_int_equal (tier_evt_fit (e, 0.95, 0, &fit, &error), 0);
    assert_true (fit.gev.shape <= 3.);
    tier_evt_destroy (e);
    assert_int_equal (tier_evt_fit (NULL, 0.95, 0, &fit, &error), -1);
}

/* The Wald mode and the Gumbel limit. */
static void test_wald_gumbel (void **state)
{
    struct tier_gev g = { 300., 40., 0. };
    gsl_rng *r = gsl_rng_alloc (gsl_rng_mt19937);
    double z[400];
    tier_error_t error;
    struct tier_evt_fit fit;
    struct tier_evt_estimate q;
    struct tier_evt *e;

    gsl_rng_set (r, 7);
    draw (r, &g, z, 400);
    assert_non_null (e = tier_evt_create (z, 400, &error));
    assert_int_equal (tier_evt_fit (e, 0.9, TIER_EVT_WALD, &fit, &error), 0);
    assert_false (fit.profile);
    assert_true (fabs (fit.gev.shape) < 4. * fit.par[TIER_EVT_SHAPE].se);
    assert_true (fabs (fit.par[TIER_EVT_SHAPE].hi - fit.gev.shape
                       - 1.6449 * fit.par[TIER_EVT_SHAPE].se) < 1e-3);
    /* the Gumbel limit is not rejected at 1% */
    assert_true (fit.gumbel_p > 0.01);
    assert_int_equal (tier_evt_quantile (e, tier_evt_y_period (50.), &q,
                                         &error), 0);
    assert_true (q.lo < q.value && q.value < q.hi);
    tier_evt_destroy (e);
    gsl_rng_free (r);
}

/* The fit is the global maximum: on data sets made to have several local
 * optima or optima on the edge of the parameter space (a tight cluster
 * with far outliers, two clusters, shapes near -1 and near 3), its
 * log-likelihood is at least the best found by an independent search: a
 * grid of shapes over the whole space (-1, 3], and for each shape the
 * best of several simplexes over location and log scale.
 */
struct prof2 {
    const double *z;
    size_t n;
    double xi;
};

static double prof2_f (const gsl_vector *x, void *arg)
{
    const struct prof2 *a = arg;
    struct tier_gev g = { gsl_vector_get (x, 0), exp (gsl_vector_get (x, 1)),
                          a->xi };
    double l = tier_gev_loglik (&g, a->z, a->n);

    return isfinite (l) ? -l : 1e300;
}

static double search_max (const double *z, size_t n)
{
    const gsl_multimin_fminimizer_type *T = gsl_multimin_fminimizer_nmsimplex2;
    gsl_multimin_fminimizer *s = gsl_multimin_fminimizer_alloc (T, 2);
    gsl_vector *x = gsl_vector_alloc (2), *step = gsl_vector_alloc (2);
    double lo = z[0], hi = z[0], mean = 0., sd = 0., best = -INFINITY;
    double warm[2] = { NAN, NAN };

    for (size_t i = 0; i < n; i++) {
        lo = fmin (lo, z[i]);
        hi = fmax (hi, z[i]);
        mean += z[i] / n;
    }
    for (size_t i = 0; i < n; i++)
        sd += (z[i] - mean) * (z[i] - mean) / (n - 1);
    sd = sqrt (sd);
    for (int k = 0; k <= 40; k++) {
        struct prof2 a = { z, n, k == 0 ? -1. + 1e-6 : -1. + 0.1 * k };
        gsl_multimin_function fn = { prof2_f, 2, &a };
        double next[2] = { NAN, NAN }, fbest = INFINITY;
        /* starts inside the support (location at the minimum, the mean
         * or the maximum, a scale that reaches every point), and the
         * optimum of the previous shape
         */
        const double at[3] = { lo, mean, hi };
        for (int j = 0; j < 4; j++) {
            double m, sig;
            if (j < 3) {
                m = at[j];
                sig = sd;
                if (a.xi < 0.)
                    sig = fmax (sig, -a.xi * (hi - m) * 1.01);
                if (a.xi > 0.)
                    sig = fmax (sig, a.xi * (m - lo) * 1.01);
            }
            else if (isfinite (warm[0])) {
                m = warm[0];
                sig = warm[1];
            }
            else
                continue;
            gsl_vector_set (x, 0, m);
            gsl_vector_set (x, 1, log (sig));
            gsl_vector_set (step, 0, 0.2 * sd);
            gsl_vector_set (step, 1, 0.5);
            gsl_multimin_fminimizer_set (s, &fn, x, step);
            for (int it = 0; it < 1000; it++) {
                if (gsl_multimin_fminimizer_iterate (s))
                    break;
                if (gsl_multimin_test_size (gsl_multimin_fminimizer_size (s),
                                            1e-6) == GSL_SUCCESS)
                    break;
            }
            if (s->fval < fbest) {
                fbest = s->fval;
                next[0] = gsl_vector_get (s->x, 0);
                next[1] = exp (gsl_vector_get (s->x, 1));
            }
        }
        if (fbest < 1e299) {
            best = fmax (best, -fbest);
            memcpy (warm, next, sizeof (warm));
        }
    }
    gsl_vector_free (step);
    gsl_vector_free (x);
    gsl_multimin_fminimizer_free (s);
    return best;
}

/* One adversarial data set of kind k into z; returns its size. */
static size_t hard_data (gsl_rng *r, int kind, double *z)
{
    static const size_t sizes[] = { 8, 15, 30 };
    size_t n = sizes[gsl_rng_uniform_int (r, 3)], m = n;

    switch (kind) {
        case 0:     /* a tight cluster and one to three far outliers */
            for (size_t i = 0; i < n; i++)
                z[i] = 100. + gsl_ran_gaussian (r, 1.);
            for (size_t i = 0; i < 1 + gsl_rng_uniform_int (r, 3); i++)
                z[m++] = 150. + 250. * gsl_rng_uniform (r);
            break;
        case 1:     /* two clusters */
            for (size_t i = 0; i < n; i++)
                z[m - n + i] = 100. + gsl_ran_gaussian (r, 2.);
            for (size_t i = 0; i < n / 3 + 1; i++)
                z[m++] = 130. + gsl_ran_gaussian (r, 2.);
            break;
        default: {  /* shapes near the edges of the space */
            static const double xi[] = { -0.95, -0.85, 1.5, 2.5 };
            struct tier_gev g = { 100., 10., xi[gsl_rng_uniform_int (r, 4)] };
            draw (r, &g, z, n);
        }
    }
    return m;
}

static void test_global (void **state)
{
    gsl_rng *r = gsl_rng_alloc (gsl_rng_mt19937);
    double z[64], worst = 0.;
    int count = 0;

    gsl_rng_set (r, 20261202);
    for (int t = 0; t < 90; t++) {
        size_t n = hard_data (r, t % 3, z);
        struct tier_evt_fit fit;
        tier_error_t error;
        struct tier_evt *e;
        double ref;

        assert_non_null (e = tier_evt_create (z, n, &error));
        assert_int_equal (tier_evt_fit (e, 0.95, TIER_EVT_WALD, &fit,
                                        &error), 0);
        ref = search_max (z, n);
        worst = fmax (worst, ref - fit.loglik);
        if (fit.loglik < ref - 1e-6 * (1. + fabs (ref)))
            fail_msg ("data set %d (kind %d, n %zu): the fit's "
                      "log-likelihood %.9g is below %.9g found by the "
                      "search (shape %g)", t, t % 3, n, fit.loglik, ref,
                      fit.gev.shape);
        count++;
        tier_evt_destroy (e);
    }
    print_message ("# global: %d hard data sets, the search beat the fit by "
                   "at most %.2g\n", count, worst);
    gsl_rng_free (r);
}

/* Every allocation of the reader, the blocks and the fit may fail. */
static void test_failalloc (void **state)
{
    const char *text = H "1,1,3\n1,2,4\n2,1,6\n2,2,5\n3,1,9\n3,2,2\n"
                       "4,1,7\n4,2,1\n5,1,5.5\n5,2,0\n";
    int failed = 1;

    for (int n = 1; failed && n < 200; n++) {
        tier_error_t error;
        struct tier_evt_times *t;
        struct tier_evt_blocks b;
        struct tier_evt_fit fit;
        struct tier_evt_estimate q;
        struct tier_evt *e = NULL;
        int rc = -1;

        failalloc_arm (n);
        if ((t = parse (text, &error))
            && tier_evt_times_blocks (t, 0, &b, &error) == 0) {
            if ((e = tier_evt_create (b.max, b.n, &error))
                && tier_evt_fit (e, 0.95, 0, &fit, &error) == 0
                && tier_evt_quantile (e, 2., &q, &error) == 0)
                rc = 0;
            tier_evt_blocks_free (&b);
        }
        failed = failalloc_failed;
        failalloc_arm (-1);
        if (failed)
            assert_int_equal (rc, -1);
        else
            assert_int_equal (rc, 0);
        tier_evt_destroy (e);
        tier_evt_times_destroy (t);
    }
    assert_false (failed);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_distribution),
        cmocka_unit_test (test_input_errors),
        cmocka_unit_test (test_input_ok),
        cmocka_unit_test (test_degenerate_fit),
        cmocka_unit_test (test_failalloc),
        cmocka_unit_test (test_wald_gumbel),
        cmocka_unit_test (test_recovery),
        cmocka_unit_test (test_global),
        cmocka_unit_test (test_reference),
        cmocka_unit_test (test_coverage),
    };
    return UNIT_RUN (tests);
}
