/*
 * The body of oddnode's bulk-synchronous kernel, shared by its two
 * transports: MPI (mpi_sync.c, MPI_Allreduce or MPI_Barrier between the
 * ranks) and TCP (tcp_sync.c, a binomial tree of TCP connections, for nodes
 * without MPI).  Both print the same output, read by one parser.
 *
 * Every rank repeats, ITERATIONS times (-n, or about -s seconds) after WARMUP
 * untimed ones (-W):
 *
 *   compute  a work quantum: a chain of splitmix64 steps, the same number
 *            of steps on every rank (QUANTUM_US on the fastest rank, as
 *            calibrated at the start), so a slower or interrupted node
 *            takes longer for the same work;
 *   sync     an allreduce of one double (MPI_SUM) or a barrier.
 *
 * Each rank times its own compute and its own wait in the collective with
 * CLOCK_MONOTONIC, and keeps them per iteration.  The rank that arrived
 * last at an iteration's collective is the one that waited least in it: all
 * leave together once it is there.  Its *extra wait* is the second shortest
 * wait minus its own: how much earlier every other rank could have left had
 * it arrived with the next-to-last.  These are found at the end, not per
 * iteration (nothing but the collective travels during the loop): one
 * reduction of (shortest wait, its rank, second shortest) triples per
 * iteration to rank 0.
 *
 * Included by the transport after "oddnode_kernel.h" (the package pastes
 * both into the source a node compiles); the transport defines the
 * functions declared below and calls sync_run().
 */
#ifndef ODDNODE_SYNC_H
#define ODDNODE_SYNC_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNC_KERNEL_VERSION 1

#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

/* The work quantum in microseconds when -q is not given: about an
 * application's compute between two synchronisations, and 100 times the
 * cost of a small collective on a fast network, so that the collective's
 * own time does not hide the waits. */
#ifndef ODDNODE_DEFAULT_QUANTUM_US
#define ODDNODE_DEFAULT_QUANTUM_US 1000
#endif
#ifndef ODDNODE_DEFAULT_ITERATIONS
#define ODDNODE_DEFAULT_ITERATIONS 1000
#endif
/* Untimed iterations first: the first collectives set up connections and
 * buffers (STREAM's rule: the first iteration is discarded). */
#ifndef ODDNODE_DEFAULT_WARMUP
#define ODDNODE_DEFAULT_WARMUP 10
#endif

#define MAX_QUANTUM_US 1000000L
#define MAX_ITERATIONS 1000000L
#define MAX_WARMUP 10000L
/* With -s, at least this many iterations whatever their length: the
 * shares of iterations each rank was last need a count to mean anything. */
#define MIN_SECONDS_ITERATIONS 10L
#define MAX_SECONDS 3600.0
/* A host name as the output carries it (longer ones are cut). */
#define HOST_BYTES 64
/* Calibration: the best rate of CALIBRATION_TRIALS trials of at least
 * CALIBRATION_TRIAL_SECONDS each.  A trial the scheduler interrupts comes
 * out slow, never fast, so the best one is the CPU's own speed; short
 * trials fit between the interruptions of a busy or capped CPU. */
#define CALIBRATION_TRIALS 25
#define CALIBRATION_TRIAL_SECONDS 2.0e-4

enum sync_operation { OP_ALLREDUCE, OP_BARRIER, OPERATIONS };
static const char *const OPERATION_NAMES[OPERATIONS] = {"allreduce", "barrier"};
/* How transport_allreduce combines the ranks' values. */
enum reduce_op { REDUCE_SUM, REDUCE_MAX };

/* What a run was asked for. */
struct sync_config {
    int operation;
    long quantum_us;
    long iterations;  /* 0 with -s: chosen from the warm-up */
    double seconds;   /* with -s */
    long warmup;
    char **names;     /* -N: the nodes' names in rank order, or NULL */
    int name_count;
    int corrupt_rank; /* ODDNODE_CORRUPT_RANK, or -1 */
};

/* --- what the transport provides ------------------------------------------------ */

static int sync_rank, sync_ranks;
/* Every rank: combine `count` doubles of every rank into values, everywhere. */
static void transport_allreduce(double *values, int count, int op);
/* Every rank: the iteration's collective (barrier or allreduce of one
 * double); *result is the sum for an allreduce. */
