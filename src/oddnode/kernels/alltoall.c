/*
 * oddnode alltoall kernel v1: Switchbench's congestion-controlled all-to-all
 * over TCP, one rank per node.
 *
 *   alltoall -r RANK -R HOST:PORT,HOST:PORT,... [-s MESSAGE_SIZE] [-S SEED] [-W WARMUP_PASSES]
 *            [-w CONNECT_WAIT] [-i IO_TIMEOUT]
 *
 * The N ranks are the N addresses of -R, in order (an IPv6 address in
 * brackets: [::1]:5000); this process is rank RANK and listens on the port
 * of its own entry, on every address.  On a cluster every rank has its own
 * host and the same port; on one machine, distinct ports.
 *
 * Mesh: every pair of ranks shares one TCP connection, made at the start:
 * rank r connects to every lower rank (retrying a refusal, so that all may
 * start at the same moment) and accepts every higher one, all within
 * CONNECT_WAIT seconds.  Each connection opens with a greeting that names
 * both ranks, the rank count, the message size and the seed: a rank of
 * another run, or at the wrong place in the list, is refused.
 *
 * Phases i = 1 .. N-1: rank r sends MESSAGE_SIZE bytes to rank (r+i) mod N
 * and at the same time receives as many from rank (r-i) mod N, so every
 * phase is a permutation: each rank sends one flow and receives one, and no
 * receiver is offered two (no incast).  A barrier ends every phase, so the
 * next permutation starts only when the last flow of this one is done: that
 * is the congestion control.
 *
 * Barrier: rank 0 coordinates.  Every other rank, once its phase is done,
 * sends a BARRIER record to rank 0 over their connection and waits for
 * GO; rank 0 finishes its own phase, reads the N-1 BARRIER records, then
 * sends GO to every rank.  A barrier also precedes the first phase and
 * follows the last, so that all ranks start the timed pass together and its
 * total time covers every rank.  The records travel on the data connections
 * between phases, when no data is in flight on them, so they never mix with
 * data.  Between arriving and departing a rank checks the message it
 * received and writes its next one, so neither is in a phase's time, and
 * only rank 0's, when it is the last to finish, delays a release.  Each
 * wait in a barrier is bounded by IO_TIMEOUT: a phase may take at most that
 * long on the slowest rank.
 *
 * Timing: a phase starts when this rank's GO arrives; its send time ends
 * when the last byte was handed to the kernel, its receive time when the
 * last byte arrived.  Bandwidth = bytes / seconds, MB = 10^6 bytes.  Sends
 * and receives run together in one poll() loop over non-blocking calls.
 * WARMUP_PASSES passes over all phases run first, untimed and unreported
 * (but checked): TCP's windows are open when the timed pass starts.
 *
 * Data: every message is a seeded pattern, splitmix64 of the seed, the pass,
 * the phase, the sender and the receiver, then the word index; the receiver
 * recomputes it and compares every byte, outside the timer.  A misrouted,
 * stale, shifted or corrupted message differs.
 *
 * Output (stdout): '#' header lines "# key: value", then one line per phase
 *   phase <i> <to_rank> <from_rank> <bytes_sent> <send_seconds> <send_MBps>
 *         <bytes_received> <receive_seconds> <receive_MBps>
 * then
 *   total <seconds> <bytes_sent> <bytes_received>
 * (seconds from the GO of the first timed phase to the end of the barrier
 * after the last), and "validation ok" or "validation failed data
 * bad=<messages>/<checked> pass=P phase=I from=S offset=O expected=0xEE got=0xGG".
 *
 * Exit status: 0 when the exchange ran (even if validation failed), 2 for
 * bad arguments, 3 when a rank never came (refused connections or no
 * connection within CONNECT_WAIT), 4 for a network or protocol error (a
 * rank vanished, stopped for IO_TIMEOUT seconds, or is of another run).
 * The error names the rank and its address.  Every blocking call is
 * bounded (poll() for accept, connect and the phases, SO_RCVTIMEO and
 * SO_SNDTIMEO for records), so a dead rank never hangs the others: they
 * fail in turn, within CONNECT_WAIT + IO_TIMEOUT seconds per barrier.
 *
 * Compile-time settings (each with a guarded default):
 *   ODDNODE_DEFAULT_MESSAGE_SIZE  -s when not given
 *   ODDNODE_DEFAULT_CONNECT_WAIT  -w when not given
 *   ODDNODE_DEFAULT_IO_TIMEOUT    -i when not given
 *   ODDNODE_DEFAULT_WARMUP_PASSES -W when not given
 *   ODDNODE_CFLAGS                string literal of the flags used, for the header
 *   ODDNODE_TEST_CORRUPT_PHASE    test only: this rank flips one byte of what it
 *                                 sends in timed phase N, so that its receiver's
 *                                 check must fail
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "oddnode_kernel.h"
#include "oddnode_net.h"
#include "oddnode_ranks.h"

/* 1 MiB per flow and phase: each phase then lasts about a millisecond on a
 * 10 Gbit/s link, long against a barrier, and the per-call cost is small. */
