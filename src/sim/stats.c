/* stats.c: means, standard deviations and percentiles for the reports. Percentiles
 * are the nearest rank on sorted values: p of n values is the ceil(p*n)-th. */
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double rank(const double *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p * (double)n);
    if (k < 1)
        k = 1;
    return v[k - 1];
}

void dist_from(double *values, size_t n, Dist *ret)
{
    *ret = (Dist){.n = n};
    if (!n)
        return;
    qsort(values, n, sizeof(*values), cmp_double);
    ret->mean = mean_of(values, n);
    ret->p50 = rank(values, n, 0.50);
    ret->p95 = rank(values, n, 0.95);
    ret->p99 = rank(values, n, 0.99);
    ret->max = values[n - 1];
}

double mean_of(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : 0;
}

/* The sample standard deviation (n - 1), as numpy's std(ddof=1) and the FGD
 * authors' summaries use. */
double stddev_of(const double *v, size_t n)
{
    if (n < 2)
        return 0;
    double m = mean_of(v, n), s = 0;
    for (size_t i = 0; i < n; i++)
        s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (double)(n - 1));
}
