/*
 * oddnode shm_pingpong kernel v1: latency and bandwidth between a CPU of one
 * NUMA node and a CPU of another (or of the same) inside one machine, over
 * shared memory.
 *
 *   shm_pingpong [-a NODE] [-b NODE] [-s SIZES] [-T SECONDS_PER_SIZE]
 *
 * Two threads of one process: end A pinned to the first CPU of NUMA node a
 * this process may use, end B to the first one of node b other than A's (on
 * another core than A's when the node has one: two hardware threads of one
 * core share its caches, which is not the path being measured).  Each end
 * receives into a channel in its own node's memory (mbind, MPOL_BIND,
 * before the first touch), as a shared-memory MPI transport's receive
 * queues are: a control cache line (the message's sequence number, its size,
 * a stop flag) and the payload.  A message is sent by copying it into the
 * peer's channel and then publishing its sequence number (a release store);
 * the receiver spins on that number (acquire) and copies the payload out.
 * One flag per message: a number never seen before, so no message is taken
 * twice and none is lost.
 *
 * A sends, B receives the whole message and sends it back, A receives the
 * echo.  For each message size: warm-up round trips, then timed batches as
 * the other ping-pong kernels' (oddnode_batches.h) until the size has run
 * SECONDS_PER_SIZE, its warm-up included (an upper bound; a size with fewer
 * than MIN_BATCHES batches is said cut).  One-way time = batch
 * time / round trips / 2; the minimum and the median over the batches.
 *
 * Data check: every message carries its sequence number in its first and
 * last 8 bytes (fewer in a shorter one), checked by the receiving end of
 * every message; the last echo of each batch is compared whole with the
 * message sent (a pattern of the size and the batch).  Binding check: at the
 * end each end's CPU is read back, and 16 pages of each channel are asked
 * where they are (get_mempolicy).
 *
 * Output (stdout): '#' header lines "# key: value", then one line per size
 *   result <bytes> <round_trips> <min_us> <median_us> <batches>
 * (the lines of the TCP and MPI ping-pong kernels, so that one parser reads
 * all three) and "validation ok", or "validation failed echo bad=N/M size=S
 * batch=B offset=K expected=X got=Y", or "validation failed binding
 * what=... expected=... got=...".
 *
 * Exit status: 0 done (even if a check failed: the output says so), 2 bad
 * arguments, 3 out of memory, 4 the binding asked cannot be made (no such
 * node, no usable CPU there, mbind refused), 5 a peer silent for
 * STALL_SECONDS.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oddnode_kernel.h"
#include "oddnode_batches.h"
#include "oddnode_numa.h"

#define KERNEL_VERSION 1
#define EXIT_USAGE 2
#define EXIT_MEMORY 3
#define EXIT_BINDING 4
#define EXIT_STALLED 5

#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define MAX_SIZES 64
#define MAX_SIZE (256L << 20)
/* The control line of a channel sits alone in its own 128 bytes: two cache
 * lines, as x86's adjacent-line prefetcher pulls pairs. */
#define CONTROL_BYTES 128
/* Pages of each channel asked where they are at the end. */
#define PAGES_SAMPLED 16
/* A peer that publishes nothing for this long has stopped (a descheduled
 * thread comes back within a scheduler period, milliseconds). */
#define STALL_SECONDS 60.0
/* Spins between two looks at the clock while waiting. */
#define SPINS_PER_CLOCK_READ 65536
/* Bytes of the sequence number stamped at each end of a message. */
#define STAMP_BYTES 8

/* One direction's receive queue: the control line, then the payload. */
struct channel {
    _Atomic unsigned long long sequence; /* of the last message published */
    _Atomic long size;
    _Atomic int stop;
    unsigned char *payload; /* CONTROL_BYTES after the start of the mapping */
    void *mapping;
    size_t mapped;
    int node; /* the NUMA node it is bound to, -1 when unbound */
};

struct end {
    int cpu;
    int node;
    int final_cpu;
    int pin_error;
};

static struct channel to_a, to_b;
static struct end end_a, end_b;
static long largest = 1;
static _Atomic long stamp_errors;
static _Atomic int b_ready;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin until the channel publishes `sequence`; the stall exits the process. */
static void wait_for(struct channel *channel, unsigned long long sequence)
{
    unsigned long spins = 0;
    double since = 0.0;
    while (atomic_load_explicit(&channel->sequence, memory_order_acquire) != sequence) {
        cpu_relax();
        if (++spins % SPINS_PER_CLOCK_READ == 0) {
            double now = now_seconds();
            if (since == 0.0)
                since = now;
            else if (now - since > STALL_SECONDS) {
                fprintf(stderr, "shm_pingpong: no message %llu from the peer for %.0f s\n", sequence,
                        STALL_SECONDS);
                exit(EXIT_STALLED);
            }
        }
    }
}

