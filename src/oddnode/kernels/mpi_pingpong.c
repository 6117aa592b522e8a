/*
 * oddnode mpi_pingpong kernel v1: MPI latency and bandwidth between two ranks.
 *
 *   mpirun -np 2 [--host A,B] mpi_pingpong [-s SIZES] [-T SECONDS_PER_SIZE] [-P CPU0,CPU1]
 *
 * Rank 0 sends each message with MPI_Send and waits for rank 1's echo with
 * MPI_Recv; rank 1 receives the whole message, then sends it back.  For each
 * message size: warm-up round trips, then timed batches as the TCP kernel's
 * (oddnode_batches.h) until the size has run SECONDS_PER_SIZE, its warm-up
 * included (an upper bound; a size with fewer than MIN_BATCHES batches is
 * said cut).  Rank 0 tells rank 1 each batch's round trips before
 * it starts (outside the timer).  One-way time = batch time / round trips /
 * 2; the minimum and the median over the batches are reported, as by the TCP
 * pingpong kernel, so that the two compare directly.  A message of 0 bytes is an empty MPI message.
 *
 * Echo check: before each batch rank 0 fills its message with a pattern of
 * the size and the batch; after it, the last echo is compared with it.
 *
 * -P CPU0,CPU1 (both ranks on one machine, started without the launcher's
 * binding, e.g. mpirun --bind-to none): rank r pins itself to the r-th CPU
 * of the list (sched_setaffinity) right after MPI_Init, before its buffers
 * are allocated and first touched, so that under the default first-touch
 * policy each rank's memory is on its own CPU's NUMA node.  A CPU outside a
 * rank's allowed set (its cpuset) is refused.  The header then says
 * "# binding: rank0 cpu A, rank1 cpu B", and after the run each rank reads
 * back its CPU (sched_getcpu): a rank found elsewhere makes the run invalid
 * ("validation failed binding what=cpu expected=A,B got=X,Y").  Without -P
 * nothing is pinned and nothing of this is printed.
 *
 * Output (rank 0's stdout): '#' header lines "# key: value", then one line
 * per size
 *   result <bytes> <round_trips> <min_us> <median_us> <batches>
 * and "validation ok" or "validation failed echo bad=N/M size=S batch=B
 * offset=K expected=X got=Y".
 *
 * Exit status: 0 done (even if the echo check failed: the output says so),
 * 2 bad arguments, 3 not run as two MPI ranks, 4 the -P binding cannot be
 * made (a CPU outside a rank's allowed set, or sched_setaffinity refused).
 */
#define _GNU_SOURCE /* sched_getcpu, the CPU_* macros */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oddnode_kernel.h"
#include "oddnode_batches.h"
#include "oddnode_numa.h"

#define KERNEL_VERSION 1
#define EXIT_USAGE 2
#define EXIT_RANKS 3
#define EXIT_BINDING 4

#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define MAX_SIZES 64
#define MAX_SIZE (64L << 20)
#define TAG_MESSAGE 1
#define STOP (-1L)

static int rank;

