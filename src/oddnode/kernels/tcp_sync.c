/*
 * oddnode tcp_sync kernel v1: the bulk-synchronous iterations of mpi_sync
 * over plain TCP, for nodes without MPI, one rank per node.
 *
 *   tcp_sync -r RANK -R HOST:PORT,HOST:PORT,... [-o allreduce|barrier] [-q US] [-n N | -s SECONDS] [-W N]
 *            [-N NAME,...] [-w CONNECT_WAIT] [-i IO_TIMEOUT]
 *
 * The K ranks are the K addresses of -R, in order (an IPv6 address in
 * brackets); this process is rank RANK and listens on its own entry's port
 * on every address.  On a cluster every rank has its own host and the same
 * port; on one machine, distinct ports.  Every rank is started by the
 * caller (oddnode starts them all at one moment through its transport).
 *
 * Tree: the ranks form a binomial tree rooted at rank 0: rank r's parent is
 * r with its lowest set bit cleared, its children r + 2^k for every 2^k
 * below that bit (every 2^k for rank 0) while below K.  Each rank accepts
 * its children's connections, then connects to its parent (retrying a
 * refusal: all start at about the same moment), all within CONNECT_WAIT
 * seconds; a greeting names both ranks, the rank count and the run's seed,
 * so a rank of another run, or at the wrong place in the list, is refused.
 *
 * Collectives: a reduction goes up the tree (a rank reads each child's
 * values in turn, combines them with its own and sends the result to its
 * parent), a broadcast down it; an allreduce is both, 2·ceil(log2 K) hops.
 * The iteration's allreduce sums one double; its barrier reduces the
 * iteration's number (every rank's must match: a protocol check) and
 * broadcasts it back.  Reads block in recv() (a waiting rank sleeps, as
 * Open MPI's never does), every read and write bounded by IO_TIMEOUT.  The
 * laggard triples go up the tree once at the end, and every rank's summary
 * is gathered at rank 0 along the same edges.
 *
 * Output: that of mpi_sync (see oddnode_sync.h and mpi_sync.c), with
 * "# transport: tcp" and "# rank: R HOST NODE" (HOST: the rank's
 * gethostname(); NODE: -N's name, else the host of its -R entry).  Only
 * rank 0 prints; the others print nothing unless they fail.
 *
 * Exit status: 0 done (even if the check failed: the output says so), 2 bad
 * arguments, 3 when a rank never came (refused or no connection within
 * CONNECT_WAIT), 4 for a network or protocol error (a rank vanished,
 * stopped for IO_TIMEOUT seconds, or is of another run).  The error names
 * the rank and its address; a rank that fails closes its connections, so
 * its neighbours fail in turn and none hangs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "oddnode_kernel.h"
#include "oddnode_net.h"
#include "oddnode_ranks.h"
#include "oddnode_sync.h"

#define PROTOCOL_VERSION 1
#define MAX_RANKS 4096
/* A rank of a binomial tree over at most MAX_RANKS has at most this many children. */
#define MAX_CHILDREN 13
#define DEFAULT_SEED 1

/* Every record opens with three big-endian words: the magic with the
 * command in its low byte, a tag (an iteration, a rank) and the count of
 * 64-bit payload words that follow. */
#define MAGIC 0x6f646473796e6300ULL /* "oddsync\0" */
enum command { CMD_HELLO = 1, CMD_UP = 2, CMD_DOWN = 3, CMD_GATHER = 4, CMD_LAGGARDS = 5 };
#define HEADER_BYTES 24

static struct {
    double wait;
    int io_timeout;
    uint64_t seed;
    struct rank_address *address;
    int parent;               /* -1 for rank 0 */
    int parent_fd;
    int children;
    int child[MAX_CHILDREN];  /* their ranks, ascending */
    int child_fd[MAX_CHILDREN];
    unsigned char *buffer;    /* one record's payload, grown as needed */
    size_t buffer_size;
} tree = {.wait = ODDNODE_DEFAULT_CONNECT_WAIT, .io_timeout = ODDNODE_DEFAULT_IO_TIMEOUT, .seed = DEFAULT_SEED,
          .parent = -1, .parent_fd = -1};

