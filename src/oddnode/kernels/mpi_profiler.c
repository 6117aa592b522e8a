/*
 * oddnode mpi_profiler v1: a PMPI interposition library, preloaded into an
 * unchanged MPI application (LD_PRELOAD=libmpi_profiler.so), that counts
 * and times its MPI calls per rank, per call and per message-size bucket.
 *
 * Every wrapper MPI_X reads the clock, calls PMPI_X, reads the clock again
 * and adds to a fixed table cell (call, bucket): count, total time, longest
 * call and bytes.  Buckets are those of oddnode.readings.profile.size_bucket:
 * bucket k >= 0 holds [2^k, 2^(k+1)) bytes, a 0-byte call bucket -1, and a
 * call without a size (Wait, Barrier, Probe) the "no size" bucket, written
 * '-'.  The message size of each call is defined as IMB and oddnode's set
 * kernels name it (docs/kernels.md lists every definition).
 *
 * Clock: on x86-64 with an invariant TSC (constant_tsc and nonstop_tsc in
 * /proc/cpuinfo) the time-stamp counter, its ticks per second calibrated
 * against CLOCK_MONOTONIC over the run (from the end of MPI_Init to
 * MPI_Finalize, at least CALIBRATION_NS); otherwise CLOCK_MONOTONIC in ns.
 *
 * Threads: under MPI_THREAD_SINGLE, FUNNELED and SERIALIZED one thread at a
 * time calls MPI (SERIALIZED: the application orders its calls, and with
 * them our updates), so cells are updated without a lock; when MPI_Init_thread
 * provides MPI_THREAD_MULTIPLE, every update takes one mutex.
 *
 * At MPI_Finalize (untimed, before PMPI_Finalize) every rank's non-empty
 * cells are gathered to rank 0 over PMPI calls on a duplicate of
 * MPI_COMM_WORLD, and rank 0 writes the text file named by the environment
 * variable ODDNODE_PROFILE_OUTPUT (to a temporary name, then renamed):
 *
 *   oddnode-mpi-profile 1
 *   ranks K
 *   clock tsc TICKS_PER_S | clock monotonic
 *   command ARGV words joined by spaces
 *   rank R HOST WALL_S MPI_S CPU          (one per rank; CPU '-' if unknown)
 *   call R MPI_NAME BUCKET COUNT TIME_S MAX_S BYTES   (BUCKET '-': no size)
 *   end
 *
 * Only C bindings are seen: Fortran bindings that do not go through the C
 * symbols are not counted.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define FORMAT_VERSION 1
/* Shortest span the TSC is calibrated over: 50 ms of CLOCK_MONOTONIC make
 * the rate good to a few parts per million (the two clocks are read within
 * ~100 ns of each other at both ends). */
#define CALIBRATION_NS 50000000LL
#define HOST_CHARS 256
#define COMMAND_CHARS 4096

/* The wrapped calls; CALL_NAMES in the same order. */
enum call {
    C_INIT, C_INIT_THREAD, C_FINALIZE,
    C_SEND, C_SSEND, C_BSEND, C_RSEND, C_ISEND, C_ISSEND, C_IRECV, C_RECV, C_SENDRECV, C_SENDRECV_REPLACE,
    C_WAIT, C_WAITALL, C_WAITANY, C_WAITSOME, C_TEST, C_TESTALL, C_TESTANY, C_PROBE, C_IPROBE,
    C_BARRIER, C_BCAST, C_REDUCE, C_ALLREDUCE, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK, C_SCAN, C_EXSCAN,
    C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, C_ALLGATHER, C_ALLGATHERV, C_ALLTOALL, C_ALLTOALLV,
    C_ALLTOALLW, C_IBARRIER, C_IBCAST, C_IALLREDUCE, C_IALLTOALL, CALLS
};
static const char *const CALL_NAMES[CALLS] = {
    "MPI_Init", "MPI_Init_thread", "MPI_Finalize",
    "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend", "MPI_Irecv", "MPI_Recv",
    "MPI_Sendrecv", "MPI_Sendrecv_replace",
    "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall", "MPI_Testany",
    "MPI_Probe", "MPI_Iprobe",
    "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
    "MPI_Scan", "MPI_Exscan", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather",
    "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw",
    "MPI_Ibarrier", "MPI_Ibcast", "MPI_Iallreduce", "MPI_Ialltoall"};

