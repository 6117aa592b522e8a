/*
 * oddnode mpi_demo_app kernel v1: a small bulk-synchronous MPI application
 * whose every MPI call is known in advance, to profile and to model.
 *
 *   mpirun -np K mpi_demo_app [-n ITERATIONS] [-w WORK_UNITS] [-h HALO_BYTES]
 *                             [-a ALLTOALL_EVERY] [-A ALLTOALL_BYTES] [-i IMBALANCE]
 *
 * K >= 2.  Every iteration i = 1..N of every rank:
 *
 *   1. compute: work_units(r) units of floating-point work (a unit is
 *      UNIT_STEPS steps of CHAINS independent dependent multiply-add chains:
 *      a fixed amount of work, never a wall time), where
 *          work_units(r) = W + floor(W * IMBALANCE * r / (K - 1) + 0.5)
 *      so rank 0 does W units, the last rank (1 + IMBALANCE) * W, the ranks
 *      between them in proportion (-i 3: the last rank does 4 times rank 0's);
 *   2. halo: two MPI_Sendrecv of HALO_BYTES with the periodic 1-D ring's
 *      neighbours: send right (r+1) and receive from the left (r-1), then
 *      send left and receive from the right (distinct tags, so that two ranks,
 *      each the other's left and right, are no exception);
 *   3. when ALLTOALL_EVERY > 0 and i % ALLTOALL_EVERY == 0: one MPI_Alltoall
 *      of ALLTOALL_BYTES per pair;
 * then one MPI_Allreduce (MPI_SUM of 64-bit words) of every rank's checksum.
 *
 * MPI calls made by every rank (the "calls" lines, counted as they are made;
 * N iterations, a = ALLTOALL_EVERY):
 *   MPI_Init 1, MPI_Comm_rank 1, MPI_Comm_size 1, MPI_Get_processor_name 1,
 *   MPI_Get_library_version 1, MPI_Barrier 1 (before the loop),
 *   MPI_Sendrecv 2 N, MPI_Alltoall floor(N / a) (0 when a = 0),
 *   MPI_Allreduce 1, MPI_Gather 3 (hosts, times, counts and checks),
 *   MPI_Finalize 1 (made right after the report; counted in it).
 * The options are checked before any of them but Init, Comm_rank, Comm_size
 * and Finalize; a run refused for its options makes only those four.
 *
 * Check: every halo carries a pattern of (sender, direction, iteration) and
 * every alltoall block one of (sender, receiver, iteration), each compared on
 * receipt; each rank's checksum is the sum (mod 2^64) of a hash of every
 * iteration's compute result, and rank 0 compares the allreduced sum with
 * the sum of the checksums it gathers.  ODDNODE_CORRUPT_RANK=R makes rank R
 * spoil one byte of its first rightward halo and of its first alltoall's
 * blocks (a test of the check itself).
 *
 * Output (rank 0's stdout): '#' header lines (one "# rank: R HOST" per rank),
 * then per rank
 *   rank R wall_s W compute_s C comm_s M other_s O work_units U
 * (wall: the loop and the final allreduce, from just after the barrier;
 * compute: step 1; comm: steps 2 and 3 and the allreduce, waits included;
 * other: filling and checking the patterns; W = C + M + O but for the clock
 * reads), then per rank and call "calls R MPI_NAME COUNT", then
 * "checksum 0xHEX", then "validation ok" or one line per fault:
 *   validation failed halo|alltoall rank=R from_rank=J bad=B/M iteration=I offset=K
 *   validation failed checksum expected=0xHEX got=0xHEX
 * (bad: messages with bad data of those rank R checked; iteration and
 * offset: the first bad one and its first bad byte).
 *
 * Exit status: 0 done (even if the check failed: the output says so),
 * 2 bad arguments, 3 fewer than two MPI ranks.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oddnode_kernel.h"

#define KERNEL_VERSION 1
#define EXIT_USAGE 2
#define EXIT_RANKS 3

#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

/* A work unit: UNIT_STEPS steps of CHAINS independent chains x = x*c + d.
 * Each step of a chain waits for the one before it (about 4 cycles for a
 * multiply-add), and CHAINS of them keep a core's floating-point units
 * busy without letting the compiler shorten the loop (no -ffast-math:
 * no reassociation): about 1.1 us a unit on a 2-core AMD EPYC guest. */