static void transport_collective(int operation, long iteration, double contribution, double *result);
/* Every rank: reduce `count` laggard triples (merge_laggards) to rank 0, in place there. */
static void transport_reduce_laggards(double *triples, long count);
/* Every rank: `bytes` of every rank, in rank order, into `all` on rank 0. */
static void transport_gather(const unsigned char *mine, size_t bytes, unsigned char *all);
/* Rank 0: the transport's own header lines. */
static void transport_header(void);
/* Any rank: an error that ends the whole run, its message on stderr. */
static void transport_abort(int status, const char *format, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* --- the work ------------------------------------------------------------------- */

/* `steps` splitmix64 steps chained on `seed`: each depends on the last, so
 * the compiler can neither skip nor vectorise them; the result is used. */
static uint64_t busy_work(uint64_t seed, uint64_t steps)
{
    uint64_t x = seed;
    for (uint64_t i = 0; i < steps; i++)
        x = mix64(x + i);
    return x;
}

/* The seed of iteration i's work: the same on every rank. */
static inline uint64_t work_seed(long iteration)
{
    return mix64(0x6f64646e73796e63ULL ^ (uint64_t)iteration); /* "oddnsync" */
}

/* The allreduce's contribution of a rank: the top 20 bits of its work's
 * result (the same on every rank that did the same work) plus a 10-bit term
 * of its own rank and the iteration.  The sum over up to 2^22 ranks stays a
 * whole number below 2^53: exact in doubles, and known to every rank. */
static inline double rank_term(int rank, long iteration)
{
    return (double)(mix64(((uint64_t)rank << 32) ^ (uint64_t)iteration ^ 0x5bd1e995ULL) >> 54);
}

static inline double work_term(uint64_t result)
{
    return (double)(result >> 44);
}

/* Steps of work per microsecond on this rank (see CALIBRATION_TRIALS). */
static double calibrate(void)
{
    uint64_t steps = 1024;
    double best = 0.0;
    uint64_t sink = 0;
    for (int trial = 0; trial < CALIBRATION_TRIALS; trial++) {
        double started = now_seconds();
        sink ^= busy_work((uint64_t)trial, steps);
        double seconds = now_seconds() - started;
        if (seconds < CALIBRATION_TRIAL_SECONDS) {
            steps *= 2; /* too short for the clock: not counted, longer next time */
            trial--;
            continue;
        }
        double rate = 1.0e-6 * (double)steps / seconds;
        if (rate > best)
            best = rate;
    }
    /* Keeps the trials' work from being optimised away. */
    if (sink == 42)
        fputc('\0', stderr);
    return best;
}

/* --- the laggards ------------------------------------------------------------ */

/* (shortest wait, its rank, second shortest wait) of two groups of ranks
 * into `into`: the two shortest of the four, ties to the lower rank.
 * Commutative and associative, as MPI_Op_create wants. */
static inline void merge_laggard(const double *in, double *into)
{
    if (in[0] < into[0] || (in[0] == into[0] && in[1] < into[1])) {
        into[2] = in[2] < into[0] ? in[2] : into[0];
        into[0] = in[0];
        into[1] = in[1];
    } else if (in[0] < into[2]) {
        into[2] = in[0];
    }
}

static void merge_laggards(const double *in, double *into, long count)
{
    for (long i = 0; i < count; i++)
        merge_laggard(in + 3 * i, into + 3 * i);
}

/* --- one rank's account --------------------------------------------------------- */

/* Doubles of a rank's summary, gathered at rank 0 with its host name. */
enum {
    S_COMPUTE_TOTAL, S_COMPUTE_MEDIAN, S_COMPUTE_MAX, S_WAIT_TOTAL, S_WAIT_MEDIAN, /* us */
    S_BAD, S_CHECKED, S_FIRST_BAD, S_EXPECTED, S_GOT, S_CHECKSUM,
    SUMMARY_WORDS
};
#define SUMMARY_BYTES (SUMMARY_WORDS * 8 + HOST_BYTES)

static void encode_summary(const double *words, const char *host, unsigned char *out)
{
    for (int k = 0; k < SUMMARY_WORDS; k++) {
        uint64_t bits;
        memcpy(&bits, &words[k], 8);
        for (int b = 0; b < 8; b++)
            out[8 * k + b] = (unsigned char)(bits >> (56 - 8 * b)); /* big-endian on the wire */
    }
    memset(out + SUMMARY_WORDS * 8, 0, HOST_BYTES);
    strncpy((char *)out + SUMMARY_WORDS * 8, host, HOST_BYTES - 1);
}

static void decode_summary(const unsigned char *in, double *words, char *host)
{
    for (int k = 0; k < SUMMARY_WORDS; k++) {
        uint64_t bits = 0;
        for (int b = 0; b < 8; b++)
            bits = (bits << 8) | in[8 * k + b];
        memcpy(&words[k], &bits, 8);
    }
    memcpy(host, in + SUMMARY_WORDS * 8, HOST_BYTES);
    host[HOST_BYTES - 1] = '\0';
}

/* The median of n > 0 values (sorted in place). */
static double median_of(double *values, long n)
{
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* --- the options every transport takes --------------------------------------- */

static void sync_defaults(struct sync_config *c)
{
    c->operation = OP_ALLREDUCE;
    c->quantum_us = ODDNODE_DEFAULT_QUANTUM_US;
    c->iterations = ODDNODE_DEFAULT_ITERATIONS;
    c->seconds = 0.0;
    c->warmup = ODDNODE_DEFAULT_WARMUP;
    c->names = NULL;
    c->name_count = 0;
    c->corrupt_rank = -1;
}

/* -N's comma list into c->names; 0, or -1 when an entry is empty or too long. */
static int parse_names(const char *text, struct sync_config *c)
{
    int count = 1;
    for (const char *p = text; *p; p++)
        count += *p == ',';
    char **names = calloc((size_t)count, sizeof *names);
    if (names == NULL)
        return -1;
    const char *p = text;
    for (int i = 0; i < count; i++) {
        size_t length = strcspn(p, ",");
        if (length == 0 || length >= HOST_BYTES) {
            free(names);
            return -1;
        }
        names[i] = malloc(length + 1);
        if (names[i] == NULL)
            return -1;
        memcpy(names[i], p, length);
        names[i][length] = '\0';
        p += length + 1;
    }
    c->names = names;
    c->name_count = count;
    return 0;
}

/* One option of argv[*i] shared by both transports: 1 when it was one
 * (its value consumed), 0 when it is not, -1 when its value is bad (what
 * is wrong in *error). */
static int sync_option(int argc, char **argv, int *i, struct sync_config *c, const char **error)
{
    const char *option = argv[*i];
    if (strlen(option) != 2 || option[0] != '-' || strchr("oqnsWN", option[1]) == NULL)
        return 0;
    if (*i + 1 >= argc) {
        *error = "an option lacks its value";
        return -1;
    }
    const char *value = argv[++*i];
    switch (option[1]) {
    case 'o':
        for (int op = 0; op < OPERATIONS; op++)
            if (strcmp(value, OPERATION_NAMES[op]) == 0) {
                c->operation = op;
                return 1;
            }
        *error = "-o wants allreduce or barrier";
        return -1;
    case 'q':
        c->quantum_us = (long)parse_count(value, 1, MAX_QUANTUM_US);
        *error = "-q wants the work quantum in microseconds, 1-1000000";
        return c->quantum_us < 0 ? -1 : 1;
    case 'n':
        c->iterations = (long)parse_count(value, 1, MAX_ITERATIONS);
        c->seconds = 0.0;
        *error = "-n wants iterations, 1-1000000";
        return c->iterations < 0 ? -1 : 1;
    case 's':
        c->seconds = parse_seconds(value, 1.0e-3, MAX_SECONDS);
        c->iterations = 0;
        *error = "-s wants seconds, 0.001-3600";
        return c->seconds < 0.0 ? -1 : 1;
    case 'W':
        c->warmup = (long)parse_count(value, 1, MAX_WARMUP);
        *error = "-W wants warm-up iterations, 1-10000";
        return c->warmup < 0 ? -1 : 1;
    default:
        *error = "-N wants the nodes' names in rank order, a comma list (each 1-63 characters)";
        return parse_names(value, c) < 0 ? -1 : 1;
    }
}

static const char SYNC_OPTIONS_HELP[] =
    "  -o OPERATION  allreduce (one double, MPI_SUM) or barrier, after every quantum (default allreduce)\n"
    "  -q US         the work quantum in microseconds on the fastest rank (default 1000)\n"
    "  -n N          timed iterations (default 1000), or\n"
    "  -s SECONDS    about this long: iterations from the warm-up's pace\n"
    "  -W N          untimed warm-up iterations first (default 10)\n"
    "  -N NAMES      the nodes' names in rank order, printed with each rank's host\n"
    "  ODDNODE_CORRUPT_RANK=R makes rank R spoil one contribution (allreduce) or its work (barrier)\n";

/* --- the run ------------------------------------------------------------------ */

/* A rank's arrays, one entry per timed iteration. */
struct sync_arrays {
    double *compute, *wait, *result;
    uint32_t *work; /* work_term of each iteration's result */
};

static void *allocate_or_abort(size_t bytes, const char *what)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL)
        transport_abort(1, "rank %d cannot allocate %zu bytes for %s", sync_rank, bytes, what);
    return p;
}

