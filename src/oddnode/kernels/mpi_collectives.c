/*
 * oddnode mpi_collectives kernel v1: MPI exchange and collective times over
 * a set of nodes, one rank per node.
 *
 *   mpirun -np K [--host A,B,...] mpi_collectives [-b BENCHMARKS] [-s SIZES] [-T SECONDS_PER_SIZE]
 *
 * K >= 2.  Benchmarks (a comma list, default all, run in this order):
 *
 *   sendrecv   IMB's Sendrecv: a periodic chain, every rank calls MPI_Sendrecv
 *              sending SIZE bytes to (rank+1) % K and receiving SIZE bytes from
 *              (rank-1+K) % K, separate send and receive buffers;
 *   allreduce  MPI_Allreduce of SIZE bytes of doubles with MPI_SUM; SIZE is
 *              rounded down to whole doubles, and a rounded size already run
 *              is run once ("# allreduce_sizes" lists what ran);
 *   alltoall   MPI_Alltoall with SIZE bytes for every destination (K·SIZE
 *              bytes sent and received by each rank, itself included);
 *   bcast      MPI_Bcast of SIZE bytes, the root moving to the next rank at
 *              every call (as IMB's Bcast, so that back-to-back calls
 *              cannot pipeline behind one root);
 *   barrier    MPI_Barrier: a time only, no sizes.
 *
 * Timing, in the batches of the ping-pong kernels (oddnode_batches.h), but
 * of at least 10 ms: per benchmark and size, warm-up batches of one
 * iteration, then timed batches until the size has run SECONDS_PER_SIZE, its
 * warm-up included (an upper bound; one batch at the least, a size with
 * fewer than MIN_BATCHES said cut in a warning line).  Rank 0 decides every
 * batch's iterations (so that all ranks make the same calls) and broadcasts
 * them outside the timer; one untimed call and a barrier precede each
 * batch, whose calls follow each other back to back (as IMB times
 * Sendrecv; IMB puts a barrier between collective calls and times each
 * alone).  Every rank times its own batch and divides by the iterations;
 * the batch's time is the maximum over the ranks (IMB's t_max, an
 * MPI_Reduce with MPI_MAX): a batch is what one IMB loop is.  The minimum
 * and the median over the batches are reported.
 * Buffers are reused by every iteration of a size, as IMB does by default
 * (no -off_cache): messages come from the cache.
 *
 * Check: before each batch every rank fills what it sends with a pattern of
 * its rank, the destination, the size and the batch; after it, every rank
 * compares what the batch's last iteration left in its receive buffer with
 * what it must be: the left neighbour's message (sendrecv), the exact sum of
 * all ranks' integer-valued doubles (allreduce: rank r sends a_k + r·b_k, so
 * that the sum K·a_k + b_k·K(K-1)/2 is known without the others' data and
 * exact in doubles), each rank's block for this rank (alltoall), and the
 * message of the batch's first root (bcast: every rank fills its buffer
 * with its own pattern, the first call spreads the first root's, and a rank
 * that missed a call would spread its own when its turn as root came).  Rank 0
 * gathers every rank's account at the end; each failure names the rank that
 * saw it, its host (MPI_Get_processor_name) and, where one rank's data is at
 * fault, the sender and its host.  ODDNODE_CORRUPT_RANK=R in the environment
 * makes rank R spoil what it sends in the first timed batch of every size
 * (a byte, an element's value; bcast: R is that batch's first root; a test
 * of the check itself).
 *
 * Output (rank 0's stdout): '#' header lines "# key: value" (with one
 * "# rank: R HOST" line per rank: the chain's order), then per benchmark and
 * size
 *   result <benchmark> <bytes> <iterations> <min_us> <median_us> <batches>
 * (barrier: bytes 0), then "validation ok" or one line per rank and
 * benchmark that saw bad data:
 *   validation failed <benchmark> rank=R host=H [from_rank=J from_host=G] bad=N/M bytes=S batch=B
 *       offset=K|element=K expected=X got=Y
 * (bad: batches with bad data of those checked on that rank; offset: the
 * first bad byte and its values; element: allreduce's first wrong sum, the
 * sum expected and the one received, as numbers).
 *
 * Rounds of sets in one launch (-P PLAN): the ranks of every node of a
 * check start once, and each round splits them into its sets, each timed as
 * above on a communicator of its own, all of a round's sets at once, the
 * next round after the last set's end.  PLAN lists the rounds separated by
 * '/', a round's sets by ';', a set's ranks (of MPI_COMM_WORLD) by ',',
 * in the set's order: "0,1;2,3/0,2;1,3" is two rounds of two pairs; a rank in
 * no set of a round sits it out.  Rank 0 prints, round after round, each
 * set's output as a run of that set alone prints it, after a line
 *   == round R set S
 * (both from 1, in the plan's order); ODDNODE_CORRUPT_RANK then names a
 * rank of every set.  A launch's start (mpirun reaching every node, the
 * library's wire-up) is paid once instead of once per set and round.
 *
 * Exit status: 0 done (even if the check failed: the output says so), 2 bad
 * arguments, 3 fewer than two MPI ranks.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oddnode_kernel.h"

/* Timed batches of at least 10 ms, not the ping-pong kernels' 1 ms.  Before
 * each batch every rank rewrites what it sends and has read what it
 * received, and the first calls after that run slower than a loop's: on 2
 * ranks over shared memory (Open MPI 4.1) the median batch of 1 ms, 3 calls
 * at 4 MiB, took 1.5-1.6 times IMB's time per call (Sendrecv; Allreduce up
 * to 2.7 times, also at 1 MiB); batches of 10 ms, about 20 calls, took 0.9
 * to 1.1 times (bench/mpi_kernels.py; see timed_calls for the rest). */
