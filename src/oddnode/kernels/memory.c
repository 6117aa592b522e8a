/*
 * oddnode memory kernel v1: sustainable memory bandwidth of one node.
 *
 * Four loops over three double arrays, in this order on every iteration:
 *   copy   c = a           (2 arrays moved: read a, write c)
 *   scale  b = s * c       (2 arrays)
 *   add    c = a + b       (3 arrays)
 *   triad  a = b + s * c   (3 arrays)
 * Each loop is an OpenMP parallel for with a static schedule; the arrays are
 * initialised by the same static schedule, so every page is first touched
 * (and therefore placed) by the thread that later streams through it.
 *
 * Usage: memory [-n ELEMENTS] [-t NTIMES] [-m MIN_LOOP_SECONDS] [-s MAX_SECONDS] [-C CPU_NODE] [-M MEM_NODE]
 *   The caller (oddnode.kernels) chooses ELEMENTS so that each array is at
 *   least four times the node's last-level cache; the default below is only a
 *   fallback for running the binary by hand.  With -m, each timed loop runs
 *   its pass over the arrays as many times in a row as it takes to last at
 *   least MIN_LOOP_SECONDS (counted from the first, untimed, iteration); the
 *   passes are idempotent (each writes what the same pass wrote before), so
 *   the values and their validation are those of one pass.  Long loops keep
 *   a rate clear of the timer and of a scheduler's time slices.
 *
 * Time budget: with -s, the timed iterations stop once MAX_SECONDS have
 *   passed since the first began.  A loop running when the time is up ends
 *   after the pass it is in (its time is scaled to the passes it was given,
 *   the rate being per pass), the iteration's other loops run one pass each,
 *   and no further iteration starts (the second always runs: it is the first
 *   counted).  A node that a competing process slows down then still reports
 *   its bandwidth in about MAX_SECONDS, however far from the first
 *   iteration's pace the calibrated loops fall.  The header then says
 *   "# iterations_run: K", fewer than NTIMES when the budget cut the run.
 *
 * NUMA binding (oddnode_numa.h, system calls only: no libnuma, no numactl):
 *   -C CPU_NODE  each thread is pinned to one CPU of that NUMA node (thread
 *                t to its t-th CPU this process may use, round robin); with
 *                no OMP_NUM_THREADS, as many threads as the node has such CPUs.
 *   -M MEM_NODE  the arrays are mapped and bound to that node (mbind,
 *                MPOL_BIND) before the first touch.
 *   Both are checked after the timed loops: every thread's CPU (and its
 *   affinity) within the node's, and 64 pages sampled per array on the
 *   memory node (get_mempolicy).  The header then says what was asked and
 *   what was had, and a line "binding ok" or "binding failed <what> ..."
 *   follows the results; without -C and -M the output is as before.
 *
 * Output (stdout): '#' header lines "# key: value", then one line per loop
 *   result <kernel> <best_MBps> <avg_s> <min_s> <max_s>
 * (MB = 10^6 bytes, best = shortest time, the first iteration not counted;
 * times are those of the whole timed loop, all its passes, scaled to them
 * for a loop the time budget cut short),
 * and finally "validation ok" or "validation failed <kernel> <max_rel_error>".
 * Exit status: 0 when the loops ran (even if validation or the binding check
 * failed: the parser decides what a failed run means), 2 for bad arguments,
 * 3 when the arrays cannot be allocated, 4 when the binding asked cannot be
 * made (no such NUMA node, none of its CPUs allowed, mbind refused).
 *
 * Compile-time settings (each with a guarded default):
 *   ODDNODE_DEFAULT_ELEMENTS  array length when -n is not given
 *   ODDNODE_DEFAULT_NTIMES    iterations when -t is not given
 *   ODDNODE_CFLAGS            string literal of the flags used, for the header
 *   ODDNODE_CORRUPT_ELEMENT   test only: index of an element of a that is
 *                             perturbed after the timed loop, so that the
 *                             validation must fail
 *   ODDNODE_TEST_NODE_CPUS    test only: a CPU list ("0") taken as the -C
 *                             node's CPUs instead of sysfs's
 *   ODDNODE_TEST_ESCAPE       test only: after the timed loops every thread
 *                             may run on every CPU again, so that the
 *                             binding check must fail when the node's CPUs
 *                             are fewer than the process's
 */