/* die() of oddnode_net.h: the message names this rank. */
static void die(int status, const char *format, ...)
{
    char who[40];
    snprintf(who, sizeof who, "tcp_sync rank %d: ", sync_rank);
    va_list args;
    va_start(args, format);
    exit_with_error(status, who, format, args);
}

static void transport_abort(int status, const char *format, ...)
{
    char who[40];
    snprintf(who, sizeof who, "tcp_sync rank %d: ", sync_rank);
    va_list args;
    va_start(args, format);
    exit_with_error(status, who, format, args);
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s -r RANK -R HOST:PORT,HOST:PORT,... [-o OPERATION] [-q US] [-n N | -s SECONDS] [-W N]\n"
            "          [-N NAMES] [-S SEED] [-w CONNECT_WAIT] [-i IO_TIMEOUT]\n"
            "  -R LIST       every rank's address in rank order, 2 to %d of them (IPv6 in brackets: [::1]:5000)\n"
            "  -r RANK       this rank, 0 to K-1: it listens on its own entry's port\n"
            "  -S SEED       the run's seed, the same on every rank: ranks of other runs are refused (default %d)\n"
            "  -w SECONDS    how long to wait for the tree's connections (default %g)\n"
            "  -i SECONDS    give up when nothing moves for this long (default %d)\n%s",
            program, MAX_RANKS, DEFAULT_SEED, ODDNODE_DEFAULT_CONNECT_WAIT, ODDNODE_DEFAULT_IO_TIMEOUT,
            SYNC_OPTIONS_HELP);
}

/* --- records ------------------------------------------------------------------------ */

static const char *rank_text(int rank)
{
    return rank_address_text(&tree.address[rank], rank);
}

static const char *io_error_text(int error)
{
    return rank_io_error_text(error, tree.io_timeout);
}

/* Records of up to this many payload words leave in one send(), header and
 * all: one segment per hop for an iteration's collective. */
#define SMALL_RECORD_WORDS 64

static void send_record(int fd, int rank, int command, uint64_t tag, const unsigned char *payload, uint64_t words)
{
    unsigned char small[HEADER_BYTES + 8 * SMALL_RECORD_WORDS];
    put_be64(small, MAGIC | (uint64_t)command);
    put_be64(small + 8, tag);
    put_be64(small + 16, words);
    int error;
    if (words <= SMALL_RECORD_WORDS) {
        if (words > 0)
            memcpy(small + HEADER_BYTES, payload, (size_t)words * 8);
        error = send_fully(fd, small, HEADER_BYTES + (size_t)words * 8);
    } else {
        error = send_fully(fd, small, HEADER_BYTES);
        if (error == 0)
            error = send_fully(fd, payload, (size_t)words * 8);
    }
    if (error != 0)
        die(EXIT_NETWORK, "sending to %s: %s", rank_text(rank), io_error_text(error));
}

/* A record of `command` with `tag` and `words` payload words from `rank`
 * (-1: a rank that connected, not yet known); its payload in tree.buffer. */
static void receive_record(int fd, int rank, int command, uint64_t tag, uint64_t words)
{
    unsigned char header[HEADER_BYTES];
    const char *whom = rank >= 0 ? rank_text(rank) : "a rank that connected";
    int error = recv_fully(fd, header, sizeof header);
    if (error != 0)
        die(EXIT_NETWORK, "waiting for %s: %s", whom, io_error_text(error));
    uint64_t magic = get_be64(header), got_tag = get_be64(header + 8), got_words = get_be64(header + 16);
    if ((magic & ~0xffULL) != MAGIC)
        die(EXIT_NETWORK, "%s sent something that is not a tcp_sync record (0x%016llx): another program or another "
                          "version of this kernel", whom, (unsigned long long)magic);
    if ((magic & 0xff) != (uint64_t)command || got_tag != tag || got_words != words)
        die(EXIT_NETWORK, "protocol error from %s: command %llu, tag %llu, %llu words where %d, %llu, %llu were "
                          "expected", whom, (unsigned long long)(magic & 0xff), (unsigned long long)got_tag,
            (unsigned long long)got_words, command, (unsigned long long)tag, (unsigned long long)words);
    if (words * 8 > tree.buffer_size) {
        free(tree.buffer);
        tree.buffer_size = (size_t)words * 8;
        tree.buffer = malloc(tree.buffer_size);
        if (tree.buffer == NULL)
            die(1, "cannot allocate %zu bytes for a record", tree.buffer_size);
    }
    if (words > 0 && (error = recv_fully(fd, tree.buffer, (size_t)words * 8)) != 0)
        die(EXIT_NETWORK, "waiting for %s: %s", whom, io_error_text(error));
}

