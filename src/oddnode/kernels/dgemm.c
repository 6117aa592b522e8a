/*
 * oddnode dgemm kernel v1: double-precision matrix multiply rate of one node,
 * through the node's own BLAS, with a check of the product.
 *
 * C = A * B for n x n column-major matrices, timed NTIMES times; the rate is
 * 2 n^3 floating-point operations over the best time, the first call (which
 * pays for page faults, thread start-up and the BLAS's own set-up) not
 * counted.
 *
 * The BLAS is loaded at run time with dlopen, so that building needs no BLAS
 * headers or link flags and one binary works whatever the node has:
 *   - $ODDNODE_BLAS when set: a path or soname, or "builtin" for our own
 *     multiply; when it names a library that cannot be loaded, the kernel
 *     stops (exit 4) rather than measure another library than the one asked;
 *   - otherwise the first of ODDNODE_BLAS_CANDIDATES that loads and has the
 *     Fortran symbol dgemm_ (LP64: 32-bit integers);
 *   - otherwise our own OpenMP blocked multiply, reported as "# blas: builtin"
 *     so that a node without an optimised BLAS stands out.
 * dlopen is in libc from glibc 2.34 on; older glibc needs -ldl, which newer
 * ones still accept (libdl is kept as an empty stub), so the caller always
 * links -ldl.
 *
 * Usage: dgemm [-n ORDER] [-t NTIMES]
 *
 * Output (stdout): '#' header lines "# key: value", then
 *   result dgemm <best_GFLOPs> <avg_s> <min_s> <max_s>
 * (GFLOP = 10^9 floating-point operations, the first call not counted), and
 * finally "validation ok" or "validation failed dgemm <scaled_residual>".
 * Exit status: 0 when the multiplies ran (even if validation failed: the
 * parser decides what a failed run means), 2 for bad arguments, 3 when the
 * matrices cannot be allocated, 4 when $ODDNODE_BLAS cannot be loaded.
 *
 * Compile-time settings (each with a guarded default):
 *   ODDNODE_DEFAULT_N          matrix order when -n is not given
 *   ODDNODE_DEFAULT_NTIMES     multiplies when -t is not given
 *   ODDNODE_BLAS_CANDIDATES    colon-separated libraries tried in order
 *   ODDNODE_CFLAGS             string literal of the flags used, for the header
 *   ODDNODE_CORRUPT_ELEMENT    test only: index (column-major) of an element
 *                              of C changed after the timed calls, so that
 *                              the validation must fail
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oddnode_kernel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef ODDNODE_DEFAULT_N
#define ODDNODE_DEFAULT_N 6000
#endif
#ifndef ODDNODE_DEFAULT_NTIMES
#define ODDNODE_DEFAULT_NTIMES 5
#endif
#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif
/*
 * Optimised libraries first: libblas.so.3 comes last because on many
 * distributions it is the unoptimised reference BLAS.  Fedora and RHEL name
 * the OpenMP and pthread builds of OpenBLAS libopenblaso and libopenblasp
 * (their plain libopenblas is single-threaded); Debian's libopenblas.so.0 is
 * the threaded build the admin installed.
 */
#ifndef ODDNODE_BLAS_CANDIDATES
#define ODDNODE_BLAS_CANDIDATES                                                       \
    "libopenblaso.so.0:libopenblasp.so.0:libopenblas.so.0:libmkl_rt.so.2:libmkl_rt.so:" \
    "libflexiblas.so.3:libblis.so.4:libblas.so.3"
#endif

#define KERNEL_VERSION 1
/* A best time shorter than this many timer ticks is too coarse to trust. */
#define MIN_TICKS 20
/* Alignment of the matrices: a page, so that vector loads never split pages. */
#define MATRIX_ALIGNMENT 4096
/* The largest order accepted: dgemm_'s arguments are 32-bit integers, and
 * three matrices of this order (24 TB) are more than any node holds. */