/* Bucket slots: 0 no size, 1 zero bytes (bucket -1), 2 + k bucket k for
 * sizes up to 2^63 bytes. */
#define NO_SIZE (-1LL)
#define SLOT_NONE 0
#define SLOT_ZERO 1
#define SLOTS 65

struct cell {
    uint64_t count;
    uint64_t ticks; /* total */
    uint64_t max_ticks;
    uint64_t bytes;
};

static struct cell table[CALLS][SLOTS];
static int use_tsc;           /* 1: ticks are TSC ticks; 0: ns of CLOCK_MONOTONIC */
static int use_lock;          /* MPI_THREAD_MULTIPLE provided */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
/* The clocks read together at the start of the span, for the calibration. */
static uint64_t span_ticks0;
static int64_t span_ns0;
static double span_cpu0 = -1.0; /* process CPU seconds at the start; < 0 unknown */
static char command_line[COMMAND_CHARS];

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline uint64_t ticks_now(void)
{
#if defined(__x86_64__)
    if (use_tsc)
        return __rdtsc();
#endif
    return (uint64_t)monotonic_ns();
}

/* Invariant TSC: the kernel's constant_tsc (fixed rate) and nonstop_tsc
 * (runs in deep C-states) flags on the first "flags" line. */
static int invariant_tsc(void)
{
#if defined(__x86_64__)
    FILE *file = fopen("/proc/cpuinfo", "r");
    if (file == NULL)
        return 0;
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        found = strstr(line, " constant_tsc") != NULL && strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    fclose(file);
    return found;
#else
    return 0;
#endif
}

/* utime + stime of this process in seconds (fields 14 and 15 of
 * /proc/self/stat, counted after the command name's closing parenthesis,
 * which may itself hold spaces); < 0 when unreadable. */
static double process_cpu_seconds(void)
{
    FILE *file = fopen("/proc/self/stat", "r");
    if (file == NULL)
        return -1.0;
    char text[4096];
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = '\0';
    char *after = strrchr(text, ')');
    if (after == NULL)
        return -1.0;
    unsigned long long utime, stime;
    /* After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt
     * cminflt majflt cmajflt utime(14) stime(15). */
    if (sscanf(after + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1.0;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (double)(utime + stime) / (double)hz : -1.0;
}

static void read_command_line(void)
{
    FILE *file = fopen("/proc/self/cmdline", "r");
    if (file == NULL)
        return;
    size_t length = fread(command_line, 1, sizeof command_line - 1, file);
    fclose(file);
    /* NUL-separated words -> one line; control characters become '?'. */
    while (length > 0 && command_line[length - 1] == '\0')
        length--;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)command_line[i];
        if (c == '\0')
            command_line[i] = ' ';
        else if (c < 0x20 || c == 0x7f)
            command_line[i] = '?';
    }
    command_line[length] = '\0';
}

__attribute__((constructor)) static void profiler_load(void)
{
    use_tsc = invariant_tsc();
    span_ns0 = monotonic_ns();
    span_ticks0 = ticks_now();
}

static inline int slot_of(long long bytes)
{
    if (bytes < 0)
        return SLOT_NONE;
    if (bytes == 0)
        return SLOT_ZERO;
    return 2 + (63 - __builtin_clzll((unsigned long long)bytes)); /* floor(log2) */
}