static void usage(const char *program)
{
    if (rank == 0)
        fprintf(stderr,
                "usage: mpirun -np 2 %s [-s SIZES] [-T SECONDS_PER_SIZE] [-P CPU0,CPU1]\n"
                "  -s SIZES    message sizes in bytes, a comma list (default 0 and 1 B to 4 MiB in powers of two)\n"
                "  -T SECONDS  time per message size (default 1)\n"
                "  -P CPUS     pin rank 0 to the first CPU and rank 1 to the second (default: no pinning)\n",
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

/* Rank 0's batch: `rounds` round trips of `size` bytes; the seconds they took. */
static double ping_batch(unsigned char *message, unsigned char *echo, long size, long rounds)
{
    MPI_Bcast(&rounds, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    double started = now_seconds();
    for (long i = 0; i < rounds; i++) {
        MPI_Send(message, (int)size, MPI_BYTE, 1, TAG_MESSAGE, MPI_COMM_WORLD);
        MPI_Recv(echo, (int)size, MPI_BYTE, 1, TAG_MESSAGE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return now_seconds() - started;
}

/* Rank 1: echo batches of `size` bytes until rank 0 says stop. */
static void echo_size(unsigned char *buffer, long size)
{
    for (;;) {
        long rounds;
        MPI_Bcast(&rounds, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (rounds == STOP)
            return;
        for (long i = 0; i < rounds; i++) {
            MPI_Recv(buffer, (int)size, MPI_BYTE, 0, TAG_MESSAGE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, (int)size, MPI_BYTE, 0, TAG_MESSAGE, MPI_COMM_WORLD);
        }
    }
}

/* Rank 0: one size's batches; its round trips, min and median one-way us
 * (half a round trip), batches. */
static void ping_size(unsigned char *message, unsigned char *echo, long size, double seconds_per_size,
                      double target, struct message_check *result, FILE *out)
{
    struct ping_batches batches = {ping_batch, message, echo, size, result};
    double *times;
    long round_trips;
    size_t samples = time_batches(timed_ping_batch, &batches, seconds_per_size, target, &times, &round_trips);
    long stop = STOP;
    MPI_Bcast(&stop, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (samples == 0) {
        fprintf(stderr, "mpi_pingpong: cannot allocate the sample table\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    report_cut(out, "", size, samples, seconds_per_size);
    fprintf(out, "result %ld %ld %.3f %.3f %zu\n", size, round_trips, 0.5e6 * times[0],
            0.5e6 * sorted_median(times, samples), samples);
    free(times);
}

/* "A,B": two CPU numbers, in rank order, into cpus; 0, or -1 when the text is not two. */
static int parse_cpu_pair(const char *text, int cpus[2])
{
    const char *p = text;
    for (int r = 0; r < 2; r++) {
        char *end = NULL;
        long cpu = strtol(p, &end, 10);
        if (end == p || *p == '-' || *p == '+' || cpu < 0 || cpu >= CPU_SETSIZE)
            return -1;
        cpus[r] = (int)cpu;
        p = end;
        if (r == 0 && *p++ != ',')
            return -1;
    }
    return *p == '\0' ? 0 : -1;
}

/* Pin this rank to `cpu` if its allowed set (cpuset) holds it; 0, or an
 * error message on stderr and -1.  Every rank then learns whether all did. */
static int pin_rank(const char *program, int cpu)
{
    cpu_set_t allowed;
    char text[1024];
    int failed = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "%s: rank %d: sched_getaffinity: %s\n", program, rank, strerror(errno));
        failed = 1;
    } else if (!CPU_ISSET(cpu, &allowed)) {
        format_cpu_list(&allowed, text, sizeof text);
        fprintf(stderr, "%s: rank %d: -P CPU %d is not one this rank may use (allowed: %s; see "
                        "Cpus_allowed_list in /proc/self/status)\n", program, rank, cpu, text);
        failed = 1;
    } else {
        int error = pin_to_cpu(cpu);
        if (error != 0) {
            fprintf(stderr, "%s: rank %d: cannot pin to CPU %d: sched_setaffinity: %s\n", program, rank, cpu,
                    strerror(error));
            failed = 1;
        }
    }
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any ? -1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int ranks;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const char *program = argv[0];

    long long sizes[MAX_SIZES];
    int count = 0;
    sizes[count++] = 0;
    for (long long s = 1; s <= (4LL << 20); s *= 2)
        sizes[count++] = s;
    double seconds_per_size = 1.0;
    int pinned = 0, cpus[2] = {-1, -1};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            count = parse_count_list(argv[++i], MAX_SIZE, sizes, MAX_SIZES);
            if (count < 0)
                return bad_arguments(program, "-s wants a comma list of distinct sizes in bytes, 0-67108864 each",
                                     argv[i]);
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            seconds_per_size = parse_seconds(argv[++i], 1.0e-6, 3600.0);
            if (seconds_per_size < 0.0)
                return bad_arguments(program, "-T wants seconds per size, > 0 and <= 3600", argv[i]);
        } else if (strcmp(argv[i], "-P") == 0 && i + 1 < argc) {
            if (parse_cpu_pair(argv[++i], cpus) != 0)
                return bad_arguments(program, "-P wants two CPU numbers, rank 0's and rank 1's: CPU0,CPU1",
                                     argv[i]);
            pinned = 1;
        } else {
            return bad_arguments(program, "unknown option or missing value", argv[i]);
        }
    }
    if (ranks != 2) {
        if (rank == 0)
            fprintf(stderr, "%s: run as exactly two MPI ranks (mpirun -np 2), not %d\n", program, ranks);
        MPI_Finalize();
        return EXIT_RANKS;
    }
    /* Pinned before the buffers exist: their pages are first touched on the rank's CPU. */
    if (pinned && pin_rank(program, cpus[rank]) != 0) {
        MPI_Finalize();
        return EXIT_BINDING;
    }

    long largest = 1;
    for (int i = 0; i < count; i++)
        if (sizes[i] > largest)
            largest = sizes[i];
    unsigned char *message = malloc((size_t)largest), *echo = malloc((size_t)largest);
    if (message == NULL || echo == NULL) {
        fprintf(stderr, "mpi_pingpong: cannot allocate two buffers of %ld bytes\n", largest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (pinned) { /* touched now, on the rank's own CPU */
        memset(message, 0, (size_t)largest);
        memset(echo, 0, (size_t)largest);
    }
    char host[MPI_MAX_PROCESSOR_NAME] = "", peer[MPI_MAX_PROCESSOR_NAME] = "";
    int length;
    MPI_Get_processor_name(host, &length);
    if (rank == 1)
        MPI_Send(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    else
        MPI_Recv(peer, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    if (rank == 1) {
        for (int i = 0; i < count; i++)
            echo_size(message, sizes[i]);
        if (pinned) {
            int final = sched_getcpu();
            MPI_Send(&final, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    } else {
        char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        MPI_Get_library_version(library, &length);
        library[strcspn(library, "\n,")] = '\0';
        const long long granularity = timer_granularity_ns();
        const double target = min_batch_seconds(granularity);
        printf("# oddnode mpi_pingpong kernel v%d\n", KERNEL_VERSION);
        printf("# mode: ping\n");
        printf("# compiler: %s\n", compiler_name());
        printf("# cflags: %s\n", ODDNODE_CFLAGS);
        printf("# mpi_library: %s\n", library);
        printf("# host: %s\n", host);
        printf("# peer: %s\n", peer);
        if (pinned)
            printf("# binding: rank0 cpu %d, rank1 cpu %d\n", cpus[0], cpus[1]);
        printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
        printf("# timer_granularity_ns: %lld\n", granularity);
        printf("# sizes:");
        for (int i = 0; i < count; i++)
            printf("%s%lld", i ? "," : " ", sizes[i]);
        printf("\n# seconds_per_size: %g\n", seconds_per_size);
        printf("# min_batches: %d\n", MIN_BATCHES);
        printf("# min_batch_ns: %.0f\n", 1.0e9 * target);
        printf("# time: one-way = batch time / round trips / 2; min and median over batches\n");
        printf("# echo: rank 1 receives a whole message, then sends it back; the last echo of each batch "
               "compared\n");
        fflush(stdout);
        struct message_check result = {0};
        for (int i = 0; i < count; i++) {
            ping_size(message, echo, sizes[i], seconds_per_size, target, &result, stdout);
            fflush(stdout);
        }
        /* Where each rank ended: rank 1's CPU comes over (pinned runs only). */
        int final[2] = {sched_getcpu(), -1};
        if (pinned)
            MPI_Recv(&final[1], 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int moved = pinned && (final[0] != cpus[0] || final[1] != cpus[1]);
        if (result.bad == 0 && !moved)
            printf("validation ok\n");
        if (result.bad != 0)
            printf("validation failed echo bad=%ld/%ld size=%ld batch=%ld offset=%ld expected=%u got=%u\n",
                   result.bad, result.checked, result.size, result.batch, result.offset, result.expected,
                   result.got);
        if (moved)
            printf("validation failed binding what=cpu expected=%d,%d got=%d,%d\n", cpus[0], cpus[1], final[0],
                   final[1]);
    }
    free(message);
    free(echo);
    MPI_Finalize();
    return 0;
}