#ifndef ODDNODE_DEFAULT_MESSAGE_SIZE
#define ODDNODE_DEFAULT_MESSAGE_SIZE (1L << 20)
#endif
/* ODDNODE_DEFAULT_CONNECT_WAIT and ODDNODE_DEFAULT_IO_TIMEOUT: oddnode_net.h. */
/* One untimed pass: STREAM's rule, the first iteration discarded. */
#ifndef ODDNODE_DEFAULT_WARMUP_PASSES
#define ODDNODE_DEFAULT_WARMUP_PASSES 1
#endif
#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define KERNEL_VERSION 1
#define PROTOCOL_VERSION 1

/* Enough for any cluster one TCP mesh is sensible on: each rank holds
 * N-1 connections, and the descriptor limit is checked at the start. */
#define MAX_RANKS 4096
#define MAX_MESSAGE (256L << 20)
#define MAX_WARMUP_PASSES 100
/* Descriptors beyond the mesh: stdio, listeners, a spare. */
#define SPARE_DESCRIPTORS 16

/* Control records: four big-endian 64-bit words, the first the magic. */
#define MAGIC 0x6f6464616c6c3261ULL /* "oddall2a" */
#define RECORD_WORDS 4
#define RECORD_BYTES (RECORD_WORDS * 8)
enum command {
    CMD_HELLO = 1,   /* a: the sender's rank, b: the rank count */
    CMD_RUN = 2,     /* a: the seed, b: protocol version << 48 | message size */
    CMD_BARRIER = 3, /* a: barrier number: the sender is done with everything before it */
    CMD_GO = 4,      /* a: barrier number: every rank is done */
};
struct record {
    uint64_t command, a, b;
};
/* The message size shares CMD_RUN's second word with the protocol version. */
#define RUN_SIZE_BITS 48

/* The run, as every rank must agree on it. */
static struct {
    int rank, ranks;
    size_t message_size;
    uint64_t seed;
    int warmup_passes;
    double wait;
    int io_timeout;
    struct rank_address *address;
    int *fd; /* fd[s]: the connection to rank s; -1 for this rank */
} run = {.io_timeout = ODDNODE_DEFAULT_IO_TIMEOUT};

/* die() of oddnode_net.h: the message names this rank. */
static void die(int status, const char *format, ...)
{
    char who[32];
    snprintf(who, sizeof who, "rank %d: ", run.rank);
    va_list args;
    va_start(args, format);
    exit_with_error(status, who, format, args);
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s -r RANK -R HOST:PORT,HOST:PORT,... [-s MESSAGE_SIZE] [-S SEED] [-W WARMUP_PASSES]\n"
            "          [-w CONNECT_WAIT] [-i IO_TIMEOUT]\n"
            "  -R LIST          every rank's address in rank order, 2 to %d of them\n"
            "                   (IPv6 in brackets: [::1]:5000)\n"
            "  -r RANK          this rank, 0 to N-1: it listens on its own entry's port\n"
            "  -s BYTES         bytes each rank sends per phase, 1-%ld (default %ld)\n"
            "  -S SEED          the data pattern's seed, the same on every rank (default 0)\n"
            "  -W PASSES        untimed passes over all phases first, 0-%d (default %d)\n"
            "  -w SECONDS       how long to wait for every rank to connect (default %g)\n"
            "  -i SECONDS       give up when nothing moves for this long (default %d)\n",
            program, MAX_RANKS, MAX_MESSAGE, (long)ODDNODE_DEFAULT_MESSAGE_SIZE, MAX_WARMUP_PASSES,
            ODDNODE_DEFAULT_WARMUP_PASSES, ODDNODE_DEFAULT_CONNECT_WAIT, ODDNODE_DEFAULT_IO_TIMEOUT);
}