#define MAX_ORDER 1000000LL
/* Seed of the generator; streams 1, 2, 3 fill A, B and x. */
#define SEED 20240601ULL
/* Rows of one block in the matrix-vector products of the check: 512 doubles
 * (4 KiB) of each column, so a block's partial sums stay in the L1 cache. */
#define CHECK_ROWS 512
/* Blocking of the builtin multiply: a BUILTIN_ROWS x BUILTIN_DEPTH block of A
 * (128 KiB) stays in the L2 cache while BUILTIN_COLUMNS columns of C use it. */
#define BUILTIN_ROWS 128
#define BUILTIN_DEPTH 128
#define BUILTIN_COLUMNS 64
/*
 * Residual threshold.  To first order, rounding in the multiply and in each
 * of the three matrix-vector products of the check (C x, B x, A (B x)) adds
 * at most n u ||A||_oo ||B||_oo ||x||_oo to |C x - A (B x)|, u = DBL_EPSILON/2
 * being the unit roundoff: the scaled residual below, which divides by
 * n DBL_EPSILON ||A|| ||B|| ||x||, is at most 2 for a correct product and, with
 * errors of random sign, orders of magnitude less.  16 is HPL's threshold for
 * its own scaled residual.  It bounds rounding; it does not catch every wrong
 * digit: with entries in [-1, 1), one element of C must be wrong by more than
 * about 16 DBL_EPSILON n^3 / 4, some 1% of its size at n = 6000, to fail.  The
 * faults it is for (a lost or misplaced block, a race, a flipped exponent or
 * high mantissa bit) are far larger.
 */
#define RESIDUAL_THRESHOLD 16.0

typedef void (*dgemm_function)(const char *transa, const char *transb, const int *m, const int *n,
                               const int *k, const double *alpha, const double *a, const int *lda,
                               const double *b, const int *ldb, const double *beta, double *c,
                               const int *ldc, size_t transa_len, size_t transb_len);

/* What the run found out about the BLAS, for the header. */
struct blas_library {
    void *handle;
    dgemm_function dgemm;
    char name[PATH_MAX];      /* as asked for: path, soname or "builtin" */
    char file[PATH_MAX];      /* the file dgemm_ was found in, links resolved */
    char config[512];         /* the library's own description, if it gives one */
    char core[128];           /* OpenBLAS's name for the CPU kernel it chose */
    long threads;             /* the library's thread count, -1 if unknown */
    char tried[4096];         /* "name: why" for every candidate that failed */
};

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s [-n ORDER] [-t NTIMES]\n"
            "  -n ORDER   order of the square matrices, 1..%lld (default %d)\n"
            "  -t NTIMES  multiplies, >= 2; the first is not counted (default %d)\n"
            "  $ODDNODE_BLAS  the BLAS library to load, or 'builtin'\n",
            program, MAX_ORDER, ODDNODE_DEFAULT_N, ODDNODE_DEFAULT_NTIMES);
}

/* splitmix64: the golden-ratio step, then its output function: a well-mixed
 * 64-bit hash of its input. */
static uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A uniform double in [0, 1) that depends only on (stream, index): the same
 * matrices whatever the number of threads filling them. */
static double uniform(uint64_t stream, uint64_t index)
{
    /* The top 53 bits of the hash, scaled by 2^-53: a double k / 2^53. */
    return (double)(splitmix64(splitmix64(SEED + stream) ^ index) >> 11) * (1.0 / 9007199254740992.0);
}

static void append_tried(struct blas_library *blas, const char *name, const char *why)
{
    size_t used = strlen(blas->tried);
    snprintf(blas->tried + used, sizeof blas->tried - used, "%s%s: %s", used ? "; " : "", name, why);
}

/* dlerror's text, without the library's name that glibc puts in front. */
static const char *load_error(const char *name)
{
    const char *text = dlerror();
    if (text == NULL)
        return "unknown error";
    size_t length = strlen(name);
    if (strncmp(text, name, length) == 0 && strncmp(text + length, ": ", 2) == 0)
        return text + length + 2;
    return text;
}

