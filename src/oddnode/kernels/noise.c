/*
 * oddnode noise kernel v1: operating-system noise on every CPU of one node,
 * in the fixed-work-quantum (FWQ) style.
 *
 * One thread is pinned to each CPU the process may use (sched_getaffinity;
 * -c restricts the list), and all of them run at once for SECONDS.  Each
 * thread repeats a fixed quantum of work -- a chain of dependent integer
 * multiply-adds that touches no memory, so that only the CPU being taken
 * away can make it slower -- and reads the clock after every quantum.  The
 * quanta follow one another with no gap (the end of one is the start of the
 * next), so every nanosecond of the run belongs to exactly one quantum.
 *
 * Baseline and detours.  Before the measurement each thread runs a short
 * warm-up and takes as its baseline the BASELINE_PERCENTILE-th percentile of
 * its warm-up quanta: a low quantile rather than the minimum, which one lucky
 * quantum (a frequency boost) would set, and far below the median, so that
 * a CPU interrupted in most of its warm-up quanta still finds its
 * undisturbed time.  A quantum longer than the baseline by more than the
 * threshold is a detour; the time it lost is its duration less the baseline.
 * The threshold is the largest of
 *   MIN_DETOUR_NS (1 us): a timer interrupt, the shortest thing the kernel
 *     does on a CPU, takes about that on current hardware; variation below it
 *     is the quantum's own (caches, branch predictors, the clock read);
 *   THRESHOLD_FRACTION (10%) of the baseline: a longer quantum's own jitter
 *     grows with it (a frequency step, a clock-rate correction), and a tenth
 *     is several times the 1-3% that quiet CPUs show;
 *   THRESHOLD_TICKS (10) timer ticks: a coarse clock would otherwise make
 *     its own steps look like detours.
 * lost_fraction = (sum of the detours' lost time) / elapsed time of the CPU.
 *
 * Duty (-d, below 1).  Under a CPU quota (a container, a cgroup) a thread
 * that never stops measures the quota: it is throttled at the quota's
 * period.  With a duty d, each thread works one burst of BURST_QUANTA
 * quanta in each window of BURST / d, starting at a uniformly random moment
 * of the window after sleeping to it (clock_nanosleep to an absolute
 * deadline, with 1 ns of timer slack): it takes a steady share d of its CPU,
 * never bunched (a Poisson schedule would sometimes cross a quota by
 * chance), and its samples fall at moments that carry no period of their
 * own (a start uniform over the whole window cancels every harmonic of the
 * window's period).  A wake-up later than the thread's baseline wake-up
 * (the same percentile of its warm-up's wake-ups) by more than the
 * threshold and at least MIN_WAKE_DETOUR_NS is a detour too: the CPU was not
 * there when wanted.  The elapsed time is then the time the thread wanted
 * the CPU: from each burst's deadline to its last quantum's end.
 *
 * Usage: noise [-s SECONDS] [-q QUANTUM_NS] [-c CPU,CPU,...] [-d DUTY] [-e EVENTS] [-w WARMUP_SECONDS]
 *
 * Output (stdout): '#' header lines "# key: value" (the configuration, the
 * timer's granularity and cost, the baseline and threshold rules), then one
 *   cpu <cpu> <observed_cpu> <quanta> <elapsed_ns> <baseline_ns> <threshold_ns>
 *       <lost_ns> <lost_fraction> <detours> <median_ns> <max_ns> <events> <complete_ns>
 *       <wakeups> <wake_baseline_ns>
 * line per CPU (the columns are named in "# cpu_columns"): the CPU asked
 * for and the one the thread found itself on at the end, its detours'
 * count, median lost time (from a histogram of 1/32-octave bins: within 2%)
 * and largest; then the detours themselves,
 *   detour <cpu> <offset_ns> <lost_ns>
 * (offset: start of the quantum that held it, from the earliest CPU's start),
 * in time order per CPU, at most EVENTS in all (EVENTS / CPUs per CPU): a
 * CPU whose detours were cut says so in a warning line, and its events are
 * complete up to <complete_ns> (the elapsed time otherwise); finally
 *   end <cpus> <events printed>
 * Exit status: 0 when the run completed, 2 for bad arguments, 3 when memory
 * cannot be allocated, 4 when a thread cannot be started or pinned.
 *
 * Compile-time settings (each with a guarded default):
 *   ODDNODE_DEFAULT_SECONDS     measured seconds when -s is not given
 *   ODDNODE_DEFAULT_QUANTUM_NS  the quantum's length when -q is not given
 *   ODDNODE_DEFAULT_EVENTS      detours printed at most when -e is not given
 *   ODDNODE_CFLAGS              string literal of the flags used, for the header
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "oddnode_kernel.h"

#ifndef ODDNODE_DEFAULT_SECONDS
#define ODDNODE_DEFAULT_SECONDS 10.0
#endif
#ifndef ODDNODE_DEFAULT_QUANTUM_NS
#define ODDNODE_DEFAULT_QUANTUM_NS 10000LL
#endif
#ifndef ODDNODE_DEFAULT_EVENTS
#define ODDNODE_DEFAULT_EVENTS 20000LL
#endif
#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define KERNEL_VERSION 1
#define DEFAULT_WARMUP_SECONDS 0.2
/* The warm-up keeps at most this many quanta for its percentile (0.5 MB). */
#define WARMUP_MAX_QUANTA 65536
/* ... and at least this many, whatever the warm-up's length. */
#define WARMUP_MIN_QUANTA 20
/* ... and at most this many wake-ups (with a duty below 1). */
#define WARMUP_MAX_WAKES 65536
/* With a duty below 1, a burst is this many quanta (200 us at 10 us). */
#define BURST_QUANTA 20
/* A wake-up is a detour when later than the thread's baseline wake-up by
 * more than the quantum's threshold and at least this much: above the exit
 * latency of a deep idle state (tens to 150 us) and a virtual machine's
 * timer jitter, far below a scheduler's time slice or a quota's throttling
 * (milliseconds). */