#ifndef ODDNODE_MIN_BATCH_SECONDS
#define ODDNODE_MIN_BATCH_SECONDS 1.0e-2
#endif
#include "oddnode_batches.h"

#define KERNEL_VERSION 1
#define EXIT_USAGE 2
#define EXIT_RANKS 3

#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define MAX_SIZES 64
#define MAX_SIZE (64L << 20)
#define TAG_SENDRECV 1
#define STOP (-1L)

enum benchmark { SENDRECV, ALLREDUCE, ALLTOALL, BCAST, BARRIER, BENCHMARKS };
static const char *const NAMES[BENCHMARKS] = {"sendrecv", "allreduce", "alltoall", "bcast", "barrier"};

/* What one rank saw of one benchmark's data: how many batches it checked and
 * how many were bad, and the first bad one.  Long longs, so that the table
 * gathers as one MPI type. */
enum { BAD, CHECKED, BYTES, BATCH, FROM_RANK, OFFSET, EXPECTED, GOT, FIELDS };

static int rank, ranks;
/* The set's communicator: MPI_COMM_WORLD, or one set of a plan's round;
 * rank and ranks are this rank's place in it and its size. */
static MPI_Comm comm;
/* Bcast's root: the batch's first call's, and the next call's. */
static int bcast_first_root, bcast_root;

static void usage(const char *program)
{
    if (rank == 0)
        fprintf(stderr,
                "usage: mpirun -np K %s [-b BENCHMARKS] [-s SIZES] [-T SECONDS_PER_SIZE] [-P PLAN]\n"
                "  -b BENCHMARKS  a comma list of sendrecv, allreduce, alltoall, bcast, barrier (default all)\n"
                "  -s SIZES       message sizes in bytes, a comma list (default 0 and 1 B to 4 MiB in powers "
                "of two)\n"
                "  -T SECONDS     time per message size (default 0.2)\n"
                "  -P PLAN        rounds of sets in this launch: rounds split by '/', sets by ';', ranks by ','\n"
                "  ODDNODE_CORRUPT_RANK=R spoils what rank R sends in the first timed batch of every size\n",
                program);
}

static int bad_arguments(const char *program, const char *what, const char *value)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s, got '%s'\n", program, what, value);
    usage(program);
    MPI_Finalize();
    return EXIT_USAGE;
}

/* -b's comma list into chosen[]; how many, or -1 when it is not one. */
static int parse_benchmarks(const char *text, int chosen[BENCHMARKS])
{
    for (int b = 0; b < BENCHMARKS; b++)
        chosen[b] = 0;
    int count = 0;
    const char *p = text;
    for (;;) {
        size_t length = strcspn(p, ",");
        int found = -1;
        for (int b = 0; b < BENCHMARKS; b++)
            if (strlen(NAMES[b]) == length && strncmp(p, NAMES[b], length) == 0)
                found = b;
        if (found < 0 || chosen[found])
            return -1;
        chosen[found] = 1;
        count++;
        if (p[length] == '\0')
            return count;
        p += length + 1;
    }
}

/* --- the data patterns ----------------------------------------------------------- */

/* The seed of what `from` sends `to` in one batch of one benchmark and size. */
static uint64_t pattern_seed(int benchmark, long from, long to, long size, long batch)
{
    uint64_t seed = mix64(((uint64_t)benchmark << 56) ^ ((uint64_t)size << 20) ^ (uint64_t)batch);
    return mix64(seed ^ mix64(((uint64_t)from << 32) ^ (uint64_t)to));
}