#define _GNU_SOURCE
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
#ifdef __linux__
#include "oddnode_numa.h"
#endif

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __linux__
#include <sched.h>
#endif

#ifndef ODDNODE_DEFAULT_ELEMENTS
#define ODDNODE_DEFAULT_ELEMENTS 20000000L /* 160 MB per array */
#endif
#ifndef ODDNODE_DEFAULT_NTIMES
#define ODDNODE_DEFAULT_NTIMES 10
#endif
#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define KERNEL_VERSION 1
#define NKERNELS 4
/* A best time shorter than this many timer ticks is too coarse to trust. */
#define MIN_TICKS 20
/* Alignment of the arrays: a page, so that vector loads never split pages. */
#define ARRAY_ALIGNMENT 4096
/* Relative size of the test-only perturbation: far above the tolerance. */
#define CORRUPTION 1.0e-6
/* The largest element count accepted: the three arrays must be addressable. */
#define MAX_ELEMENTS ((long long)(SIZE_MAX / (3 * sizeof(double))))

/*
 * The scalar s is the positive root of s^2 + 2s - 1 = 0 (s = sqrt(2) - 1).
 * One iteration maps a to b + s*c = s*a + s*(a + s*a) = (s^2 + 2s) * a = a,
 * so the values neither grow nor shrink however many iterations run: no
 * overflow for a large NTIMES, and a relative error keeps its meaning.
 */
static const double SCALAR = 0.41421356237309504880;

static const char *const KERNEL_NAMES[NKERNELS] = {"copy", "scale", "add", "triad"};
/* Arrays each loop moves through memory, as STREAM counts them. */
static const int ARRAYS_MOVED[NKERNELS] = {2, 2, 3, 3};
/* Most passes -m may ask of one timed loop: a bound on a mistaken -m with
 * tiny arrays, far above what seconds of streaming need. */
#define MAX_PASSES 1000000LL
/* Longest time budget -s accepts: a day. */
#define MAX_BUDGET_SECONDS 86400.0
/* Exit status when the NUMA binding asked for cannot be made. */
#define EXIT_BINDING 4
/* Pages sampled per array for the memory binding check: the first, the
 * last and evenly between; a wrong policy misplaces all of them, a node
 * running out of memory a growing share of the later ones. */
#define PAGES_SAMPLED 64

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s [-n ELEMENTS] [-t NTIMES] [-m MIN_LOOP_SECONDS] [-s MAX_SECONDS]\n"
            "  -n ELEMENTS  doubles per array, >= 1 (default %ld)\n"
            "  -t NTIMES    iterations, >= 2; the first is not counted (default %d)\n"
            "  -m SECONDS   repeat each timed loop's pass until it lasts this long, 0-60 (default 0: one pass)\n"
            "  -s SECONDS   stop the timed iterations after this long, 0-86400 (default 0: no bound)\n"
            "  -C NODE      pin the threads to the CPUs of this NUMA node\n"
            "  -M NODE      bind the arrays to the memory of this NUMA node\n",
            program, (long)ODDNODE_DEFAULT_ELEMENTS, ODDNODE_DEFAULT_NTIMES);
}

static const char *proc_bind_name(void)
{
#ifdef _OPENMP
    switch (omp_get_proc_bind()) {
    case omp_proc_bind_false: return "false";
    case omp_proc_bind_true: return "true";
    case omp_proc_bind_master: return "primary";
    case omp_proc_bind_close: return "close";
    case omp_proc_bind_spread: return "spread";
    default: return "unknown";
    }
#else
    return "none (built without OpenMP)";
#endif
}

static void copy_kernel(long n, const double *restrict a, double *restrict c)
{
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++)
        c[j] = a[j];
}