/* One iteration: the quantum, then the collective; its two times. */
static inline void iterate(const struct sync_config *c, uint64_t steps, long iteration, double *compute,
                           double *wait, double *result, uint64_t *work)
{
    double t0 = now_seconds();
    uint64_t x = busy_work(work_seed(iteration), steps);
    double t1 = now_seconds();
    double contribution = work_term(x) + rank_term(sync_rank, iteration);
    if (c->corrupt_rank == sync_rank && iteration == 0)
        contribution += 1.0;
    transport_collective(c->operation, iteration, contribution, result);
    double t2 = now_seconds();
    *compute = t1 - t0;
    *wait = t2 - t1;
    *work = x;
}

/* Rank 0: the header, once every rank's host is known. */
static void print_header(const struct sync_config *c, const char *hosts, uint64_t steps, double fastest,
                         double slowest, long long granularity, const char *kernel)
{
    printf("# oddnode %s kernel v%d\n", kernel, SYNC_KERNEL_VERSION);
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
    transport_header();
    printf("# processes: %d\n", sync_ranks);
    for (int r = 0; r < sync_ranks; r++) {
        const char *host = hosts + (size_t)r * HOST_BYTES;
        printf("# rank: %d %s %s\n", r, host, c->names != NULL ? c->names[r] : host);
    }
    printf("# operation: %s\n", OPERATION_NAMES[c->operation]);
    printf("# quantum_us: %ld\n", c->quantum_us);
    printf("# work: a chain of splitmix64 steps, the same count on every rank\n");
    printf("# work_steps: %llu\n", (unsigned long long)steps);
    printf("# steps_per_us_fastest: %.3f\n", fastest);
    printf("# steps_per_us_slowest: %.3f\n", slowest);
    printf("# warmup_iterations: %ld\n", c->warmup);
    if (c->seconds > 0.0)
        printf("# seconds: %g\n", c->seconds);
    printf("# iterations: %ld\n", c->iterations);
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", granularity);
    printf("# time: each rank times its compute and its wait in the collective, every iteration\n");
    printf("# last: per iteration, the rank that waited least arrived last; its extra wait is the second "
           "shortest wait minus its own\n");
    if (c->corrupt_rank >= 0)
        printf("# corrupt_rank: %d\n", c->corrupt_rank);
    fflush(stdout);
}