static void stamp(unsigned char *message, long size, unsigned long long sequence)
{
    long n = size < STAMP_BYTES ? size : STAMP_BYTES;
    memcpy(message, &sequence, (size_t)n);
    memcpy(message + size - n, &sequence, (size_t)n);
}

static int stamped(const unsigned char *message, long size, unsigned long long sequence)
{
    long n = size < STAMP_BYTES ? size : STAMP_BYTES;
    return memcmp(message, &sequence, (size_t)n) == 0 && memcmp(message + size - n, &sequence, (size_t)n) == 0;
}

static void send_message(struct channel *channel, const unsigned char *message, long size,
                         unsigned long long sequence, int stop)
{
    memcpy(channel->payload, message, (size_t)size);
    atomic_store_explicit(&channel->size, size, memory_order_relaxed);
    atomic_store_explicit(&channel->stop, stop, memory_order_relaxed);
    atomic_store_explicit(&channel->sequence, sequence, memory_order_release);
}

/* End B: take every message whole, check its stamps, send it back. */
static void *echo_end(void *unused)
{
    (void)unused;
    end_b.pin_error = pin_to_cpu(end_b.cpu);
    unsigned char *received = malloc((size_t)largest);
    if (received == NULL) {
        fprintf(stderr, "shm_pingpong: cannot allocate %ld bytes\n", largest);
        exit(EXIT_MEMORY);
    }
    memset(received, 0, (size_t)largest); /* placed on B's node by the first touch */
    atomic_store_explicit(&b_ready, 1, memory_order_release);
    for (unsigned long long sequence = 1;; sequence++) {
        wait_for(&to_b, sequence);
        if (atomic_load_explicit(&to_b.stop, memory_order_relaxed))
            break;
        long size = atomic_load_explicit(&to_b.size, memory_order_relaxed);
        memcpy(received, to_b.payload, (size_t)size);
        if (!stamped(received, size, sequence))
            atomic_fetch_add(&stamp_errors, 1);
        send_message(&to_a, received, size, sequence, 0);
    }
    end_b.final_cpu = sched_getcpu();
    free(received);
    return NULL;
}

static unsigned long long next_sequence = 1;

/* End A's batch: `rounds` round trips of `size` bytes; the seconds they took. */
static double ping_batch(unsigned char *message, unsigned char *echo, long size, long rounds)
{
    double started = now_seconds();
    for (long i = 0; i < rounds; i++) {
        unsigned long long sequence = next_sequence++;
        stamp(message, size, sequence);
        send_message(&to_b, message, size, sequence, 0);
        wait_for(&to_a, sequence);
        memcpy(echo, to_a.payload, (size_t)size);
        if (!stamped(echo, size, sequence))
            atomic_fetch_add(&stamp_errors, 1);
    }
    return now_seconds() - started;
}

/* End A: one size's batches; prints its result line (one way: half a round trip). */
static void ping_size(unsigned char *message, unsigned char *echo, long size, double seconds_per_size,
                      double target, struct message_check *result)
{
    struct ping_batches batches = {ping_batch, message, echo, size, result};
    double *times;
    long round_trips;
    size_t samples = time_batches(timed_ping_batch, &batches, seconds_per_size, target, &times, &round_trips);
    if (samples == 0) {
        fprintf(stderr, "shm_pingpong: cannot allocate the sample table\n");
        exit(EXIT_MEMORY);
    }
    report_cut(stdout, "", size, samples, seconds_per_size);
    printf("result %ld %ld %.3f %.3f %zu\n", size, round_trips, 0.5e6 * times[0],
           0.5e6 * sorted_median(times, samples), samples);
    free(times);
}

/* The CPU an end runs on: the first usable CPU of `node` that is not
 * `avoid`, on another core than `avoid` when the node has one; -1 if none. */
static int choose_cpu(const cpu_set_t *usable, int avoid)
{
    cpu_set_t siblings;
    CPU_ZERO(&siblings);
    if (avoid >= 0) {
        char path[128], text[1024];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", avoid);
        if (read_sysfs_line(path, text, sizeof text) != 0 || parse_cpu_list(text, &siblings) != 0)
            CPU_ZERO(&siblings);
        CPU_SET(avoid, &siblings);
    }
    int fallback = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, usable) || cpu == avoid)
            continue;
        if (!CPU_ISSET(cpu, &siblings))
            return cpu;
        if (fallback < 0)
            fallback = cpu;
    }
    return fallback;
}

