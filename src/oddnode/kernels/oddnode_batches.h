/*
 * The timed batches of oddnode's ping-pong kernels (pingpong.c over TCP,
 * mpi_pingpong.c over MPI, shm_pingpong.c over shared memory), shared so
 * that they measure alike (the TCP kernel runs its own loop of batches,
 * over its connection's state; the others call time_batches): warm-up
 * round trips, each timed alone, whose fastest sets how many round trips
 * make one batch; batches at least MIN_BATCH_TICKS timer ticks and
 * ODDNODE_MIN_BATCH_SECONDS long, until the size's time is spent (an upper
 * bound: warm-up and batches together, the batch under way ending first;
 * one batch at the least, and a size with fewer than MIN_BATCHES is said
 * cut); one-way time = batch time / round trips / 2, its minimum and
 * median reported.
 * Also the messages of the MPI and shared-memory ping-pongs and the check
 * of their echoes.  Included after "oddnode_kernel.h".
 */
#ifndef ODDNODE_BATCHES_H
#define ODDNODE_BATCHES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A timed batch also lasts at least this long: on a fast network some 100
 * round trips, so that each sample is a sustained one-way time, an average
 * over many round trips as NetPIPE, IMB and OSU report, not the luck of two
 * or three; the minimum of such samples is a floor the network holds. */
#ifndef ODDNODE_MIN_BATCH_SECONDS
#define ODDNODE_MIN_BATCH_SECONDS 1.0e-3
#endif

/* A timed batch shorter than this many timer ticks would be measured with
 * a relative error above 0.1%: batches are made at least this long. */
#define MIN_BATCH_TICKS 1000
/* Batches a size wants, so that the median means something: a size whose
 * time runs out before them is reported as cut. */
#define MIN_BATCHES 10
/* Warm-up round trips per size: the first always, the second while they
 * leave half of the size's time, more while a tenth of it is not spent. */
#define MIN_WARMUP_ROUNDS 2
#define MAX_WARMUP_ROUNDS 16
/* Round trips per batch: a ceiling, and how far above the estimate from
 * the warm-up the first batch size is chosen (so batches are rarely short). */
#define MAX_BATCH_ROUNDS 1000000L
#define BATCH_MARGIN 1.5

/* The shortest timed batch: enough timer ticks, and enough round trips. */
static inline double min_batch_seconds(long long granularity_ns)
{
    double ticks = 1.0e-9 * (double)MIN_BATCH_TICKS * (double)granularity_ns;
    return ticks > ODDNODE_MIN_BATCH_SECONDS ? ticks : ODDNODE_MIN_BATCH_SECONDS;
}

/* Round trips in the first timed batch: BATCH_MARGIN times what the fastest
 * warm-up round trip says fills `target` seconds, from 1 to `capacity`. */
static inline long first_batch_rounds(double target, double fastest, long capacity)
{
    double wanted = BATCH_MARGIN * target / (fastest > 0.0 ? fastest : 1.0e-9);
    return wanted < 1.0 ? 1 : (wanted > (double)capacity ? capacity : (long)wanted + 1);
}

/* Whether warm-up round trip `w` (from 0) of a size that started at
 * `started` and may last `seconds` runs: the first always; the second (the
 * first pays for cold caches and connections) unless half the size's time
 * is gone; more, up to MAX_WARMUP_ROUNDS, while a tenth of it is not spent,
 * so that slow round trips leave the time to the timed batches. */
static inline int warmup_goes_on(int w, double started, double seconds)
{
    const double spent = now_seconds() - started;
    if (w == 0)
        return 1;
    if (w < MIN_WARMUP_ROUNDS)
        return spent < 0.5 * seconds;
    return w < MAX_WARMUP_ROUNDS && spent < 0.1 * seconds;
}

/* Whether a size that started at `started` (its warm-up included) and has
 * `samples` timed batches times another: its `seconds` are an upper bound,
 * so a size whose round trips are slow gets fewer than MIN_BATCHES
 * batches, and never none. */
static inline int batches_go_on(size_t samples, double started, double seconds)
{
    return samples == 0 || now_seconds() - started < seconds;
}

/* Says, as a warning line of `out`, that a size (of `what`: "" or a
 * benchmark's name and a space) ran out of its time with `samples` of the
 * MIN_BATCHES batches it wants. */