/* The pattern's word k: consecutive words look independent (mix64). */
static inline uint64_t pattern_word(uint64_t seed, long k)
{
    return mix64(seed + (uint64_t)k);
}

static void fill_bytes(unsigned char *buffer, long size, uint64_t seed)
{
    long words = size / 8;
    for (long k = 0; k < words; k++) {
        uint64_t word = pattern_word(seed, k);
        memcpy(buffer + 8 * k, &word, 8);
    }
    uint64_t last = pattern_word(seed, words);
    memcpy(buffer + 8 * words, &last, (size_t)(size - 8 * words));
}

/* The first byte of buffer that is not the pattern, or -1; its expected value in *expected. */
static long first_bad_byte(const unsigned char *buffer, long size, uint64_t seed, unsigned *expected)
{
    unsigned char want[8];
    for (long k = 0; 8 * k < size; k++) {
        uint64_t word = pattern_word(seed, k);
        memcpy(want, &word, 8);
        long n = size - 8 * k < 8 ? size - 8 * k : 8;
        if (memcmp(buffer + 8 * k, want, (size_t)n) != 0) {
            long i = 0;
            while (buffer[8 * k + i] == want[i])
                i++;
            *expected = want[i];
            return 8 * k + i;
        }
    }
    return -1;
}

/* Allreduce: rank r sends a_k + r·b_k, whole numbers below 2^20 + r·2^10,
 * so that the sum over K ranks, K·a_k + b_k·K(K-1)/2, is exact in doubles
 * (below 2^53) for any K up to millions and known to every rank alone. */
static inline double term_a(uint64_t seed, long k) { return (double)(pattern_word(seed, k) >> 44); }
static inline double term_b(uint64_t seed, long k) { return (double)((pattern_word(seed ^ 1, k) >> 54) + 1); }

/* A double carried in the long long table of what a rank saw (a wrong sum
 * may be anything, NaN included: no conversion to an integer). */