/* A channel whose memory is bound to `node` (when the kernel has NUMA). */
static int make_channel(struct channel *channel, int node)
{
    channel->mapping = map_pages(CONTROL_BYTES + (size_t)largest, &channel->mapped);
    if (channel->mapping == NULL) {
        fprintf(stderr, "shm_pingpong: cannot map %ld bytes\n", CONTROL_BYTES + largest);
        return EXIT_MEMORY;
    }
    channel->node = -1;
    if (numa_in_kernel()) {
        int refused = bind_memory(channel->mapping, channel->mapped, node);
        if (refused != 0) {
            fprintf(stderr, "shm_pingpong: cannot bind memory to NUMA node %d: mbind: %s (see Mems_allowed_list "
                            "in /proc/self/status)\n", node, strerror(refused));
            return EXIT_BINDING;
        }
        channel->node = node;
    }
    memset(channel->mapping, 0, channel->mapped); /* every page faulted in now, on its node */
    channel->payload = (unsigned char *)channel->mapping + CONTROL_BYTES;
    atomic_init(&channel->sequence, 0);
    atomic_init(&channel->size, 0);
    atomic_init(&channel->stop, 0);
    return 0;
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s [-a NODE] [-b NODE] [-s SIZES] [-T SECONDS_PER_SIZE]\n"
            "  -a NODE     NUMA node of end A (default 0)\n"
            "  -b NODE     NUMA node of end B (default 0)\n"
            "  -s SIZES    message sizes in bytes, a comma list (default 8,4194304)\n"
            "  -T SECONDS  time per message size (default 1)\n",
            program);
}