/* --- the wire ------------------------------------------------------------------ */

static const char *rank_text(int rank)
{
    return rank_address_text(&run.address[rank], rank);
}

static const char *io_error_text(int error)
{
    return rank_io_error_text(error, run.io_timeout);
}

static void die_io(int error, const char *what, int rank) __attribute__((noreturn));

static void die_io(int error, const char *what, int rank)
{
    die(EXIT_NETWORK, "%s %s: %s", what, rank_text(rank), io_error_text(error));
}

static void send_record(int rank, const struct record *r, const char *what)
{
    unsigned char bytes[RECORD_BYTES];
    const uint64_t words[RECORD_WORDS] = {MAGIC, r->command, r->a, r->b};
    for (int i = 0; i < RECORD_WORDS; i++)
        put_be64(bytes + 8 * i, words[i]);
    int error = send_fully(run.fd[rank], bytes, sizeof bytes);
    if (error != 0)
        die_io(error, what, rank);
}

/* A record of the expected command from a rank, or a clear error. */
static void expect_record_on(int fd, int rank, struct record *r, uint64_t command, const char *what)
{
    unsigned char bytes[RECORD_BYTES];
    int error = recv_fully(fd, bytes, sizeof bytes);
    if (error != 0) {
        if (rank >= 0)
            die_io(error, what, rank);
        die(EXIT_NETWORK, "%s a rank that connected: %s", what, io_error_text(error));
    }
    uint64_t words[RECORD_WORDS];
    for (int i = 0; i < RECORD_WORDS; i++)
        words[i] = get_be64(bytes + 8 * i);
    if (words[0] != MAGIC)
        die(EXIT_NETWORK, "%s %s: not an oddnode alltoall record (magic 0x%016llx): another program or another "
                          "version of this kernel", what, rank >= 0 ? rank_text(rank) : "a rank that connected",
            (unsigned long long)words[0]);
    if (words[1] != command)
        die(EXIT_NETWORK, "%s %s: protocol error: command %llu where %llu was expected", what,
            rank >= 0 ? rank_text(rank) : "a rank that connected", (unsigned long long)words[1],
            (unsigned long long)command);
    r->command = words[1];
    r->a = words[2];
    r->b = words[3];
}

/* A greeting is two records: who is speaking, and of what run. */
static void send_greeting(int rank)
{
    struct record who = {.command = CMD_HELLO, .a = (uint64_t)run.rank, .b = (uint64_t)run.ranks};
    struct record what = {.command = CMD_RUN, .a = run.seed,
                          .b = ((uint64_t)PROTOCOL_VERSION << RUN_SIZE_BITS) | run.message_size};
    send_record(rank, &who, "greeting");
    send_record(rank, &what, "greeting");
}

/* Reads a greeting on fd and checks that it belongs to this run; the
 * sender's rank.  `expected` is the rank the caller connected to, or -1
 * for an accepted connection (any higher rank not yet connected). */
