/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_predict.c - tierctl predict: the slowest node's time from a GEV fit */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "lib/evt.h"
#include "ctl.h"

#define LIST_MAX 64
#define PLOT_BAND 25            /* profile intervals drawn on the plot */
#define PLOT_CURVE 80

struct measured {
    long nodes;
    size_t runs;
    double median, mean;
};

struct prediction {
    long nodes;
    double blocks;                  /* nodes / block */
    struct tier_evt_estimate median;
    double mean;                    /* NAN if none */
    const struct measured *meas;    /* NULL if none measured */
};

struct level {
    double period;
    struct tier_evt_estimate est;
};

struct predict {
    const char *file;
    size_t block;                   /* --block, 0 = one run */
    double level;
    const char *measured_file;
    const char *svg_file;
    bool json;

    double periods[LIST_MAX];
    size_t nperiods;
    long nodes[2 * LIST_MAX];
    size_t nnodes;

    struct tier_evt_times *times;
    struct tier_evt_blocks blocks;
    struct tier_evt *evt;
    struct tier_evt_fit fit;
    struct level levels[LIST_MAX];
    struct prediction pred[2 * LIST_MAX];
    struct measured meas[LIST_MAX];
    size_t nmeas;
    double band_period[PLOT_BAND];
    struct tier_evt_estimate band[PLOT_BAND];
    size_t nband;
};

static int cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y ? 1 : 0;
}

static int cmp_long (const void *a, const void *b)
{
    long x = *(const long *) a, y = *(const long *) b;

    return x < y ? -1 : x > y ? 1 : 0;
}