static void put_doubles(unsigned char *out, const double *values, long count)
{
    for (long k = 0; k < count; k++) {
        uint64_t bits;
        memcpy(&bits, &values[k], 8);
        put_be64(out + 8 * k, bits);
    }
}

static void get_doubles(const unsigned char *in, double *values, long count)
{
    for (long k = 0; k < count; k++) {
        uint64_t bits = get_be64(in + 8 * k);
        memcpy(&values[k], &bits, 8);
    }
}

/* --- the tree ------------------------------------------------------------------------ */

static void shape_tree(void)
{
    int bit = 1;
    while (bit < sync_ranks && !(sync_rank & bit))
        bit <<= 1;
    tree.parent = sync_rank == 0 ? -1 : sync_rank - bit;
    tree.children = 0;
    /* Rank 0's loop above ran past every rank: all its steps are children. */
    for (int step = 1; step < bit && sync_rank + step < sync_ranks; step <<= 1)
        tree.child[tree.children++] = sync_rank + step;
}

/* The greeting: who speaks, to whom, of which run. */
static void send_hello(int fd, int rank)
{
    unsigned char payload[24];
    put_be64(payload, (uint64_t)sync_ranks);
    put_be64(payload + 8, tree.seed);
    put_be64(payload + 16, PROTOCOL_VERSION);
    send_record(fd, rank, CMD_HELLO, (uint64_t)sync_rank, payload, 3);
}

/* A greeting from `rank` (or, with -1, from any child not yet connected):
 * the rank it says it is, after checking it belongs to this run. */
static int check_hello(int fd, int rank, int *connected)
{
    unsigned char header[HEADER_BYTES], payload[24];
    const char *whom = rank >= 0 ? rank_text(rank) : "a rank that connected";
    int error = recv_fully(fd, header, sizeof header);
    if (error == 0)
        error = recv_fully(fd, payload, sizeof payload);
    if (error != 0)
        die(EXIT_NETWORK, "waiting for the greeting of %s: %s", whom, io_error_text(error));
    if (get_be64(header) != (MAGIC | CMD_HELLO) || get_be64(header + 16) != 3)
        die(EXIT_NETWORK, "%s did not greet as tcp_sync does: another program or another version of this kernel",
            whom);
    uint64_t said = get_be64(header + 8), ranks = get_be64(payload), seed = get_be64(payload + 8),
             protocol = get_be64(payload + 16);
    if (protocol != PROTOCOL_VERSION)
        die(EXIT_NETWORK, "%s speaks protocol %llu, this rank %d: run the same kernel on every rank", whom,
            (unsigned long long)protocol, PROTOCOL_VERSION);
    if (ranks != (uint64_t)sync_ranks || seed != tree.seed)
        die(EXIT_NETWORK, "%s is of another run: %llu ranks and seed %llu; this rank has %d and %llu", whom,
            (unsigned long long)ranks, (unsigned long long)seed, sync_ranks, (unsigned long long)tree.seed);
    if (rank >= 0) {
        if (said != (uint64_t)rank)
            die(EXIT_NETWORK, "%s answered as rank %llu: the rank lists differ", whom, (unsigned long long)said);
        return rank;
    }
    for (int c = 0; c < tree.children; c++)
        if ((uint64_t)tree.child[c] == said) {
            if (connected[c])
                die(EXIT_NETWORK, "%s connected twice", rank_text(tree.child[c]));
            connected[c] = 1;
            return c;
        }
    die(EXIT_NETWORK, "a rank that connected says it is rank %llu, not a child of this rank in the tree: the rank "
                      "lists differ", (unsigned long long)said);
}