static int check_greeting(int fd, int expected)
{
    struct record who, what;
    expect_record_on(fd, expected, &who, CMD_HELLO, "waiting for the greeting of");
    expect_record_on(fd, expected, &what, CMD_RUN, "waiting for the greeting of");
    const uint64_t message_size = what.b & ((1ULL << RUN_SIZE_BITS) - 1), protocol = what.b >> RUN_SIZE_BITS;
    const char *whom = expected >= 0 ? rank_text(expected) : "a rank that connected";
    if (protocol != PROTOCOL_VERSION)
        die(EXIT_NETWORK, "%s speaks protocol %llu, this rank %d: run the same kernel on every rank", whom,
            (unsigned long long)protocol, PROTOCOL_VERSION);
    if (who.b != (uint64_t)run.ranks || message_size != run.message_size || what.a != run.seed)
        die(EXIT_NETWORK, "%s is of another run: %llu ranks, %llu-byte messages, seed %llu; this rank has %d, %zu, "
                          "%llu", whom, (unsigned long long)who.b, (unsigned long long)message_size,
            (unsigned long long)what.a, run.ranks, run.message_size, (unsigned long long)run.seed);
    if (expected >= 0 && who.a != (uint64_t)expected)
        die(EXIT_NETWORK, "%s answered as rank %llu: the rank lists differ", whom, (unsigned long long)who.a);
    if (expected < 0 && (who.a <= (uint64_t)run.rank || who.a >= (uint64_t)run.ranks))
        die(EXIT_NETWORK, "a rank that connected says it is rank %llu; only ranks %d to %d connect to this one",
            (unsigned long long)who.a, run.rank + 1, run.ranks - 1);
    return (int)who.a;
}

/* --- the mesh -------------------------------------------------------------------- */

/* Connects to a lower rank, retrying refusals until the deadline. */
static int connect_rank(int rank, double deadline, int *attempts)
{
    const struct rank_address *a = &run.address[rank];
    struct addrinfo *addresses = NULL;
    int status = tcp_addresses(a->host, a->port, &addresses);
    if (status != 0)
        die(EXIT_NETWORK, "cannot resolve the host of %s: %s", rank_text(rank), gai_strerror(status));
    int last_error = 0;
    int fd = connect_until(addresses, deadline, attempts, &last_error);
    freeaddrinfo(addresses);
    if (fd >= 0)
        return fd;
    if (last_error == ECONNREFUSED)
        die(EXIT_NO_PARTNER, "%s refused every connection for %g s: it was not started or failed before "
                             "listening", rank_text(rank), run.wait);
    if (last_error == ETIMEDOUT)
        die(EXIT_NO_PARTNER, "no answer from %s within %g s: the host is down or a firewall drops the connection",
            rank_text(rank), run.wait);
    die(EXIT_NETWORK, "cannot connect to %s: %s", rank_text(rank), strerror(last_error));
}

/* Every pair of ranks connected and greeted, within the wait of `started`. */
static void build_mesh(double started, int *attempts)
{
    /* This rank's port on every address; every higher rank may connect at once. */
    struct listeners listeners;
    listen_everywhere(run.address[run.rank].port, SOMAXCONN, &listeners, NULL, 0);
    const double deadline = started + run.wait;
    for (int s = 0; s < run.rank; s++) {
        run.fd[s] = connect_rank(s, deadline, attempts);
        configure_socket(run.fd[s], run.io_timeout);
        send_greeting(s);
        check_greeting(run.fd[s], s);
    }
    int missing = run.ranks - 1 - run.rank;
    while (missing > 0) {
        double remaining = deadline - now_seconds();
        if (remaining <= 0.0) {
            char list[256] = "";
            for (int s = run.rank + 1, shown = 0; s < run.ranks; s++) {
                if (run.fd[s] >= 0)
                    continue;
                size_t used = strlen(list);
                if (shown++ == 4) {
                    snprintf(list + used, sizeof list - used, " and %d more", missing - 4);
                    break;
                }
                snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", rank_text(s));
            }
            die(EXIT_NO_PARTNER, "%d rank%s never connected within %g s: %s", missing, missing == 1 ? "" : "s",
                run.wait, list);
        }
        int ready = poll(listeners.fd, (nfds_t)listeners.count, (int)(remaining * 1000.0) + 1);
        if (ready < 0 && errno != EINTR)
            die(EXIT_NETWORK, "waiting for the higher ranks: %s", strerror(errno));
        for (int i = 0; i < listeners.count && ready > 0; i++) {
            if (!(listeners.fd[i].revents & POLLIN))
                continue;
            int fd = accept4(listeners.fd[i].fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
                    continue;
                die(EXIT_NETWORK, "accepting a rank: %s", strerror(errno));
            }
            configure_socket(fd, run.io_timeout);
            int s = check_greeting(fd, -1);
            if (run.fd[s] >= 0)
                die(EXIT_NETWORK, "%s connected twice: two processes claim that rank", rank_text(s));
            run.fd[s] = fd;
            send_greeting(s);
            missing--;
        }
    }
    for (int i = 0; i < listeners.count; i++)
        close(listeners.fd[i].fd);
}