/* "16,32,64": positive integers, at most max of them */
static int parse_nodes (const char *s, long *out, size_t max, size_t *count)
{
    const char *p = s;
    size_t n = 0;

    while (*p) {
        char *end;
        long v;
        errno = 0;
        v = strtol (p, &end, 10);
        if (end == p || errno || v <= 0 || v > 100000000L
            || (*end != ',' && *end != '\0') || n == max)
            return -1;
        out[n++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0')
            return -1;
    }
    *count = n;
    return n > 0 ? 0 : -1;
}

/* "10,100,1000": return periods > 1 */
static int parse_periods (const char *s, double *out, size_t max,
                          size_t *count)
{
    const char *p = s;
    size_t n = 0;

    while (*p) {
        char *end;
        double v;
        errno = 0;
        v = strtod (p, &end);
        if (end == p || errno || !(v > 1.) || !isfinite (v) || v > 1e12
            || (*end != ',' && *end != '\0') || n == max)
            return -1;
        out[n++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0')
            return -1;
    }
    *count = n;
    return n > 0 ? 0 : -1;
}

struct slow {
    long nodes;
    double seconds;
};

static int cmp_slow (const void *a, const void *b)
{
    const struct slow *x = a, *y = b;

    if (x->nodes != y->nodes)
        return x->nodes < y->nodes ? -1 : 1;
    return cmp_double (&x->seconds, &y->seconds);
}

/* Measured runs: each run's slowest node, grouped by the run's node count:
 * their median and mean.
 */
static int load_measured (struct predict *pr, tier_error_t *error)
{
    struct tier_evt_times *t;
    struct slow *sl;
    int rc = -1;

    if (!(t = tier_evt_times_load (pr->measured_file, error)))
        return -1;
    if (!(sl = malloc (t->nruns * sizeof (*sl)))) {
        tier_errprintf (error, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < t->nruns; i++) {
        const struct tier_evt_run *r = &t->runs[i];
        sl[i].nodes = r->count;
        sl[i].seconds = r->seconds[0];
        for (size_t j = 1; j < r->count; j++)
            sl[i].seconds = fmax (sl[i].seconds, r->seconds[j]);
    }
    qsort (sl, t->nruns, sizeof (*sl), cmp_slow);
    pr->nmeas = 0;
    for (size_t i = 0, j; i < t->nruns; i = j) {
        struct measured *m;
        double sum = 0.;
        size_t k;
        for (j = i; j < t->nruns && sl[j].nodes == sl[i].nodes; j++)
            sum += sl[j].seconds;
        if (pr->nmeas == LIST_MAX) {
            tier_errprintf (error, "%s: runs of more than %d different "
                            "node counts", t->file, LIST_MAX);
            goto out;
        }
        m = &pr->meas[pr->nmeas++];
        k = j - i;
        m->nodes = sl[i].nodes;
        m->runs = k;
        m->mean = sum / k;
        m->median = k % 2 ? sl[i + k / 2].seconds
                    : 0.5 * (sl[i + k / 2 - 1].seconds + sl[i + k / 2].seconds);
    }
    rc = 0;
out:
    free (sl);
    tier_evt_times_destroy (t);
    return rc;
}

/* The fit and every quantile; a profile that finds a higher likelihood
 * makes the library ask for a new fit (EAGAIN), and everything is redone.
 */
static int compute (struct predict *pr, tier_error_t *error)
{
    double b = pr->blocks.block;

    for (int attempt = 0; attempt < 6; attempt++) {
        bool again = false;

        if (tier_evt_fit (pr->evt, pr->level, 0, &pr->fit, error) < 0)
            return -1;
        for (size_t i = 0; i < pr->nperiods && !again; i++) {
            struct level *l = &pr->levels[i];
            l->period = pr->periods[i];
            if (tier_evt_quantile (pr->evt, tier_evt_y_period (l->period),
                                   &l->est, error) < 0) {
                if (errno != EAGAIN)
                    return -1;
                again = true;
            }
        }
        for (size_t i = 0; i < pr->nnodes && !again; i++) {
            struct prediction *p = &pr->pred[i];
            struct tier_gev g;
            p->nodes = pr->nodes[i];
            p->blocks = p->nodes / b;
            g = tier_gev_power (&pr->fit.gev, p->blocks);
            p->mean = tier_gev_mean (&g);
            p->meas = NULL;
            for (size_t k = 0; k < pr->nmeas; k++)
                if (pr->meas[k].nodes == p->nodes)
                    p->meas = &pr->meas[k];
            if (tier_evt_quantile (pr->evt, tier_evt_y_nodes (p->nodes, b,
                                                              0.5),
                                   &p->median, error) < 0) {
                if (errno != EAGAIN)
                    return -1;
                again = true;
            }
        }
        for (size_t i = 0; i < pr->nband && !again; i++) {
            if (tier_evt_quantile (pr->evt,
                                   tier_evt_y_period (pr->band_period[i]),
                                   &pr->band[i], error) < 0) {
                if (errno != EAGAIN)
                    return -1;
                again = true;
            }
        }
        if (!again)
            return 0;
    }
    errno = EDOM;
    return tier_errprintf (error, "the fit does not settle");
}

/* Notes on the data and the fit, for the table and the JSON. */
static size_t notes (const struct predict *pr, char out[][160], size_t max)
{
    const struct tier_evt_fit *f = &pr->fit;
    size_t n = 0;

#define NOTE(...) \
    do { \
        if (n < max) \
            snprintf (out[n++], 160, __VA_ARGS__); \
    } while (0)
    if (pr->blocks.dropped)
        NOTE ("%zu times in an incomplete last block were not used",
              pr->blocks.dropped);
    if (pr->blocks.straddle)
        NOTE ("some blocks hold nodes of two runs (blocks of %zu nodes do "
              "not divide the runs)", pr->blocks.block);
    if (f->warn & TIER_EVT_WARN_FEW)
        NOTE ("only %zu blocks: the intervals are rough", f->n);
    if (f->warn & TIER_EVT_WARN_BOUNDARY)
        NOTE ("the fit lies on a bound of the parameter space (shape -1 "
              "or 3, or a vanishing scale): the likelihood has no regular "
              "maximum and the fit is not meaningful");
    else if (f->warn & TIER_EVT_WARN_NONREGULAR)
        NOTE ("shape < -0.5: the estimate is not regular (Smith 1985); "
              "trust the profile intervals, not the standard errors");
    if (f->warn & TIER_EVT_WARN_SINGULAR)
        NOTE ("the observed information is singular: no standard errors");
    if (f->warn & TIER_EVT_WARN_UNSETTLED)
        NOTE ("the likelihood kept rising towards the edge of the "
              "parameter space; the best point found is shown");
    if (f->warn & TIER_EVT_WARN_REFIT)
        NOTE ("a profile found a higher likelihood than the first fit; the "
              "fit was redone from there");
    for (size_t i = 0; i < pr->nnodes; i++) {
        if (pr->pred[i].blocks > f->n) {
            NOTE ("predictions beyond %zu nodes (%zu blocks, the data) are "
                  "extrapolations", f->n * pr->blocks.block, f->n);
            break;
        }
    }
#undef NOTE
    return n;
}

/* Output: the table. */

/* a number of seconds: fixed point unless it is huge or tiny */
static const char *num (double v, int prec, char *buf, size_t size)
{
    if (v != 0. && (fabs (v) >= 1e9 || fabs (v) < 1e-3))
        snprintf (buf, size, "%.*g", prec + 3, v);
    else
        snprintf (buf, size, "%.*f", prec, v);
    return buf;
}

/* "[lo, hi]"; an open end is shown with a parenthesis */
static const char *fmt_interval (const struct tier_evt_estimate *e, int prec,
                                 char *buf, size_t size)
{
    char lo[32], hi[32];

    if (e->lo_open && !isfinite (e->lo))
        snprintf (lo, sizeof (lo), "-inf");
    else
        num (e->lo, prec, lo, sizeof (lo));
    if (e->hi_open && !isfinite (e->hi))
        snprintf (hi, sizeof (hi), "inf");
    else
        num (e->hi, prec, hi, sizeof (hi));
    snprintf (buf, size, "%s%s, %s%s", e->lo_open ? "(" : "[", lo, hi,
              e->hi_open ? ")" : "]");
    return buf;
}

static void print_se (double se, int prec)
{
    char b[40];

    printf ("%10s", isfinite (se) ? num (se, prec, b, sizeof (b)) : "-");
}

static void print_table (const struct predict *pr)
{
    const struct tier_evt_fit *f = &pr->fit;
    const struct tier_evt_times *t = pr->times;
    char note[16][160];
    size_t nn = notes (pr, note, 16);
    int pct = (int) lround (pr->level * 100.);
    static const char *names[3] = { "location (mu)", "scale (sigma)",
                                    "shape (xi)" };
    static const int order[3] = { TIER_EVT_SHAPE, TIER_EVT_SCALE,
                                  TIER_EVT_LOC };
    size_t b = pr->blocks.block;

    printf ("%s: %zu times, %zu runs; %zu blocks of %zu node%s%s\n",
            t->file, t->rows, t->nruns, pr->blocks.n, b, b == 1 ? "" : "s",
            pr->block ? "" : " (one run = one block)");
    printf ("GEV fit by maximum likelihood: log-likelihood %.4f, %d%% "
            "%s intervals\n\n", f->loglik, pct,
            f->profile ? "profile-likelihood" : "Wald");
    printf ("%-15s %12s %10s   %d%% interval\n", "parameter", "estimate",
            "std.err", pct);
    for (int k = 0; k < 3; k++) {
        const struct tier_evt_estimate *e = &f->par[order[k]];
        int prec = order[k] == TIER_EVT_SHAPE ? 4 : 2;
        char iv[80], nb[40];
        printf ("%-15s %12s ", names[order[k]],
                num (e->value, prec, nb, sizeof (nb)));
        print_se (e->se, prec);
        printf ("   %s%s\n", fmt_interval (e, prec, iv, sizeof (iv)),
                order[k] == TIER_EVT_SHAPE ? "" : " s");
    }
    printf ("Gumbel limit (shape 0): likelihood ratio %.3f, p = %.4g\n",
            f->gumbel_lr, f->gumbel_p);

    if (pr->nperiods) {
        printf ("\nReturn levels: the slowest node of a block of %zu, "
                "exceeded once in T blocks\n", b);
        printf ("%-10s %12s %10s   %d%% interval\n", "T (blocks)",
                "level (s)", "std.err", pct);
        for (size_t i = 0; i < pr->nperiods; i++) {
            const struct level *l = &pr->levels[i];
            char iv[80], nb[40];
            printf ("%-10g %12s ", l->period,
                    num (l->est.value, 2, nb, sizeof (nb)));
            print_se (l->est.se, 2);
            printf ("   %s\n", fmt_interval (&l->est, 2, iv, sizeof (iv)));
        }
    }
    if (pr->nnodes) {
        bool any = pr->nmeas > 0;
        printf ("\nSlowest node of N nodes: the maximum of N/%zu blocks, "
                "cdf F(z)^(N/%zu);\nmedian = F^-1(0.5^(%zu/N)), mean of "
                "F^(N/%zu)\n", b, b, b, b);
        char head[32];
        snprintf (head, sizeof (head), "%d%% interval", pct);
        printf ("%-8s %8s %12s   %-22s %10s", "N", "N/b", "median (s)",
                head, "mean (s)");
        if (any)
            printf (" %12s %5s %8s", "measured (s)", "runs", "error");
        printf ("\n");
        for (size_t i = 0; i < pr->nnodes; i++) {
            const struct prediction *p = &pr->pred[i];
            char iv[80], nb[40];
            printf ("%-8ld %8.3g %12s   %-22s ", p->nodes, p->blocks,
                    num (p->median.value, 2, nb, sizeof (nb)),
                    fmt_interval (&p->median, 2, iv, sizeof (iv)));
            printf ("%10s", isfinite (p->mean)
                    ? num (p->mean, 2, nb, sizeof (nb)) : "-");
            if (p->meas)
                printf (" %12s %5zu %+7.2f%%",
                        num (p->meas->median, 2, nb, sizeof (nb)),
                        p->meas->runs,
                        100. * (p->median.value - p->meas->median)
                        / p->meas->median);
            printf ("\n");
        }
        if (any)
            printf ("error: (predicted median - measured median) / "
                    "measured median\n");
    }
    for (size_t i = 0; i < nn; i++)
        printf ("%snote: %s\n", i == 0 ? "\n" : "", note[i]);
}

/* Output: JSON. */

static json_t *jreal (double v)
{
    return isfinite (v) ? json_real (v) : json_null ();
}

static json_t *jestimate (const struct tier_evt_estimate *e)
{
    json_t *o = json_object ();
    json_t *iv = json_array ();

    json_array_append_new (iv, e->lo_open && !isfinite (e->lo)
                           ? json_null () : jreal (e->lo));
    json_array_append_new (iv, e->hi_open && !isfinite (e->hi)
                           ? json_null () : jreal (e->hi));
    json_object_set_new (o, "estimate", jreal (e->value));
    json_object_set_new (o, "se", jreal (e->se));
    json_object_set_new (o, "interval", iv);
    json_object_set_new (o, "lower_open", json_boolean (e->lo_open));
    json_object_set_new (o, "upper_open", json_boolean (e->hi_open));
    return o;
}

static int print_json (const struct predict *pr)
{
    const struct tier_evt_fit *f = &pr->fit;
    json_t *root = json_object ();
    json_t *in = json_object (), *fit = json_object ();
    json_t *rl = json_array (), *pred = json_array (), *warn = json_array ();
    char note[16][160], map[128];
    size_t nn = notes (pr, note, 16);
    char *s;

    json_object_set_new (in, "file", json_string (pr->times->file));
    json_object_set_new (in, "rows", json_integer (pr->times->rows));
    json_object_set_new (in, "runs", json_integer (pr->times->nruns));
    json_object_set_new (in, "block", json_integer (pr->blocks.block));
    json_object_set_new (in, "blocks", json_integer (pr->blocks.n));
    json_object_set_new (in, "dropped", json_integer (pr->blocks.dropped));
    json_object_set_new (in, "blocks_span_runs",
                         json_boolean (pr->blocks.straddle));
    json_object_set_new (root, "input", in);

    for (size_t i = 0; i < nn; i++)
        json_array_append_new (warn, json_string (note[i]));
    json_object_set_new (fit, "method", json_string ("maximum likelihood"));
    json_object_set_new (fit, "loglik", jreal (f->loglik));
    json_object_set_new (fit, "level", jreal (f->level));
    json_object_set_new (fit, "intervals", json_string (f->profile
                         ? "profile likelihood" : "wald"));
    json_object_set_new (fit, "gumbel_lr", jreal (f->gumbel_lr));
    json_object_set_new (fit, "gumbel_p", jreal (f->gumbel_p));
    json_object_set_new (fit, "starts", json_integer (f->starts));
    json_object_set_new (fit, "evaluations", json_integer (f->evals));
    json_object_set_new (fit, "warnings", warn);
    json_object_set_new (root, "fit", fit);

    json_object_set_new (root, "shape", jestimate (&f->par[TIER_EVT_SHAPE]));
    json_object_set_new (root, "scale", jestimate (&f->par[TIER_EVT_SCALE]));
    json_object_set_new (root, "location",
                         jestimate (&f->par[TIER_EVT_LOC]));

    for (size_t i = 0; i < pr->nperiods; i++) {
        json_t *o = jestimate (&pr->levels[i].est);
        json_object_set_new (o, "period", jreal (pr->levels[i].period));
        json_array_append_new (rl, o);
    }
    json_object_set_new (root, "return_levels", rl);

    snprintf (map, sizeof (map), "max of N nodes ~ F(z)^(N/%zu); median "
              "F^-1(0.5^(%zu/N))", pr->blocks.block, pr->blocks.block);
    json_object_set_new (root, "mapping", json_string (map));
    for (size_t i = 0; i < pr->nnodes; i++) {
        const struct prediction *p = &pr->pred[i];
        json_t *o = json_object ();
        json_object_set_new (o, "nodes", json_integer (p->nodes));
        json_object_set_new (o, "blocks", jreal (p->blocks));
        json_object_set_new (o, "median", jestimate (&p->median));
        json_object_set_new (o, "mean", jreal (p->mean));
        if (p->meas) {
            json_t *m = json_object ();
            json_object_set_new (m, "runs", json_integer (p->meas->runs));
            json_object_set_new (m, "median", jreal (p->meas->median));
            json_object_set_new (m, "mean", jreal (p->meas->mean));
            json_object_set_new (o, "measured", m);
            json_object_set_new (o, "error_pct",
                                 jreal (100. * (p->median.value
                                                - p->meas->median)
                                        / p->meas->median));
        }
        json_array_append_new (pred, o);
    }
    json_object_set_new (root, "predictions", pred);

    s = json_dumps (root, JSON_INDENT (2) | JSON_REAL_PRECISION (10));
    json_decref (root);
    if (!s) {
        fprintf (stderr, "tierctl predict: out of memory\n");
        return -1;
    }
    printf ("%s\n", s);
    free (s);
    return 0;
}

/* Output: the return-level plot. */

static void xml_text (FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = *s;
        if (c == '<')
            fputs ("&lt;", f);
        else if (c == '>')
            fputs ("&gt;", f);
        else if (c == '&')
            fputs ("&amp;", f);
        else if (c == '"')
            fputs ("&quot;", f);
        else if (c < 0x20)
            fputc ('?', f);
        else
            fputc (c, f);
    }
}

static double nice_step (double range)
{
    double raw = range / 6., mag = pow (10., floor (log10 (raw)));
    double r = raw / mag;

    return mag * (r < 1.5 ? 1. : r < 3.5 ? 2. : r < 7.5 ? 5. : 10.);
}

struct frame {
    double x0, x1, y0, y1;          /* data: log10 period, seconds */
    double left, right, top, bottom;    /* pixels */
};

static double px (const struct frame *fr, double t)
{
    return fr->left + (log10 (t) - fr->x0) / (fr->x1 - fr->x0)
           * (fr->right - fr->left);
}

static double py (const struct frame *fr, double z)
{
    return fr->bottom - (z - fr->y0) / (fr->y1 - fr->y0)
           * (fr->bottom - fr->top);
}

/* Return periods from 1.01 to tmax, evenly spaced in the Gumbel variate
 * w = -log (-log (1 - 1/T)), on which return levels are smooth.
 */
static double plot_period (double tmax, int i, int count)
{
    double w0 = -log (tier_evt_y_period (1.01));
    double w1 = -log (tier_evt_y_period (tmax));
    double w = w0 + (w1 - w0) * i / (count - 1);

    return 1. / -expm1 (-exp (-w));
}

/* the return period at which the block-level quantile is the median of
 * the slowest of N nodes: 1 - 1/T = 0.5^(b/N)
 */
static double period_of_nodes (double nodes, double b)
{
    return 1. / -expm1 (log (0.5) * b / nodes);
}

/* the plot's last return period: a power of 10 past every period shown */
static double plot_tmax (const struct predict *pr)
{
    double tmax = fmax (1000., pr->blocks.n + 1.);

    for (size_t i = 0; i < pr->nperiods; i++)
        tmax = fmax (tmax, pr->periods[i]);
    for (size_t i = 0; i < pr->nnodes; i++)
        tmax = fmax (tmax, period_of_nodes (pr->nodes[i], pr->blocks.block));
    return pow (10., ceil (log10 (tmax)));
}

/* the frame's data ranges: every block maximum, the fitted curve from
 * T = 1.01 to tmax and the finite parts of the interval band
 */
static void plot_frame (const struct predict *pr, const double *z, double tmax,
                        struct frame *fr)
{
    const struct tier_evt_fit *fit = &pr->fit;
    size_t n = pr->blocks.n;
    double ymin, ymax, step;

    ymin = fmin (z[0], tier_gev_return_level (&fit->gev, 1.01));
    ymax = fmax (z[n - 1], tier_gev_return_level (&fit->gev, tmax));
    for (size_t i = 0; i < pr->nband; i++) {
        if (isfinite (pr->band[i].lo))
            ymin = fmin (ymin, pr->band[i].lo);
        if (isfinite (pr->band[i].hi))
            ymax = fmax (ymax, fmin (pr->band[i].hi, 2. * ymax));
    }
    step = nice_step (ymax - ymin);
    fr->y0 = floor (ymin / step) * step;
    fr->y1 = ceil (ymax / step) * step;
    if (fr->y1 <= fr->y0)
        fr->y1 = fr->y0 + step;
    fr->x0 = 0.;
    fr->x1 = log10 (tmax);
}

/* the XML prologue, the title and subtitle, and the frame's clip path */
static void svg_head (FILE *f, const struct predict *pr, const struct frame *fr)
{
    const struct tier_evt_fit *fit = &pr->fit;
    const char *base = strrchr (pr->times->file, '/');

    fprintf (f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" "
             "height=\"480\" viewBox=\"0 0 720 480\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n"
             "<rect width=\"720\" height=\"480\" fill=\"white\"/>\n"
             "<text x=\"390\" y=\"22\" text-anchor=\"middle\" "
             "font-size=\"14\">Return levels of ");
    xml_text (f, base ? base + 1 : pr->times->file);
    fprintf (f,
             "</text>\n<text x=\"390\" y=\"40\" "
             "text-anchor=\"middle\">%zu blocks of %zu nodes; GEV shape "
             "%.3f, scale %.4g s, location %.4g s</text>\n",
             pr->blocks.n, pr->blocks.block, fit->gev.shape, fit->gev.scale,
             fit->gev.loc);
    /* clip everything drawn inside the frame */
    fprintf (f,
             "<clipPath id=\"frame\"><rect x=\"%.1f\" y=\"%.1f\" "
             "width=\"%.1f\" height=\"%.1f\"/></clipPath>\n",
             fr->left, fr->top, fr->right - fr->left, fr->bottom - fr->top);
}

/* grid lines and ticks, their labels, the frame and the axis titles */
static void svg_axes (FILE *f, const struct frame *fr, size_t block)
{
    double step = nice_step (fr->y1 - fr->y0);

    fprintf (f, "<g stroke=\"#888\" stroke-width=\"0.5\">\n");
    for (int d = 0; d <= (int) lround (fr->x1); d++) {
        for (int m = 1; m < 10; m++) {
            double t = m * pow (10., d);
            if (log10 (t) > fr->x1 + 1e-9)
                break;
            fprintf (f,
                     "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                     "y2=\"%.1f\"%s/>\n",
                     px (fr, t), fr->bottom, px (fr, t),
                     m == 1 ? fr->top : fr->bottom - 4,
                     m == 1 ? " stroke-dasharray=\"2,3\"" : "");
        }
    }
    for (double y = fr->y0; y <= fr->y1 + 1e-9 * step; y += step)
        fprintf (f,
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                 "y2=\"%.1f\" stroke-dasharray=\"2,3\"/>\n",
                 fr->left, py (fr, y), fr->right, py (fr, y));
    fprintf (f, "</g>\n<g text-anchor=\"end\">\n");
    for (double y = fr->y0; y <= fr->y1 + 1e-9 * step; y += step)
        fprintf (f, "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n", fr->left - 6,
                 py (fr, y) + 4, y);
    fprintf (f, "</g>\n<g text-anchor=\"middle\">\n");
    for (int d = 0; d <= (int) lround (fr->x1); d++)
        fprintf (f, "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n",
                 px (fr, pow (10., d)), fr->bottom + 16, pow (10., d));
    fprintf (f,
             "</g>\n"
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
             "fill=\"none\" stroke=\"black\"/>\n"
             "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">return "
             "period T (blocks of %zu nodes, log scale)</text>\n"
             "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
             "transform=\"rotate(-90 18 %.1f)\">slowest node of a block "
             "(s)</text>\n",
             fr->left, fr->top, fr->right - fr->left, fr->bottom - fr->top,
             0.5 * (fr->left + fr->right), fr->bottom + 36, block,
             0.5 * (fr->top + fr->bottom), 0.5 * (fr->top + fr->bottom));
}

/* the interval band, an infinite bound drawn past the frame's edge */
static void svg_band (FILE *f, const struct predict *pr, const struct frame *fr)
{
    if (pr->nband <= 1)
        return;
    fprintf (f, "<polygon fill=\"#9ecae1\" fill-opacity=\"0.5\" "
                "stroke=\"none\" points=\"");
    for (size_t i = 0; i < pr->nband; i++)
        fprintf (f, "%.1f,%.1f ", px (fr, pr->band_period[i]),
                 py (fr,
                     isfinite (pr->band[i].hi) ? pr->band[i].hi : fr->y1 * 2.));
    for (size_t i = pr->nband; i-- > 0;)
        fprintf (f, "%.1f,%.1f ", px (fr, pr->band_period[i]),
                 py (fr, isfinite (pr->band[i].lo)
                             ? pr->band[i].lo
                             : fr->y0 - (fr->y1 - fr->y0)));
    fprintf (f, "\"/>\n");
}

/* the fitted curve, the block maxima (z, sorted) at their empirical
 * return periods, predictions (diamonds) and measured medians (crosses)
 */
static void svg_points (FILE *f, const struct predict *pr,
                        const struct frame *fr, const double *z, double tmax)
{
    size_t n = pr->blocks.n;

    fprintf (f, "<polyline fill=\"none\" stroke=\"#08519c\" "
             "stroke-width=\"2\" points=\"");
    for (int i = 0; i < PLOT_CURVE; i++) {
        double t = plot_period (tmax, i, PLOT_CURVE);
        fprintf (f, "%.1f,%.1f ", px (fr, t),
                 py (fr, tier_gev_return_level (&pr->fit.gev, t)));
    }
    fprintf (f, "\"/>\n");
    for (size_t i = 0; i < n; i++) {
        double t = 1. / (1. - (i + 1.) / (n + 1.));
        fprintf (f,
                 "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
                 "fill=\"black\"/>\n",
                 px (fr, t), py (fr, z[i]));
    }
    for (size_t i = 0; i < pr->nnodes; i++) {
        const struct prediction *p = &pr->pred[i];
        double t = period_of_nodes (p->nodes, pr->blocks.block);
        double x = px (fr, t), y = py (fr, p->median.value);
        fprintf (f, "<path d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\" "
                 "fill=\"#e6550d\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                 "fill=\"#e6550d\">N=%ld</text>\n", x, y - 5, x + 6, y - 8,
                 p->nodes);
        if (p->meas) {
            double ym = py (fr, p->meas->median);
            fprintf (f, "<path d=\"M%.1f %.1fl8 8m0 -8l-8 8\" "
                     "stroke=\"#31a354\" stroke-width=\"2\"/>\n", x - 4,
                     ym - 4);
        }
    }
}

/* the legend, and the end of the document */
static void svg_legend (FILE *f, const struct predict *pr)
{
    const struct tier_evt_fit *fit = &pr->fit;

    fprintf (f, "<g font-size=\"11\">\n"
             "<line x1=\"95\" y1=\"66\" x2=\"120\" y2=\"66\" "
             "stroke=\"#08519c\" stroke-width=\"2\"/>"
             "<text x=\"126\" y=\"70\">maximum-likelihood GEV</text>\n"
             "<rect x=\"95\" y=\"76\" width=\"25\" height=\"10\" "
             "fill=\"#9ecae1\" fill-opacity=\"0.5\"/>"
             "<text x=\"126\" y=\"86\">%d%% %s interval</text>\n"
             "<circle cx=\"107\" cy=\"98\" r=\"2.5\"/>"
             "<text x=\"126\" y=\"102\">block maxima</text>\n"
             "<path d=\"M107 108l5 5l-5 5l-5 -5z\" fill=\"#e6550d\"/>"
             "<text x=\"126\" y=\"118\">median of the slowest of N nodes"
             "</text>\n", (int) lround (fit->level * 100.),
             fit->profile ? "profile-likelihood" : "Wald");
    if (pr->nmeas)
        fprintf (f, "<path d=\"M103 124l8 8m0 -8l-8 8\" stroke=\"#31a354\" "
                 "stroke-width=\"2\"/><text x=\"126\" y=\"134\">measured "
                 "median</text>\n");
    fprintf (f, "</g>\n</svg>\n");
}

static int write_svg (const struct predict *pr, tier_error_t *error)
{
    size_t n = pr->blocks.n;
    double *z;
    double tmax;
    struct frame fr = { .left = 80, .right = 700, .top = 52, .bottom = 420 };
    FILE *f;

    if (!(z = malloc (n * sizeof (double)))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    memcpy (z, pr->blocks.max, n * sizeof (double));
    qsort (z, n, sizeof (double), cmp_double);
    tmax = plot_tmax (pr);
    plot_frame (pr, z, tmax, &fr);

    if (!(f = fopen (pr->svg_file, "w"))) {
        tier_errprintf (error, "%s: %s", pr->svg_file, strerror (errno));
        free (z);
        return -1;
    }
    svg_head (f, pr, &fr);
    svg_axes (f, &fr, pr->blocks.block);
    fprintf (f, "<g clip-path=\"url(#frame)\">\n");
    svg_band (f, pr, &fr);
    svg_points (f, pr, &fr, z, tmax);
    fprintf (f, "</g>\n");
    svg_legend (f, pr);
    free (z);
    if (ferror (f) | (fclose (f) != 0)) {
        tier_errprintf (error, "%s: write error", pr->svg_file);
        return -1;
    }
    return 0;
}

static int usage (void)
{
    return ctl_usage (ctl_cmd_find ("predict"));
}

/* --block: a whole number of nodes, 1-1000000 */
static int parse_block (const char *s, size_t *block)
{
    char *end;
    long v;

    errno = 0;
    v = strtol (s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 1000000)
        return -1;
    *block = v;
    return 0;
}

/* --level: a confidence level in [0.5, 0.999] */
static int parse_level (const char *s, double *level)
{
    char *end;

    errno = 0;
    *level = strtod (s, &end);
    if (errno || end == s || *end || !(*level >= 0.5) || !(*level <= 0.999))
        return -1;
    return 0;
}

/* Parse the command line into pr.  Return 0 to go on, or -1 to stop with
 * the exit code in *rc (after --help, or a usage message).
 */
static int parse_args (struct ctl *ctl, struct predict *pr, int argc,
                       char **argv, bool *nodes_given, int *rc)
{
    static const struct option longopts[] = {
        { "block", required_argument, NULL, 'b' },
        { "nodes", required_argument, NULL, 'n' },
        { "periods", required_argument, NULL, 'p' },
        { "level", required_argument, NULL, 'l' },
        { "measured", required_argument, NULL, 'm' },
        { "svg", required_argument, NULL, 's' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    while ((c = getopt_long (argc, argv, "b:n:p:l:m:s:jh", longopts, NULL))
           != -1) {
        switch (c) {
            case 'b':
                if (parse_block (optarg, &pr->block) < 0) {
                    fprintf (stderr, "tierctl predict: --block: '%s' is "
                             "not a whole number of nodes (1-1000000)\n",
                             optarg);
                    goto error;
                }
                break;
            case 'n':
                if (parse_nodes (optarg, pr->nodes, LIST_MAX, &pr->nnodes)
                    < 0) {
                    fprintf (stderr, "tierctl predict: --nodes: '%s' is "
                             "not a list of up to %d node counts\n",
                             optarg, LIST_MAX);
                    goto error;
                }
                *nodes_given = true;
                break;
            case 'p':
                if (parse_periods (optarg, pr->periods, LIST_MAX,
                                   &pr->nperiods) < 0) {
                    fprintf (stderr, "tierctl predict: --periods: '%s' is "
                             "not a list of up to %d return periods > 1\n",
                             optarg, LIST_MAX);
                    goto error;
                }
                break;
            case 'l':
                if (parse_level (optarg, &pr->level) < 0) {
                    fprintf (stderr, "tierctl predict: --level: '%s' is "
                             "not a confidence level in [0.5, 0.999]\n",
                             optarg);
                    goto error;
                }
                break;
            case 'm':
                pr->measured_file = optarg;
                break;
            case 's':
                pr->svg_file = optarg;
                break;
            case 'j':
                pr->json = true;
                break;
            case 'h':
                *rc = cmd_help (ctl, 2, (char *[]){ "help", "predict", NULL });
                return -1;
            default:
                goto error;
        }
    }
    if (optind != argc - 1) {
        fprintf (stderr, "tierctl predict: %s\n", optind >= argc
                 ? "no TIMES.csv given" : "only one TIMES.csv may be given");
        goto error;
    }
    pr->file = argv[optind];
    return 0;
error:
    *rc = usage ();
    return -1;
}

/* The node counts to predict for: those given (or 2, 4, 8 and 16 blocks'
 * worth), and every measured one, sorted without repeats; the return
 * periods sorted; the plot's band periods if a plot is asked for.
 */
static void settle_lists (struct predict *pr, bool nodes_given)
{
    size_t w = 0;

    if (!nodes_given) {
        for (int k = 1; k <= 4; k++)
            pr->nodes[pr->nnodes++] = (long) pr->blocks.block << k;
    }
    for (size_t k = 0; k < pr->nmeas; k++) {
        bool have = false;
        for (size_t i = 0; i < pr->nnodes; i++)
            if (pr->nodes[i] == pr->meas[k].nodes)
                have = true;
        if (!have)
            pr->nodes[pr->nnodes++] = pr->meas[k].nodes;
    }
    qsort (pr->nodes, pr->nnodes, sizeof (long), cmp_long);
    for (size_t i = 0; i < pr->nnodes; i++)
        if (w == 0 || pr->nodes[i] != pr->nodes[w - 1])
            pr->nodes[w++] = pr->nodes[i];
    pr->nnodes = w;
    qsort (pr->periods, pr->nperiods, sizeof (double), cmp_double);
    if (pr->svg_file) {
        double tmax = plot_tmax (pr);
        pr->nband = PLOT_BAND;
        for (size_t i = 0; i < PLOT_BAND; i++)
            pr->band_period[i] = plot_period (tmax, i, PLOT_BAND);
    }
}

/* the fit and the predictions; an error names the times file */
static int fit_and_compute (struct predict *pr, tier_error_t *error)
{
    if (!(pr->evt = tier_evt_create (pr->blocks.max, pr->blocks.n, error))
        || compute (pr, error) < 0) {
        char msg[TIER_ERROR_MAX];
        snprintf (msg, sizeof (msg), "%s", error->text);
        tier_errprintf (error, "%s: %s", pr->file, msg);
        return -1;
    }
    return 0;
}

/* the table or JSON on stdout; -1 once the failure is reported */
static int print_result (const struct predict *pr)
{
    if (pr->json ? print_json (pr) < 0 : (print_table (pr), 0))
        return -1;
    if (fflush (stdout) != 0 || ferror (stdout)) {
        fprintf (stderr, "tierctl predict: write error: %s\n",
                 strerror (errno));
        return -1;
    }
    return 0;
}

int cmd_predict (struct ctl *ctl, int argc, char **argv)
{
    struct predict *pr;
    tier_error_t error = { { 0 } };
    int rc = CTL_ERROR;
    bool nodes_given = false;

    if (!(pr = calloc (1, sizeof (*pr)))) {
        fprintf (stderr, "tierctl predict: out of memory\n");
        return CTL_ERROR;
    }
    pr->level = 0.95;
    pr->json = ctl->json;
    pr->periods[0] = 10.;
    pr->periods[1] = 100.;
    pr->periods[2] = 1000.;
    pr->nperiods = 3;
    if (parse_args (ctl, pr, argc, argv, &nodes_given, &rc) < 0)
        goto out;

    if (!(pr->times = tier_evt_times_load (pr->file, &error))
        || tier_evt_times_blocks (pr->times, pr->block, &pr->blocks, &error)
               < 0)
        goto error;
    if (pr->measured_file && load_measured (pr, &error) < 0)
        goto error;
    settle_lists (pr, nodes_given);
    if (fit_and_compute (pr, &error) < 0)
        goto error;
    if (pr->svg_file && write_svg (pr, &error) < 0)
        goto error;
    if (print_result (pr) < 0)
        goto out;
    rc = CTL_OK;
    goto out;
error:
    fprintf (stderr, "tierctl predict: %s\n", error.text);
out:
    tier_evt_destroy (pr->evt);
    tier_evt_blocks_free (&pr->blocks);
    tier_evt_times_destroy (pr->times);
    free (pr);
    return rc;
}