static inline void record(enum call call, long long bytes, uint64_t t0, uint64_t t1)
{
    uint64_t ticks = t1 > t0 ? t1 - t0 : 0;
    if (use_lock)
        pthread_mutex_lock(&table_lock);
    struct cell *cell = &table[call][slot_of(bytes)];
    cell->count++;
    cell->ticks += ticks;
    if (ticks > cell->max_ticks)
        cell->max_ticks = ticks;
    if (bytes > 0)
        cell->bytes += (uint64_t)bytes;
    if (use_lock)
        pthread_mutex_unlock(&table_lock);
}

static inline long long type_bytes(long long count, MPI_Datatype type)
{
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL)
        return 0;
    PMPI_Type_size(type, &size);
    return count * (long long)size;
}

static inline int comm_size(MPI_Comm comm)
{
    int size = 1;
    PMPI_Comm_size(comm, &size);
    return size > 0 ? size : 1;
}

static inline int comm_rank(MPI_Comm comm)
{
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return rank;
}

/* The span's start: the end of MPI_Init (or Init_thread). */
static void start_span(void)
{
    read_command_line();
    span_cpu0 = process_cpu_seconds();
    span_ns0 = monotonic_ns();
    span_ticks0 = ticks_now();
}

#define TIMED(call, bytes_expression, pmpi_call)                                                                  \
    do {                                                                                                          \
        uint64_t t0_ = ticks_now();                                                                               \
        int result_ = (pmpi_call);                                                                                \
        uint64_t t1_ = ticks_now();                                                                               \
        record((call), (bytes_expression), t0_, t1_);                                                             \
        return result_;                                                                                           \
    } while (0)

/* --- init and finalize ------------------------------------------------------------ */

int MPI_Init(int *argc, char ***argv)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Init(argc, argv);
    record(C_INIT, NO_SIZE, t0, ticks_now());
    start_span();
    return result;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Init_thread(argc, argv, required, provided);
    record(C_INIT_THREAD, NO_SIZE, t0, ticks_now());
    if (result == MPI_SUCCESS && provided != NULL && *provided == MPI_THREAD_MULTIPLE)
        use_lock = 1;
    start_span();
    return result;
}

/* What each rank sends rank 0. */
struct rank_head {
    double wall;
    double mpi;
    double cpu; /* < 0 unknown */
    int cells;
    char host[HOST_CHARS];
};
struct rank_cell {
    int call;
    int slot;
    uint64_t count;
    uint64_t bytes;
    double time;
    double max_time;
};