/* This rank's check of its results: allreduce sums against what every rank
 * knows they must be.  Fills the summary's S_BAD .. S_GOT. */
static void check_results(const struct sync_config *c, const struct sync_arrays *a, double *summary)
{
    summary[S_BAD] = summary[S_CHECKED] = 0.0;
    summary[S_FIRST_BAD] = summary[S_EXPECTED] = summary[S_GOT] = -1.0;
    if (c->operation != OP_ALLREDUCE)
        return;
    for (long i = 0; i < c->iterations; i++) {
        double expected = (double)sync_ranks * (double)a->work[i];
        for (int r = 0; r < sync_ranks; r++)
            expected += rank_term(r, i);
        summary[S_CHECKED] += 1.0;
        if (a->result[i] != expected) {
            if (summary[S_BAD] == 0.0) {
                summary[S_FIRST_BAD] = (double)i;
                summary[S_EXPECTED] = expected;
                summary[S_GOT] = a->result[i];
            }
            summary[S_BAD] += 1.0;
        }
    }
}

/* Rank 0: the result lines and the verdict. */
static void report(const struct sync_config *c, double loop_seconds, const unsigned char *all,
                   const double *triples)
{
    long *last = calloc((size_t)sync_ranks, sizeof *last);
    double *extra = calloc((size_t)sync_ranks, sizeof *extra);
    if (last == NULL || extra == NULL)
        transport_abort(1, "rank 0 cannot allocate the laggard table");
    for (long i = 0; i < c->iterations; i++) {
        const double *t = triples + 3 * i;
        int r = (int)t[1];
        last[r]++;
        extra[r] += t[2] - t[0];
    }
    printf("loop %ld %.6f %.3f\n", c->iterations, loop_seconds, 1.0e6 * loop_seconds / (double)c->iterations);
    double words[SUMMARY_WORDS];
    char host[HOST_BYTES];
    double reference = 0.0;
    int failed = 0;
    for (int r = 0; r < sync_ranks; r++) {
        decode_summary(all + (size_t)r * SUMMARY_BYTES, words, host);
        if (r == 0)
            reference = words[S_CHECKSUM];
        printf("rank %d %.3f %.3f %.3f %.3f %.3f %ld %.3f\n", r, words[S_COMPUTE_TOTAL], words[S_COMPUTE_MEDIAN],
               words[S_COMPUTE_MAX], words[S_WAIT_TOTAL], words[S_WAIT_MEDIAN], last[r], 1.0e6 * extra[r]);
    }
    for (int r = 0; r < sync_ranks; r++) {
        decode_summary(all + (size_t)r * SUMMARY_BYTES, words, host);
        if (words[S_BAD] > 0.0) {
            failed = 1;
            printf("validation failed allreduce rank=%d host=%s bad=%.0f/%.0f iteration=%.0f expected=%.17g "
                   "got=%.17g\n", r, host, words[S_BAD], words[S_CHECKED], words[S_FIRST_BAD], words[S_EXPECTED],
                   words[S_GOT]);
        }
        if (words[S_CHECKSUM] != reference) {
            failed = 1;
            printf("validation failed work rank=%d host=%s checksum=%.0f expected=%.0f\n", r, host,
                   words[S_CHECKSUM], reference);
        }
    }
    if (!failed)
        printf("validation ok\n");
    fflush(stdout);
    free(last);
    free(extra);
}