static inline void report_cut(FILE *out, const char *what, long size, size_t samples, double seconds)
{
    if (samples < MIN_BATCHES)
        fprintf(out, "# warning: %ssize %ld: cut by its time of %g s after %zu of %d timed batches\n", what, size,
                seconds, samples, MIN_BATCHES);
}

/* The median of n > 0 values sorted ascending. */
static inline double sorted_median(const double *sorted, size_t n)
{
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

/* Runs batch `number`, `rounds` round trips, and returns the seconds they
 * took (writing what it sends before them and checking what came back
 * after them, both outside the time). */
typedef double (*batch_runner)(void *context, long number, long rounds);

/* One message size's batches: warm-up batches of one round trip, then
 * timed batches until the size has run `seconds` (at least one), each
 * sized from the warm-up (and doubled while shorter than `target`).  `*times`
 * gets a malloc'd table, sorted ascending, of seconds per round trip, one
 * per timed batch, and `*round_trips` the timed round trips in all; returns
 * the table's length, 0 when it cannot be allocated (`*times` NULL). */
static inline size_t time_batches(batch_runner batch, void *context, double seconds, double target, double **times,
                                  long *round_trips)
{
    long number = 0;
    double fastest = 1.0e30;
    const double started = now_seconds();
    for (int w = 0; warmup_goes_on(w, started, seconds); w++) {
        double t = batch(context, number++, 1);
        if (t < fastest)
            fastest = t;
    }
    long rounds = first_batch_rounds(target, fastest, MAX_BATCH_ROUNDS);
    size_t capacity = 1024, samples = 0;
    double *sample = malloc(capacity * sizeof *sample);
    *round_trips = 0;
    while (sample != NULL && batches_go_on(samples, started, seconds)) {
        double t = batch(context, number++, rounds);
        if (samples == capacity) {
            capacity *= 2;
            double *grown = realloc(sample, capacity * sizeof *sample);
            if (grown == NULL)
                free(sample);
            sample = grown;
            if (sample == NULL)
                break;
        }
        sample[samples++] = t / (double)rounds;
        *round_trips += rounds;
        /* A short batch is kept (dropping fast ones would bias the minimum
         * up); the next ones get more round trips. */
        if (t < target && rounds < MAX_BATCH_ROUNDS)
            rounds = rounds * 2 < MAX_BATCH_ROUNDS ? rounds * 2 : MAX_BATCH_ROUNDS;
    }
    *times = sample;
    if (sample == NULL)
        return 0;
    qsort(sample, samples, sizeof *sample, compare_doubles);
    return samples;
}

/* What the echoes of one size's batches showed: how many were checked,
 * how many came back changed, and where the first one differed. */
struct message_check {
    long bad, checked, size, batch, offset;
    unsigned expected, got;
};

/* Batch `batch`'s message of `size` bytes: pseudo-random bytes (splitmix64)
 * of the size and the batch, so that an echo that brings back another
 * batch's message, or stale bytes, is caught. */
static inline void fill_message(unsigned char *message, long size, long batch)
{
    uint64_t word = mix64(((uint64_t)size << 32) ^ (uint64_t)batch);
    for (long k = 0; k < size; k++) {
        if (k % 8 == 0)
            word = mix64(word + (uint64_t)k);
        message[k] = (unsigned char)(word >> (8 * (k % 8)));
    }
}

/* Compares an echo with the message sent; the first bad one is kept. */
static inline void check_echo(const unsigned char *message, const unsigned char *echo, long size, long batch,
                              struct message_check *result)
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

/* One size's ping-pong as time_batches runs it: the kernel's own round
 * trips (`ping`), each batch's message written before and its echo checked
 * after them. */
struct ping_batches {
    double (*ping)(unsigned char *message, unsigned char *echo, long size, long rounds);
    unsigned char *message, *echo;
    long size;
    struct message_check *result;
};

static inline double timed_ping_batch(void *context, long number, long rounds)
{
    struct ping_batches *p = context;
    fill_message(p->message, p->size, number);
    double t = p->ping(p->message, p->echo, p->size, rounds);
    check_echo(p->message, p->echo, p->size, number, p->result);
    return t;
}

#endif