static void write_profile(const char *path, int ranks, double ticks_per_s, const struct rank_head *heads,
                          const struct rank_cell *cells)
{
    char temporary[4096];
    if (snprintf(temporary, sizeof temporary, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof temporary) {
        fprintf(stderr, "oddnode mpi_profiler: cannot write the profile %s: the path is too long\n", path);
        return;
    }
    FILE *file = fopen(temporary, "w");
    if (file == NULL) {
        fprintf(stderr, "oddnode mpi_profiler: cannot write the profile %s: %s\n", path, strerror(errno));
        return;
    }
    fprintf(file, "oddnode-mpi-profile %d\nranks %d\n", FORMAT_VERSION, ranks);
    if (use_tsc)
        fprintf(file, "clock tsc %.0f\n", ticks_per_s);
    else
        fprintf(file, "clock monotonic\n");
    fprintf(file, "command %s\n", command_line);
    for (int r = 0; r < ranks; r++) {
        fprintf(file, "rank %d %s %.9f %.9f ", r, heads[r].host[0] ? heads[r].host : "?", heads[r].wall,
                heads[r].mpi);
        if (heads[r].cpu < 0)
            fprintf(file, "-\n");
        else
            fprintf(file, "%.4f\n", heads[r].cpu);
    }
    const struct rank_cell *cell = cells;
    for (int r = 0; r < ranks; r++)
        for (int i = 0; i < heads[r].cells; i++, cell++) {
            fprintf(file, "call %d %s ", r, CALL_NAMES[cell->call]);
            if (cell->slot == SLOT_NONE)
                fprintf(file, "-");
            else
                fprintf(file, "%d", cell->slot - 2);
            fprintf(file, " %llu %.9f %.9f %llu\n", (unsigned long long)cell->count, cell->time, cell->max_time,
                    (unsigned long long)cell->bytes);
        }
    fprintf(file, "end\n");
    int failed = ferror(file);
    if (fclose(file) != 0 || failed) {
        fprintf(stderr, "oddnode mpi_profiler: cannot write the profile %s: %s\n", path, strerror(errno));
        unlink(temporary);
        return;
    }
    if (rename(temporary, path) != 0) {
        fprintf(stderr, "oddnode mpi_profiler: cannot write the profile %s: %s\n", path, strerror(errno));
        unlink(temporary);
    }
}

int MPI_Finalize(void)
{
    /* The span ends here; MPI_Finalize is counted once, its time is not
     * known when the profile is written (before PMPI_Finalize). */
    int64_t end_ns = monotonic_ns();
    uint64_t end_ticks = ticks_now();
    double cpu_end = process_cpu_seconds();
    record(C_FINALIZE, NO_SIZE, end_ticks, end_ticks);

    double wall = (double)(end_ns - span_ns0) * 1e-9;
    /* Calibrate the TSC over the span, stretched to CALIBRATION_NS when the
     * run was shorter (untimed: the application is done). */
    int64_t calibration_end = end_ns;
    uint64_t calibration_ticks = end_ticks;
    while (calibration_end - span_ns0 < CALIBRATION_NS) {
        calibration_end = monotonic_ns();
        calibration_ticks = ticks_now();
    }
    double ticks_per_s =
        use_tsc ? (double)(calibration_ticks - span_ticks0) / ((double)(calibration_end - span_ns0) * 1e-9) : 1e9;

    struct rank_head head;
    memset(&head, 0, sizeof head);
    head.wall = wall;
    head.cpu = span_cpu0 >= 0 && cpu_end >= 0 && wall > 0 ? (cpu_end - span_cpu0) / wall : -1.0;
    gethostname(head.host, HOST_CHARS - 1);
    for (char *c = head.host; *c; c++)
        if (*c <= ' ' || *c == 0x7f)
            *c = '?';
    static struct rank_cell mine[CALLS * SLOTS];
    uint64_t mpi_ticks = 0;
    for (int c = 0; c < CALLS; c++)
        for (int s = 0; s < SLOTS; s++) {
            const struct cell *cell = &table[c][s];
            if (cell->count == 0)
                continue;
            if (c != C_INIT && c != C_INIT_THREAD && c != C_FINALIZE)
                mpi_ticks += cell->ticks;
            mine[head.cells++] = (struct rank_cell){c, s, cell->count, cell->bytes,
                                                    (double)cell->ticks / ticks_per_s,
                                                    (double)cell->max_ticks / ticks_per_s};
        }
    head.mpi = (double)mpi_ticks / ticks_per_s;

    MPI_Comm world;
    int ranks = 1, rank = 0;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
        PMPI_Comm_size(world, &ranks);
        PMPI_Comm_rank(world, &rank);
        struct rank_head *heads = rank == 0 ? calloc((size_t)ranks, sizeof *heads) : NULL;
        int *counts = rank == 0 ? calloc((size_t)ranks, sizeof *counts) : NULL;
        int *offsets = rank == 0 ? calloc((size_t)ranks, sizeof *offsets) : NULL;
        int ok = rank != 0 || (heads && counts && offsets);
        PMPI_Gather(&head, (int)sizeof head, MPI_BYTE, heads, (int)sizeof head, MPI_BYTE, 0, world);
        long long total = 0;
        if (rank == 0 && ok)
            for (int r = 0; r < ranks; r++) {
                counts[r] = heads[r].cells * (int)sizeof(struct rank_cell);
                offsets[r] = (int)(total * (long long)sizeof(struct rank_cell));
                total += heads[r].cells;
            }
        struct rank_cell *cells = rank == 0 && ok ? calloc((size_t)(total > 0 ? total : 1), sizeof *cells) : NULL;
        PMPI_Gatherv(mine, head.cells * (int)sizeof(struct rank_cell), MPI_BYTE, cells, counts, offsets, MPI_BYTE,
                     0, world);
        if (rank == 0) {
            const char *path = getenv("ODDNODE_PROFILE_OUTPUT");
            if (!ok || cells == NULL)
                fprintf(stderr, "oddnode mpi_profiler: out of memory gathering %d ranks' profiles\n", ranks);
            else if (path == NULL || path[0] == '\0')
                fprintf(stderr, "oddnode mpi_profiler: ODDNODE_PROFILE_OUTPUT is not set: no profile written\n");
            else
                write_profile(path, ranks, ticks_per_s, heads, cells);
        }
        free(cells);
        free(heads);
        free(counts);
        free(offsets);
        PMPI_Comm_free(&world);
    } else if (rank == 0) {
        fprintf(stderr, "oddnode mpi_profiler: cannot duplicate MPI_COMM_WORLD: no profile written\n");
    }
    return PMPI_Finalize();
}