/* A barrier in two halves (see the top), so that a rank checks the message
 * it received and prepares its next one while it waits for the others.
 * Arriving: this rank is done with everything before barrier `number`. */
static void barrier_arrive(uint64_t number)
{
    if (run.rank == 0)
        return; /* the coordinator's arrival is its departure */
    struct record done = {.command = CMD_BARRIER, .a = number};
    send_record(0, &done, "arriving at a barrier, telling");
}

/* Departing: every rank has arrived. */
static void barrier_depart(uint64_t number)
{
    struct record r;
    if (run.rank == 0) {
        for (int s = 1; s < run.ranks; s++) {
            expect_record_on(run.fd[s], s, &r, CMD_BARRIER, "waiting at a barrier for");
            if (r.a != number)
                die(EXIT_NETWORK, "%s is at barrier %llu, rank 0 at %llu: protocol error", rank_text(s),
                    (unsigned long long)r.a, (unsigned long long)number);
        }
        struct record go = {.command = CMD_GO, .a = number};
        for (int s = 1; s < run.ranks; s++)
            send_record(s, &go, "releasing from a barrier");
        return;
    }
    expect_record_on(run.fd[0], 0, &r, CMD_GO, "waiting at a barrier for the release by");
    if (r.a != number)
        die(EXIT_NETWORK, "rank 0 released barrier %llu, this rank waits at %llu: protocol error",
            (unsigned long long)r.a, (unsigned long long)number);
}

/* --- the data -------------------------------------------------------------------- */

/* The first word of the message from `from` to `to` in a phase of a pass;
 * word k of it is mix64(base + k). */
static uint64_t message_base(int pass, int phase, int from, int to)
{
    const uint64_t route = mix64(((uint64_t)from << 32) ^ (uint64_t)to);
    return mix64(run.seed ^ mix64(((uint64_t)pass << 48) ^ ((uint64_t)phase << 24) ^ route));
}

static void fill_message(unsigned char *buffer, size_t size, uint64_t base)
{
    size_t k = 0;
    for (; (k + 1) * 8 <= size; k++) {
        uint64_t word = mix64(base + k);
        memcpy(buffer + 8 * k, &word, 8);
    }
    if (8 * k < size) {
        uint64_t word = mix64(base + k);
        memcpy(buffer + 8 * k, &word, size - 8 * k);
    }
}

/* The first wrong message, for the validation line. */
struct data_check {
    uint64_t bad, checked;
    int pass, phase, from;
    size_t offset;
    unsigned expected, got;
};

static void check_message(const unsigned char *buffer, size_t size, uint64_t base, int pass, int phase, int from,
                          struct data_check *check)
{
    check->checked++;
    for (size_t k = 0; 8 * k < size; k++) {
        uint64_t word = mix64(base + k);
        const unsigned char *expected = (const unsigned char *)&word;
        size_t length = size - 8 * k < 8 ? size - 8 * k : 8;
        if (memcmp(buffer + 8 * k, expected, length) == 0)
            continue;
        if (check->bad++ == 0) {
            size_t j = 0;
            while (buffer[8 * k + j] == expected[j])
                j++;
            check->pass = pass;
            check->phase = phase;
            check->from = from;
            check->offset = 8 * k + j;
            check->expected = expected[j];
            check->got = buffer[8 * k + j];
        }
        return;
    }
}

struct phase_result {
    double send_seconds, receive_seconds;
};