static long long double_bits(double value)
{
    long long bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static double bits_double(long long bits)
{
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* --- one batch ------------------------------------------------------------------- */

struct buffers {
    unsigned char *send, *receive;
};

static void record_bad(long long *seen, long size, long batch, long from, long offset, long long expected,
                       long long got)
{
    if (seen[BAD]++ > 0)
        return;
    seen[BYTES] = size;
    seen[BATCH] = batch;
    seen[FROM_RANK] = from;
    seen[OFFSET] = offset;
    seen[EXPECTED] = expected;
    seen[GOT] = got;
}

/* Fill what this rank sends in the batch (spoilt when `corrupt`). */
static void prepare(int benchmark, struct buffers *b, long size, long batch, int corrupt)
{
    if (benchmark == SENDRECV) {
        fill_bytes(b->send, size, pattern_seed(SENDRECV, rank, (rank + 1) % ranks, size, batch));
        if (corrupt && size > 0)
            b->send[size / 2] ^= 0x5a;
    } else if (benchmark == ALLREDUCE) {
        long count = size / (long)sizeof(double);
        uint64_t seed = pattern_seed(ALLREDUCE, 0, 0, size, batch);
        double *values = (double *)b->send;
        for (long k = 0; k < count; k++)
            values[k] = term_a(seed, k) + (double)rank * term_b(seed, k);
        if (corrupt && count > 0)
            values[count / 2] += 1.0;
    } else if (benchmark == ALLTOALL) {
        for (long to = 0; to < ranks; to++) {
            fill_bytes(b->send + to * size, size, pattern_seed(ALLTOALL, rank, to, size, batch));
            if (corrupt && size > 0 && to != rank)
                b->send[to * size + size / 2] ^= 0x5a;
        }
    } else if (benchmark == BCAST) {
        /* Broadcast in place: the buffer a root sends is the one the others receive into. */
        fill_bytes(b->receive, size, pattern_seed(BCAST, rank, 0, size, batch));
        if (corrupt && size > 0)
            b->receive[size / 2] ^= 0x5a;
    }
}

/* Compare what the batch left in the receive buffer with what it must be. */
static void check(int benchmark, const struct buffers *b, long size, long batch, long long *seen)
{
    unsigned expected = 0;
    if (benchmark == SENDRECV) {
        long left = (rank - 1 + ranks) % ranks;
        long offset = first_bad_byte(b->receive, size, pattern_seed(SENDRECV, left, rank, size, batch), &expected);
        if (offset >= 0)
            record_bad(seen, size, batch, left, offset, expected, b->receive[offset]);
    } else if (benchmark == ALLREDUCE) {
        long count = size / (long)sizeof(double);
        uint64_t seed = pattern_seed(ALLREDUCE, 0, 0, size, batch);
        const double *sums = (const double *)b->receive, k_ranks = (double)ranks;
        for (long k = 0; k < count; k++) {
            double want = k_ranks * term_a(seed, k) + term_b(seed, k) * (k_ranks * (k_ranks - 1.0) / 2.0);
            if (sums[k] != want) {
                record_bad(seen, size, batch, -1, k, double_bits(want), double_bits(sums[k]));
                break;
            }
        }
    } else if (benchmark == BCAST) {
        long offset = first_bad_byte(b->receive, size, pattern_seed(BCAST, bcast_first_root, 0, size, batch),
                                     &expected);
        if (offset >= 0)
            record_bad(seen, size, batch, bcast_first_root, offset, expected, b->receive[offset]);
    } else if (benchmark == ALLTOALL) {
        for (long from = 0; from < ranks; from++) {
            const unsigned char *block = b->receive + from * size;
            long offset = first_bad_byte(block, size, pattern_seed(ALLTOALL, from, rank, size, batch), &expected);
            if (offset >= 0) {
                record_bad(seen, size, batch, from, offset, expected, block[offset]);
                break;
            }
        }
    } else {
        return;  /* a barrier carries no data */
    }
    seen[CHECKED]++;
}

/* Every rank: `iterations` calls of the benchmark, back to back. */
static void calls(int benchmark, const struct buffers *b, long size, long iterations)
{
    const int count = (int)size;
    const int right = (rank + 1) % ranks, left = (rank - 1 + ranks) % ranks;
    switch (benchmark) {
    case SENDRECV:
        for (long i = 0; i < iterations; i++)
            MPI_Sendrecv(b->send, count, MPI_BYTE, right, TAG_SENDRECV, b->receive, count, MPI_BYTE, left,
                         TAG_SENDRECV, comm, MPI_STATUS_IGNORE);
        break;
    case ALLREDUCE:
        for (long i = 0; i < iterations; i++)
            MPI_Allreduce(b->send, b->receive, count / (int)sizeof(double), MPI_DOUBLE, MPI_SUM, comm);
        break;
    case ALLTOALL:
        for (long i = 0; i < iterations; i++)
            MPI_Alltoall(b->send, count, MPI_BYTE, b->receive, count, MPI_BYTE, comm);
        break;
    case BCAST:
        for (long i = 0; i < iterations; i++) {
            MPI_Bcast(b->receive, count, MPI_BYTE, bcast_root, comm);
            bcast_root = (bcast_root + 1) % ranks;
        }
        break;
    default:
        for (long i = 0; i < iterations; i++)
            MPI_Barrier(comm);
    }
}

/* Every rank: one untimed call, then `iterations` timed; this rank's
 * seconds per call.  The untimed call takes the cost of the batch's
 * preparation (messages just rewritten, the last batch's received data just
 * read) that its first call would pay, as IMB's timed loop follows its
 * warm-up calls: at 4 MiB over shared memory a 25-call batch without it ran
 * 7-20% slower than the same calls after a warm-up, with it 0-12%. */
static double timed_calls(int benchmark, const struct buffers *b, long size, long iterations)
{
    calls(benchmark, b, size, 1);
    MPI_Barrier(comm);
    double started = now_seconds();
    calls(benchmark, b, size, iterations);
    return (now_seconds() - started) / (double)iterations;
}

/* What rank 0 tells every rank before a batch (outside the timer). */
enum { ITERATIONS, BATCH_NUMBER, SPOIL, ORDERS };

/* Every rank: one batch as rank 0 orders it; on rank 0 the slowest rank's
 * seconds per call (t_max), elsewhere 0.  Returns 0 when rank 0 said stop. */
static int batch(int benchmark, struct buffers *b, long size, int corrupt_rank, long long *seen,
                 long orders[ORDERS], double *slowest)
{
    MPI_Bcast(orders, ORDERS, MPI_LONG, 0, comm);
    if (orders[ITERATIONS] == STOP)
        return 0;
    /* Every rank knows the batch's first root: the spoiling rank when it
     * spoils (its message must travel), else the batch number's turn. */
    bcast_first_root = orders[SPOIL] && corrupt_rank >= 0 && corrupt_rank < ranks ? corrupt_rank
                                                                                  : (int)(orders[BATCH_NUMBER] % ranks);
    bcast_root = bcast_first_root;
    prepare(benchmark, b, size, orders[BATCH_NUMBER], orders[SPOIL] && rank == corrupt_rank);
    double mine = timed_calls(benchmark, b, size, orders[ITERATIONS]);
    check(benchmark, b, size, orders[BATCH_NUMBER], seen);
    *slowest = 0.0;
    MPI_Reduce(&mine, slowest, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    return 1;
}

/* Every rank: one benchmark at one size; rank 0 orders the batches, keeps
 * their times and prints the result line. */
static void run_size(int benchmark, struct buffers *b, long size, double seconds_per_size, double target,
                     int corrupt_rank, long long *seen, FILE *out)
{
    long orders[ORDERS] = {0};
    double slowest;
    if (rank != 0) {
        while (batch(benchmark, b, size, corrupt_rank, seen, orders, &slowest))
            ;
        return;
    }
    long number = 0;
    double fastest = 1.0e30;
    const double started = now_seconds();
    for (int w = 0; warmup_goes_on(w, started, seconds_per_size); w++) {
        orders[ITERATIONS] = 1;
        orders[BATCH_NUMBER] = number++;
        orders[SPOIL] = 0;
        batch(benchmark, b, size, corrupt_rank, seen, orders, &slowest);
        if (slowest < fastest)
            fastest = slowest;
    }
    long iterations = first_batch_rounds(target, fastest, MAX_BATCH_ROUNDS);

    size_t capacity = 1024, samples = 0;
    double *sample = malloc(capacity * sizeof *sample);
    long total = 0;
    while (sample != NULL && batches_go_on(samples, started, seconds_per_size)) {
        orders[ITERATIONS] = iterations;
        orders[BATCH_NUMBER] = number++;
        orders[SPOIL] = samples == 0;
        batch(benchmark, b, size, corrupt_rank, seen, orders, &slowest);
        if (samples == capacity) {
            capacity *= 2;
            double *grown = realloc(sample, capacity * sizeof *sample);
            if (grown == NULL)
                free(sample);
            sample = grown;
            if (sample == NULL)
                break;
        }
        sample[samples++] = slowest;
        total += iterations;
        /* A short batch is kept (dropping fast ones would bias the minimum
         * up); the next ones get more iterations. */
        if (slowest * (double)iterations < target && iterations < MAX_BATCH_ROUNDS)
            iterations = iterations * 2 < MAX_BATCH_ROUNDS ? iterations * 2 : MAX_BATCH_ROUNDS;
    }
    orders[ITERATIONS] = STOP;
    MPI_Bcast(orders, ORDERS, MPI_LONG, 0, comm);
    if (sample == NULL) {
        fprintf(stderr, "mpi_collectives: cannot allocate the sample table\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    qsort(sample, samples, sizeof *sample, compare_doubles);
    char what[32];
    snprintf(what, sizeof what, "%s ", NAMES[benchmark]);
    report_cut(out, what, size, samples, seconds_per_size);
    fprintf(out, "result %s %ld %ld %.3f %.3f %zu\n", NAMES[benchmark], size, total, 1.0e6 * sample[0],
            1.0e6 * sorted_median(sample, samples), samples);
    fflush(out);
    free(sample);
}

/* Buffers for the largest of `sizes`: K blocks each for alltoall. */
static void allocate(struct buffers *b, long largest, long blocks)
{
    size_t bytes = (size_t)(largest > 0 ? largest : 1) * (size_t)blocks;
    b->send = malloc(bytes);
    b->receive = malloc(bytes);
    if (b->send == NULL || b->receive == NULL) {
        fprintf(stderr, "mpi_collectives: rank %d cannot allocate two buffers of %zu bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Touched once, so that no first-touch page fault lands in a timed call. */
    memset(b->send, 0, bytes);
    memset(b->receive, 0, bytes);
}

static void release(struct buffers *b)
{
    free(b->send);
    free(b->receive);
}

static void print_list(FILE *out, const char *key, const long long *values, int count)
{
    fprintf(out, "# %s:", key);
    for (int i = 0; i < count; i++)
        fprintf(out, "%s%lld", i ? "," : " ", values[i]);
    fprintf(out, "\n");
}

/* Rank 0: one line per rank and benchmark that saw bad data; 1 if any did. */
static int report_failures(FILE *out, const long long *all, const char *hosts, const int chosen[BENCHMARKS])
{
    int failed = 0;
    for (int b = 0; b < BENCHMARKS; b++) {
        if (!chosen[b])
            continue;
        for (int r = 0; r < ranks; r++) {
            const long long *seen = all + ((size_t)r * BENCHMARKS + (size_t)b) * FIELDS;
            if (seen[BAD] == 0)
                continue;
            failed = 1;
            fprintf(out, "validation failed %s rank=%d host=%s", NAMES[b], r,
                    hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
            if (seen[FROM_RANK] >= 0)
                fprintf(out, " from_rank=%lld from_host=%s", seen[FROM_RANK],
                        hosts + (size_t)seen[FROM_RANK] * MPI_MAX_PROCESSOR_NAME);
            fprintf(out, " bad=%lld/%lld bytes=%lld batch=%lld", seen[BAD], seen[CHECKED], seen[BYTES], seen[BATCH]);
            if (b == ALLREDUCE)
                fprintf(out, " element=%lld expected=%.17g got=%.17g\n", seen[OFFSET],
                        bits_double(seen[EXPECTED]), bits_double(seen[GOT]));
            else
                fprintf(out, " offset=%lld expected=%lld got=%lld\n", seen[OFFSET], seen[EXPECTED], seen[GOT]);
        }
    }
    return failed;
}

/* What every set of a launch runs: the arguments, read once. */
struct settings {
    int chosen[BENCHMARKS];
    long long sizes[MAX_SIZES], reduced[MAX_SIZES]; /* reduced: Allreduce's */
    int count, reduced_count;
    long largest;
    double seconds_per_size, target;
    long long granularity;
    int corrupt_rank;
};

/* Every rank of `comm`: the benchmarks on this set; `out` (set rank 0's
 * alone, NULL elsewhere) gets what a run of the set prints. */
static void run_set(const struct settings *s, FILE *out)
{
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int length;
    MPI_Get_processor_name(host, &length);
    char *hosts = rank == 0 ? calloc((size_t)ranks, MPI_MAX_PROCESSOR_NAME) : NULL;
    if (rank == 0 && hosts == NULL) {
        fprintf(stderr, "mpi_collectives: cannot allocate the host table\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, comm);

    if (rank == 0) {
        char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        MPI_Get_library_version(library, &length);
        library[strcspn(library, "\n,")] = '\0';
        fprintf(out, "# oddnode mpi_collectives kernel v%d\n", KERNEL_VERSION);
        fprintf(out, "# compiler: %s\n", compiler_name());
        fprintf(out, "# cflags: %s\n", ODDNODE_CFLAGS);
        fprintf(out, "# mpi_library: %s\n", library);
        fprintf(out, "# processes: %d\n", ranks);
        for (int r = 0; r < ranks; r++)
            fprintf(out, "# rank: %d %s\n", r, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        fprintf(out, "# benchmarks:");
        for (int b = 0, first = 1; b < BENCHMARKS; b++)
            if (s->chosen[b]) {
                fprintf(out, "%s%s", first ? " " : ",", NAMES[b]);
                first = 0;
            }
        fprintf(out, "\n");
        print_list(out, "sizes", s->sizes, s->count);
        print_list(out, "allreduce_sizes", s->reduced, s->reduced_count);
        fprintf(out, "# allreduce_datatype: MPI_DOUBLE, MPI_SUM; sizes rounded down to whole 8-byte elements\n");
        fprintf(out, "# timer: clock_gettime(CLOCK_MONOTONIC)\n");
        fprintf(out, "# timer_granularity_ns: %lld\n", s->granularity);
        fprintf(out, "# seconds_per_size: %g\n", s->seconds_per_size);
        fprintf(out, "# min_batches: %d\n", MIN_BATCHES);
        fprintf(out, "# min_batch_ns: %.0f\n", 1.0e9 * s->target);
        fprintf(out, "# time: per call = a rank's batch time / iterations; the maximum over ranks per batch (t_max); "
                     "min and median over batches\n");
        fprintf(out, "# buffers: reused by every call of a size (cache-warm, as IMB without -off_cache)\n");
        fprintf(out, "# check: the last call's received data of every batch, on every rank\n");
        if (s->corrupt_rank >= 0)
            fprintf(out, "# corrupt_rank: %d\n", s->corrupt_rank);
        fflush(out);
    }

    long long seen[BENCHMARKS][FIELDS];
    memset(seen, 0, sizeof seen);
    struct buffers b;
    const int sized[] = {SENDRECV, ALLREDUCE, ALLTOALL, BCAST}; /* the barrier has no sizes */
    for (size_t i = 0; i < sizeof sized / sizeof sized[0]; i++) {
        const int benchmark = sized[i];
        if (!s->chosen[benchmark])
            continue;
        const long long *sizes = benchmark == ALLREDUCE ? s->reduced : s->sizes;
        const int count = benchmark == ALLREDUCE ? s->reduced_count : s->count;
        allocate(&b, s->largest, benchmark == ALLTOALL ? ranks : 1);
        for (int k = 0; k < count; k++)
            run_size(benchmark, &b, sizes[k], s->seconds_per_size, s->target, s->corrupt_rank, seen[benchmark], out);
        release(&b);
    }
    if (s->chosen[BARRIER])
        run_size(BARRIER, NULL, 0, s->seconds_per_size, s->target, s->corrupt_rank, seen[BARRIER], out);

    long long *all = rank == 0 ? malloc((size_t)ranks * sizeof seen) : NULL;
    if (rank == 0 && all == NULL) {
        fprintf(stderr, "mpi_collectives: cannot allocate the validation table\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(seen, BENCHMARKS * FIELDS, MPI_LONG_LONG, all, BENCHMARKS * FIELDS, MPI_LONG_LONG, 0, comm);
    if (rank == 0) {
        if (!report_failures(out, all, hosts, s->chosen))
            fprintf(out, "validation ok\n");
        fflush(out);
        free(all);
        free(hosts);
    }
}

/* A plan's rounds: per round its number of sets and each set's first rank
 * (world ranks, rounds x world), and this rank's set and place in each. */
struct plan {
    int rounds;
    int *sets, *leaders, *color, *key;
};

/* -P's text for `world` ranks, from rank `me`'s side; 0, or -1 when it is
 * not a plan (a rank out of range or twice in a round, a set of fewer
 * than two, an empty round). */
static int parse_plan(const char *text, int world, int me, struct plan *plan)
{
    int rounds = 1;
    for (const char *c = text; *c; c++)
        rounds += *c == '/';
    plan->rounds = rounds;
    plan->sets = calloc((size_t)rounds, sizeof *plan->sets);
    plan->leaders = calloc((size_t)rounds * (size_t)world, sizeof *plan->leaders);
    plan->color = malloc((size_t)rounds * sizeof *plan->color);
    plan->key = calloc((size_t)rounds, sizeof *plan->key);
    char *in_round = malloc((size_t)world);
    if (!plan->sets || !plan->leaders || !plan->color || !plan->key || !in_round) {
        fprintf(stderr, "mpi_collectives: cannot allocate the plan of %d rounds\n", rounds);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *c = text;
    for (int r = 0; r < rounds; r++) {
        memset(in_round, 0, (size_t)world);
        plan->color[r] = MPI_UNDEFINED;
        for (;;) { /* one set */
            int members = 0;
            for (;;) { /* one rank */
                if (*c < '0' || *c > '9')
                    return -1;
                char *end;
                long value = strtol(c, &end, 10);
                if (value >= world || in_round[value])
                    return -1;
                in_round[value] = 1;
                if (members == 0)
                    plan->leaders[(size_t)r * (size_t)world + (size_t)plan->sets[r]] = (int)value;
                if (value == me) {
                    plan->color[r] = plan->sets[r];
                    plan->key[r] = members;
                }
                members++;
                c = end;
                if (*c != ',')
                    break;
                c++;
            }
            if (members < 2)
                return -1;
            plan->sets[r]++;
            if (*c != ';')
                break;
            c++;
        }
        if (*c != (r + 1 < rounds ? '/' : '\0'))
            return -1;
        c++;
    }
    free(in_round);
    return 0;
}

/* Every rank: the plan's rounds, each split into its sets; world rank 0
 * prints every set's output in the plan's order, a round at a time. */
static void run_plan(const struct settings *s, const struct plan *plan, int world, int me)
{
    int *lengths = me == 0 ? malloc((size_t)world * sizeof *lengths) : NULL;
    int *offsets = me == 0 ? malloc((size_t)world * sizeof *offsets) : NULL;
    if (me == 0 && (lengths == NULL || offsets == NULL)) {
        fprintf(stderr, "mpi_collectives: cannot allocate the output table\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int r = 0; r < plan->rounds; r++) {
        MPI_Comm_split(MPI_COMM_WORLD, plan->color[r], plan->key[r], &comm);
        /* The round's sets start together, as separate jobs started at one
         * moment would. */
        MPI_Barrier(MPI_COMM_WORLD);
        char *text = NULL;
        size_t size = 0;
        if (comm != MPI_COMM_NULL) {
            MPI_Comm_rank(comm, &rank);
            MPI_Comm_size(comm, &ranks);
            FILE *out = rank == 0 ? open_memstream(&text, &size) : NULL;
            if (rank == 0 && out == NULL) {
                fprintf(stderr, "mpi_collectives: cannot open a buffer for a set's output\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            run_set(s, out);
            if (out != NULL)
                fclose(out);
            MPI_Comm_free(&comm);
        }
        int mine = (int)size;
        MPI_Gather(&mine, 1, MPI_INT, lengths, 1, MPI_INT, 0, MPI_COMM_WORLD);
        char *all = NULL;
        if (me == 0) {
            size_t total = 0;
            for (int w = 0; w < world; w++) {
                offsets[w] = (int)total;
                total += (size_t)lengths[w];
            }
            all = malloc(total > 0 ? total : 1);
            if (all == NULL) {
                fprintf(stderr, "mpi_collectives: cannot allocate a round's output of %zu bytes\n", total);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        MPI_Gatherv(text, mine, MPI_CHAR, all, lengths, offsets, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (me == 0) {
            for (int set = 0; set < plan->sets[r]; set++) {
                int leader = plan->leaders[(size_t)r * (size_t)world + (size_t)set];
                printf("== round %d set %d\n", r + 1, set + 1);
                fwrite(all + offsets[leader], 1, (size_t)lengths[leader], stdout);
            }
            fflush(stdout);
        }
        free(all);
        free(text);
    }
    free(lengths);
    free(offsets);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    comm = MPI_COMM_WORLD;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    const int world = ranks, me = rank;
    const char *program = argv[0];

    struct settings s = {.chosen = {1, 1, 1, 1, 1}, .seconds_per_size = 0.2, .corrupt_rank = -1};
    s.sizes[s.count++] = 0;
    for (long long size = 1; size <= (4LL << 20); size *= 2)
        s.sizes[s.count++] = size;
    const char *plan_text = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
            if (parse_benchmarks(argv[++i], s.chosen) < 0)
                return bad_arguments(program,
                                     "-b wants a comma list of distinct benchmarks: sendrecv, allreduce, alltoall, "
                                     "bcast, barrier",
                                     argv[i]);
        } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            s.count = parse_count_list(argv[++i], MAX_SIZE, s.sizes, MAX_SIZES);
            if (s.count < 0)
                return bad_arguments(program, "-s wants a comma list of distinct sizes in bytes, 0-67108864 each",
                                     argv[i]);
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            s.seconds_per_size = parse_seconds(argv[++i], 1.0e-6, 3600.0);
            if (s.seconds_per_size < 0.0)
                return bad_arguments(program, "-T wants seconds per size, > 0 and <= 3600", argv[i]);
        } else if (strcmp(argv[i], "-P") == 0 && i + 1 < argc) {
            plan_text = argv[++i];
        } else {
            return bad_arguments(program, "unknown option or missing value", argv[i]);
        }
    }
    if (ranks < 2) {
        if (rank == 0)
            fprintf(stderr, "%s: run as two or more MPI ranks (mpirun -np K, K >= 2), not %d\n", program, ranks);
        MPI_Finalize();
        return EXIT_RANKS;
    }
    struct plan plan = {0};
    if (plan_text != NULL && parse_plan(plan_text, world, me, &plan) < 0)
        return bad_arguments(program,
                             "-P wants rounds split by '/' of sets split by ';' of two or more distinct ranks "
                             "split by ',', each below the ranks' count",
                             plan_text);
    const char *corrupt_text = getenv("ODDNODE_CORRUPT_RANK");
    if (corrupt_text != NULL && *corrupt_text != '\0') {
        long long value = parse_count(corrupt_text, 0, ranks - 1);
        if (value < 0)
            return bad_arguments(program, "ODDNODE_CORRUPT_RANK wants a rank number below the ranks' count",
                                 corrupt_text);
        s.corrupt_rank = (int)value;
    }

    /* Allreduce's sizes: whole doubles, each rounded size once. */
    for (int i = 0; i < s.count; i++) {
        long long whole = s.sizes[i] - s.sizes[i] % (long long)sizeof(double);
        int seen_before = 0;
        for (int j = 0; j < s.reduced_count; j++)
            seen_before |= s.reduced[j] == whole;
        if (!seen_before)
            s.reduced[s.reduced_count++] = whole;
    }
    s.largest = 1;
    for (int i = 0; i < s.count; i++)
        if (s.sizes[i] > s.largest)
            s.largest = s.sizes[i];
    s.granularity = timer_granularity_ns();
    s.target = min_batch_seconds(s.granularity);

    if (plan_text != NULL)
        run_plan(&s, &plan, world, me);
    else
        run_set(&s, rank == 0 ? stdout : NULL);
    MPI_Finalize();
    return 0;
}