/* --- point to point --------------------------------------------------------------- */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(C_SEND, type_bytes(count, type), PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(C_SSEND, type_bytes(count, type), PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(C_BSEND, type_bytes(count, type), PMPI_Bsend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(C_RSEND, type_bytes(count, type), PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
    TIMED(C_ISEND, type_bytes(count, type), PMPI_Isend(buf, count, type, dest, tag, comm, request));
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    TIMED(C_ISSEND, type_bytes(count, type), PMPI_Issend(buf, count, type, dest, tag, comm, request));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *request)
{
    /* The posted size: what arrives is known only at its Wait. */
    TIMED(C_IRECV, type_bytes(count, type), PMPI_Irecv(buf, count, type, source, tag, comm, request));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *used = status == MPI_STATUS_IGNORE ? &own : status;
    uint64_t t0 = ticks_now();
    int result = PMPI_Recv(buf, count, type, source, tag, comm, used);
    uint64_t t1 = ticks_now();
    /* The received size; the posted one when the status does not say. */
    long long bytes = type_bytes(count, type);
    int received = MPI_UNDEFINED;
    if (result == MPI_SUCCESS && PMPI_Get_count(used, type, &received) == MPI_SUCCESS && received != MPI_UNDEFINED)
        bytes = type_bytes(received, type);
    record(C_RECV, bytes, t0, t1);
    return result;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    TIMED(C_SENDRECV, type_bytes(sendcount, sendtype),
          PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                        comm, status));
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status)
{
    TIMED(C_SENDRECV_REPLACE, type_bytes(count, type),
          PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status));
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    TIMED(C_WAIT, NO_SIZE, PMPI_Wait(request, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    TIMED(C_WAITALL, NO_SIZE, PMPI_Waitall(count, requests, statuses));
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    TIMED(C_WAITANY, NO_SIZE, PMPI_Waitany(count, requests, index, status));
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    TIMED(C_WAITSOME, NO_SIZE, PMPI_Waitsome(incount, requests, outcount, indices, statuses));
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    TIMED(C_TEST, NO_SIZE, PMPI_Test(request, flag, status));
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    TIMED(C_TESTALL, NO_SIZE, PMPI_Testall(count, requests, flag, statuses));
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    TIMED(C_TESTANY, NO_SIZE, PMPI_Testany(count, requests, index, flag, status));
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    TIMED(C_PROBE, NO_SIZE, PMPI_Probe(source, tag, comm, status));
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    TIMED(C_IPROBE, NO_SIZE, PMPI_Iprobe(source, tag, comm, flag, status));
}

/* --- collectives ------------------------------------------------------------------ */

int MPI_Barrier(MPI_Comm comm)
{
    TIMED(C_BARRIER, NO_SIZE, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    TIMED(C_BCAST, type_bytes(count, type), PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    TIMED(C_REDUCE, type_bytes(count, type), PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(C_ALLREDUCE, type_bytes(count, type), PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

/* The whole vector reduced, as IMB's Reduce_scatter names its size. */
static long long sum_counts_bytes(const int counts[], MPI_Datatype type, MPI_Comm comm)
{
    long long total = 0;
    int size = comm_size(comm);
    for (int i = 0; i < size; i++)
        total += counts[i];
    return type_bytes(total, type);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    uint64_t t1 = ticks_now();
    record(C_REDUCE_SCATTER, sum_counts_bytes(recvcounts, type, comm), t0, t1);
    return result;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
    uint64_t t1 = ticks_now();
    record(C_REDUCE_SCATTER_BLOCK, type_bytes((long long)recvcount * comm_size(comm), type), t0, t1);
    return result;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(C_SCAN, type_bytes(count, type), PMPI_Scan(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(C_EXSCAN, type_bytes(count, type), PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm));
}

/* Gather family: the per-rank block (the receive side's when the send side
 * is MPI_IN_PLACE). */
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    TIMED(C_GATHER, sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype),
          PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    uint64_t t1 = ticks_now();
    record(C_GATHERV, sendbuf == MPI_IN_PLACE ? type_bytes(recvcounts[comm_rank(comm)], recvtype)
                                              : type_bytes(sendcount, sendtype), t0, t1);
    return result;
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    TIMED(C_SCATTER, recvbuf == MPI_IN_PLACE ? type_bytes(sendcount, sendtype) : type_bytes(recvcount, recvtype),
          PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    uint64_t t1 = ticks_now();
    record(C_SCATTERV, recvbuf == MPI_IN_PLACE ? type_bytes(sendcounts[comm_rank(comm)], sendtype)
                                               : type_bytes(recvcount, recvtype), t0, t1);
    return result;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    TIMED(C_ALLGATHER,
          sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype),
          PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    uint64_t t1 = ticks_now();
    record(C_ALLGATHERV, sendbuf == MPI_IN_PLACE ? type_bytes(recvcounts[comm_rank(comm)], recvtype)
                                                 : type_bytes(sendcount, sendtype), t0, t1);
    return result;
}

/* Alltoall: the block sent to each destination (IMB's message size). */
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    TIMED(C_ALLTOALL, sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype),
          PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

/* Alltoallv/w: the mean block, total bytes sent over the communicator's size. */
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                comm);
    uint64_t t1 = ticks_now();
    int size = comm_size(comm);
    const int *counts = sendbuf == MPI_IN_PLACE ? recvcounts : sendcounts;
    MPI_Datatype type = sendbuf == MPI_IN_PLACE ? recvtype : sendtype;
    long long total = 0;
    for (int i = 0; i < size; i++)
        total += counts[i];
    record(C_ALLTOALLV, type_bytes(total, type) / size, t0, t1);
    return result;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm)
{
    uint64_t t0 = ticks_now();
    int result = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                comm);
    uint64_t t1 = ticks_now();
    int size = comm_size(comm);
    int in_place = sendbuf == MPI_IN_PLACE;
    long long total = 0;
    for (int i = 0; i < size; i++)
        total += in_place ? type_bytes(recvcounts[i], recvtypes[i]) : type_bytes(sendcounts[i], sendtypes[i]);
    record(C_ALLTOALLW, total / size, t0, t1);
    return result;
}

/* --- nonblocking collectives: sized as their blocking forms ----------------------- */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    TIMED(C_IBARRIER, NO_SIZE, PMPI_Ibarrier(comm, request));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request)
{
    TIMED(C_IBCAST, type_bytes(count, type), PMPI_Ibcast(buf, count, type, root, comm, request));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    TIMED(C_IALLREDUCE, type_bytes(count, type), PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    TIMED(C_IALLTOALL,
          sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype),
          PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request));
}