#define UNIT_STEPS 1024
#define CHAINS 4

#define MAX_ITERATIONS 100000000LL
#define MAX_WORK_UNITS 1000000000LL
#define MAX_HALO_BYTES (64LL << 20)
#define MAX_ALLTOALL_BYTES (16LL << 20)
#define MAX_IMBALANCE 1000.0

#define TAG_RIGHTWARD 1
#define TAG_LEFTWARD 2
enum { RIGHTWARD, LEFTWARD };

/* The MPI calls counted, in the order printed. */
enum call {
    C_INIT, C_COMM_RANK, C_COMM_SIZE, C_PROCESSOR_NAME, C_LIBRARY_VERSION, C_BARRIER,
    C_SENDRECV, C_ALLTOALL, C_ALLREDUCE, C_GATHER, C_FINALIZE, CALLS
};
static const char *const CALL_NAMES[CALLS] = {
    "MPI_Init", "MPI_Comm_rank", "MPI_Comm_size", "MPI_Get_processor_name", "MPI_Get_library_version",
    "MPI_Barrier", "MPI_Sendrecv", "MPI_Alltoall", "MPI_Allreduce", "MPI_Gather", "MPI_Finalize"};
static long long counted[CALLS];
#define COUNTED(call, expression) (counted[call]++, (expression))

/* What a rank saw of one kind of message: how many it checked, how many were
 * bad, the first bad one's sender, iteration and offset. */
enum { BAD, CHECKED, FROM_RANK, ITERATION, OFFSET, FIELDS };
enum { HALO, ALLTOALL, KINDS };
static const char *const KIND_NAMES[KINDS] = {"halo", "alltoall"};

/* Gathered doubles per rank. */
enum { WALL, COMPUTE, COMM, OTHER, TIMES };

static int rank, ranks;

static void usage(const char *program)
{
    if (rank == 0)
        fprintf(stderr,
                "usage: mpirun -np K %s [-n ITERATIONS] [-w WORK_UNITS] [-h HALO_BYTES] [-a ALLTOALL_EVERY]\n"
                "       [-A ALLTOALL_BYTES] [-i IMBALANCE]\n"
                "  -n ITERATIONS      iterations of compute, halo exchange and (every -a) alltoall (default 100)\n"
                "  -w WORK_UNITS      rank 0's floating-point work per iteration, in units of %d x %d "
                "multiply-adds (default 500)\n"
                "  -h HALO_BYTES      bytes sent to each ring neighbour per iteration (default 4096)\n"
                "  -a ALLTOALL_EVERY  an MPI_Alltoall every this many iterations, 0 never (default 10)\n"
                "  -A ALLTOALL_BYTES  bytes per pair of each alltoall (default 1024)\n"
                "  -i IMBALANCE       rank r works W * (1 + IMBALANCE * r / (K-1)) units (default 0)\n"
                "  --help             this text\n"
                "  ODDNODE_CORRUPT_RANK=R spoils rank R's first halo and first alltoall\n",
                program, UNIT_STEPS, CHAINS);
}

static int bad_arguments(const char *program, const char *what, const char *value)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s, got '%s'\n", program, what, value);
    usage(program);
    COUNTED(C_FINALIZE, MPI_Finalize());
    return EXIT_USAGE;
}

/* --- data patterns -------------------------------------------------------------- */

static uint64_t pattern_seed(int kind, long from, long to, long long iteration)
{
    uint64_t seed = mix64(((uint64_t)kind << 56) ^ (uint64_t)iteration);
    return mix64(seed ^ mix64(((uint64_t)from << 32) ^ (uint64_t)to));
}

static void fill(unsigned char *buffer, long long size, uint64_t seed)
{
    for (long long k = 0; k < size; k += 8) {
        uint64_t word = mix64(seed + (uint64_t)(k / 8));
        memcpy(buffer + k, &word, (size_t)(size - k < 8 ? size - k : 8));
    }
}

/* The first byte that is not the pattern, or -1. */
static long long first_bad(const unsigned char *buffer, long long size, uint64_t seed)
{
    for (long long k = 0; k < size; k += 8) {
        uint64_t word = mix64(seed + (uint64_t)(k / 8));
        unsigned char want[8];
        memcpy(want, &word, 8);
        for (long long i = 0; i < 8 && k + i < size; i++)
            if (buffer[k + i] != want[i])
                return k + i;
    }
    return -1;
}