/* Every rank: the whole run after the transport is up.  `host` is this
 * rank's host name; `kernel` the banner's name.  Returns the exit status. */
static int sync_run(struct sync_config *c, const char *host, const char *kernel)
{
    if (c->names != NULL && c->name_count != sync_ranks)
        transport_abort(2, "-N names %d nodes for %d ranks", c->name_count, sync_ranks);
    const long long granularity = timer_granularity_ns();

    /* The same work everywhere: the fastest rank's steps for the quantum. */
    double rate = calibrate(), fastest = rate, slowest = -rate;
    transport_allreduce(&fastest, 1, REDUCE_MAX);
    transport_allreduce(&slowest, 1, REDUCE_MAX);
    slowest = -slowest;
    uint64_t steps = (uint64_t)(fastest * (double)c->quantum_us + 0.5);
    if (steps < 1)
        steps = 1;

    /* Warm-up; with -s its pace (the slowest rank's) sets the iterations. */
    double compute, wait, result;
    uint64_t work;
    double started = now_seconds();
    for (long i = 0; i < c->warmup; i++)
        iterate(c, steps, -1 - i, &compute, &wait, &result, &work);
    if (c->iterations == 0) {
        double pace = (now_seconds() - started) / (double)c->warmup;
        transport_allreduce(&pace, 1, REDUCE_MAX);
        double wanted = pace > 0.0 ? c->seconds / pace : (double)MAX_ITERATIONS;
        c->iterations = wanted < (double)MIN_SECONDS_ITERATIONS ? MIN_SECONDS_ITERATIONS
                        : wanted > (double)MAX_ITERATIONS      ? MAX_ITERATIONS
                                                               : (long)(wanted + 0.5);
    }

    unsigned char mine_host[HOST_BYTES] = {0};
    strncpy((char *)mine_host, host, HOST_BYTES - 1);
    unsigned char *hosts = sync_rank == 0 ? allocate_or_abort((size_t)sync_ranks * HOST_BYTES, "the host table")
                                          : NULL;
    transport_gather(mine_host, HOST_BYTES, hosts);
    if (sync_rank == 0)
        print_header(c, (const char *)hosts, steps, fastest, slowest, granularity, kernel);

    const long n = c->iterations;
    struct sync_arrays a = {
        allocate_or_abort((size_t)n * sizeof(double), "the compute times"),
        allocate_or_abort((size_t)n * sizeof(double), "the waits"),
        allocate_or_abort((size_t)n * sizeof(double), "the reduced values"),
        allocate_or_abort((size_t)n * sizeof(uint32_t), "the work results"),
    };
    /* Touched once, so that no first-touch page fault lands in the loop. */
    memset(a.compute, 0, (size_t)n * sizeof(double));
    memset(a.wait, 0, (size_t)n * sizeof(double));
    memset(a.result, 0, (size_t)n * sizeof(double));
    memset(a.work, 0, (size_t)n * sizeof(uint32_t));

    uint64_t checksum = 0;
    double loop_started = now_seconds();
    for (long i = 0; i < n; i++) {
        iterate(c, steps, i, &a.compute[i], &a.wait[i], &a.result[i], &work);
        a.work[i] = (uint32_t)(work >> 44);
        checksum += work >> 44;
    }
    double loop_seconds = now_seconds() - loop_started;
    if (c->operation == OP_BARRIER && c->corrupt_rank == sync_rank)
        checksum += 1; /* a rank that did other work: the barrier's check */

    /* The laggard of every iteration, reduced to rank 0. */
    double *triples = allocate_or_abort((size_t)n * 3 * sizeof(double), "the laggard table");
    for (long i = 0; i < n; i++) {
        triples[3 * i] = a.wait[i];
        triples[3 * i + 1] = (double)sync_rank;
        triples[3 * i + 2] = HUGE_VAL;
    }
    transport_reduce_laggards(triples, n);

    double summary[SUMMARY_WORDS];
    double total = 0.0;
    for (long i = 0; i < n; i++)
        total += a.compute[i];
    summary[S_COMPUTE_TOTAL] = 1.0e6 * total;
    total = 0.0;
    for (long i = 0; i < n; i++)
        total += a.wait[i];
    summary[S_WAIT_TOTAL] = 1.0e6 * total;
    check_results(c, &a, summary);
    summary[S_CHECKSUM] = (double)checksum;
    double largest = 0.0;
    for (long i = 0; i < n; i++)
        largest = a.compute[i] > largest ? a.compute[i] : largest;
    summary[S_COMPUTE_MAX] = 1.0e6 * largest;
    summary[S_COMPUTE_MEDIAN] = 1.0e6 * median_of(a.compute, n);
    summary[S_WAIT_MEDIAN] = 1.0e6 * median_of(a.wait, n);

    unsigned char record[SUMMARY_BYTES];
    encode_summary(summary, host, record);
    unsigned char *all = sync_rank == 0 ? allocate_or_abort((size_t)sync_ranks * SUMMARY_BYTES, "the rank table")
                                        : NULL;
    transport_gather(record, SUMMARY_BYTES, all);
    if (sync_rank == 0)
        report(c, loop_seconds, all, triples);
    free(all);
    free(hosts);
    free(triples);
    free(a.compute);
    free(a.wait);
    free(a.result);
    free(a.work);
    return 0;
}

/* ODDNODE_CORRUPT_RANK as a rank below the ranks' count, -1 when unset, -2 when bad. */
static int corrupt_rank_from_environment(void)
{
    const char *text = getenv("ODDNODE_CORRUPT_RANK");
    if (text == NULL || *text == '\0')
        return -1;
    long long value = parse_count(text, 0, sync_ranks - 1);
    return value < 0 ? -2 : (int)value;
}

#endif