static int connect_parent(double deadline)
{
    const struct rank_address *a = &tree.address[tree.parent];
    struct addrinfo *addresses = NULL;
    int status = tcp_addresses(a->host, a->port, &addresses);
    if (status != 0)
        die(EXIT_NETWORK, "cannot resolve the host of %s: %s", rank_text(tree.parent), gai_strerror(status));
    int attempts = 0, last_error = 0;
    int fd = connect_until(addresses, deadline, &attempts, &last_error);
    freeaddrinfo(addresses);
    if (fd >= 0)
        return fd;
    if (last_error == ECONNREFUSED)
        die(EXIT_NO_PARTNER, "%s refused every connection for %g s: it was not started or failed before listening",
            rank_text(tree.parent), tree.wait);
    if (last_error == ETIMEDOUT)
        die(EXIT_NO_PARTNER, "no answer from %s within %g s: the host is down or a firewall drops the connection",
            rank_text(tree.parent), tree.wait);
    die(EXIT_NETWORK, "cannot connect to %s: %s", rank_text(tree.parent), strerror(last_error));
}

/* Children accepted and greeted, then the parent connected and greeted,
 * all within the connect wait of `started`. */
static void build_tree(double started)
{
    shape_tree();
    const double deadline = started + tree.wait;
    if (tree.children > 0) {
        struct listeners listeners;
        listen_everywhere(tree.address[sync_rank].port, SOMAXCONN, &listeners, NULL, 0);
        int connected[MAX_CHILDREN] = {0}, missing = tree.children;
        while (missing > 0) {
            double remaining = deadline - now_seconds();
            if (remaining <= 0.0) {
                for (int c = 0; c < tree.children; c++)
                    if (!connected[c])
                        die(EXIT_NO_PARTNER, "%s never connected within %g s (%d of this rank's %d children "
                                             "missing): it was not started or failed", rank_text(tree.child[c]),
                            tree.wait, missing, tree.children);
            }
            int ready = poll(listeners.fd, (nfds_t)listeners.count, (int)(remaining * 1000.0) + 1);
            if (ready < 0 && errno != EINTR)
                die(EXIT_NETWORK, "poll: %s", strerror(errno));
            for (int l = 0; ready > 0 && l < listeners.count; l++) {
                if (!(listeners.fd[l].revents & POLLIN))
                    continue;
                int fd = accept4(listeners.fd[l].fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                    continue; /* a connection that went away before it was accepted */
                configure_socket(fd, tree.io_timeout);
                int c = check_hello(fd, -1, connected);
                tree.child_fd[c] = fd;
                send_hello(fd, tree.child[c]);
                missing--;
            }
        }
        for (int l = 0; l < listeners.count; l++)
            close(listeners.fd[l].fd);
    }
    if (tree.parent >= 0) {
        tree.parent_fd = connect_parent(deadline);
        configure_socket(tree.parent_fd, tree.io_timeout);
        send_hello(tree.parent_fd, tree.parent);
        check_hello(tree.parent_fd, tree.parent, NULL);
    }
}

/* --- the collectives ----------------------------------------------------------------- */

/* Up the tree: every child's `count` doubles combined into values by
 * `combine`, then sent to the parent. */
static void reduce_up(int command, uint64_t tag, double *values, long count, void (*combine)(double *, const double *, long))
{
    double small[64];
    double *theirs = count <= 64 ? small : malloc((size_t)count * sizeof *theirs);
    if (theirs == NULL)
        die(1, "cannot allocate %ld values", count);
    for (int c = 0; c < tree.children; c++) {
        receive_record(tree.child_fd[c], tree.child[c], command, tag, (uint64_t)count);
        get_doubles(tree.buffer, theirs, count);
        combine(values, theirs, count);
    }
    if (theirs != small)
        free(theirs);
    if (tree.parent >= 0) {
        unsigned char small_payload[64 * 8];
        unsigned char *payload = count <= 64 ? small_payload : malloc((size_t)count * 8);
        if (payload == NULL)
            die(1, "cannot allocate %ld values", count);
        put_doubles(payload, values, count);
        send_record(tree.parent_fd, tree.parent, command, tag, payload, (uint64_t)count);
        if (payload != small_payload)
            free(payload);
    }
}

/* Down the tree: rank 0's `count` doubles into values everywhere. */
static void broadcast_down(uint64_t tag, double *values, long count)
{
    unsigned char payload[64 * 8];
    if (tree.parent >= 0) {
        receive_record(tree.parent_fd, tree.parent, CMD_DOWN, tag, (uint64_t)count);
        get_doubles(tree.buffer, values, count);
    }
    put_doubles(payload, values, count);
    for (int c = 0; c < tree.children; c++)
        send_record(tree.child_fd[c], tree.child[c], CMD_DOWN, tag, payload, (uint64_t)count);
}

static void add_values(double *into, const double *in, long count)
{
    for (long k = 0; k < count; k++)
        into[k] += in[k];
}

static void max_values(double *into, const double *in, long count)
{
    for (long k = 0; k < count; k++)
        into[k] = in[k] > into[k] ? in[k] : into[k];
}

static void merge_triples(double *into, const double *in, long count)
{
    merge_laggards(in, into, count / 3);
}

/* Tags of the collectives outside the iterations, apart from every iteration's. */
#define TAG_SETUP (UINT64_C(1) << 62)

static void transport_allreduce(double *values, int count, int op)
{
    static uint64_t sequence = 0;
    uint64_t tag = TAG_SETUP + sequence++;
    reduce_up(CMD_UP, tag, values, count, op == REDUCE_MAX ? max_values : add_values);
    broadcast_down(tag, values, count);
}

static void transport_collective(int operation, long iteration, double contribution, double *result)
{
    uint64_t tag = (uint64_t)iteration & (TAG_SETUP - 1);
    if (operation == OP_BARRIER) {
        /* The iteration's number, the same from every rank: the largest is it. */
        double token = (double)iteration;
        reduce_up(CMD_UP, tag, &token, 1, max_values);
        broadcast_down(tag, &token, 1);
        if (token != (double)iteration)
            die(EXIT_NETWORK, "protocol error: the barrier of iteration %ld came back as %.0f", iteration, token);
        *result = 0.0;
    } else {
        double sum = contribution;
        reduce_up(CMD_UP, tag, &sum, 1, add_values);
        broadcast_down(tag, &sum, 1);
        *result = sum;
    }
}

static void transport_reduce_laggards(double *triples, long count)
{
    reduce_up(CMD_LAGGARDS, 0, triples, 3 * count, merge_triples);
}

/* Every rank's `bytes` at rank 0 in rank order: each rank sends its
 * subtree's records, its own first, to its parent (a subtree of the
 * binomial tree is a range of ranks from its root). */
static void transport_gather(const unsigned char *mine, size_t bytes, unsigned char *all)
{
    int span = 1;
    while (span < sync_ranks && !(sync_rank & span))
        span <<= 1;
    if (sync_rank == 0)
        span = sync_ranks;
    int end = sync_rank + span < sync_ranks ? sync_rank + span : sync_ranks;
    size_t records = (size_t)(end - sync_rank);
    /* Padded to whole words, the records travel as words. */
    size_t padded = (bytes + 7) / 8 * 8;
    unsigned char *subtree = sync_rank == 0 && all != NULL && padded == bytes ? all : calloc(records, padded);
    if (subtree == NULL)
        die(1, "cannot allocate the gather of %zu records", records);
    memcpy(subtree, mine, bytes);
    for (int c = 0; c < tree.children; c++) {
        int child = tree.child[c];
        int child_end = c + 1 < tree.children ? tree.child[c + 1] : end;
        size_t count = (size_t)(child_end - child);
        receive_record(tree.child_fd[c], child, CMD_GATHER, (uint64_t)child, count * padded / 8);
        memcpy(subtree + (size_t)(child - sync_rank) * padded, tree.buffer, count * padded);
    }
    if (tree.parent >= 0)
        send_record(tree.parent_fd, tree.parent, CMD_GATHER, (uint64_t)sync_rank, subtree, records * padded / 8);
    if (sync_rank == 0 && subtree != all) {
        for (size_t r = 0; r < records; r++)
            memcpy(all + r * bytes, subtree + r * padded, bytes);
    }
    if (subtree != all)
        free(subtree);
}

static void transport_header(void)
{
    printf("# transport: tcp\n");
    printf("# tcp_tree: binomial, rooted at rank 0; allreduce and barrier up and down it\n");
    printf("# connect_wait_seconds: %g\n", tree.wait);
    printf("# io_timeout_seconds: %d\n", tree.io_timeout);
}

int main(int argc, char **argv)
{
    const double started = now_seconds();
    const char *program = argv[0];
    struct sync_config config;
    sync_defaults(&config);
    const char *list = NULL;
    long long rank = -1;
    for (int i = 1; i < argc; i++) {
        const char *error = "unknown option or missing value", *option = argv[i];
        int parsed = sync_option(argc, argv, &i, &config, &error);
        if (parsed < 0)
            return bad_arguments(program, "%s, got '%s'", error, argv[i]);
        if (parsed > 0)
            continue;
        if (i + 1 >= argc)
            return bad_arguments(program, "unknown option or missing value: '%s'", option);
        const char *value = argv[++i];
        if (strcmp(option, "-r") == 0) {
            rank = parse_count(value, 0, MAX_RANKS - 1);
            if (rank < 0)
                return bad_arguments(program, "-r wants this rank's number, got '%s'", value);
        } else if (strcmp(option, "-R") == 0) {
            list = value;
        } else if (strcmp(option, "-S") == 0) {
            long long seed = parse_count(value, 0, LLONG_MAX);
            if (seed < 0)
                return bad_arguments(program, "-S wants a whole number, got '%s'", value);
            tree.seed = (uint64_t)seed;
        } else if (strcmp(option, "-w") == 0) {
            tree.wait = parse_seconds(value, 0.0, 86400.0);
            if (tree.wait < 0.0)
                return bad_arguments(program, "-w wants seconds, 0-86400, got '%s'", value);
        } else if (strcmp(option, "-i") == 0) {
            long long seconds = parse_count(value, 1, 86400);
            if (seconds < 0)
                return bad_arguments(program, "-i wants whole seconds, 1-86400, got '%s'", value);
            tree.io_timeout = (int)seconds;
        } else {
            return bad_arguments(program, "unknown option '%s'", option);
        }
    }
    if (list == NULL || rank < 0)
        return bad_arguments(program, "-r RANK and -R HOST:PORT,... are needed%s", "");
    int bad = 0;
    sync_ranks = parse_rank_addresses(list, MAX_RANKS, &tree.address, &bad);
    if (sync_ranks < 0)
        return bad_arguments(program, "-R wants 2 to %d HOST:PORT entries; entry %d is not one", MAX_RANKS, bad + 1);
    if (sync_ranks < 2)
        return bad_arguments(program, "-R names %d rank: the iterations need two or more", sync_ranks);
    if (rank >= sync_ranks)
        return bad_arguments(program, "-r %lld is not a rank of the %d in -R", rank, sync_ranks);
    sync_rank = (int)rank;
    config.corrupt_rank = corrupt_rank_from_environment();
    if (config.corrupt_rank == -2)
        return bad_arguments(program, "ODDNODE_CORRUPT_RANK wants a rank number below the ranks' count, got '%s'",
                             getenv("ODDNODE_CORRUPT_RANK"));
    if (config.names != NULL && config.name_count != sync_ranks)
        return bad_arguments(program, "-N names %d nodes for the %d ranks of -R", config.name_count, sync_ranks);
    if (config.names == NULL) {
        /* The nodes are the hosts -R names them by. */
        config.names = calloc((size_t)sync_ranks, sizeof *config.names);
        if (config.names == NULL)
            die(1, "cannot allocate the names");
        for (int r = 0; r < sync_ranks; r++)
            config.names[r] = tree.address[r].host;
        config.name_count = sync_ranks;
    }

    build_tree(started);
    char host[HOST_BYTES] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    return sync_run(&config, host, "tcp_sync");
}
