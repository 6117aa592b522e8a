/*
 * oddnode mpi_pingpong kernel v1: MPI latency and bandwidth between two ranks.
 *
 *   mpirun -np 2 [--host A,B] mpi_pingpong [-s SIZES] [-T SECONDS_PER_SIZE]
 *
 * Rank 0 sends each message with MPI_Send and waits for rank 1's echo with
 * MPI_Recv; rank 1 receives the whole message, then sends it back.  For each
 * message size: warm-up round trips, then timed batches as the TCP kernel's
 * (oddnode_batches.h) until the size has run SECONDS_PER_SIZE and at least
 * MIN_BATCHES batches.  Rank 0 tells rank 1 each batch's round trips before
 * it starts (outside the timer).  One-way time = batch time / round trips /
 * 2; the minimum and the median over the batches are reported, as by the TCP
 * pingpong kernel, so that the two compare directly.  A message of 0 bytes is an empty MPI message.
 *
 * Echo check: before each batch rank 0 fills its message with a pattern of
 * the size and the batch; after it, the last echo is compared with it.
 *
 * Output (rank 0's stdout): '#' header lines "# key: value", then one line
 * per size
 *   result <bytes> <round_trips> <min_us> <median_us> <batches>
 * and "validation ok" or "validation failed echo bad=N/M size=S batch=B
 * offset=K expected=X got=Y".
 *
 * Exit status: 0 done (even if the echo check failed: the output says so),
 * 2 bad arguments, 3 not run as two MPI ranks.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oddnode_kernel.h"
#include "oddnode_batches.h"

#define KERNEL_VERSION 1
#define EXIT_USAGE 2
#define EXIT_RANKS 3

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
                "usage: mpirun -np 2 %s [-s SIZES] [-T SECONDS_PER_SIZE]\n"
                "  -s SIZES    message sizes in bytes, a comma list (default 0 and 1 B to 4 MiB in powers of two)\n"
                "  -T SECONDS  time per message size (default 1)\n",
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

struct echo_check {
    long bad, checked, size, batch, offset;
    unsigned expected, got;
};

static void fill(unsigned char *message, long size, long batch)
{
    uint64_t word = mix64(((uint64_t)size << 32) ^ (uint64_t)batch);
    for (long k = 0; k < size; k++) {
        if (k % 8 == 0)
            word = mix64(word + (uint64_t)k);
        message[k] = (unsigned char)(word >> (8 * (k % 8)));
    }
}

static void check(const unsigned char *message, const unsigned char *echo, long size, long batch,
                  struct echo_check *result)
{
    result->checked++;
    if (memcmp(message, echo, (size_t)size) == 0)
        return;
    if (result->bad++ == 0) {
        long k = 0;
        while (message[k] == echo[k])
            k++;
        result->size = size;
        result->batch = batch;
        result->offset = k;
        result->expected = message[k];
        result->got = echo[k];
    }
}

/* Rank 0: one size's batches; its round trips, min and median one-way us, batches. */
static void ping_size(unsigned char *message, unsigned char *echo, long size, double seconds_per_size,
                      double target, struct echo_check *result, FILE *out)
{
    long batch = 0;
    double fastest = 1.0e30;
    const double warmup_started = now_seconds();
    for (int w = 0; w < MAX_WARMUP_ROUNDS; w++) {
        if (w >= MIN_WARMUP_ROUNDS && now_seconds() - warmup_started > 0.25 * seconds_per_size)
            break;
        fill(message, size, batch);
        double t = ping_batch(message, echo, size, 1);
        check(message, echo, size, batch++, result);
        if (t < fastest)
            fastest = t;
    }
    long rounds = first_batch_rounds(target, fastest, MAX_BATCH_ROUNDS);

    size_t capacity = 1024, samples = 0;
    double *sample = malloc(capacity * sizeof *sample);
    long round_trips = 0;
    const double started = now_seconds();
    while (sample != NULL && (samples < MIN_BATCHES || now_seconds() - started < seconds_per_size)) {
        fill(message, size, batch);
        double t = ping_batch(message, echo, size, rounds);
        check(message, echo, size, batch++, result);
        if (samples == capacity) {
            capacity *= 2;
            double *grown = realloc(sample, capacity * sizeof *sample);
            if (grown == NULL)
                free(sample);
            sample = grown;
            if (sample == NULL)
                break;
        }
        sample[samples++] = t / (double)rounds / 2.0;
        round_trips += rounds;
        /* A short batch is kept (dropping fast ones would bias the minimum
         * up); the next ones get more round trips. */
        if (t < target && rounds < MAX_BATCH_ROUNDS)
            rounds = rounds * 2 < MAX_BATCH_ROUNDS ? rounds * 2 : MAX_BATCH_ROUNDS;
    }
    long stop = STOP;
    MPI_Bcast(&stop, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (sample == NULL) {
        fprintf(stderr, "mpi_pingpong: cannot allocate the sample table\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    qsort(sample, samples, sizeof *sample, compare_doubles);
    fprintf(out, "result %ld %ld %.3f %.3f %zu\n", size, round_trips, 1.0e6 * sample[0],
            1.0e6 * sorted_median(sample, samples), samples);
    free(sample);
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

    long largest = 1;
    for (int i = 0; i < count; i++)
        if (sizes[i] > largest)
            largest = sizes[i];
    unsigned char *message = malloc((size_t)largest), *echo = malloc((size_t)largest);
    if (message == NULL || echo == NULL) {
        fprintf(stderr, "mpi_pingpong: cannot allocate two buffers of %ld bytes\n", largest);
        MPI_Abort(MPI_COMM_WORLD, 1);
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
        struct echo_check result = {0};
        for (int i = 0; i < count; i++) {
            ping_size(message, echo, sizes[i], seconds_per_size, target, &result, stdout);
            fflush(stdout);
        }
        if (result.bad == 0)
            printf("validation ok\n");
        else
            printf("validation failed echo bad=%ld/%ld size=%ld batch=%ld offset=%ld expected=%u got=%u\n",
                   result.bad, result.checked, result.size, result.batch, result.offset, result.expected,
                   result.got);
    }
    free(message);
    free(echo);
    MPI_Finalize();
    return 0;
}
