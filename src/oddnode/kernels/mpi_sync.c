/*
 * oddnode mpi_sync kernel v1: bulk-synchronous iterations over MPI, one
 * rank per node: how long each node makes the others wait.
 *
 *   mpirun -np K [--host A,B,...] mpi_sync [-o allreduce|barrier] [-q US] [-n N | -s SECONDS] [-W N]
 *                                          [-N NAME,NAME,...] [-y US]
 *
 * K >= 2.  Every iteration each rank computes the same work quantum (-q
 * microseconds on the fastest rank), then calls MPI_Allreduce of one double
 * (MPI_SUM) or MPI_Barrier; each rank times both.  See oddnode_sync.h for
 * the work, the timing, who was last and the output; the TCP kernel
 * (tcp_sync.c) runs the same iterations without MPI.
 *
 * -y US: for capped or shared CPUs.  Open MPI waits in a collective by
 * polling, and a rank whose CPU time is capped (a CFS quota, as on oddnode's
 * testbed) spends its quota waiting and is stopped when its next quantum
 * is due: the waits then measure the quota, not who arrived last.  With -y
 * each iteration starts MPI_Iallreduce or MPI_Ibarrier and tests it every
 * US microseconds, sleeping in between, as the TCP kernel sleeps in recv().
 * Without -y the collective blocks, as an application's does.
 *
 * The end of the run travels over MPI too: MPI_Reduce of the per-iteration
 * (shortest wait, its rank, second shortest) triples to rank 0 with an
 * operation of our own (merge_laggard), MPI_Gather of every rank's summary
 * and host (MPI_Get_processor_name).
 *
 * Output (rank 0's stdout): '#' header lines "# key: value", one
 * "# rank: R HOST NODE" per rank (NODE: -N's name, else HOST), then
 *   loop <iterations> <seconds> <us_per_iteration>
 *   rank <r> <compute_total_us> <compute_median_us> <compute_max_us> <wait_total_us> <wait_median_us>
 *        <iterations_last> <extra_wait_total_us>
 * per rank, then "validation ok" or per rank with wrong results
 *   validation failed allreduce rank=R host=H bad=N/M iteration=I expected=X got=Y
 *   validation failed work rank=R host=H checksum=C expected=D
 * (allreduce: the sums every rank received against the exact sum of every
 * rank's integer-valued contribution; work: the sum of a rank's work
 * results against rank 0's, the same work on every rank).
 *
 * Exit status: 0 done (even if the check failed: the output says so), 2 bad
 * arguments, 3 fewer than two MPI ranks.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oddnode_kernel.h"
#include "oddnode_sync.h"

#define EXIT_USAGE 2
#define EXIT_RANKS 3

static MPI_Datatype laggard_type;
static MPI_Op laggard_op;
/* -y: microseconds between tests of a non-blocking collective, sleeping
 * between them; 0: the blocking collective. */
static long test_interval_us = 0;
#define MAX_TEST_INTERVAL_US 100000L

/* Until the request completes: a test every test_interval_us, asleep in between. */
static void sleep_until_done(MPI_Request *request)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = test_interval_us * 1000L};
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    while (!done) {
        nanosleep(&pause, NULL);
        MPI_Test(request, &done, MPI_STATUS_IGNORE);
    }
}

static void laggard_reduction(void *in, void *into, int *count, MPI_Datatype *type)
{
    (void)type;
    merge_laggards(in, into, *count);
}

static void transport_allreduce(double *values, int count, int op)
{
    MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, op == REDUCE_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
}

static void transport_collective(int operation, long iteration, double contribution, double *result)
{
    (void)iteration;
    *result = 0.0;
    if (test_interval_us > 0) {
        MPI_Request request;
        if (operation == OP_BARRIER)
            MPI_Ibarrier(MPI_COMM_WORLD, &request);
        else
            MPI_Iallreduce(&contribution, result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
        sleep_until_done(&request);
    } else if (operation == OP_BARRIER) {
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Allreduce(&contribution, result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
}

static void transport_reduce_laggards(double *triples, long count)
{
    if (sync_rank == 0)
        MPI_Reduce(MPI_IN_PLACE, triples, (int)count, laggard_type, laggard_op, 0, MPI_COMM_WORLD);
    else
        MPI_Reduce(triples, NULL, (int)count, laggard_type, laggard_op, 0, MPI_COMM_WORLD);
}

static void transport_gather(const unsigned char *mine, size_t bytes, unsigned char *all)
{
    MPI_Gather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void transport_header(void)
{
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int length;
    MPI_Get_library_version(library, &length);
    library[strcspn(library, "\n,")] = '\0';
    printf("# transport: mpi\n");
    printf("# mpi_library: %s\n", library);
    if (test_interval_us > 0)
        printf("# wait: non-blocking collective tested every %ld us, asleep in between\n", test_interval_us);
    else
        printf("# wait: blocking collective (Open MPI polls)\n");
}

static void transport_abort(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("mpi_sync: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

static void usage(const char *program)
{
    if (sync_rank == 0)
        fprintf(stderr,
                "usage: mpirun -np K %s [-o OPERATION] [-q US] [-n N | -s SECONDS] [-W N] [-N NAMES] [-y US]\n%s"
                "  -y US         wait by testing a non-blocking collective every US microseconds (1-100000), "
                "asleep in between: for capped or shared CPUs\n",
                program, SYNC_OPTIONS_HELP);
}

static int bad_arguments(const char *program, const char *what, const char *value)
{
    if (sync_rank == 0)
        fprintf(stderr, "%s: %s, got '%s'\n", program, what, value);
    usage(program);
    MPI_Finalize();
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &sync_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &sync_ranks);
    const char *program = argv[0];

    struct sync_config config;
    sync_defaults(&config);
    for (int i = 1; i < argc; i++) {
        const char *error = "unknown option";
        const char *option = argv[i];
        int parsed = sync_option(argc, argv, &i, &config, &error);
        if (parsed == 0 && strcmp(option, "-y") == 0 && i + 1 < argc) {
            test_interval_us = (long)parse_count(argv[++i], 1, MAX_TEST_INTERVAL_US);
            if (test_interval_us < 0)
                return bad_arguments(program, "-y wants microseconds between tests, 1-100000", argv[i]);
            continue;
        }
        if (parsed <= 0)
            return bad_arguments(program, parsed < 0 ? error : "unknown option or missing value",
                                 parsed < 0 ? argv[i] : option);
    }
    if (sync_ranks < 2) {
        if (sync_rank == 0)
            fprintf(stderr, "%s: run as two or more MPI ranks (mpirun -np K, K >= 2), not %d\n", program,
                    sync_ranks);
        MPI_Finalize();
        return EXIT_RANKS;
    }
    config.corrupt_rank = corrupt_rank_from_environment();
    if (config.corrupt_rank == -2)
        return bad_arguments(program, "ODDNODE_CORRUPT_RANK wants a rank number below the ranks' count",
                             getenv("ODDNODE_CORRUPT_RANK"));
    if (config.names != NULL && config.name_count != sync_ranks) {
        char count[32];
        snprintf(count, sizeof count, "%d names", config.name_count);
        return bad_arguments(program, "-N wants one name per rank", count);
    }

    MPI_Type_contiguous(3, MPI_DOUBLE, &laggard_type);
    MPI_Type_commit(&laggard_type);
    MPI_Op_create(laggard_reduction, 1, &laggard_op);

    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int length;
    MPI_Get_processor_name(host, &length);
    int status = sync_run(&config, host, "mpi_sync");

    MPI_Op_free(&laggard_op);
    MPI_Type_free(&laggard_type);
    MPI_Finalize();
    return status;
}