/* Open one library and find dgemm_ in it; 0 on success, the reason in tried. */
static int open_blas(struct blas_library *blas, const char *name)
{
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        append_tried(blas, name, load_error(name));
        return -1;
    }
    dlerror();
    void *symbol = dlsym(handle, "dgemm_");
    if (symbol == NULL) {
        append_tried(blas, name, "no dgemm_ symbol");
        dlclose(handle);
        return -1;
    }
    blas->handle = handle;
    blas->dgemm = (dgemm_function)symbol;
    snprintf(blas->name, sizeof blas->name, "%s", name);
    Dl_info info;
    if (dladdr(symbol, &info) != 0 && info.dli_fname != NULL) {
        char resolved[PATH_MAX];
        snprintf(blas->file, sizeof blas->file, "%s",
                 realpath(info.dli_fname, resolved) ? resolved : info.dli_fname);
    }
    return 0;
}

/* Whatever the loaded library says about itself: version, CPU kernel, threads.
 * Each library has its own functions; those it lacks are simply not there. */
static void describe_blas(struct blas_library *blas)
{
    void *h = blas->handle;
    char *(*openblas_config)(void) = (char *(*)(void))dlsym(h, "openblas_get_config");
    char *(*openblas_core)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    int (*openblas_threads)(void) = (int (*)(void))dlsym(h, "openblas_get_num_threads");
    void (*mkl_version)(char *, int) = (void (*)(char *, int))dlsym(h, "MKL_Get_Version_String");
    int (*mkl_threads)(void) = (int (*)(void))dlsym(h, "MKL_Get_Max_Threads");
    int (*flexiblas_backend)(char *, size_t) = (int (*)(char *, size_t))dlsym(h, "flexiblas_current_backend");
    int (*flexiblas_threads)(void) = (int (*)(void))dlsym(h, "flexiblas_get_num_threads");
    const char *(*blis_version)(void) = (const char *(*)(void))dlsym(h, "bli_info_get_version_str");
    int64_t (*blis_threads)(void) = (int64_t (*)(void))dlsym(h, "bli_thread_get_num_threads");

    if (flexiblas_backend) {
        char backend[256] = "";
        flexiblas_backend(backend, sizeof backend);
        snprintf(blas->config, sizeof blas->config, "FlexiBLAS backend %s", backend);
    } else if (openblas_config) {
        snprintf(blas->config, sizeof blas->config, "%s", openblas_config());
    } else if (mkl_version) {
        mkl_version(blas->config, (int)sizeof blas->config);
    } else if (blis_version) {
        snprintf(blas->config, sizeof blas->config, "BLIS %s", blis_version());
    }
    if (openblas_core)
        snprintf(blas->core, sizeof blas->core, "%s", openblas_core());
    if (flexiblas_threads)
        blas->threads = flexiblas_threads();
    else if (openblas_threads)
        blas->threads = openblas_threads();
    else if (mkl_threads)
        blas->threads = mkl_threads();
    else if (blis_threads)
        blas->threads = (long)blis_threads();
    /* Header values are one line each. */
    for (char *p = blas->config; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* Choose the BLAS as the file comment says; -1 when $ODDNODE_BLAS names a
 * library that does not load (the reason is in blas->tried). */
static int find_blas(struct blas_library *blas)
{
    memset(blas, 0, sizeof *blas);
    blas->threads = -1;
    const char *wanted = getenv("ODDNODE_BLAS");
    if (wanted != NULL && *wanted != '\0') {
        if (strcmp(wanted, "builtin") == 0) {
            snprintf(blas->name, sizeof blas->name, "builtin");
            return 0;
        }
        if (open_blas(blas, wanted) != 0)
            return -1;
        describe_blas(blas);
        return 0;
    }
    char candidates[] = ODDNODE_BLAS_CANDIDATES;
    char *saved = NULL;
    for (char *name = strtok_r(candidates, ":", &saved); name; name = strtok_r(NULL, ":", &saved)) {
        if (open_blas(blas, name) == 0) {
            describe_blas(blas);
            return 0;
        }
    }
    snprintf(blas->name, sizeof blas->name, "builtin");
    return 0;
}

/*
 * Our own C = A * B, for nodes without a BLAS: blocked so that a block of A
 * is reused from cache, four columns of A per pass over a block of C (one
 * load and store of C for eight floating-point operations), and the inner
 * loop contiguous for the compiler to vectorise.  Correct but several times
 * slower than an optimised BLAS; it only keeps the stage running.
 */
static void builtin_dgemm(long n, const double *restrict a, const double *restrict b, double *restrict c)
{
#pragma omp parallel for schedule(dynamic, 1)
    for (long j0 = 0; j0 < n; j0 += BUILTIN_COLUMNS) {
        const long j1 = j0 + BUILTIN_COLUMNS < n ? j0 + BUILTIN_COLUMNS : n;
        for (long j = j0; j < j1; j++)
            memset(c + (size_t)j * n, 0, sizeof(double) * (size_t)n);
        for (long k0 = 0; k0 < n; k0 += BUILTIN_DEPTH) {
            const long k1 = k0 + BUILTIN_DEPTH < n ? k0 + BUILTIN_DEPTH : n;
            for (long i0 = 0; i0 < n; i0 += BUILTIN_ROWS) {
                const long rows = (i0 + BUILTIN_ROWS < n ? i0 + BUILTIN_ROWS : n) - i0;
                for (long j = j0; j < j1; j++) {
                    double *restrict cj = c + (size_t)j * n + i0;
                    const double *bj = b + (size_t)j * n;
                    long k = k0;
                    for (; k + 3 < k1; k += 4) {
                        const double *a0 = a + (size_t)k * n + i0, *a1 = a0 + n, *a2 = a1 + n, *a3 = a2 + n;
                        const double b0 = bj[k], b1 = bj[k + 1], b2 = bj[k + 2], b3 = bj[k + 3];
                        for (long i = 0; i < rows; i++)
                            cj[i] += a0[i] * b0 + a1[i] * b1 + a2[i] * b2 + a3[i] * b3;
                    }
                    for (; k < k1; k++) {
                        const double *ak = a + (size_t)k * n + i0;
                        const double bk = bj[k];
                        for (long i = 0; i < rows; i++)
                            cj[i] += ak[i] * bk;
                    }
                }
            }
        }
    }
}

static void multiply(const struct blas_library *blas, long n, const double *a, const double *b, double *c)
{
    if (blas->dgemm == NULL) {
        builtin_dgemm(n, a, b, c);
        return;
    }
    const int order = (int)n;
    const double one = 1.0, zero = 0.0;
    /* The two trailing lengths are the hidden lengths of the Fortran
     * character arguments; libraries written in C ignore them. */
    blas->dgemm("N", "N", &order, &order, &order, &one, a, &order, b, &order, &zero, c, &order, 1, 1);
}

/*
 * out = M v for a column-major n x n matrix M, and when row_norm is not NULL
 * also ||M||_oo (the largest sum of |m_ij| over a row), in one pass over M.
 * Our own loops, not the BLAS's dgemv: the check must not share a fault with
 * the multiply it checks.
 */
static void matvec(long n, const double *m, const double *v, double *out, double *row_norm)
{
    double norm = 0.0;
#pragma omp parallel for schedule(static) reduction(max : norm)
    for (long i0 = 0; i0 < n; i0 += CHECK_ROWS) {
        const long rows = (i0 + CHECK_ROWS < n ? i0 + CHECK_ROWS : n) - i0;
        double sum[CHECK_ROWS], abs_sum[CHECK_ROWS];
        for (long i = 0; i < rows; i++)
            sum[i] = abs_sum[i] = 0.0;
        for (long j = 0; j < n; j++) {
            const double *column = m + (size_t)j * n + i0;
            const double vj = v[j];
            for (long i = 0; i < rows; i++) {
                sum[i] += column[i] * vj;
                abs_sum[i] += column[i] < 0.0 ? -column[i] : column[i];
            }
        }
        for (long i = 0; i < rows; i++) {
            out[i0 + i] = sum[i];
            if (abs_sum[i] > norm)
                norm = abs_sum[i];
        }
    }
    if (row_norm != NULL)
        *row_norm = norm;
}

/*
 * Freivalds' check of C = A B in O(n^2): for a vector x, C x must equal
 * A (B x).  Returns ||C x - A (B x)||_oo / (eps n ||A||_oo ||B||_oo ||x||_oo),
 * a scaled residual like HPL's; NaN anywhere in C gives DBL_MAX.
 */
static double scaled_residual(long n, const double *a, const double *b, const double *c, const double *x,
                              double *work)
{
    double *bx = work, *abx = work + n, *cx = work + 2 * n;
    double norm_a, norm_b;
    matvec(n, b, x, bx, &norm_b);
    matvec(n, a, bx, abx, &norm_a);
    matvec(n, c, x, cx, NULL);
    double worst = 0.0, norm_x = 0.0;
    for (long i = 0; i < n; i++) {
        double diff = cx[i] - abx[i];
        diff = diff < 0.0 ? -diff : diff;
        if (!(diff <= worst))
            worst = diff != diff ? DBL_MAX : diff; /* NaN counts as the worst */
        if (x[i] > norm_x)
            norm_x = x[i];
    }
    const double scale = DBL_EPSILON * (double)n * norm_a * norm_b * norm_x;
    if (worst == DBL_MAX || !(scale > 0.0))
        return DBL_MAX;
    return worst / scale;
}

int main(int argc, char **argv)
{
    long long order = ODDNODE_DEFAULT_N;
    long long ntimes = ODDNODE_DEFAULT_NTIMES;
    int option;

    opterr = 0;
    while ((option = getopt(argc, argv, "n:t:")) != -1) {
        switch (option) {
        case 'n':
            order = parse_count(optarg, 1, MAX_ORDER);
            if (order < 0) {
                fprintf(stderr, "error: -n wants a whole matrix order in 1..%lld, got '%s'\n", MAX_ORDER, optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 't':
            ntimes = parse_count(optarg, 2, INT_MAX);
            if (ntimes < 0) {
                fprintf(stderr, "error: -t wants a whole number of multiplies >= 2, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        default:
            fprintf(stderr, "error: unknown option or missing value: '%s'\n", argv[optind - 1]);
            usage(argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
        usage(argv[0]);
        return 2;
    }

    static struct blas_library blas;
    if (find_blas(&blas) != 0) {
        fprintf(stderr, "error: cannot use ODDNODE_BLAS: %s\n", blas.tried);
        return 4;
    }

    const long n = (long)order;
    const size_t elements = (size_t)n * (size_t)n;
    const size_t bytes_per_matrix = elements * sizeof(double);
    if (bytes_per_matrix / sizeof(double) / (size_t)n != (size_t)n) {
        fprintf(stderr, "error: a matrix of order %ld does not fit in memory\n", n);
        return 3;
    }
    double *a = NULL, *b = NULL, *c = NULL, *x = NULL, *work = NULL;
    if (posix_memalign((void **)&a, MATRIX_ALIGNMENT, bytes_per_matrix) != 0
        || posix_memalign((void **)&b, MATRIX_ALIGNMENT, bytes_per_matrix) != 0
        || posix_memalign((void **)&c, MATRIX_ALIGNMENT, bytes_per_matrix) != 0
        || (x = malloc(sizeof(double) * (size_t)n)) == NULL
        || (work = malloc(3 * sizeof(double) * (size_t)n)) == NULL) {
        fprintf(stderr, "error: cannot allocate 3 matrices of %zu bytes\n", bytes_per_matrix);
        return 3;
    }

    int threads_requested = 1, threads_counted = 0;
#ifdef _OPENMP
    threads_requested = omp_get_max_threads();
#endif
#pragma omp parallel
    {
#pragma omp atomic
        threads_counted++;
    }

    /* Entries of A and B uniform in [-1, 1); x in [0.5, 1), so that an error
     * in any column of C weighs at least half as much in C x as the largest. */
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) {
        for (long i = 0; i < n; i++) {
            const size_t index = (size_t)j * n + i;
            a[index] = 2.0 * uniform(1, index) - 1.0;
            b[index] = 2.0 * uniform(2, index) - 1.0;
            c[index] = 0.0;
        }
        x[j] = 0.5 + 0.5 * uniform(3, (uint64_t)j);
    }

    long long granularity_ns = timer_granularity_ns();

    printf("# oddnode dgemm kernel v%d\n", KERNEL_VERSION);
    printf("# n: %ld\n", n);
    printf("# bytes_per_matrix: %zu\n", bytes_per_matrix);
    printf("# ntimes: %lld\n", ntimes);
    printf("# flops_per_call: %.0f\n", 2.0 * (double)n * (double)n * (double)n);
    printf("# threads_requested: %d\n", threads_requested);
    printf("# threads_counted: %d\n", threads_counted);
    printf("# blas: %s\n", blas.name);
    if (blas.file[0])
        printf("# blas_file: %s\n", blas.file);
    if (blas.config[0])
        printf("# blas_config: %s\n", blas.config);
    if (blas.core[0])
        printf("# blas_core: %s\n", blas.core);
    if (blas.threads >= 0)
        printf("# blas_threads: %ld\n", blas.threads);
    if (blas.dgemm == NULL && blas.tried[0])
        printf("# blas_not_found: %s\n", blas.tried);
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", granularity_ns);
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
    printf("# seed: %llu\n", (unsigned long long)SEED);
#ifdef ODDNODE_CORRUPT_ELEMENT
    printf("# corrupt_element: %zu\n", (size_t)(ODDNODE_CORRUPT_ELEMENT) % elements);
#endif
    fflush(stdout);

    double *times = malloc(sizeof(double) * (size_t)ntimes);
    if (times == NULL) {
        fprintf(stderr, "error: cannot allocate the timing table\n");
        return 3;
    }
    for (long long k = 0; k < ntimes; k++) {
        double t0 = now_seconds();
        multiply(&blas, n, a, b, c);
        times[k] = now_seconds() - t0;
    }

#ifdef ODDNODE_CORRUPT_ELEMENT
    {
        /* An error of the element's own size, as a flipped exponent bit makes. */
        double *wrong = c + (size_t)(ODDNODE_CORRUPT_ELEMENT) % elements;
        *wrong += 1.0 + (*wrong < 0.0 ? -*wrong : *wrong);
    }
#endif

    /* Statistics over calls 1..NTIMES-1: the first one is not counted. */
    double best = DBL_MAX, worst = 0.0, avg = 0.0;
    for (long long k = 1; k < ntimes; k++) {
        avg += times[k];
        if (times[k] < best) best = times[k];
        if (times[k] > worst) worst = times[k];
    }
    avg /= (double)(ntimes - 1);
    free(times);
    double ticks = best * 1.0e9 / (double)granularity_ns;
    if (ticks < MIN_TICKS)
        printf("# warning: dgemm best time %.3e s is only %.0f timer ticks (< %d); "
               "increase -n for a trustworthy rate\n", best, ticks, MIN_TICKS);
    const double flops = 2.0 * (double)n * (double)n * (double)n;
    printf("result dgemm %.3f %.9f %.9f %.9f\n", 1.0e-9 * flops / best, avg, best, worst);

    const double residual = scaled_residual(n, a, b, c, x, work);
    printf("# residual_threshold: %.1f\n", RESIDUAL_THRESHOLD);
    printf("# scaled_residual: %.6e\n", residual);
    if (residual <= RESIDUAL_THRESHOLD)
        printf("validation ok\n");
    else
        printf("validation failed dgemm %.6e\n", residual);

    free(a);
    free(b);
    free(c);
    free(x);
    free(work);
    /* The library stays loaded: unloading a BLAS whose worker threads are
     * still parked can crash at exit, and the process ends here anyway. */
    return 0;
}