static int bad_arguments(const char *program, const char *what, const char *value)
{
    fprintf(stderr, "%s: %s, got '%s'\n", program, what, value);
    usage(program);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    const char *program = argv[0];
    long long sizes[MAX_SIZES] = {8, 4L << 20};
    int count = 2;
    long long node_a = 0, node_b = 0;
    double seconds_per_size = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            count = parse_count_list(argv[++i], MAX_SIZE, sizes, MAX_SIZES);
            if (count < 0)
                return bad_arguments(program, "-s wants a comma list of distinct sizes in bytes, 0-268435456 each",
                                     argv[i]);
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            seconds_per_size = parse_seconds(argv[++i], 1.0e-6, 3600.0);
            if (seconds_per_size < 0.0)
                return bad_arguments(program, "-T wants seconds per size, > 0 and <= 3600", argv[i]);
        } else if ((strcmp(argv[i], "-a") == 0 || strcmp(argv[i], "-b") == 0) && i + 1 < argc) {
            long long *node = argv[i][1] == 'a' ? &node_a : &node_b;
            *node = parse_count(argv[++i], 0, ODDNODE_MAX_NUMA_NODE);
            if (*node < 0)
                return bad_arguments(program, "-a and -b want a NUMA node number, 0-1023", argv[i]);
        } else {
            return bad_arguments(program, "unknown option or missing value", argv[i]);
        }
    }
    for (int i = 0; i < count; i++)
        if (sizes[i] > largest)
            largest = (long)sizes[i];

    char online[256];
    online_nodes(online, sizeof online);
    cpu_set_t listed_a, usable_a, listed_b, usable_b;
    if (numa_node_cpus((int)node_a, &listed_a, &usable_a) != 0
        || numa_node_cpus((int)node_b, &listed_b, &usable_b) != 0) {
        fprintf(stderr, "shm_pingpong: no NUMA node %lld (online nodes: %s)\n",
                numa_node_cpus((int)node_a, &listed_a, &usable_a) != 0 ? node_a : node_b, online);
        return EXIT_BINDING;
    }
    end_a.node = (int)node_a;
    end_b.node = (int)node_b;
    end_a.cpu = choose_cpu(&usable_a, -1);
    end_b.cpu = end_a.cpu < 0 ? -1 : choose_cpu(&usable_b, end_a.cpu);
    if (end_a.cpu < 0 || end_b.cpu < 0) {
        fprintf(stderr, "shm_pingpong: NUMA node %lld has no CPU this process may use%s (see Cpus_allowed_list in "
                        "/proc/self/status)\n", end_a.cpu < 0 ? node_a : node_b,
                end_a.cpu < 0 ? "" : " besides end A's");
        return EXIT_BINDING;
    }
    int failed = make_channel(&to_a, end_a.node);
    if (failed == 0)
        failed = make_channel(&to_b, end_b.node);
    if (failed != 0)
        return failed;

    end_a.pin_error = pin_to_cpu(end_a.cpu);
    unsigned char *message = malloc((size_t)largest), *echo = malloc((size_t)largest);
    if (message == NULL || echo == NULL) {
        fprintf(stderr, "shm_pingpong: cannot allocate two buffers of %ld bytes\n", largest);
        return EXIT_MEMORY;
    }
    memset(message, 0, (size_t)largest);
    memset(echo, 0, (size_t)largest);
    pthread_t thread_b;
    if (pthread_create(&thread_b, NULL, echo_end, NULL) != 0) {
        fprintf(stderr, "shm_pingpong: cannot start the second thread\n");
        return EXIT_MEMORY;
    }
    while (!atomic_load_explicit(&b_ready, memory_order_acquire))
        cpu_relax();

    const long long granularity = timer_granularity_ns();
    const double target = min_batch_seconds(granularity);
    char text[1024];
    printf("# oddnode shm_pingpong kernel v%d\n", KERNEL_VERSION);
    printf("# mode: ping\n");
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
    printf("# numa_nodes: %s\n", online);
    format_cpu_list(&usable_a, text, sizeof text);
    printf("# a_node: %d\n# a_node_cpus: %s\n# a_cpu: %d\n", end_a.node, text, end_a.cpu);
    format_cpu_list(&usable_b, text, sizeof text);
    printf("# b_node: %d\n# b_node_cpus: %s\n# b_cpu: %d\n", end_b.node, text, end_b.cpu);
    printf("# memory: each end receives into a channel bound to its own NUMA node (%s)\n",
           to_a.node >= 0 ? "mbind MPOL_BIND before the first touch" : "no NUMA in this kernel: one node");
    printf("# transport: shared memory between two threads, a sequence-number flag per message\n");
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", granularity);
    printf("# sizes:");
    for (int i = 0; i < count; i++)
        printf("%s%lld", i ? "," : " ", sizes[i]);
    printf("\n# seconds_per_size: %g\n", seconds_per_size);
    printf("# min_batches: %d\n", MIN_BATCHES);
    printf("# min_batch_ns: %.0f\n", 1.0e9 * target);
    printf("# time: one-way = batch time / round trips / 2; min and median over batches\n");
    printf("# echo: end B receives a whole message, then sends it back; the last echo of each batch compared, "
           "every message's sequence stamps checked\n");
    fflush(stdout);

    struct message_check result = {0};
    for (int i = 0; i < count; i++) {
        ping_size(message, echo, (long)sizes[i], seconds_per_size, target, &result);
        fflush(stdout);
    }
    end_a.final_cpu = sched_getcpu();
    send_message(&to_b, message, 0, next_sequence, 1);
    pthread_join(thread_b, NULL);

    /* Where the channels' pages are, and where each end ran at the end. */
    int checked = 0, on_node = 0, elsewhere = -1, channel_node = -1;
    if (to_a.node >= 0) {
        sample_page_nodes(to_a.mapping, to_a.mapped, to_a.node, PAGES_SAMPLED, &checked, &on_node, &elsewhere);
        if (on_node < checked)
            channel_node = to_a.node;
        int before = on_node;
        sample_page_nodes(to_b.mapping, to_b.mapped, to_b.node, PAGES_SAMPLED, &checked, &on_node, &elsewhere);
        if (channel_node < 0 && on_node - before < PAGES_SAMPLED)
            channel_node = to_b.node;
        printf("# pages_checked: %d\n# pages_on_node: %d\n", checked, on_node);
    }
    printf("# a_final_cpu: %d\n# b_final_cpu: %d\n", end_a.final_cpu, end_b.final_cpu);
    long stamps = atomic_load(&stamp_errors);
    if (result.bad != 0)
        printf("validation failed echo bad=%ld/%ld size=%ld batch=%ld offset=%ld expected=%u got=%u\n", result.bad,
               result.checked, result.size, result.batch, result.offset, result.expected, result.got);
    else if (stamps != 0)
        printf("validation failed stamp bad=%ld messages whose sequence stamps differed from their flag's\n",
               stamps);
    else if (end_a.pin_error || end_b.pin_error)
        printf("validation failed binding what=pin a_error=%d b_error=%d\n", end_a.pin_error, end_b.pin_error);
    else if (end_a.final_cpu != end_a.cpu || end_b.final_cpu != end_b.cpu)
        printf("validation failed binding what=cpu expected=%d,%d got=%d,%d\n", end_a.cpu, end_b.cpu,
               end_a.final_cpu, end_b.final_cpu);
    else if (on_node < checked)
        printf("validation failed binding what=memory pages=%d/%d expected=%d got=%d\n", checked - on_node, checked,
               channel_node, elsewhere);
    else
        printf("validation ok\n");
    free(message);
    free(echo);
    munmap(to_a.mapping, to_a.mapped);
    munmap(to_b.mapping, to_b.mapped);
    return 0;
}