#define MIN_WAKE_DETOUR_NS 200000LL
#define BASELINE_PERCENTILE 10
#define MIN_DETOUR_NS 1000LL
#define THRESHOLD_FRACTION 0.10
#define THRESHOLD_TICKS 10
/* Detour histogram: exact below 64 ns, then 32 bins per power of two. */
#define HIST_SUB 32
#define HIST_BINS (61 * HIST_SUB)
/* Calibration: a quantum's work is found by doubling from this many steps
 * until the shortest of CALIBRATION_TRIALS runs lasts a quarter of the
 * quantum, then scaled to the whole quantum. */
#define CALIBRATION_START 16LL
#define CALIBRATION_TRIALS 21
#define TIMER_COST_READS 1001
#define MAX_CPUS CPU_SETSIZE

/* The clock in whole nanoseconds: no rounding of doubles in the loop. */
static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/* One quantum of work: `steps` dependent multiply-adds (an LCG step, whose
 * result the compiler cannot know without doing them). */
static __attribute__((noinline)) uint64_t work(uint64_t x, long long steps)
{
    for (long long i = 0; i < steps; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static volatile uint64_t sink;

static int hist_index(uint64_t d)
{
    if (d < 2 * HIST_SUB)
        return (int)d;
    int msb = 63 - __builtin_clzll(d);
    int shift = msb - 5; /* keep the leading bit and 5 more */
    return (shift + 1) * HIST_SUB + (int)((d >> shift) & (HIST_SUB - 1));
}

/* The middle of a histogram bin, in nanoseconds. */
static int64_t hist_value(int index)
{
    if (index < 2 * HIST_SUB)
        return index;
    int shift = index / HIST_SUB - 1;
    int64_t low = (int64_t)(HIST_SUB + index % HIST_SUB) << shift;
    return low + ((int64_t)1 << shift) / 2;
}

struct worker {
    int cpu;
    int observed_cpu;
    pthread_t thread;
    int64_t start_ns, end_ns;
    int64_t baseline_ns, threshold_ns;
    long long quanta;
    int64_t lost_ns;
    long long detours;
    int64_t max_ns;
    uint32_t hist[HIST_BINS];
    int64_t *events; /* offset (absolute ns), lost ns; pairs */
    long long capacity, stored;
    int64_t first_unstored_ns; /* start of the first detour not stored; 0: none */
    int64_t *warmup, *wakes; /* the warm-up's quanta and wake-ups, ns */
    long long kept, wakes_kept;
    int64_t wake_baseline_ns, wake_threshold_ns;
    long long wakeups;
    int64_t wanted_ns; /* time the thread wanted the CPU while measuring */
};

static long long g_steps;
static int64_t g_seconds_ns, g_warmup_ns, g_granularity_ns, g_burst_ns, g_window_ns;
static double g_duty = 1.0;
static pthread_barrier_t g_ready, g_measure;

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A detour of `lost` ns in the quantum (or the wake-up) that began at `at`. */
static void record(struct worker *w, int64_t at, int64_t lost)
{
    w->detours++;
    w->lost_ns += lost;
    if (lost > w->max_ns)
        w->max_ns = lost;
    w->hist[hist_index((uint64_t)lost)]++;
    if (w->stored < w->capacity) {
        w->events[2 * w->stored] = at;
        w->events[2 * w->stored + 1] = lost;
        w->stored++;
    } else if (w->first_unstored_ns == 0) {
        w->first_unstored_ns = at;
    }
}

/* A pseudo-random offset in [0, span): splitmix64's counter through
 * mix64, its top 53 bits a uniform number in [0, 1). */
static int64_t uniform_offset(uint64_t *state, int64_t span)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return (int64_t)((double)(mix64(*state) >> 11) / 9007199254740992.0 * (double)span);
}

static void sleep_until(int64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        continue;
}

/*
 * Quanta from now until `end`: back to back with a duty of 1; otherwise one
 * burst of g_burst_ns in each window of g_window_ns, at a uniformly random
 * moment of it, after a sleep to that deadline.  While warming up
 * (measuring == 0) the quanta's and the wake-ups' lengths are kept in
 * w->warmup and w->wakes; while measuring, quanta longer than the cutoff
 * and wake-ups later than the wake cutoff are detours.  The time the thread
 * wanted the CPU -- from each burst's deadline to its last quantum's end --
 * adds up in w->wanted_ns.
 */
static uint64_t run_quanta(struct worker *w, uint64_t x, int64_t end, int measuring, long long minimum)
{
    const int64_t cutoff = w->baseline_ns + w->threshold_ns;
    const int64_t wake_cutoff = w->wake_baseline_ns + w->wake_threshold_ns;
    uint64_t state = mix64((uint64_t)w->cpu * 0x2545f4914f6cdd1dULL + (uint64_t)now_ns());
    int64_t next = now_ns(), previous = next, window = next;
    long long quanta = 0;
    while (previous < end || quanta < minimum) {
        int64_t burst_end = end;
        if (g_duty < 1.0) {
            next = window + uniform_offset(&state, g_window_ns - g_burst_ns);
            if (next < previous)
                next = previous; /* the last burst overran this window */
            sleep_until(next);
            previous = now_ns();
            int64_t late = previous - next;
            if (!measuring) {
                if (w->wakes_kept < WARMUP_MAX_WAKES)
                    w->wakes[w->wakes_kept++] = late;
            } else {
                w->wakeups++;
                if (late > wake_cutoff)
                    record(w, next, late - w->wake_baseline_ns);
            }
            burst_end = previous + g_burst_ns;
        }
        do {
            x = work(x, g_steps);
            int64_t t = now_ns();
            int64_t d = t - previous;
            quanta++;
            if (!measuring) {
                if (w->kept < WARMUP_MAX_QUANTA)
                    w->warmup[w->kept++] = d;
            } else if (d > cutoff) {
                record(w, previous, d - w->baseline_ns);
            }
            previous = t;
        } while (previous < burst_end || (!measuring && quanta < minimum));
        w->wanted_ns += previous - next;
        /* The next window; those a long detour swallowed are skipped. */
        window += g_window_ns;
        if (window + g_window_ns <= previous)
            window = previous;
    }
    if (measuring)
        w->quanta = quanta;
    return x;
}

static void *run_worker(void *argument)
{
    struct worker *w = argument;
    uint64_t x = (uint64_t)w->cpu + 1;
    /* Wake-ups on time: the default 50 us of timer slack would be taken
     * for the CPU being busy. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_barrier_wait(&g_ready);

    /* Warm-up: caches, branch predictors and the CPU's clock settle, and its
     * quanta (and wake-ups) give the baselines. */
    x = run_quanta(w, x, now_ns() + g_warmup_ns, 0, WARMUP_MIN_QUANTA);
    qsort(w->warmup, (size_t)w->kept, sizeof(int64_t), compare_int64);
    w->baseline_ns = w->warmup[w->kept * BASELINE_PERCENTILE / 100];
    int64_t threshold = MIN_DETOUR_NS;
    if ((int64_t)(THRESHOLD_FRACTION * (double)w->baseline_ns) > threshold)
        threshold = (int64_t)(THRESHOLD_FRACTION * (double)w->baseline_ns);
    if (THRESHOLD_TICKS * g_granularity_ns > threshold)
        threshold = THRESHOLD_TICKS * g_granularity_ns;
    w->threshold_ns = threshold;
    if (w->wakes_kept > 0) {
        qsort(w->wakes, (size_t)w->wakes_kept, sizeof(int64_t), compare_int64);
        w->wake_baseline_ns = w->wakes[w->wakes_kept * BASELINE_PERCENTILE / 100];
    }
    w->wake_threshold_ns = threshold > MIN_WAKE_DETOUR_NS ? threshold : MIN_WAKE_DETOUR_NS;
    w->wanted_ns = 0;

    pthread_barrier_wait(&g_measure);
    w->start_ns = now_ns();
    x = run_quanta(w, x, w->start_ns + g_seconds_ns, 1, 0);
    w->end_ns = now_ns();
    w->observed_cpu = sched_getcpu();
    sink = x;
    return NULL;
}

static int64_t median_of(const struct worker *w)
{
    if (w->detours == 0)
        return 0;
    long long wanted = (w->detours + 1) / 2, seen = 0;
    for (int i = 0; i < HIST_BINS; i++) {
        seen += w->hist[i];
        if (seen >= wanted)
            return hist_value(i);
    }
    return w->max_ns;
}

/* The median cost of one clock read, in nanoseconds: the loop's overhead
 * per quantum. */
static int64_t timer_cost_ns(void)
{
    static int64_t gaps[TIMER_COST_READS];
    int64_t previous = now_ns();
    for (int i = 0; i < TIMER_COST_READS; i++) {
        int64_t t = now_ns();
        gaps[i] = t - previous;
        previous = t;
    }
    qsort(gaps, TIMER_COST_READS, sizeof(int64_t), compare_int64);
    return gaps[TIMER_COST_READS / 2];
}

/* The shortest of CALIBRATION_TRIALS runs of `steps` steps, in ns. */
static int64_t shortest_run(long long steps)
{
    int64_t best = INT64_MAX;
    uint64_t x = 1;
    for (int trial = 0; trial < CALIBRATION_TRIALS; trial++) {
        int64_t t0 = now_ns();
        x = work(x, steps);
        int64_t d = now_ns() - t0;
        if (d < best)
            best = d;
    }
    sink = x;
    return best;
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s [-s SECONDS] [-q QUANTUM_NS] [-c CPU,CPU,...] [-d DUTY] [-e EVENTS] [-w WARMUP_SECONDS]\n"
            "  -s SECONDS   measured time, 0.1-3600 (default %g)\n"
            "  -q NS        length of one work quantum, 100-100000000 ns (default %lld)\n"
            "  -c CPUS      CPUs to measure, a comma list (default every CPU the process may use)\n"
            "  -d DUTY      fraction of the time each thread works, 0.001-1 (default 1)\n"
            "  -e EVENTS    detours printed at most, over all CPUs, 0-10000000 (default %lld)\n"
            "  -w SECONDS   warm-up before the measurement, 0.01-60 (default %g)\n",
            program, (double)ODDNODE_DEFAULT_SECONDS, (long long)ODDNODE_DEFAULT_QUANTUM_NS,
            (long long)ODDNODE_DEFAULT_EVENTS, DEFAULT_WARMUP_SECONDS);
}