/* Sends the message to `to` while receiving one from `from`, in one poll
 * loop; the seconds each took from the phase's start.  `to` and `from` are
 * the same rank when N = 2 or i = N/2: one connection, both ways. */
static void exchange(int to, int from, const unsigned char *outgoing, unsigned char *incoming, double started,
                     struct phase_result *result)
{
    const size_t size = run.message_size;
    size_t sent = 0, received = 0;
    double idle_deadline = started + run.io_timeout;
    const int shared = to == from;
    while (sent < size || received < size) {
        struct pollfd pfd[2];
        int count = 0, send_index = -1, receive_index = -1;
        if (sent < size) {
            pfd[count] = (struct pollfd){.fd = run.fd[to], .events = POLLOUT};
            send_index = count++;
        }
        if (received < size) {
            if (shared && send_index >= 0) {
                pfd[send_index].events |= POLLIN;
                receive_index = send_index;
            } else {
                pfd[count] = (struct pollfd){.fd = run.fd[from], .events = POLLIN};
                receive_index = count++;
            }
        }
        double remaining = idle_deadline - now_seconds();
        if (remaining <= 0.0) {
            if (received < size)
                die_io(ETIMEDOUT, "receiving this phase's message from", from);
            die_io(ETIMEDOUT, "sending this phase's message to", to);
        }
        int ready = poll(pfd, (nfds_t)count, (int)(remaining * 1000.0) + 1);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            die(EXIT_NETWORK, "waiting for this phase's partners: %s", strerror(errno));
        }
        int progress = 0;
        if (send_index >= 0 && (pfd[send_index].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = send(run.fd[to], outgoing + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                die_io(errno, "sending this phase's message to", to);
            if (n > 0) {
                sent += (size_t)n;
                progress = 1;
                if (sent == size)
                    result->send_seconds = now_seconds() - started;
            }
        }
        if (receive_index >= 0 && (pfd[receive_index].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t n = recv(run.fd[from], incoming + received, size - received, MSG_DONTWAIT);
            if (n == 0)
                die_io(PEER_CLOSED, "receiving this phase's message from", from);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                die_io(errno, "receiving this phase's message from", from);
            if (n > 0) {
                received += (size_t)n;
                progress = 1;
                if (received == size)
                    result->receive_seconds = now_seconds() - started;
            }
        }
        if (progress)
            idle_deadline = now_seconds() + run.io_timeout;
    }
}

/* The message this rank sends in a phase of a pass, in `outgoing`. */
static void prepare_message(unsigned char *outgoing, int pass, int phase, int timed)
{
    const int to = (run.rank + phase) % run.ranks;
    fill_message(outgoing, run.message_size, message_base(pass, phase, run.rank, to));
#ifdef ODDNODE_TEST_CORRUPT_PHASE
    if (timed && phase == (ODDNODE_TEST_CORRUPT_PHASE))
        outgoing[run.message_size / 2] ^= 0xFF;
#else
    (void)timed;
#endif
}

/* One pass over every phase; each phase's times when `results` is given,
 * and the pass's time from the release into phase 1 to the release after
 * the last.  Barrier numbers go on across passes: pass p's phase i starts
 * at barrier p*N + i - 1, and barrier p*N + N - 1 ends the pass. */
static void run_pass(int pass, unsigned char *outgoing, unsigned char *incoming, struct phase_result *results,
                     struct data_check *check, double *total_seconds)
{
    const int n = run.ranks;
    const uint64_t first_barrier = (uint64_t)pass * (uint64_t)n;
    prepare_message(outgoing, pass, 1, results != NULL);
    barrier_arrive(first_barrier);
    barrier_depart(first_barrier);
    const double pass_started = now_seconds();
    for (int phase = 1; phase < n; phase++) {
        const int to = (run.rank + phase) % n, from = (run.rank - phase + n) % n;
        struct phase_result r = {0.0, 0.0};
        exchange(to, from, outgoing, incoming, now_seconds(), &r);
        if (results != NULL)
            results[phase] = r;
        barrier_arrive(first_barrier + (uint64_t)phase);
        check_message(incoming, run.message_size, message_base(pass, phase, from, run.rank), pass, phase, from,
                      check);
        if (phase + 1 < n)
            prepare_message(outgoing, pass, phase + 1, results != NULL);
        barrier_depart(first_barrier + (uint64_t)phase);
    }
    if (total_seconds != NULL)
        *total_seconds = now_seconds() - pass_started;
}

static int run_alltoall(void)
{
    const double started = now_seconds();
    const long long granularity = timer_granularity_ns();
    const int n = run.ranks;
    printf("# oddnode alltoall kernel v%d\n", KERNEL_VERSION);
    printf("# protocol: %d\n", PROTOCOL_VERSION);
    printf("# rank: %d\n", run.rank);
    printf("# ranks: %d\n", n);
    printf("# host: %s\n", run.address[run.rank].host);
    printf("# port: %d\n", run.address[run.rank].port);
    printf("# message_size: %zu\n", run.message_size);
    printf("# phases: %d\n", n - 1);
    printf("# warmup_passes: %d\n", run.warmup_passes);
    printf("# seed: %llu\n", (unsigned long long)run.seed);
    printf("# connect_wait_seconds: %g\n", run.wait);
    printf("# io_timeout_seconds: %d\n", run.io_timeout);
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", granularity);
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
    printf("# schedule: phase i sends to rank (r+i) mod N and receives from rank (r-i) mod N at once\n");
    printf("# barrier: coordinated by rank 0 over the mesh, before the first phase and after every phase; "
           "checks and the next message are made while waiting\n");
    printf("# rate: bytes over the time from this rank's release into the phase to its last byte; MB = 10^6 B\n");
    printf("# pattern: splitmix64 of seed, pass, phase, sender and receiver, then the word; every byte checked\n");
#ifdef ODDNODE_TEST_CORRUPT_PHASE
    printf("# corrupt_phase: %d\n", (int)(ODDNODE_TEST_CORRUPT_PHASE));
#endif
    fflush(stdout);

    int attempts = 0;
    build_mesh(started, &attempts);
    printf("# connect_attempts: %d\n", attempts);
    printf("# mesh_seconds: %.6f\n", now_seconds() - started);
    fflush(stdout);

    unsigned char *outgoing = NULL, *incoming = NULL;
    if (posix_memalign((void **)&outgoing, 4096, run.message_size) != 0
        || posix_memalign((void **)&incoming, 4096, run.message_size) != 0)
        die(EXIT_NETWORK, "cannot allocate message buffers of %zu bytes", run.message_size);
    struct phase_result *results = calloc((size_t)n, sizeof *results);
    if (results == NULL)
        die(EXIT_NETWORK, "cannot allocate the phase table");
    struct data_check check;
    memset(&check, 0, sizeof check);
    for (int pass = 0; pass < run.warmup_passes; pass++)
        run_pass(pass, outgoing, incoming, NULL, &check, NULL);
    double total = 0.0;
    run_pass(run.warmup_passes, outgoing, incoming, results, &check, &total);

    for (int phase = 1; phase < n; phase++) {
        const struct phase_result *r = &results[phase];
        printf("phase %d %d %d %zu %.9f %.3f %zu %.9f %.3f\n", phase, (run.rank + phase) % n,
               (run.rank - phase + n) % n, run.message_size, r->send_seconds,
               rate_mbps(run.message_size, r->send_seconds), run.message_size, r->receive_seconds,
               rate_mbps(run.message_size, r->receive_seconds));
    }
    const uint64_t moved = (uint64_t)run.message_size * (uint64_t)(n - 1);
    printf("total %.6f %llu %llu\n", total, (unsigned long long)moved, (unsigned long long)moved);
    printf("# messages_checked: %llu\n", (unsigned long long)check.checked);
    if (check.bad == 0)
        printf("validation ok\n");
    else
        printf("validation failed data bad=%llu/%llu pass=%d phase=%d from=%d offset=%zu expected=0x%02x "
               "got=0x%02x\n", (unsigned long long)check.bad, (unsigned long long)check.checked, check.pass,
               check.phase, check.from, check.offset, check.expected, check.got);
    fflush(stdout);
    for (int s = 0; s < n; s++)
        if (run.fd[s] >= 0)
            close(run.fd[s]);
    free(results);
    free(outgoing);
    free(incoming);
    return 0;
}

/* --- main ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *program = argv[0];
    signal(SIGPIPE, SIG_IGN); /* a vanished rank is an error to report, not a silent death */
    long long rank = -1, message_size = ODDNODE_DEFAULT_MESSAGE_SIZE, warmup = ODDNODE_DEFAULT_WARMUP_PASSES;
    unsigned long long seed = 0;
    const char *list = NULL;
    run.wait = ODDNODE_DEFAULT_CONNECT_WAIT;
    int option;
    opterr = 0;
    while ((option = getopt(argc, argv, "r:R:s:S:W:w:i:")) != -1) {
        switch (option) {
        case 'r':
            rank = parse_count(optarg, 0, MAX_RANKS - 1);
            if (rank < 0)
                return bad_arguments(program, "-r wants this rank's index, 0-%d, got '%s'", MAX_RANKS - 1, optarg);
            break;
        case 'R':
            list = optarg;
            break;
        case 's':
            message_size = parse_count(optarg, 1, MAX_MESSAGE);
            if (message_size < 0)
                return bad_arguments(program, "-s wants bytes per message, 1-%ld, got '%s'", MAX_MESSAGE, optarg);
            break;
        case 'S': {
            char *end = NULL;
            errno = 0;
            seed = strtoull(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || optarg[0] == '-')
                return bad_arguments(program, "-S wants a whole number seed, got '%s'", optarg);
            break;
        }
        case 'W':
            warmup = parse_count(optarg, 0, MAX_WARMUP_PASSES);
            if (warmup < 0)
                return bad_arguments(program, "-W wants untimed passes, 0-%d, got '%s'", MAX_WARMUP_PASSES, optarg);
            break;
        case 'w':
            run.wait = parse_seconds(optarg, 0.0, 86400.0);
            if (run.wait < 0.0)
                return bad_arguments(program, "-w wants seconds, 0-86400, got '%s'", optarg);
            break;
        case 'i':
            run.io_timeout = (int)parse_count(optarg, 1, 3600);
            if (run.io_timeout < 0)
                return bad_arguments(program, "-i wants whole seconds, 1-3600, got '%s'", optarg);
            break;
        default:
            return bad_arguments(program, "unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return bad_arguments(program, "unexpected argument '%s'", argv[optind]);
    if (list == NULL)
        return bad_arguments(program, "-R HOST:PORT,... is required: every rank's address");
    if (rank < 0)
        return bad_arguments(program, "-r RANK is required");
    int bad = 0;
    int ranks = parse_rank_addresses(list, MAX_RANKS, &run.address, &bad);
    if (ranks < 0)
        return bad_arguments(program, "-R entry %d is not HOST:PORT or [IPV6]:PORT, or there are more than %d "
                                      "ranks", bad + 1, MAX_RANKS);
    if (ranks < 2)
        return bad_arguments(program, "-R lists %d rank: an all-to-all needs at least 2", ranks);
    if (rank >= ranks)
        return bad_arguments(program, "-r %lld is not a rank of the %d listed (0-%d)", rank, ranks, ranks - 1);
    run.rank = (int)rank;
    run.ranks = ranks;
    run.message_size = (size_t)message_size;
    run.seed = (uint64_t)seed;
    run.warmup_passes = (int)warmup;
    long open_max = sysconf(_SC_OPEN_MAX);
    if (open_max > 0 && open_max < ranks + SPARE_DESCRIPTORS)
        die(EXIT_NETWORK, "%d ranks need %d open files, the limit is %ld: raise it with ulimit -n", ranks,
            ranks + SPARE_DESCRIPTORS, open_max);
    run.fd = malloc((size_t)ranks * sizeof *run.fd);
    if (run.fd == NULL)
        die(EXIT_NETWORK, "cannot allocate the connection table");
    for (int s = 0; s < ranks; s++)
        run.fd[s] = -1;
    return run_alltoall();
}