static void record(long long *seen, long from, long long iteration, long long offset)
{
    seen[CHECKED]++;
    if (offset < 0 || seen[BAD]++ > 0)
        return;
    seen[FROM_RANK] = from;
    seen[ITERATION] = iteration;
    seen[OFFSET] = offset;
}

/* --- compute ---------------------------------------------------------------------- */

/* `units` work units; the result depends on every step, rank and iteration. */
static double compute(long long units, long long iteration)
{
    double x[CHAINS];
    for (int c = 0; c < CHAINS; c++)
        x[c] = 1.0 + 1.0e-3 * (double)(rank + c) + 1.0e-9 * (double)iteration;
    /* c < 1 and d small: every chain stays near d / (1 - c) = 1, finite. */
    const double factor = 0.999999, addend = 1.0e-6;
    for (long long u = 0; u < units; u++)
        for (int s = 0; s < UNIT_STEPS; s++)
            for (int c = 0; c < CHAINS; c++)
                x[c] = x[c] * factor + addend;
    double sum = 0.0;
    for (int c = 0; c < CHAINS; c++)
        sum += x[c];
    return sum;
}

static void *allocate(long long bytes)
{
    void *p = malloc((size_t)(bytes > 0 ? bytes : 1));
    if (p == NULL) {
        fprintf(stderr, "mpi_demo_app: rank %d cannot allocate %lld bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 0, (size_t)(bytes > 0 ? bytes : 1));
    return p;
}

int main(int argc, char **argv)
{
    COUNTED(C_INIT, MPI_Init(&argc, &argv));
    COUNTED(C_COMM_RANK, MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    COUNTED(C_COMM_SIZE, MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    const char *program = argv[0];

    long long iterations = 100, work = 500, halo = 4096, every = 10, block = 1024;
    double imbalance = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *option = argv[i];
        if (strcmp(option, "--help") == 0) {
            usage(program);
            COUNTED(C_FINALIZE, MPI_Finalize());
            return 0;
        }
        if (i + 1 >= argc || strlen(option) != 2 || !strchr("nwhaAi", option[1]) || option[0] != '-')
            return bad_arguments(program, "unknown option or missing value", option);
        const char *value = argv[++i];
        switch (option[1]) {
        case 'n':
            if ((iterations = parse_count(value, 1, MAX_ITERATIONS)) < 0)
                return bad_arguments(program, "-n wants iterations, 1-100000000", value);
            break;
        case 'w':
            if ((work = parse_count(value, 0, MAX_WORK_UNITS)) < 0)
                return bad_arguments(program, "-w wants work units, 0-1000000000", value);
            break;
        case 'h':
            if ((halo = parse_count(value, 0, MAX_HALO_BYTES)) < 0)
                return bad_arguments(program, "-h wants halo bytes, 0-67108864", value);
            break;
        case 'a':
            if ((every = parse_count(value, 0, MAX_ITERATIONS)) < 0)
                return bad_arguments(program, "-a wants iterations between alltoalls, 0 (never)-100000000", value);
            break;
        case 'A':
            if ((block = parse_count(value, 0, MAX_ALLTOALL_BYTES)) < 0)
                return bad_arguments(program, "-A wants alltoall bytes per pair, 0-16777216", value);
            break;
        default: /* 'i' */
            if ((imbalance = parse_seconds(value, 0.0, MAX_IMBALANCE)) < 0.0)
                return bad_arguments(program, "-i wants an imbalance fraction, 0-1000", value);
        }
    }
    if (ranks < 2) {
        if (rank == 0)
            fprintf(stderr, "%s: run as two or more MPI ranks (mpirun -np K, K >= 2), not %d\n", program, ranks);
        COUNTED(C_FINALIZE, MPI_Finalize());
        return EXIT_RANKS;
    }
    int corrupt_rank = -1;
    const char *corrupt_text = getenv("ODDNODE_CORRUPT_RANK");
    if (corrupt_text != NULL && *corrupt_text != '\0') {
        long long value = parse_count(corrupt_text, 0, ranks - 1);
        if (value < 0)
            return bad_arguments(program, "ODDNODE_CORRUPT_RANK wants a rank number below the ranks' count",
                                 corrupt_text);
        corrupt_rank = (int)value;
    }

    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int length;
    COUNTED(C_PROCESSOR_NAME, MPI_Get_processor_name(host, &length));
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    COUNTED(C_LIBRARY_VERSION, MPI_Get_library_version(library, &length));
    library[strcspn(library, "\n,")] = '\0';
    char *hosts = rank == 0 ? allocate((long long)ranks * MPI_MAX_PROCESSOR_NAME) : NULL;
    COUNTED(C_GATHER, MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
                                 MPI_COMM_WORLD));

    /* Rank r's units: W + floor(W * IMBALANCE * r / (K-1) + 0.5). */
    const long long units = work + (long long)((double)work * imbalance * (double)rank / (double)(ranks - 1) + 0.5);
    const long long alltoalls = every > 0 ? iterations / every : 0;
    if (rank == 0) {
        printf("# oddnode mpi_demo_app kernel v%d\n", KERNEL_VERSION);
        printf("# compiler: %s\n", compiler_name());
        printf("# cflags: %s\n", ODDNODE_CFLAGS);
        printf("# mpi_library: %s\n", library);
        printf("# processes: %d\n", ranks);
        for (int r = 0; r < ranks; r++)
            printf("# rank: %d %s\n", r, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("# iterations: %lld\n", iterations);
        printf("# work_units: %lld\n", work);
        printf("# unit: %d steps of %d multiply-add chains\n", UNIT_STEPS, CHAINS);
        printf("# imbalance: %g\n", imbalance);
        printf("# halo_bytes: %lld\n", halo);
        printf("# alltoall_every: %lld\n", every);
        printf("# alltoall_bytes: %lld\n", block);
        printf("# alltoalls: %lld\n", alltoalls);
        printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
        printf("# timer_granularity_ns: %lld\n", timer_granularity_ns());
        if (corrupt_rank >= 0)
            printf("# corrupt_rank: %d\n", corrupt_rank);
        fflush(stdout);
    }

    const int right = (rank + 1) % ranks, left = (rank - 1 + ranks) % ranks;
    unsigned char *halo_out = allocate(2 * halo), *halo_in = allocate(2 * halo);
    unsigned char *a_out = allocate((long long)ranks * block), *a_in = allocate((long long)ranks * block);
    long long seen[KINDS][FIELDS];
    memset(seen, 0, sizeof seen);
    double times[TIMES] = {0};
    uint64_t checksum = 0;
    long long alltoalls_done = 0;

    COUNTED(C_BARRIER, MPI_Barrier(MPI_COMM_WORLD));
    const double started = now_seconds();
    for (long long it = 1; it <= iterations; it++) {
        double t0 = now_seconds();
        double result = compute(units, it);
        double t1 = now_seconds();
        uint64_t bits;
        memcpy(&bits, &result, sizeof bits);
        checksum += mix64(bits ^ ((uint64_t)rank << 40) ^ (uint64_t)it);

        /* Halo: both directions' messages prepared, then exchanged. */
        fill(halo_out, halo, pattern_seed(HALO, rank, RIGHTWARD, it));
        fill(halo_out + halo, halo, pattern_seed(HALO, rank, LEFTWARD, it));
        if (rank == corrupt_rank && it == 1 && halo > 0)
            halo_out[halo / 2] ^= 0x5a;
        double t2 = now_seconds();
        COUNTED(C_SENDRECV, MPI_Sendrecv(halo_out, (int)halo, MPI_BYTE, right, TAG_RIGHTWARD, halo_in, (int)halo,
                                         MPI_BYTE, left, TAG_RIGHTWARD, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        COUNTED(C_SENDRECV, MPI_Sendrecv(halo_out + halo, (int)halo, MPI_BYTE, left, TAG_LEFTWARD, halo_in + halo,
                                         (int)halo, MPI_BYTE, right, TAG_LEFTWARD, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        double t3 = now_seconds();
        record(seen[HALO], left, it, first_bad(halo_in, halo, pattern_seed(HALO, left, RIGHTWARD, it)));
        record(seen[HALO], right, it, first_bad(halo_in + halo, halo, pattern_seed(HALO, right, LEFTWARD, it)));
        double t4 = now_seconds();
        times[COMPUTE] += t1 - t0;
        times[COMM] += t3 - t2;
        times[OTHER] += (t2 - t1) + (t4 - t3);

        if (every > 0 && it % every == 0) {
            for (int to = 0; to < ranks; to++) {
                fill(a_out + (size_t)to * block, block, pattern_seed(ALLTOALL, rank, to, it));
                if (rank == corrupt_rank && alltoalls_done == 0 && to != rank && block > 0)
                    a_out[(size_t)to * block + block / 2] ^= 0x5a;
            }
            double t5 = now_seconds();
            COUNTED(C_ALLTOALL, MPI_Alltoall(a_out, (int)block, MPI_BYTE, a_in, (int)block, MPI_BYTE,
                                             MPI_COMM_WORLD));
            double t6 = now_seconds();
            alltoalls_done++;
            for (int from = 0; from < ranks; from++)
                record(seen[ALLTOALL], from, it,
                       first_bad(a_in + (size_t)from * block, block, pattern_seed(ALLTOALL, from, rank, it)));
            double t7 = now_seconds();
            times[COMM] += t6 - t5;
            times[OTHER] += (t5 - t4) + (t7 - t6);
        }
    }
    uint64_t total = 0;
    double t8 = now_seconds();
    COUNTED(C_ALLREDUCE, MPI_Allreduce(&checksum, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    double finished = now_seconds();
    times[COMM] += finished - t8;
    times[WALL] = finished - started;

    /* The report: every rank's times, then its counts and checks. */
    double *all_times = rank == 0 ? allocate((long long)ranks * TIMES * (long long)sizeof(double)) : NULL;
    COUNTED(C_GATHER, MPI_Gather(times, TIMES, MPI_DOUBLE, all_times, TIMES, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    /* Per rank: its units, its checksum (as a signed word), its calls, its checks. */
    enum { ROW = 2 + CALLS + KINDS * FIELDS };
    long long row[ROW];
    row[0] = units;
    memcpy(&row[1], &checksum, sizeof checksum);
    counted[C_GATHER]++;   /* this gather, counted before it carries the counts */
    counted[C_FINALIZE]++; /* made right after the report */
    memcpy(&row[2], counted, sizeof counted);
    memcpy(&row[2 + CALLS], seen, sizeof seen);
    long long *rows = rank == 0 ? allocate((long long)ranks * ROW * (long long)sizeof(long long)) : NULL;
    MPI_Gather(row, ROW, MPI_LONG_LONG, rows, ROW, MPI_LONG_LONG, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        for (int r = 0; r < ranks; r++) {
            const double *t = all_times + (size_t)r * TIMES;
            printf("rank %d wall_s %.6f compute_s %.6f comm_s %.6f other_s %.6f work_units %lld\n", r, t[WALL],
                   t[COMPUTE], t[COMM], t[OTHER], rows[(size_t)r * ROW]);
        }
        for (int r = 0; r < ranks; r++)
            for (int c = 0; c < CALLS; c++)
                printf("calls %d %s %lld\n", r, CALL_NAMES[c], rows[(size_t)r * ROW + 2 + c]);
        printf("checksum 0x%016llx\n", (unsigned long long)total);
        uint64_t expected = 0;
        int failed = 0;
        for (int r = 0; r < ranks; r++) {
            uint64_t part;
            memcpy(&part, &rows[(size_t)r * ROW + 1], sizeof part);
            expected += part;
            for (int k = 0; k < KINDS; k++) {
                const long long *s = rows + (size_t)r * ROW + 2 + CALLS + k * FIELDS;
                if (s[BAD] == 0)
                    continue;
                failed = 1;
                printf("validation failed %s rank=%d from_rank=%lld bad=%lld/%lld iteration=%lld offset=%lld\n",
                       KIND_NAMES[k], r, s[FROM_RANK], s[BAD], s[CHECKED], s[ITERATION], s[OFFSET]);
            }
        }
        if (expected != total) {
            failed = 1;
            printf("validation failed checksum expected=0x%016llx got=0x%016llx\n", (unsigned long long)expected,
                   (unsigned long long)total);
        }
        if (!failed)
            printf("validation ok\n");
        fflush(stdout);
    }
    free(halo_out);
    free(halo_in);
    free(a_out);
    free(a_in);
    free(hosts);
    free(all_times);
    free(rows);
    MPI_Finalize();
    return 0;
}