static void scale_kernel(long n, double s, const double *restrict c, double *restrict b)
{
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++)
        b[j] = s * c[j];
}

static void add_kernel(long n, const double *restrict a, const double *restrict b, double *restrict c)
{
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++)
        c[j] = a[j] + b[j];
}

static void triad_kernel(long n, double s, const double *restrict b, const double *restrict c, double *restrict a)
{
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++)
        a[j] = b[j] + s * c[j];
}

/* Largest |x[j] - expected| / |expected| over the array; NaN wins. */
static double max_relative_error(long n, const double *x, double expected)
{
    double worst = 0.0;
    double magnitude = expected < 0.0 ? -expected : expected;
#pragma omp parallel for schedule(static) reduction(max : worst)
    for (long j = 0; j < n; j++) {
        double diff = x[j] - expected;
        double error = (diff < 0.0 ? -diff : diff) / magnitude;
        if (!(error <= worst))
            worst = error != error ? DBL_MAX : error; /* NaN counts as the worst */
    }
    return worst;
}

int main(int argc, char **argv)
{
    long long elements = ODDNODE_DEFAULT_ELEMENTS;
    long long ntimes = ODDNODE_DEFAULT_NTIMES;
    double min_loop_seconds = 0.0;
    double max_seconds = 0.0; /* 0: no time budget */
    long long cpu_node = -1, mem_node = -1; /* -1: not bound */
    int option;

    opterr = 0;
    while ((option = getopt(argc, argv, "n:t:m:s:C:M:")) != -1) {
        switch (option) {
        case 'n':
            elements = parse_count(optarg, 1, MAX_ELEMENTS);
            if (elements < 0) {
                fprintf(stderr, "error: -n wants a whole number of elements >= 1, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 't':
            ntimes = parse_count(optarg, 2, INT_MAX);
            if (ntimes < 0) {
                fprintf(stderr, "error: -t wants a whole number of iterations >= 2, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'm':
            min_loop_seconds = parse_seconds(optarg, 0.0, 60.0);
            if (min_loop_seconds < 0.0) {
                fprintf(stderr, "error: -m wants seconds, 0-60, got '%s'\n", optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 's':
            max_seconds = parse_seconds(optarg, 0.0, MAX_BUDGET_SECONDS);
            if (max_seconds < 0.0) {
                fprintf(stderr, "error: -s wants seconds, 0-%g, got '%s'\n", MAX_BUDGET_SECONDS, optarg);
                usage(argv[0]);
                return 2;
            }
            break;
        case 'C':
        case 'M':
#ifdef __linux__
            if (option == 'C')
                cpu_node = parse_count(optarg, 0, ODDNODE_MAX_NUMA_NODE);
            else
                mem_node = parse_count(optarg, 0, ODDNODE_MAX_NUMA_NODE);
            if ((option == 'C' ? cpu_node : mem_node) < 0) {
                fprintf(stderr, "error: -%c wants a NUMA node number, 0-%d, got '%s'\n", option,
                        ODDNODE_MAX_NUMA_NODE, optarg);
                usage(argv[0]);
                return 2;
            }
            break;
#else
            fprintf(stderr, "error: -%c: NUMA binding needs Linux\n", option);
            return EXIT_BINDING;
#endif
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

    const long n = (long)elements;
    const size_t bytes_per_array = (size_t)n * sizeof(double);
    double *a = NULL, *b = NULL, *c = NULL;
    int mapped = 0; /* the arrays were mapped (and bound) rather than allocated */
    size_t mapped_bytes = 0;
#ifdef __linux__
    /* The binding asked for, made before the arrays are touched or the
     * threads started; what cannot be made stops the run (exit 4). */
    cpu_set_t node_cpus, bound_cpus;
    int bound_count = 0;
    char online[256];
    online_nodes(online, sizeof online);
    CPU_ZERO(&bound_cpus);
    if (cpu_node >= 0) {
        if (numa_node_cpus((int)cpu_node, &node_cpus, &bound_cpus) != 0) {
            fprintf(stderr, "error: no NUMA node %lld (online nodes: %s)\n", cpu_node, online);
            return EXIT_BINDING;
        }
#ifdef ODDNODE_TEST_NODE_CPUS
        parse_cpu_list(ODDNODE_TEST_NODE_CPUS, &node_cpus);
        CPU_AND(&bound_cpus, &bound_cpus, &node_cpus);
#endif
        bound_count = CPU_COUNT(&bound_cpus);
        if (bound_count == 0) {
            char listed[1024];
            format_cpu_list(&node_cpus, listed, sizeof listed);
            fprintf(stderr, "error: NUMA node %lld has no CPU this process may use (its CPUs: %s; see "
                            "Cpus_allowed_list in /proc/self/status)\n", cpu_node, listed);
            return EXIT_BINDING;
        }
    }
    int numa_memory = mem_node >= 0 && numa_in_kernel();
    if (mem_node > 0 && !numa_in_kernel()) {
        fprintf(stderr, "error: no NUMA node %lld: this kernel shows no NUMA nodes (one node, 0)\n", mem_node);
        return EXIT_BINDING;
    }
    if (numa_memory) {
        unsigned long long total = 0, free_bytes = 0;
        if (node_memory_bytes((int)mem_node, &total, &free_bytes) != 0) {
            fprintf(stderr, "error: no NUMA node %lld with memory (online nodes: %s)\n", mem_node, online);
            return EXIT_BINDING;
        }
        if (3.0 * (double)bytes_per_array > (double)total) {
            fprintf(stderr, "error: NUMA node %lld has %.0f MB of memory, the 3 arrays need %.0f MB\n",
                    mem_node, 1e-6 * (double)total, 3e-6 * (double)bytes_per_array);
            return EXIT_BINDING;
        }
        if (3.0 * (double)bytes_per_array > (double)free_bytes)
            printf("# warning: NUMA node %lld has %.0f MB free, the 3 arrays need %.0f MB: the kernel must "
                   "reclaim memory there first\n", mem_node, 1e-6 * (double)free_bytes,
                   3e-6 * (double)bytes_per_array);
        double **arrays[3] = {&a, &b, &c};
        for (int k = 0; k < 3; k++) {
            *arrays[k] = map_pages(bytes_per_array, &mapped_bytes);
            if (*arrays[k] == NULL) {
                fprintf(stderr, "error: cannot map 3 arrays of %zu bytes\n", bytes_per_array);
                return 3;
            }
            int refused = bind_memory(*arrays[k], mapped_bytes, (int)mem_node);
            if (refused != 0) {
                fprintf(stderr, "error: cannot bind memory to NUMA node %lld: mbind: %s (see "
                                "Mems_allowed_list in /proc/self/status)\n", mem_node, strerror(refused));
                return EXIT_BINDING;
            }
        }
        mapped = 1;
    }
#endif
    if (!mapped && (posix_memalign((void **)&a, ARRAY_ALIGNMENT, bytes_per_array) != 0
                    || posix_memalign((void **)&b, ARRAY_ALIGNMENT, bytes_per_array) != 0
                    || posix_memalign((void **)&c, ARRAY_ALIGNMENT, bytes_per_array) != 0)) {
        fprintf(stderr, "error: cannot allocate 3 arrays of %zu bytes\n", bytes_per_array);
        return 3;
    }

    int threads_requested = 1, threads_counted = 0, places = 0;
#ifdef _OPENMP
#ifdef __linux__
    /* Bound to a node's CPUs: one thread per CPU there unless told otherwise. */
    if (cpu_node >= 0 && getenv("OMP_NUM_THREADS") == NULL)
        omp_set_num_threads(bound_count);
#endif
    threads_requested = omp_get_max_threads();
    places = omp_get_num_places();
#endif
    int pin_errors = 0;
    /* Count the threads that really run, and where each one runs. */
    int *thread_cpu = calloc((size_t)threads_requested, sizeof(int));
    if (thread_cpu == NULL) {
        fprintf(stderr, "error: cannot allocate the thread table\n");
        return 3;
    }
#pragma omp parallel
    {
        int id = 0;
#ifdef _OPENMP
        id = omp_get_thread_num();
#endif
        int cpu = -1;
#ifdef __linux__
        /* Pinned here, in the first parallel region: OpenMP keeps these
         * threads for every later region, and each keeps its CPU. */
        if (cpu_node >= 0 && pin_to_cpu(nth_cpu(&bound_cpus, id % bound_count)) != 0) {
#pragma omp atomic
            pin_errors++;
        }
        cpu = sched_getcpu();
#endif
        if (id < threads_requested)
            thread_cpu[id] = cpu;
#pragma omp atomic
        threads_counted++;
    }

    /* First touch: each thread initialises the part of the arrays it streams. */
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }

    long long granularity_ns = timer_granularity_ns();

    printf("# oddnode memory kernel v%d\n", KERNEL_VERSION);
    printf("# elements: %ld\n", n);
    printf("# bytes_per_element: %zu\n", sizeof(double));
    printf("# bytes_per_array: %zu\n", bytes_per_array);
    printf("# ntimes: %lld\n", ntimes);
    printf("# threads_requested: %d\n", threads_requested);
    printf("# threads_counted: %d\n", threads_counted);
    printf("# proc_bind: %s\n", proc_bind_name());
    printf("# places: %d\n", places);
    printf("# thread_cpus:");
    for (int t = 0; t < threads_requested && t < threads_counted; t++)
        printf("%s%d", t == 0 ? " " : ",", thread_cpu[t]);
    printf("\n");
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", granularity_ns);
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
    printf("# scalar: %.17g\n", SCALAR);
    printf("# min_loop_seconds: %g\n", min_loop_seconds);
    if (max_seconds > 0.0)
        printf("# max_seconds: %g\n", max_seconds);
#ifdef __linux__
    if (cpu_node >= 0 || mem_node >= 0)
        printf("# numa_nodes: %s\n", online);
    if (cpu_node >= 0) {
        char listed[1024], bound[1024];
        format_cpu_list(&node_cpus, listed, sizeof listed);
        format_cpu_list(&bound_cpus, bound, sizeof bound);
        printf("# cpu_node: %lld\n", cpu_node);
        printf("# cpu_node_cpus: %s\n", listed);
        printf("# bound_cpus: %s\n", bound);
        printf("# cpu_binding: each thread pinned to one bound CPU (sched_setaffinity)\n");
        if (threads_requested > bound_count)
            printf("# warning: %d threads on %d CPUs of NUMA node %lld: threads share CPUs\n", threads_requested,
                   bound_count, cpu_node);
    }
    if (mem_node >= 0) {
        printf("# mem_node: %lld\n", mem_node);
        printf("# mem_policy: %s\n", numa_memory ? "bind (mbind MPOL_BIND before the first touch)"
                                                : "none (this kernel shows no NUMA nodes: one node)");
    }
#endif
#ifdef ODDNODE_CORRUPT_ELEMENT
    printf("# corrupt_element: %ld\n", (long)((ODDNODE_CORRUPT_ELEMENT) % n));
#endif
    fflush(stdout);
    free(thread_cpu);

    double *times = malloc(sizeof(double) * NKERNELS * (size_t)ntimes);
    if (times == NULL) {
        fprintf(stderr, "error: cannot allocate the timing table\n");
        return 3;
    }
    /* Passes per timed loop: one in the first iteration, then enough for -m. */
    long long passes[NKERNELS] = {1, 1, 1, 1};
    const double deadline = max_seconds > 0.0 ? now_seconds() + max_seconds : DBL_MAX;
    long long iterations = ntimes; /* those run: fewer when the budget ran out */
    for (long long k = 0; k < ntimes; k++) {
        for (int i = 0; i < NKERNELS; i++) {
            /* Once the budget is spent a loop stops after the pass it is in:
             * its time, scaled to the passes it was given, keeps its rate. */
            long long done = 0;
            double t0 = now_seconds();
            do {
                switch (i) {
                case 0: copy_kernel(n, a, c); break;
                case 1: scale_kernel(n, SCALAR, c, b); break;
                case 2: add_kernel(n, a, b, c); break;
                default: triad_kernel(n, SCALAR, b, c, a); break;
                }
                done++;
            } while (done < passes[i] && (max_seconds == 0.0 || now_seconds() < deadline));
            times[i * ntimes + k] = (now_seconds() - t0) * (double)passes[i] / (double)done;
        }
        if (k == 0 && min_loop_seconds > 0.0) {
            for (int i = 0; i < NKERNELS; i++) {
                double first = times[i * ntimes];
                double wanted = first > 0.0 ? min_loop_seconds / first : (double)MAX_PASSES;
                if (wanted >= (double)MAX_PASSES) {
                    passes[i] = MAX_PASSES;
                } else {
                    passes[i] = (long long)wanted; /* rounded up: */
                    if ((double)passes[i] < wanted || passes[i] < 1)
                        passes[i]++;
                }
            }
        }
        if (k >= 1 && k + 1 < ntimes && now_seconds() >= deadline) {
            iterations = k + 1;
            break;
        }
    }
    printf("# passes: copy %lld scale %lld add %lld triad %lld\n", passes[0], passes[1], passes[2], passes[3]);
    if (max_seconds > 0.0)
        printf("# iterations_run: %lld\n", iterations);

#ifdef ODDNODE_CORRUPT_ELEMENT
    a[(ODDNODE_CORRUPT_ELEMENT) % n] *= 1.0 + CORRUPTION;
#endif

    /* Statistics over the iterations run but the first: the first one pays for page
     * faults, thread start-up and cold caches, so it is not counted. */
    double best[NKERNELS], avg[NKERNELS], worst[NKERNELS];
    for (int i = 0; i < NKERNELS; i++) {
        best[i] = DBL_MAX;
        worst[i] = 0.0;
        avg[i] = 0.0;
        for (long long k = 1; k < iterations; k++) {
            double t = times[i * ntimes + k];
            avg[i] += t;
            if (t < best[i]) best[i] = t;
            if (t > worst[i]) worst[i] = t;
        }
        avg[i] /= (double)(iterations - 1);
        double ticks = best[i] * 1.0e9 / (double)granularity_ns;
        if (ticks < MIN_TICKS)
            printf("# warning: %s best time %.3e s is only %.0f timer ticks (< %d); "
                   "increase -n for a trustworthy rate\n",
                   KERNEL_NAMES[i], best[i], ticks, MIN_TICKS);
    }
    free(times);

    for (int i = 0; i < NKERNELS; i++) {
        double bytes = (double)passes[i] * (double)ARRAYS_MOVED[i] * (double)bytes_per_array;
        printf("result %s %.3f %.9f %.9f %.9f\n",
               KERNEL_NAMES[i], 1.0e-6 * bytes / best[i], avg[i], best[i], worst[i]);
    }

#ifdef __linux__
    /* Set, then read back: where every thread ran at the end (and may run),
     * and where the arrays' pages are. */
    if (cpu_node >= 0 || mem_node >= 0) {
        int outside = 0, outside_cpu = -1, ran = 0;
        if (cpu_node >= 0) {
#pragma omp parallel
            {
                cpu_set_t mine;
#ifdef ODDNODE_TEST_ESCAPE
                cpu_set_t every;
                memset(&every, 0xff, sizeof every);
                sched_setaffinity(0, sizeof every, &every);
#endif
                int cpu = sched_getcpu();
                int escaped = cpu < 0 || !CPU_ISSET(cpu, &bound_cpus);
                if (sched_getaffinity(0, sizeof mine, &mine) == 0) {
                    CPU_AND(&mine, &mine, &bound_cpus);
                    cpu_set_t full;
                    sched_getaffinity(0, sizeof full, &full);
                    escaped |= !CPU_EQUAL(&mine, &full);
                }
#pragma omp critical
                {
                    ran++;
                    if (escaped) {
                        outside++;
                        outside_cpu = cpu;
                    }
                }
            }
        }
        int checked = 0, on_node = 0, elsewhere = -1;
        if (numa_memory) {
            sample_page_nodes(a, bytes_per_array, (int)mem_node, PAGES_SAMPLED, &checked, &on_node, &elsewhere);
            sample_page_nodes(b, bytes_per_array, (int)mem_node, PAGES_SAMPLED, &checked, &on_node, &elsewhere);
            sample_page_nodes(c, bytes_per_array, (int)mem_node, PAGES_SAMPLED, &checked, &on_node, &elsewhere);
            printf("# mem_pages_checked: %d\n", checked);
            printf("# mem_pages_on_node: %d\n", on_node);
        }
        if (pin_errors > 0)
            printf("binding failed cpu %d of %d threads could not be pinned to NUMA node %lld\n", pin_errors,
                   threads_counted, cpu_node);
        else if (outside > 0)
            printf("binding failed cpu %d of %d threads ran or may run outside NUMA node %lld (one on cpu %d)\n",
                   outside, ran, cpu_node, outside_cpu);
        else if (numa_memory && on_node < checked && elsewhere == -2)
            printf("binding failed memory the kernel did not say where %d of %d sampled pages are\n",
                   checked - on_node, checked);
        else if (numa_memory && on_node < checked)
            printf("binding failed memory %d of %d sampled pages not on NUMA node %lld (one on node %d)\n",
                   checked - on_node, checked, mem_node, elsewhere);
        else
            printf("binding ok\n");
    }
#endif

    /* Replay the exact sequence of the iterations run on scalars: every element
     * of an array holds the same value, so one double per array suffices. */
    double ea = 1.0, eb = 2.0, ec = 0.0;
    for (long long k = 0; k < iterations; k++) {
        ec = ea;
        eb = SCALAR * ec;
        ec = ea + eb;
        ea = eb + SCALAR * ec;
    }

    /*
     * Tolerance.  Along one element's chain of dependencies an iteration rounds
     * at most 4 times (s*c, a+b, s*c, +), each with a relative error of at most
     * DBL_EPSILON/2, and the loops only add positive terms, so relative errors
     * add up rather than amplify: after NTIMES iterations each of the kernel's
     * value and the replayed one is within 2*NTIMES*DBL_EPSILON of the exact
     * result.  They may legitimately differ (the compiler may fuse s*c + b into
     * one FMA in one and not the other), hence twice that, 4*NTIMES*DBL_EPSILON,
     * doubled again for margin.  A lost or misplaced write, a race or a bad
     * memory cell gives an error of order 1, far above it.
     */
    const double tolerance = 8.0 * (double)iterations * DBL_EPSILON;
    const double error_a = max_relative_error(n, a, ea);
    const double error_b = max_relative_error(n, b, eb);
    const double error_c = max_relative_error(n, c, ec);
    printf("# tolerance: %.3e\n", tolerance);
    printf("# max_relative_error: a(triad) %.3e b(scale) %.3e c(add) %.3e\n", error_a, error_b, error_c);

    /* Each array was last written by one loop: a by triad, b by scale, c by add. */
    const char *failed = NULL;
    double failed_error = 0.0;
    if (error_a > tolerance && error_a > failed_error) { failed = "triad"; failed_error = error_a; }
    if (error_b > tolerance && error_b > failed_error) { failed = "scale"; failed_error = error_b; }
    if (error_c > tolerance && error_c > failed_error) { failed = "add"; failed_error = error_c; }
    if (failed == NULL)
        printf("validation ok\n");
    else
        printf("validation failed %s %.6e\n", failed, failed_error);

    if (mapped) {
        munmap(a, mapped_bytes);
        munmap(b, mapped_bytes);
        munmap(c, mapped_bytes);
    } else {
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