int main(int argc, char **argv)
{
    double seconds = ODDNODE_DEFAULT_SECONDS, warmup = DEFAULT_WARMUP_SECONDS, duty = 1.0;
    long long quantum_ns = ODDNODE_DEFAULT_QUANTUM_NS, event_limit = ODDNODE_DEFAULT_EVENTS;
    long long asked[MAX_CPUS];
    int nasked = 0;
    int option;

    opterr = 0;
    while ((option = getopt(argc, argv, "s:q:c:d:e:w:")) != -1) {
        switch (option) {
        case 's':
            seconds = parse_seconds(optarg, 0.1, 3600.0);
            if (seconds < 0.0) {
                fprintf(stderr, "error: -s wants seconds, 0.1-3600, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'q':
            quantum_ns = parse_count(optarg, 100, 100000000);
            if (quantum_ns < 0) {
                fprintf(stderr, "error: -q wants nanoseconds, 100-100000000, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'c':
            nasked = parse_count_list(optarg, MAX_CPUS - 1, asked, MAX_CPUS);
            if (nasked < 1) {
                fprintf(stderr, "error: -c wants a comma list of distinct CPU numbers, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'd':
            duty = parse_seconds(optarg, 0.001, 1.0);
            if (duty < 0.0) {
                fprintf(stderr, "error: -d wants a fraction of the time, 0.001-1, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'e':
            event_limit = parse_count(optarg, 0, 10000000);
            if (event_limit < 0) {
                fprintf(stderr, "error: -e wants a whole number of events, 0-10000000, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'w':
            warmup = parse_seconds(optarg, 0.01, 60.0);
            if (warmup < 0.0) {
                fprintf(stderr, "error: -w wants seconds, 0.01-60, got '%s'\n", optarg);
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

    /* The CPUs: every one the process may use, or those asked for (each of
     * which it must be allowed to use). */
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "error: sched_getaffinity: %s\n", strerror(errno));
        return 4;
    }
    int cpus[MAX_CPUS], ncpus = 0;
    if (nasked > 0) {
        for (int i = 0; i < nasked; i++) {
            if (!CPU_ISSET((int)asked[i], &allowed)) {
                fprintf(stderr, "error: -c: CPU %lld is not one this process may use\n", asked[i]);
                return 2;
            }
            cpus[ncpus++] = (int)asked[i];
        }
    } else {
        for (int cpu = 0; cpu < MAX_CPUS; cpu++)
            if (CPU_ISSET(cpu, &allowed))
                cpus[ncpus++] = cpu;
    }

    struct worker *workers = calloc((size_t)ncpus, sizeof *workers);
    if (workers == NULL) {
        fprintf(stderr, "error: cannot allocate %d workers\n", ncpus);
        return 3;
    }
    long long capacity = event_limit / ncpus;
    for (int i = 0; i < ncpus; i++) {
        workers[i].cpu = cpus[i];
        workers[i].observed_cpu = -1;
        workers[i].capacity = capacity;
        workers[i].warmup = malloc(sizeof(int64_t) * WARMUP_MAX_QUANTA);
        workers[i].wakes = malloc(sizeof(int64_t) * WARMUP_MAX_WAKES);
        workers[i].events = capacity ? malloc(sizeof(int64_t) * 2 * (size_t)capacity) : NULL;
        if (workers[i].warmup == NULL || workers[i].wakes == NULL || (capacity && workers[i].events == NULL)) {
            fprintf(stderr, "error: cannot allocate the event buffers of %d CPUs\n", ncpus);
            return 3;
        }
    }

    /* Calibrate on the first CPU: the work of one quantum. */
    cpu_set_t first;
    CPU_ZERO(&first);
    CPU_SET(cpus[0], &first);
    if (sched_setaffinity(0, sizeof first, &first) != 0) {
        fprintf(stderr, "error: cannot pin to CPU %d: %s\n", cpus[0], strerror(errno));
        return 4;
    }
    g_granularity_ns = timer_granularity_ns();
    int64_t cost = timer_cost_ns();
    long long steps = CALIBRATION_START;
    int64_t shortest = shortest_run(steps);
    while (shortest < quantum_ns / 4 && steps < LLONG_MAX / 4) {
        steps *= 2;
        shortest = shortest_run(steps);
    }
    steps = (long long)((double)steps * (double)quantum_ns / (double)(shortest > 0 ? shortest : 1));
    if (steps < 1)
        steps = 1;
    g_steps = steps;
    int64_t calibrated = shortest_run(steps);
    g_seconds_ns = (int64_t)(seconds * 1e9);
    g_warmup_ns = (int64_t)(warmup * 1e9);
    g_duty = duty;
    g_burst_ns = BURST_QUANTA * quantum_ns;
    g_window_ns = (int64_t)((double)g_burst_ns / duty);

    printf("# oddnode noise kernel v%d\n", KERNEL_VERSION);
    printf("# cpus: %d\n", ncpus);
    printf("# cpu_list:");
    for (int i = 0; i < ncpus; i++)
        printf("%s%d", i == 0 ? " " : ",", cpus[i]);
    printf("\n");
    printf("# seconds: %g\n", seconds);
    printf("# warmup_seconds: %g\n", warmup);
    printf("# quantum_ns: %lld\n", quantum_ns);
    printf("# work_steps: %lld\n", steps);
    printf("# calibrated_quantum_ns: %lld\n", (long long)calibrated);
    printf("# baseline: percentile %d of the warm-up quanta\n", BASELINE_PERCENTILE);
    printf("# threshold: max(%lld ns, %.2f x baseline, %d timer ticks)\n", MIN_DETOUR_NS, THRESHOLD_FRACTION,
           THRESHOLD_TICKS);
    printf("# duty: %g\n", duty);
    if (duty < 1.0) {
        printf("# burst_ns: %lld\n", (long long)g_burst_ns);
        printf("# window_ns: %lld\n", (long long)g_window_ns);
        printf("# wake_threshold: max(%lld ns, the threshold) over the wake baseline, percentile %d of the "
               "warm-up's wake-ups\n", MIN_WAKE_DETOUR_NS, BASELINE_PERCENTILE);
    }
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", (long long)g_granularity_ns);
    printf("# timer_cost_ns: %lld\n", (long long)cost);
    printf("# event_limit: %lld\n", event_limit);
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
    fflush(stdout);

    if (pthread_barrier_init(&g_ready, NULL, (unsigned)ncpus) != 0
        || pthread_barrier_init(&g_measure, NULL, (unsigned)ncpus) != 0) {
        fprintf(stderr, "error: cannot make the threads' barriers\n");
        return 4;
    }
    for (int i = 0; i < ncpus; i++) {
        pthread_attr_t attributes;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[i], &one);
        pthread_attr_init(&attributes);
        /* Pinned before it starts: the thread never runs elsewhere. */
        int error = pthread_attr_setaffinity_np(&attributes, sizeof one, &one);
        if (error == 0)
            error = pthread_create(&workers[i].thread, &attributes, run_worker, &workers[i]);
        pthread_attr_destroy(&attributes);
        if (error != 0) {
            fprintf(stderr, "error: cannot start a thread pinned to CPU %d: %s\n", cpus[i], strerror(error));
            return 4;
        }
    }
    for (int i = 0; i < ncpus; i++)
        pthread_join(workers[i].thread, NULL);

    int64_t origin = INT64_MAX;
    for (int i = 0; i < ncpus; i++)
        if (workers[i].start_ns < origin)
            origin = workers[i].start_ns;
    int64_t shortest_quantum = INT64_MAX;
    for (int i = 0; i < ncpus; i++)
        if (workers[i].baseline_ns < shortest_quantum)
            shortest_quantum = workers[i].baseline_ns;
    if (shortest_quantum < 20 * g_granularity_ns)
        printf("# warning: the shortest baseline, %lld ns, is under 20 timer ticks; increase -q\n",
               (long long)shortest_quantum);

    printf("# cpu_columns: cpu observed_cpu quanta elapsed_ns baseline_ns threshold_ns lost_ns lost_fraction "
           "detours median_ns max_ns events complete_ns wakeups wake_baseline_ns\n");
    int cut = 0;
    for (int i = 0; i < ncpus; i++) {
        struct worker *w = &workers[i];
        int64_t elapsed = w->wanted_ns;
        int64_t complete = (w->first_unstored_ns ? w->first_unstored_ns : w->end_ns) - origin;
        cut += w->first_unstored_ns != 0;
        printf("cpu %d %d %lld %lld %lld %lld %lld %.9f %lld %lld %lld %lld %lld %lld %lld\n", w->cpu,
               w->observed_cpu, w->quanta, (long long)elapsed, (long long)w->baseline_ns, (long long)w->threshold_ns,
               (long long)w->lost_ns, elapsed > 0 ? (double)w->lost_ns / (double)elapsed : 0.0, w->detours,
               (long long)median_of(w), (long long)w->max_ns, w->stored, (long long)complete, w->wakeups,
               (long long)w->wake_baseline_ns);
    }
    printf("# events_cut: %d\n", cut);
    for (int i = 0; i < ncpus; i++) {
        struct worker *w = &workers[i];
        if (w->first_unstored_ns)
            printf("# warning: cpu %d: %lld of %lld detours printed (event limit %lld); its detours are complete "
                   "to %.6f s\n", w->cpu, w->stored, w->detours, event_limit,
                   1e-9 * (double)(w->first_unstored_ns - origin));
    }
    printf("# detour_columns: cpu offset_ns lost_ns\n");
    long long printed = 0;
    for (int i = 0; i < ncpus; i++) {
        struct worker *w = &workers[i];
        for (long long k = 0; k < w->stored; k++)
            printf("detour %d %lld %lld\n", w->cpu, (long long)(w->events[2 * k] - origin),
                   (long long)w->events[2 * k + 1]);
        printed += w->stored;
    }
    printf("end %d %lld\n", ncpus, printed);

    for (int i = 0; i < ncpus; i++) {
        free(workers[i].warmup);
        free(workers[i].wakes);
        free(workers[i].events);
    }
    free(workers);
    return 0;
}
