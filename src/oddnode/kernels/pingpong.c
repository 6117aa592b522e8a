/*
 * oddnode pingpong kernel v1: TCP latency and bandwidth between two nodes.
 *
 * One binary, four modes; one end serves, the other measures, and relays
 * may stand between them:
 *
 *   pingpong serve  -p PORT [-w WAIT_SECONDS] [-i IO_TIMEOUT]
 *   pingpong ping   -H HOST -p PORT [-s SIZES] [-T SECONDS_PER_SIZE] [-w CONNECT_WAIT] [-i IO_TIMEOUT]
 *   pingpong stream -H HOST -p PORT [-s MESSAGE_SIZE] [-d SECONDS] [--both] [-w CONNECT_WAIT] [-i IO_TIMEOUT]
 *   pingpong relay  -p PORT -H NEXT_HOST -P NEXT_PORT [-w WAIT_SECONDS] [-i IO_TIMEOUT]
 *
 * serve listens on PORT on every address (IPv4 and IPv6), accepts ONE
 * client within WAIT seconds and does what it asks until it says goodbye:
 * echo messages (ping), count a stream (stream), or both send and count at
 * once (stream --both).  ping and stream connect to HOST:PORT, retrying a
 * refused connection until CONNECT_WAIT has passed, so that both ends may
 * be started at the same moment on two nodes.
 *
 * ping, for each message size: warm-up round trips, each timed alone, whose
 * fastest sets how many round trips make one timed batch (a batch must last
 * at least MIN_BATCH_TICKS timer ticks and ODDNODE_MIN_BATCH_SECONDS); then
 * batches until the size has run SECONDS_PER_SIZE, warm-up included (an
 * upper bound: the batch under way ends first; one batch at the least, a
 * size with fewer than MIN_BATCHES said cut in a warning line).  Each batch gives one sample of the one-way time, batch time /
 * round trips / 2; the minimum and the median of the samples are reported.
 * The server reads a whole message before it echoes it, so a round trip
 * moves the message twice, end to end, and half of it is one transfer.
 * Reads and writes block (no busy polling): the time includes waking the
 * process at each end, as an application's would.  Every echo is compared,
 * after its batch (outside the timer), with the message sent, whose
 * contents depend on the run's seed, the size and the round: a corrupted,
 * stale or shifted echo differs.  TCP cannot carry an empty message, so
 * size 0 sends a 1-byte token: the smallest round trip there is.
 *
 * stream sends MESSAGE_SIZE writes for SECONDS, one direction (client to
 * server) or both at once (--both, a thread per direction at each end).
 * Every message starts with an 8-byte stamp, a tag and its sequence number,
 * and an 8-byte trailer ends the stream; the receiver checks each stamp and
 * counts the bytes, and its count over its own time (from its first read
 * to the trailer, the first read's bytes not counted) is the rate.
 *
 * relay listens on PORT like serve, connects to NEXT_HOST:NEXT_PORT (the
 * next relay or the server, retrying a refusal like a client), then
 * accepts ONE upstream node (a client or the previous relay), all within
 * WAIT seconds of its start, and forwards every byte both ways, unchanged,
 * until both ends have closed; a close is passed on.  A chain
 * stream -> relay -> ... -> relay -> serve thus carries one session end to
 * end, and the server's stamp checks and the client's byte count validate
 * it through every hop.  Forwarding is a poll() loop over non-blocking
 * reads and writes through a ring buffer per direction; the relay gives up
 * when no byte moves either way for IO_TIMEOUT seconds.
 *
 * Output (stdout): '#' header lines "# key: value", then for ping one line
 * per size
 *   result <bytes> <round_trips> <min_us> <median_us> <batches>
 * (one-way times in microseconds), for stream one line per direction
 *   stream <client_to_server|server_to_client> <bytes> <seconds> <MBps>
 * (MB = 10^6 bytes; bytes and seconds as the receiver counted them), and
 * finally "validation ok" or "validation failed <what> key=value...".
 * serve prints its header, then "served ..." summary lines; relay its
 * header, then one line per direction
 *   relayed <upstream_to_downstream|downstream_to_upstream> <bytes> <seconds> <MBps>
 * (bytes written on, over the time from the first byte read to the last
 * written; control records included).
 *
 * Exit status: 0 when the exchange ran (even if validation failed: the
 * parser decides what a failed run means), 2 for bad arguments, 3 when no
 * partner came within the wait (no client connected; no server answered;
 * a relay's next hop refused or its upstream node never came),
 * 4 for a network or protocol error (the partner vanished, stopped
 * answering for IO_TIMEOUT seconds, or does not speak this protocol).
 * Every blocking call is bounded: poll() for accept and connect,
 * SO_RCVTIMEO/SO_SNDTIMEO for every read and write, so a dead partner
 * never hangs either end (name resolution is bounded by the resolver's
 * own timeouts).
 *
 * Compile-time settings (each with a guarded default):
 *   ODDNODE_DEFAULT_SECONDS_PER_SIZE  -T when not given
 *   ODDNODE_DEFAULT_STREAM_SECONDS    -d when not given
 *   ODDNODE_DEFAULT_MESSAGE_SIZE      stream -s when not given
 *   ODDNODE_DEFAULT_SERVE_WAIT        serve -w when not given
 *   ODDNODE_DEFAULT_CONNECT_WAIT      ping/stream -w when not given
 *   ODDNODE_DEFAULT_IO_TIMEOUT        -i when not given
 *   ODDNODE_MIN_BATCH_SECONDS         the shortest timed batch of round trips
 *   ODDNODE_RELAY_BUFFER_BYTES        a relay's ring buffer per direction
 *   ODDNODE_CFLAGS                    string literal of the flags used, for the header
 *   ODDNODE_TEST_CORRUPT_ECHO         test only: the server flips one byte of its
 *                                     echo number N (counted from 0), so that the
 *                                     client's check must fail
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
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
#include "oddnode_batches.h"
#include "oddnode_net.h"

/* 0.2 s per size: 23 default sizes take about 5 s, and at 10-20 us per
 * round trip a size still gets thousands of round trips. */
#ifndef ODDNODE_DEFAULT_SECONDS_PER_SIZE
#define ODDNODE_DEFAULT_SECONDS_PER_SIZE 0.2
#endif
/* 2 s of streaming: long past TCP's slow start on any LAN. */
#ifndef ODDNODE_DEFAULT_STREAM_SECONDS
#define ODDNODE_DEFAULT_STREAM_SECONDS 2.0
#endif
/* 1 MiB writes: large enough that the per-call cost is small next to the
 * copy, the size streaming tools are usually run with. */
#ifndef ODDNODE_DEFAULT_MESSAGE_SIZE
#define ODDNODE_DEFAULT_MESSAGE_SIZE (1L << 20)
#endif
#ifndef ODDNODE_DEFAULT_SERVE_WAIT
#define ODDNODE_DEFAULT_SERVE_WAIT 60.0
#endif
/* ODDNODE_DEFAULT_CONNECT_WAIT and ODDNODE_DEFAULT_IO_TIMEOUT: oddnode_net.h. */
/* 4 MiB per direction: a few default stream messages, and more than the
 * bandwidth-delay product of any LAN hop, so that the relay never starves
 * a window. */
#ifndef ODDNODE_RELAY_BUFFER_BYTES
#define ODDNODE_RELAY_BUFFER_BYTES (4L << 20)
#endif
#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define KERNEL_VERSION 1
#define PROTOCOL_VERSION 1

/* Bytes of messages one batch keeps per side (sent and echoed), so that
 * all echoes can be checked after the timer stops. */
#define BATCH_BYTES_CAP (16L << 20)
#define MAX_SIZES 64
#define MAX_PING_SIZE (256L << 20)
#define MAX_STREAM_MESSAGE (256L << 20)
/* A stream message carries its 8-byte stamp. */
#define MIN_STREAM_MESSAGE 8
/* The receiver reads at least this much per call, whatever the message
 * size: reading small messages one by one would measure the reader. */
#define MIN_RECV_CHUNK (128L << 10)
/* A timer coarser than this makes short round trips hard to time. */
#define COARSE_TIMER_NS 1000

/* Control records: six big-endian 64-bit words, the first the magic. */
#define MAGIC 0x6f64646e70696e67ULL /* "oddnping" */
#define RECORD_WORDS 6
#define RECORD_BYTES (RECORD_WORDS * 8)
enum command {
    CMD_HELLO = 1,       /* a: protocol version */
    CMD_PING = 2,        /* a: message bytes, b: round trips that follow */
    CMD_STREAM = 3,      /* a: message bytes, b: duration in ns (client to server) */
    CMD_STREAM_BOTH = 4, /* as CMD_STREAM, both directions at once */
    CMD_RESULT = 5,      /* a: bytes received, b: bytes timed, c: ns timed, d: bad stamps */
    CMD_BYE = 6,         /* reply: a: echoes served, b: bytes echoed */
};
struct record {
    uint64_t command, a, b, c, d;
};

/* Stream stamps: a 24-bit tag over a 40-bit message sequence number. */
#define STAMP_INDEX_BITS 40
#define STAMP_INDEX_MASK ((1ULL << STAMP_INDEX_BITS) - 1)
#define STAMP_DATA_TAG 0x535452ULL /* "STR" */
#define STAMP_END_TAG 0x454e44ULL  /* "END" */
#define STAMP_BYTES 8

static int io_timeout_seconds = ODDNODE_DEFAULT_IO_TIMEOUT;
/* "HOST port PORT" or the client's address, for messages. */
static char peer_text[NI_MAXHOST + NI_MAXSERV + 16] = "the peer";

/* die() of oddnode_net.h. */
static void die(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    exit_with_error(status, "", format, args);
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s serve  -p PORT [-w WAIT_SECONDS] [-i IO_TIMEOUT]\n"
            "       %s ping   -H HOST -p PORT [-s SIZES] [-T SECONDS_PER_SIZE] [-w CONNECT_WAIT] [-i IO_TIMEOUT]\n"
            "       %s stream -H HOST -p PORT [-s MESSAGE_SIZE] [-d SECONDS] [--both] [-w CONNECT_WAIT] "
            "[-i IO_TIMEOUT]\n"
            "       %s relay  -p PORT -H NEXT_HOST -P NEXT_PORT [-w WAIT_SECONDS] [-i IO_TIMEOUT]\n"
            "  -p PORT          TCP port, 1-65535 (relay: the port it listens on)\n"
            "  -H HOST          the serving node (relay: the next hop): a name, an IPv4 or an IPv6 address\n"
            "  -P PORT          relay: the next hop's port\n"
            "  -w SECONDS       serve: how long to wait for the client (default %g);\n"
            "                   ping/stream: how long to retry a refused connection (default %g);\n"
            "                   relay: both, from its start (serve's default)\n"
            "  -i SECONDS       give up when a read or write makes no progress this long (default %d)\n"
            "  -s SIZES         ping: message sizes in bytes, a comma list (default 0 and 1 B to 4 MiB in\n"
            "                   powers of two); stream: bytes per write, >= %d (default %ld)\n"
            "  -T SECONDS       ping: time per message size (default %g)\n"
            "  -d SECONDS       stream: how long to send (default %g)\n"
            "  --both           stream: both directions at once\n",
            program, program, program, program, ODDNODE_DEFAULT_SERVE_WAIT, ODDNODE_DEFAULT_CONNECT_WAIT,
            ODDNODE_DEFAULT_IO_TIMEOUT, MIN_STREAM_MESSAGE, (long)ODDNODE_DEFAULT_MESSAGE_SIZE,
            ODDNODE_DEFAULT_SECONDS_PER_SIZE, ODDNODE_DEFAULT_STREAM_SECONDS);
}

/* --- the wire ------------------------------------------------------------------ */

/* Why an I/O call failed, in words; buffer holds the text when needed. */
static const char *io_error_text(int error, char *buffer, size_t size)
{
    if (error == PEER_CLOSED)
        return "the connection was closed by the other end";
    if (error == ETIMEDOUT) {
        snprintf(buffer, size, "no progress for %d s (the -i limit): the other end stopped", io_timeout_seconds);
        return buffer;
    }
    return strerror(error);
}

static void die_io(int error, const char *what) __attribute__((noreturn));

static void die_io(int error, const char *what)
{
    char text[128];
    die(EXIT_NETWORK, "%s %s: %s", what, peer_text, io_error_text(error, text, sizeof text));
}

/* One TCP connection, and the bytes a stream receiver read past the end of
 * its stream (the start of the next control record), read before the socket. */
struct connection {
    int fd;
    unsigned char *inbox;
    size_t inbox_length, inbox_position;
};

static void send_record(struct connection *conn, const struct record *r, const char *what)
{
    unsigned char bytes[RECORD_BYTES];
    const uint64_t words[RECORD_WORDS] = {MAGIC, r->command, r->a, r->b, r->c, r->d};
    for (int i = 0; i < RECORD_WORDS; i++)
        put_be64(bytes + 8 * i, words[i]);
    int error = send_fully(conn->fd, bytes, sizeof bytes);
    if (error != 0)
        die_io(error, what);
}

/* Reads one control record; 0, or PEER_CLOSED at a record boundary (the
 * caller decides whether that is an error); anything else is fatal. */
static int recv_record(struct connection *conn, struct record *r, const char *what)
{
    unsigned char bytes[RECORD_BYTES];
    size_t have = 0;
    if (conn->inbox_position < conn->inbox_length) {
        have = conn->inbox_length - conn->inbox_position;
        if (have > sizeof bytes)
            have = sizeof bytes;
        memcpy(bytes, conn->inbox + conn->inbox_position, have);
        conn->inbox_position += have;
    }
    if (have < sizeof bytes) {
        int error = recv_fully(conn->fd, bytes + have, sizeof bytes - have);
        if (error == PEER_CLOSED && have == 0)
            return PEER_CLOSED;
        if (error != 0)
            die_io(error, what);
    }
    uint64_t words[RECORD_WORDS];
    for (int i = 0; i < RECORD_WORDS; i++)
        words[i] = get_be64(bytes + 8 * i);
    if (words[0] != MAGIC)
        die(EXIT_NETWORK, "%s %s: not an oddnode pingpong record (magic 0x%016llx): the other end is "
                          "another program or another version of this kernel",
            what, peer_text, (unsigned long long)words[0]);
    r->command = words[1];
    r->a = words[2];
    r->b = words[3];
    r->c = words[4];
    r->d = words[5];
    return 0;
}

/* A record of the expected command, or a clear error. */
static void expect_record(struct connection *conn, struct record *r, uint64_t command, const char *what)
{
    if (recv_record(conn, r, what) == PEER_CLOSED)
        die_io(PEER_CLOSED, what);
    if (r->command != command)
        die(EXIT_NETWORK, "%s %s: protocol error: command %llu where %llu was expected", what, peer_text,
            (unsigned long long)r->command, (unsigned long long)command);
}

static void print_socket_facts(int fd)
{
    int nodelay = 0, sndbuf = 0, rcvbuf = 0;
    socklen_t length = sizeof nodelay;
    getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &length);
    length = sizeof sndbuf;
    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &length);
    length = sizeof rcvbuf;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &length);
    struct sockaddr_storage local;
    memset(&local, 0, sizeof local);
    socklen_t local_length = sizeof local;
    char local_text[NI_MAXHOST + NI_MAXSERV + 4] = "(unknown)";
    if (getsockname(fd, (struct sockaddr *)&local, &local_length) == 0)
        address_text((struct sockaddr *)&local, local_length, local_text, sizeof local_text);
    printf("# local_address: %s\n", local_text);
    printf("# family: %s\n", local.ss_family == AF_INET6 ? "ipv6" : "ipv4");
    printf("# tcp_nodelay: %s\n", nodelay ? "on" : "off");
    /* Not set: left to the kernel's autotuning, which setting them would turn off. */
    printf("# socket_buffers: send %d receive %d (kernel defaults, autotuned)\n", sndbuf, rcvbuf);
}

static void print_common_header(const char *mode, long long granularity_ns)
{
    printf("# oddnode pingpong kernel v%d\n", KERNEL_VERSION);
    printf("# mode: %s\n", mode);
    printf("# protocol: %d\n", PROTOCOL_VERSION);
    printf("# io_timeout_seconds: %d\n", io_timeout_seconds);
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", granularity_ns);
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
}

/* --- connecting --------------------------------------------------------------- */

/* Connects to host:port, retrying refusals until wait seconds have passed. */
static int connect_to(const char *host, int port, double wait, int *attempts_out)
{
    struct addrinfo *addresses = NULL;
    int status = tcp_addresses(host, port, &addresses);
    if (status != 0)
        die(EXIT_NETWORK, "cannot resolve the host '%s': %s", host, gai_strerror(status));
    int attempts = 0, last_error = 0;
    int fd = connect_until(addresses, now_seconds() + wait, &attempts, &last_error);
    freeaddrinfo(addresses);
    if (fd >= 0) {
        *attempts_out = attempts;
        return fd;
    }
    if (last_error == ECONNREFUSED)
        die(EXIT_NO_PARTNER, "no pingpong server at %s port %d: connection refused for %g s (%d attempts); "
                             "start 'pingpong serve -p %d' there first, or give a longer -w",
            host, port, wait, attempts, port);
    if (last_error == ETIMEDOUT)
        die(EXIT_NO_PARTNER, "no answer from %s port %d within %g s: the host is down or a firewall drops "
                             "the connection", host, port, wait);
    die(EXIT_NETWORK, "cannot connect to %s port %d: %s", host, port, strerror(last_error));
}

/* The client's half of the greeting: both ends speak this protocol. */
static void hello(struct connection *conn)
{
    struct record r = {.command = CMD_HELLO, .a = PROTOCOL_VERSION};
    send_record(conn, &r, "greeting");
    expect_record(conn, &r, CMD_HELLO, "waiting for the greeting of");
    if (r.a != PROTOCOL_VERSION)
        die(EXIT_NETWORK, "the server %s speaks protocol %llu, this client %d: run the same kernel on both ends",
            peer_text, (unsigned long long)r.a, PROTOCOL_VERSION);
}

static void goodbye(struct connection *conn, struct record *reply)
{
    struct record r = {.command = CMD_BYE};
    send_record(conn, &r, "saying goodbye to");
    expect_record(conn, reply, CMD_BYE, "waiting for the goodbye of");
}

/* --- streaming ------------------------------------------------------------------- */

/* One direction of a stream at one end: what it sent, or what it received. */
struct stream_end {
    struct connection *conn;
    size_t message_size;
    double seconds;
    /* sender */
    uint64_t sent_messages, sent_bytes;
    double sent_seconds;
    /* receiver */
    uint64_t received_bytes, timed_bytes, received_messages, bad_stamps;
    double received_seconds;
    int error; /* 0, PEER_CLOSED, ETIMEDOUT, an errno, or ENOMEM */
};

static void *stream_send(void *argument)
{
    struct stream_end *end = argument;
    const size_t size = end->message_size;
    unsigned char *buffer = NULL;
    if (posix_memalign((void **)&buffer, 4096, size) != 0) {
        end->error = ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < size; i++)
        buffer[i] = (unsigned char)mix64(i);
    const double started = now_seconds();
    const double deadline = started + end->seconds;
    uint64_t sent = 0;
    do {
        put_be64(buffer, (STAMP_DATA_TAG << STAMP_INDEX_BITS) | (sent & STAMP_INDEX_MASK));
        end->error = send_fully(end->conn->fd, buffer, size);
        if (end->error != 0)
            break;
        sent++;
    } while (now_seconds() < deadline);
    end->sent_seconds = now_seconds() - started;
    end->sent_messages = sent;
    end->sent_bytes = sent * (uint64_t)size;
    if (end->error == 0) {
        unsigned char trailer[STAMP_BYTES];
        put_be64(trailer, (STAMP_END_TAG << STAMP_INDEX_BITS) | (sent & STAMP_INDEX_MASK));
        end->error = send_fully(end->conn->fd, trailer, sizeof trailer);
    }
    free(buffer);
    return NULL;
}

static void *stream_receive(void *argument)
{
    struct stream_end *end = argument;
    const size_t size = end->message_size;
    const size_t chunk = size > (size_t)MIN_RECV_CHUNK ? size : (size_t)MIN_RECV_CHUNK;
    unsigned char *buffer = NULL;
    if (posix_memalign((void **)&buffer, 4096, chunk) != 0) {
        end->error = ENOMEM;
        return NULL;
    }
    unsigned char stamp[STAMP_BYTES];
    size_t position = 0; /* in the current message */
    uint64_t expected = 0, first_read_bytes = 0;
    double first = 0.0, last = 0.0;
    int ended = 0;
    while (!ended) {
        ssize_t n = recv(end->conn->fd, buffer, chunk, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            end->error = (errno == EAGAIN || errno == EWOULDBLOCK) ? ETIMEDOUT : errno;
            break;
        }
        if (n == 0) {
            end->error = PEER_CLOSED;
            break;
        }
        last = now_seconds();
        if (first == 0.0) {
            first = last;
            first_read_bytes = (uint64_t)n;
        }
        size_t offset = 0;
        while (offset < (size_t)n) {
            if (position < STAMP_BYTES) {
                size_t take = STAMP_BYTES - position;
                if (take > (size_t)n - offset)
                    take = (size_t)n - offset;
                memcpy(stamp + position, buffer + offset, take);
                position += take;
                offset += take;
                if (position < STAMP_BYTES)
                    break;
                uint64_t value = get_be64(stamp);
                uint64_t tag = value >> STAMP_INDEX_BITS, index = value & STAMP_INDEX_MASK;
                if (tag == STAMP_END_TAG) {
                    if (index != (expected & STAMP_INDEX_MASK))
                        end->bad_stamps++;
                    ended = 1;
                    break;
                }
                if (tag != STAMP_DATA_TAG || index != (expected & STAMP_INDEX_MASK))
                    end->bad_stamps++;
            } else {
                size_t take = size - position;
                if (take > (size_t)n - offset)
                    take = (size_t)n - offset;
                position += take;
                offset += take;
            }
            if (position == size) {
                position = 0;
                expected++;
            }
        }
        if (ended && offset < (size_t)n) {
            /* The other end's next control record, already here. */
            size_t rest = (size_t)n - offset;
            end->conn->inbox = malloc(rest);
            if (end->conn->inbox == NULL) {
                end->error = ENOMEM;
                break;
            }
            memcpy(end->conn->inbox, buffer + offset, rest);
            end->conn->inbox_length = rest;
            end->conn->inbox_position = 0;
        }
    }
    free(buffer);
    end->received_messages = expected;
    end->received_bytes = expected * (uint64_t)size;
    /* The first read's bytes arrived before the clock started. */
    end->timed_bytes = end->received_bytes > first_read_bytes ? end->received_bytes - first_read_bytes : 0;
    end->received_seconds = last - first;
    return NULL;
}

static void start_thread(pthread_t *thread, void *(*function)(void *), void *argument)
{
    int error = pthread_create(thread, NULL, function, argument);
    if (error != 0)
        die(EXIT_NETWORK, "cannot start a stream thread: %s", strerror(error));
}

static void check_stream_end(const struct stream_end *end, const char *what)
{
    if (end->error == ENOMEM)
        die(EXIT_NETWORK, "cannot allocate a stream buffer of %zu bytes", end->message_size);
    if (end->error != 0)
        die_io(end->error, what);
}

/* --- serve ------------------------------------------------------------------------ */

/* What a server has done for its client, for its summary. */
struct served {
    uint64_t echoes, echoed_bytes;
};

static void serve_ping(struct connection *conn, const struct record *request, unsigned char **buffer,
                       size_t *capacity, struct served *served)
{
    const uint64_t size = request->a, rounds = request->b;
    if (size > (uint64_t)MAX_PING_SIZE || rounds > (uint64_t)MAX_BATCH_ROUNDS)
        die(EXIT_NETWORK, "protocol error from %s: %llu round trips of %llu bytes", peer_text,
            (unsigned long long)rounds, (unsigned long long)size);
    const size_t wire = size == 0 ? 1 : (size_t)size;
    if (wire > *capacity) {
        free(*buffer);
        *buffer = NULL;
        if (posix_memalign((void **)buffer, 4096, wire) != 0)
            die(EXIT_NETWORK, "cannot allocate an echo buffer of %zu bytes", wire);
        *capacity = wire;
    }
    send_record(conn, request, "acknowledging a batch to");
    for (uint64_t i = 0; i < rounds; i++) {
        int error = recv_fully(conn->fd, *buffer, wire);
        if (error != 0)
            die_io(error, "receiving a message from");
#ifdef ODDNODE_TEST_CORRUPT_ECHO
        if (served->echoes == (uint64_t)(ODDNODE_TEST_CORRUPT_ECHO))
            (*buffer)[wire / 2] ^= 0xFF;
#endif
        error = send_fully(conn->fd, *buffer, wire);
        if (error != 0)
            die_io(error, "echoing a message to");
        served->echoes++;
        served->echoed_bytes += size;
    }
}

static void serve_stream(struct connection *conn, const struct record *request)
{
    const int both = request->command == CMD_STREAM_BOTH;
    const uint64_t size = request->a;
    if (size < MIN_STREAM_MESSAGE || size > (uint64_t)MAX_STREAM_MESSAGE || request->b > 3600ULL * 1000000000ULL)
        die(EXIT_NETWORK, "protocol error from %s: a stream of %llu-byte messages for %llu ns", peer_text,
            (unsigned long long)size, (unsigned long long)request->b);
    struct stream_end incoming = {.conn = conn, .message_size = (size_t)size};
    struct stream_end outgoing = {.conn = conn, .message_size = (size_t)size, .seconds = 1.0e-9 * (double)request->b};
    send_record(conn, request, "acknowledging a stream to");
    pthread_t sender;
    if (both)
        start_thread(&sender, stream_send, &outgoing);
    stream_receive(&incoming);
    if (both)
        pthread_join(sender, NULL);
    check_stream_end(&incoming, "receiving the stream from");
    if (both)
        check_stream_end(&outgoing, "sending the stream to");
    struct record result = {.command = CMD_RESULT, .a = incoming.received_bytes, .b = incoming.timed_bytes,
                            .c = (uint64_t)(incoming.received_seconds * 1.0e9), .d = incoming.bad_stamps};
    send_record(conn, &result, "reporting the stream's count to");
    printf("served stream client_to_server %llu %.6f %.3f\n", (unsigned long long)incoming.timed_bytes,
           incoming.received_seconds, rate_mbps(incoming.timed_bytes, incoming.received_seconds));
    if (both) {
        struct record theirs;
        expect_record(conn, &theirs, CMD_RESULT, "waiting for the stream's count from");
        double seconds = 1.0e-9 * (double)theirs.c;
        printf("served stream server_to_client %llu %.6f %.3f\n", (unsigned long long)theirs.b, seconds,
               rate_mbps(theirs.b, seconds));
    }
    fflush(stdout);
}

/* Listens on port on every address (IPv4 and IPv6) for the one partner
 * this end serves; prints where. */
static void listen_and_say_where(int port, struct listeners *out)
{
    char listening[MAX_LISTENERS * (NI_MAXHOST + NI_MAXSERV + 8)];
    listen_everywhere(port, 4, out, listening, sizeof listening);
    printf("# listening: %s\n", listening);
    fflush(stdout);
}

/* The first connection to arrive before deadline (the -w limit of `wait`
 * seconds), its address in text; then the listeners are closed, so that
 * later ones are refused.  `who` names the partner in messages. */
static int accept_one(struct listeners *listeners, int port, double deadline, double wait, const char *who,
                      char *text, size_t size)
{
    int client = -1;
    struct sockaddr_storage address;
    socklen_t address_length = sizeof address;
    while (client < 0) {
        double remaining = deadline - now_seconds();
        if (remaining <= 0.0)
            die(EXIT_NO_PARTNER, "no %s connected to port %d within %g s", who, port, wait);
        int ready = poll(listeners->fd, (nfds_t)listeners->count, (int)(remaining * 1000.0) + 1);
        if (ready < 0 && errno != EINTR)
            die(EXIT_NETWORK, "waiting for a %s on port %d: %s", who, port, strerror(errno));
        for (int i = 0; i < listeners->count && ready > 0 && client < 0; i++) {
            if (!(listeners->fd[i].revents & POLLIN))
                continue;
            address_length = sizeof address;
            client = accept4(listeners->fd[i].fd, (struct sockaddr *)&address, &address_length, SOCK_CLOEXEC);
            if (client < 0 && errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
                die(EXIT_NETWORK, "accepting a %s on port %d: %s", who, port, strerror(errno));
        }
    }
    for (int i = 0; i < listeners->count; i++)
        close(listeners->fd[i].fd);
    listeners->count = 0;
    address_text((struct sockaddr *)&address, address_length, text, size);
    return client;
}

static int run_serve(int port, double wait)
{
    const long long granularity = timer_granularity_ns();
    print_common_header("serve", granularity);
    printf("# port: %d\n", port);
    printf("# wait_seconds: %g\n", wait);
#ifdef ODDNODE_TEST_CORRUPT_ECHO
    printf("# corrupt_echo: %lld\n", (long long)(ODDNODE_TEST_CORRUPT_ECHO));
#endif

    struct listeners listeners;
    listen_and_say_where(port, &listeners);
    /* One client, within the wait. */
    int client = accept_one(&listeners, port, now_seconds() + wait, wait, "client", peer_text, sizeof peer_text);
    configure_socket(client, io_timeout_seconds);
    printf("# client: %s\n", peer_text);
    print_socket_facts(client);
    fflush(stdout);

    struct connection conn = {.fd = client};
    struct served served = {0, 0};
    unsigned char *buffer = NULL;
    size_t capacity = 0;
    for (;;) {
        struct record request;
        if (recv_record(&conn, &request, "waiting for a request from") == PEER_CLOSED)
            die(EXIT_NETWORK, "the client %s closed the connection without saying goodbye "
                              "(after %llu echoes): it stopped or failed", peer_text,
                (unsigned long long)served.echoes);
        if (conn.inbox_position >= conn.inbox_length) {
            free(conn.inbox);
            conn.inbox = NULL;
            conn.inbox_length = conn.inbox_position = 0;
        }
        switch (request.command) {
        case CMD_HELLO: {
            struct record reply = {.command = CMD_HELLO, .a = PROTOCOL_VERSION};
            send_record(&conn, &reply, "greeting");
            break;
        }
        case CMD_PING:
            serve_ping(&conn, &request, &buffer, &capacity, &served);
            break;
        case CMD_STREAM:
        case CMD_STREAM_BOTH:
            serve_stream(&conn, &request);
            break;
        case CMD_BYE: {
            struct record reply = {.command = CMD_BYE, .a = served.echoes, .b = served.echoed_bytes};
            send_record(&conn, &reply, "saying goodbye to");
            printf("served echoes %llu %llu\n", (unsigned long long)served.echoes,
                   (unsigned long long)served.echoed_bytes);
            printf("# session: the client said goodbye\n");
            free(buffer);
            close(client);
            return 0;
        }
        default:
            die(EXIT_NETWORK, "protocol error from %s: unknown command %llu", peer_text,
                (unsigned long long)request.command);
        }
    }
}

/* --- ping ------------------------------------------------------------------------ */

/* The first failed echo, for the validation line. */
struct echo_check {
    uint64_t bad, checked;
    size_t size;
    uint64_t round;
    size_t offset;
    unsigned expected, got;
};

/* The word every byte of round r's message is XORed with: each round's
 * message differs from every other round's in every word. */
static uint64_t round_mask(uint64_t seed, size_t size, uint64_t round)
{
    return mix64(seed ^ mix64(((uint64_t)size << 24) ^ (round + 1)));
}

struct ping_size_result {
    uint64_t round_trips, batches, short_batches, rounds_per_batch, first_rounds_per_batch;
    double min_us, median_us;
};

/* Runs one batch: `rounds` messages from send_slots, echoes into
 * receive_slots; returns the seconds the round trips took. */
static double ping_batch(struct connection *conn, size_t size, size_t wire, size_t stride, uint64_t rounds,
                         unsigned char *send_slots, unsigned char *receive_slots)
{
    struct record request = {.command = CMD_PING, .a = size, .b = rounds}, ack;
    send_record(conn, &request, "announcing a batch to");
    expect_record(conn, &ack, CMD_PING, "waiting for the batch's acknowledgement from");
    if (ack.a != size || ack.b != rounds)
        die(EXIT_NETWORK, "protocol error: %s acknowledged %llu round trips of %llu bytes, not %llu of %zu",
            peer_text, (unsigned long long)ack.b, (unsigned long long)ack.a, (unsigned long long)rounds, size);
    const int fd = conn->fd;
    double started = now_seconds();
    for (uint64_t i = 0; i < rounds; i++) {
        int error = send_fully(fd, send_slots + i * stride, wire);
        if (error != 0)
            die_io(error, "sending a message to");
        error = recv_fully(fd, receive_slots + i * stride, wire);
        if (error != 0)
            die_io(error, "waiting for an echo from");
    }
    return now_seconds() - started;
}

static void fill_slots(unsigned char *slots, size_t stride, uint64_t rounds, const uint64_t *base, size_t words,
                       uint64_t seed, size_t size, uint64_t first_round)
{
    for (uint64_t i = 0; i < rounds; i++) {
        uint64_t *slot = (uint64_t *)(slots + i * stride);
        uint64_t mask = round_mask(seed, size, first_round + i);
        for (size_t k = 0; k < words; k++)
            slot[k] = base[k] ^ mask;
    }
}

static void check_slots(const unsigned char *sent, const unsigned char *echoed, size_t stride, uint64_t rounds,
                        size_t size, size_t wire, uint64_t first_round, struct echo_check *check)
{
    for (uint64_t i = 0; i < rounds; i++) {
        const unsigned char *a = sent + i * stride, *b = echoed + i * stride;
        check->checked++;
        if (memcmp(a, b, wire) == 0)
            continue;
        if (check->bad++ == 0) {
            size_t k = 0;
            while (a[k] == b[k])
                k++;
            check->size = size;
            check->round = first_round + i;
            check->offset = k;
            check->expected = a[k];
            check->got = b[k];
        }
    }
}

static void ping_one_size(struct connection *conn, size_t size, double seconds_per_size, long long granularity_ns,
                          uint64_t seed, struct echo_check *check, struct ping_size_result *result)
{
    const size_t wire = size == 0 ? 1 : size;
    const size_t words = (wire + 7) / 8;
    const size_t stride = (words * 8 + 63) / 64 * 64; /* each slot on its own cache lines */
    uint64_t *base = malloc(words * 8);
    if (base == NULL)
        die(EXIT_NETWORK, "cannot allocate a pattern of %zu bytes", words * 8);
    for (size_t k = 0; k < words; k++)
        base[k] = mix64(seed + 0x9e3779b97f4a7c15ULL * (uint64_t)size + k);

    uint64_t capacity = (uint64_t)(BATCH_BYTES_CAP / (long)stride);
    if (capacity < 1)
        capacity = 1;
    if (capacity > (uint64_t)MAX_BATCH_ROUNDS)
        capacity = MAX_BATCH_ROUNDS;
    uint64_t slots = 1;
    unsigned char *send_slots = NULL, *receive_slots = NULL;
    if (posix_memalign((void **)&send_slots, 4096, stride) != 0
        || posix_memalign((void **)&receive_slots, 4096, stride) != 0)
        die(EXIT_NETWORK, "cannot allocate message buffers of %zu bytes", stride);

    /* Warm-up: round trips timed one by one; the fastest estimates a round trip. */
    uint64_t round = 0;
    double fastest = 1.0e30;
    const double started = now_seconds();
    for (int w = 0; warmup_goes_on(w, started, seconds_per_size); w++) {
        fill_slots(send_slots, stride, 1, base, words, seed, size, round);
        double t = ping_batch(conn, size, wire, stride, 1, send_slots, receive_slots);
        check_slots(send_slots, receive_slots, stride, 1, size, wire, round, check);
        round++;
        if (t < fastest)
            fastest = t;
    }

    const double target = min_batch_seconds(granularity_ns);
    const double enough_ticks = 1.0e-9 * (double)MIN_BATCH_TICKS * (double)granularity_ns;
    uint64_t rounds = (uint64_t)first_batch_rounds(target, fastest, (long)capacity);

    size_t sample_capacity = 1024, samples = 0;
    double *sample = malloc(sample_capacity * sizeof *sample);
    if (sample == NULL)
        die(EXIT_NETWORK, "cannot allocate the sample table");
    memset(result, 0, sizeof *result);
    result->rounds_per_batch = result->first_rounds_per_batch = rounds;
    while (batches_go_on(samples, started, seconds_per_size)) {
        if (rounds > slots) {
            free(send_slots);
            free(receive_slots);
            send_slots = receive_slots = NULL;
            if (posix_memalign((void **)&send_slots, 4096, rounds * stride) != 0
                || posix_memalign((void **)&receive_slots, 4096, rounds * stride) != 0)
                die(EXIT_NETWORK, "cannot allocate %llu message buffers of %zu bytes", (unsigned long long)rounds,
                    stride);
            slots = rounds;
        }
        fill_slots(send_slots, stride, rounds, base, words, seed, size, round);
        double t = ping_batch(conn, size, wire, stride, rounds, send_slots, receive_slots);
        check_slots(send_slots, receive_slots, stride, rounds, size, wire, round, check);
        round += rounds;
        if (samples == sample_capacity) {
            sample_capacity *= 2;
            sample = realloc(sample, sample_capacity * sizeof *sample);
            if (sample == NULL)
                die(EXIT_NETWORK, "cannot grow the sample table");
        }
        sample[samples++] = t / (double)rounds / 2.0;
        result->round_trips += rounds;
        /* A batch under the target is kept (dropping the fast ones would bias
         * the minimum up); the next ones get more round trips. */
        if (t < target && rounds < capacity) {
            rounds = rounds * 2 < capacity ? rounds * 2 : capacity;
            result->rounds_per_batch = rounds;
        }
        if (t < enough_ticks)
            result->short_batches++;
    }
    qsort(sample, samples, sizeof *sample, compare_doubles);
    result->batches = samples;
    result->min_us = 1.0e6 * sample[0];
    result->median_us = 1.0e6 * sorted_median(sample, samples);
    free(sample);
    free(send_slots);
    free(receive_slots);
    free(base);
}

static int parse_sizes(const char *text, size_t *sizes)
{
    long long values[MAX_SIZES];
    int count = parse_count_list(text, MAX_PING_SIZE, values, MAX_SIZES);
    for (int i = 0; i < count; i++)
        sizes[i] = (size_t)values[i];
    return count;
}

static int run_ping(const char *host, int port, const size_t *sizes, int count, double seconds_per_size,
                    double wait)
{
    const long long granularity = timer_granularity_ns();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    const uint64_t seed = mix64(((uint64_t)wall.tv_sec << 32) ^ (uint64_t)wall.tv_nsec ^ ((uint64_t)getpid() << 48));

    print_common_header("ping", granularity);
    printf("# peer: %s\n", host);
    printf("# port: %d\n", port);
    printf("# sizes:");
    for (int i = 0; i < count; i++)
        printf("%s%zu", i ? "," : " ", sizes[i]);
    printf("\n");
    printf("# seconds_per_size: %g\n", seconds_per_size);
    printf("# connect_wait_seconds: %g\n", wait);
    printf("# min_batches: %d\n", MIN_BATCHES);
    printf("# min_batch_ticks: %d\n", MIN_BATCH_TICKS);
    printf("# min_batch_seconds: %g\n", (double)ODDNODE_MIN_BATCH_SECONDS);
    printf("# min_batch_ns: %.0f\n", 1.0e9 * min_batch_seconds(granularity));
    printf("# warmup_rounds: 1 to %d, timed one by one, not counted\n", MAX_WARMUP_ROUNDS);
    printf("# time: one-way = batch time / round trips / 2; min and median over batches\n");
    printf("# echo: the server reads a whole message, then sends it back\n");
    printf("# pattern: splitmix64 of seed, size and word, XOR a word per round; every echo compared\n");
    printf("# seed: 0x%016llx\n", (unsigned long long)seed);
    for (int i = 0; i < count; i++)
        if (sizes[i] == 0)
            printf("# zero_size: a 1-byte token per message (TCP cannot carry an empty one)\n");
    if (granularity > COARSE_TIMER_NS)
        printf("# warning: the timer's granularity is %lld ns: batches are long and small-message "
               "latencies coarse\n", granularity);
    fflush(stdout);

    int attempts = 0;
    int fd = connect_to(host, port, wait, &attempts);
    snprintf(peer_text, sizeof peer_text, "%s port %d", host, port);
    configure_socket(fd, io_timeout_seconds);
    {
        struct sockaddr_storage remote;
        socklen_t length = sizeof remote;
        char text[NI_MAXHOST + NI_MAXSERV + 4] = "(unknown)";
        if (getpeername(fd, (struct sockaddr *)&remote, &length) == 0)
            address_text((struct sockaddr *)&remote, length, text, sizeof text);
        printf("# peer_address: %s\n", text);
    }
    printf("# connect_attempts: %d\n", attempts);
    print_socket_facts(fd);
    fflush(stdout);
    struct connection conn = {.fd = fd};
    hello(&conn);

    struct echo_check check;
    memset(&check, 0, sizeof check);
    for (int i = 0; i < count; i++) {
        struct ping_size_result r;
        ping_one_size(&conn, sizes[i], seconds_per_size, granularity, seed, &check, &r);
        if (r.short_batches > 0)
            printf("# warning: size %zu: %llu of %llu timed batches lasted under %d timer ticks; "
                   "round trips per batch raised from %llu to %llu\n", sizes[i],
                   (unsigned long long)r.short_batches, (unsigned long long)r.batches, MIN_BATCH_TICKS,
                   (unsigned long long)r.first_rounds_per_batch, (unsigned long long)r.rounds_per_batch);
        report_cut(stdout, "", (long)sizes[i], (size_t)r.batches, seconds_per_size);
        printf("result %zu %llu %.3f %.3f %llu\n", sizes[i], (unsigned long long)r.round_trips, r.min_us,
               r.median_us, (unsigned long long)r.batches);
        fflush(stdout);
    }
    struct record reply;
    goodbye(&conn, &reply);
    close(fd);
    printf("# echoes_checked: %llu\n", (unsigned long long)check.checked);
    if (check.bad == 0)
        printf("validation ok\n");
    else
        printf("validation failed echo bad=%llu/%llu size=%zu round=%llu offset=%zu expected=0x%02x got=0x%02x\n",
               (unsigned long long)check.bad, (unsigned long long)check.checked, check.size,
               (unsigned long long)check.round, check.offset, check.expected, check.got);
    return 0;
}

/* --- stream (client) ---------------------------------------------------------------- */

static int run_stream(const char *host, int port, size_t message_size, double seconds, int both, double wait)
{
    const long long granularity = timer_granularity_ns();
    print_common_header("stream", granularity);
    printf("# peer: %s\n", host);
    printf("# port: %d\n", port);
    printf("# message_size: %zu\n", message_size);
    printf("# seconds: %g\n", seconds);
    printf("# directions: %s\n", both ? "both (client_to_server and server_to_client at once)" : "client_to_server");
    printf("# connect_wait_seconds: %g\n", wait);
    printf("# rate: the receiver's bytes over its time, first read to end (the first read's bytes "
           "not counted); MB = 10^6 B\n");
    printf("# check: every message's stamp (tag and sequence number), and bytes received = bytes sent\n");
    fflush(stdout);

    int attempts = 0;
    int fd = connect_to(host, port, wait, &attempts);
    snprintf(peer_text, sizeof peer_text, "%s port %d", host, port);
    configure_socket(fd, io_timeout_seconds);
    printf("# connect_attempts: %d\n", attempts);
    print_socket_facts(fd);
    fflush(stdout);
    struct connection conn = {.fd = fd};
    hello(&conn);

    struct record request = {.command = both ? CMD_STREAM_BOTH : CMD_STREAM, .a = message_size,
                             .b = (uint64_t)(seconds * 1.0e9)}, ack;
    send_record(&conn, &request, "asking for a stream from");
    expect_record(&conn, &ack, request.command, "waiting for the stream's acknowledgement from");

    struct stream_end outgoing = {.conn = &conn, .message_size = message_size, .seconds = seconds};
    struct stream_end incoming = {.conn = &conn, .message_size = message_size};
    pthread_t receiver;
    if (both)
        start_thread(&receiver, stream_receive, &incoming);
    stream_send(&outgoing);
    if (both)
        pthread_join(receiver, NULL);
    check_stream_end(&outgoing, "sending the stream to");
    if (both) {
        check_stream_end(&incoming, "receiving the stream from");
        struct record mine = {.command = CMD_RESULT, .a = incoming.received_bytes, .b = incoming.timed_bytes,
                              .c = (uint64_t)(incoming.received_seconds * 1.0e9), .d = incoming.bad_stamps};
        send_record(&conn, &mine, "reporting the stream's count to");
    }
    struct record theirs;
    expect_record(&conn, &theirs, CMD_RESULT, "waiting for the stream's count from");
    /* The server's own sending end is not reported back: its receiver here counted it. */
    struct record reply;
    goodbye(&conn, &reply);
    close(fd);

    const double their_seconds = 1.0e-9 * (double)theirs.c;
    printf("# sent_client_to_server: %llu bytes in %.6f s, %llu messages\n", (unsigned long long)outgoing.sent_bytes,
           outgoing.sent_seconds, (unsigned long long)outgoing.sent_messages);
    printf("# received_client_to_server: %llu bytes, %llu timed\n", (unsigned long long)theirs.a,
           (unsigned long long)theirs.b);
    if (both)
        printf("# received_server_to_client: %llu bytes, %llu timed, %llu messages\n",
               (unsigned long long)incoming.received_bytes, (unsigned long long)incoming.timed_bytes,
               (unsigned long long)incoming.received_messages);
    printf("stream client_to_server %llu %.6f %.3f\n", (unsigned long long)theirs.b, their_seconds,
           rate_mbps(theirs.b, their_seconds));
    if (both)
        printf("stream server_to_client %llu %.6f %.3f\n", (unsigned long long)incoming.timed_bytes,
               incoming.received_seconds, rate_mbps(incoming.timed_bytes, incoming.received_seconds));

    /* The server's sender is checked by what arrived here: a whole number of
     * messages in sequence; it does not say how many it sent, so the count
     * check applies to the client's sending direction. */
    if (theirs.a != outgoing.sent_bytes || theirs.d != 0)
        printf("validation failed client_to_server sent=%llu received=%llu bad_stamps=%llu\n",
               (unsigned long long)outgoing.sent_bytes, (unsigned long long)theirs.a, (unsigned long long)theirs.d);
    else if (both && incoming.bad_stamps != 0)
        printf("validation failed server_to_client received=%llu bad_stamps=%llu\n",
               (unsigned long long)incoming.received_bytes, (unsigned long long)incoming.bad_stamps);
    else
        printf("validation ok\n");
    return 0;
}

/* --- relay ------------------------------------------------------------------------ */

#define RELAY_RING_BYTES ((size_t)ODDNODE_RELAY_BUFFER_BYTES)

/* One direction through a relay: bytes read from one socket wait in a ring
 * until they are written to the other. */
struct relay_way {
    const char *name;                  /* for the summary line */
    int from, to;                      /* indexes into the relay's two sockets */
    unsigned char *ring;
    size_t start, used;                /* the bytes waiting: ring[start, start + used) modulo the size */
    int reading_done, passed_on;       /* the sender closed; its close was passed on */
    uint64_t bytes;                    /* bytes written on */
    double first, last;                /* first byte read, last byte written */
};

struct relay_side {
    int fd;
    const char *role;                  /* "upstream node", "downstream node" */
    char address[NI_MAXHOST + NI_MAXSERV + 16];
};

static void relay_failed(const struct relay_side *side, const char *doing, int error) __attribute__((noreturn));

static void relay_failed(const struct relay_side *side, const char *doing, int error)
{
    if (error == EPIPE || error == ECONNRESET)
        die(EXIT_NETWORK, "relay: %s the %s %s: the connection was reset: it stopped or failed", doing,
            side->role, side->address);
    die(EXIT_NETWORK, "relay: %s the %s %s: %s", doing, side->role, side->address, strerror(error));
}

/* Reads what the ring has room for; whether anything happened (bytes or the
 * sender's close). */
static int relay_read(struct relay_way *way, const struct relay_side *sides)
{
    if (way->used == 0)
        way->start = 0; /* an empty ring starts over: the longest room in one piece */
    const size_t end = (way->start + way->used) % RELAY_RING_BYTES;
    const size_t room = end >= way->start ? RELAY_RING_BYTES - end : way->start - end;
    ssize_t n = recv(sides[way->from].fd, way->ring + end, room, MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;
        relay_failed(&sides[way->from], "reading from", errno);
    }
    if (n == 0) {
        way->reading_done = 1;
        return 1;
    }
    if (way->first == 0.0)
        way->first = now_seconds();
    way->used += (size_t)n;
    return 1;
}

/* Writes what the ring holds in one piece; whether anything went. */
static int relay_write(struct relay_way *way, const struct relay_side *sides)
{
    size_t piece = RELAY_RING_BYTES - way->start;
    if (piece > way->used)
        piece = way->used;
    ssize_t n = send(sides[way->to].fd, way->ring + way->start, piece, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;
        relay_failed(&sides[way->to], "writing to", errno);
    }
    way->start = (way->start + (size_t)n) % RELAY_RING_BYTES;
    way->used -= (size_t)n;
    way->bytes += (uint64_t)n;
    way->last = now_seconds();
    return n > 0;
}

/* Forwards both ways until both senders have closed and every byte went on;
 * gives up when no byte moves either way for the -i limit. */
static void relay_both_ways(struct relay_side *sides, struct relay_way *ways)
{
    double idle_deadline = now_seconds() + io_timeout_seconds;
    while (!(ways[0].passed_on && ways[1].passed_on)) {
        struct pollfd pfd[2];
        for (int s = 0; s < 2; s++) {
            pfd[s].fd = sides[s].fd;
            pfd[s].events = 0;
            pfd[s].revents = 0;
        }
        for (int w = 0; w < 2; w++) {
            if (!ways[w].reading_done && ways[w].used < RELAY_RING_BYTES)
                pfd[ways[w].from].events |= POLLIN;
            if (ways[w].used > 0)
                pfd[ways[w].to].events |= POLLOUT;
        }
        /* A socket with nothing to do is left out: a closed one would wake
         * poll with POLLHUP again and again. */
        for (int s = 0; s < 2; s++)
            if (pfd[s].events == 0)
                pfd[s].fd = -1;
        double remaining = idle_deadline - now_seconds();
        if (remaining <= 0.0)
            die(EXIT_NETWORK, "relay: no byte moved either way for %d s (the -i limit) between the upstream "
                              "node %s and the downstream node %s: the chain stopped", io_timeout_seconds,
                sides[0].address, sides[1].address);
        int ready = poll(pfd, 2, (int)(remaining * 1000.0) + 1);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            die(EXIT_NETWORK, "relay: waiting for either node: %s", strerror(errno));
        }
        int progress = 0;
        for (int w = 0; w < 2; w++) {
            struct relay_way *way = &ways[w];
            if ((pfd[way->from].events & POLLIN) && (pfd[way->from].revents & (POLLIN | POLLHUP | POLLERR)))
                progress |= relay_read(way, sides);
            if ((pfd[way->to].events & POLLOUT) && (pfd[way->to].revents & (POLLOUT | POLLHUP | POLLERR)))
                progress |= relay_write(way, sides);
            if (way->reading_done && way->used == 0 && !way->passed_on) {
                shutdown(sides[way->to].fd, SHUT_WR); /* the close goes on: an error means it is gone already */
                way->passed_on = 1;
                progress = 1;
            }
        }
        if (progress)
            idle_deadline = now_seconds() + io_timeout_seconds;
    }
}

static int run_relay(int port, const char *next_host, int next_port, double wait)
{
    const double started = now_seconds();
    const long long granularity = timer_granularity_ns();
    print_common_header("relay", granularity);
    printf("# port: %d\n", port);
    printf("# next: %s\n", next_host);
    printf("# next_port: %d\n", next_port);
    printf("# wait_seconds: %g\n", wait);
    printf("# relay_buffer_bytes: %zu\n", RELAY_RING_BYTES);
    printf("# forwarding: every byte both ways, uninterpreted and unchanged, until both ends close\n");
    fflush(stdout);

    struct listeners listeners;
    listen_and_say_where(port, &listeners);
    /* The next hop first: the upstream node's connection waits in the
     * listen queue meanwhile, and its greeting in its socket. */
    struct relay_side sides[2] = {{.fd = -1, .role = "upstream node"}, {.fd = -1, .role = "downstream node"}};
    int attempts = 0;
    sides[1].fd = connect_to(next_host, next_port, wait, &attempts);
    snprintf(sides[1].address, sizeof sides[1].address, "%s port %d", next_host, next_port);
    configure_socket(sides[1].fd, io_timeout_seconds);
    printf("# downstream: %s\n", sides[1].address);
    printf("# connect_attempts: %d\n", attempts);
    fflush(stdout);
    sides[0].fd = accept_one(&listeners, port, started + wait, wait, "upstream node", sides[0].address,
                             sizeof sides[0].address);
    configure_socket(sides[0].fd, io_timeout_seconds);
    printf("# upstream: %s\n", sides[0].address);
    print_socket_facts(sides[0].fd);
    fflush(stdout);

    struct relay_way ways[2] = {{.name = "upstream_to_downstream", .from = 0, .to = 1},
                                {.name = "downstream_to_upstream", .from = 1, .to = 0}};
    for (int w = 0; w < 2; w++)
        if (posix_memalign((void **)&ways[w].ring, 4096, RELAY_RING_BYTES) != 0)
            die(EXIT_NETWORK, "cannot allocate a relay buffer of %zu bytes", RELAY_RING_BYTES);
    relay_both_ways(sides, ways);
    for (int w = 0; w < 2; w++) {
        const double seconds = ways[w].bytes > 0 ? ways[w].last - ways[w].first : 0.0;
        printf("relayed %s %llu %.6f %.3f\n", ways[w].name, (unsigned long long)ways[w].bytes, seconds,
               rate_mbps(ways[w].bytes, seconds));
        free(ways[w].ring);
    }
    printf("# session: both ends closed\n");
    close(sides[0].fd);
    close(sides[1].fd);
    return 0;
}

/* --- main ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *program = argv[0];
    if (argc < 2) {
        return bad_arguments(program, "a mode is required: serve, ping, stream or relay");
    }
    const char *mode = argv[1];
    int serve = strcmp(mode, "serve") == 0, ping = strcmp(mode, "ping") == 0, stream = strcmp(mode, "stream") == 0;
    int relay = strcmp(mode, "relay") == 0;
    if (!serve && !ping && !stream && !relay) {
        return bad_arguments(program, "unknown mode '%s': expected serve, ping, stream or relay", mode);
    }
    signal(SIGPIPE, SIG_IGN); /* a vanished peer is an error to report, not a silent death */

    const char *host = NULL;
    long long port = -1, next_port = -1;
    double wait = serve || relay ? ODDNODE_DEFAULT_SERVE_WAIT : ODDNODE_DEFAULT_CONNECT_WAIT;
    double seconds_per_size = ODDNODE_DEFAULT_SECONDS_PER_SIZE;
    double stream_seconds = ODDNODE_DEFAULT_STREAM_SECONDS;
    long long message_size = ODDNODE_DEFAULT_MESSAGE_SIZE;
    size_t sizes[MAX_SIZES];
    int size_count = 0;
    sizes[size_count++] = 0;
    for (size_t s = 1; s <= (4UL << 20); s *= 2)
        sizes[size_count++] = s;
    int both = 0;

    static const struct option long_options[] = {{"both", no_argument, NULL, 'b'}, {NULL, 0, NULL, 0}};
    const char *short_options = serve ? "p:w:i:" : relay ? "p:H:P:w:i:" : ping ? "H:p:s:T:w:i:" : "H:p:s:d:w:i:b";
    int option;
    opterr = 0;
    optind = 1;
    while ((option = getopt_long(argc - 1, argv + 1, short_options, stream ? long_options : long_options + 1,
                                 NULL)) != -1) {
        switch (option) {
        case 'H':
            host = optarg;
            break;
        case 'p':
            port = parse_count(optarg, 1, 65535);
            if (port < 0) {
                return bad_arguments(program, "-p wants a port number 1-65535, got '%s'", optarg);
            }
            break;
        case 'P':
            next_port = parse_count(optarg, 1, 65535);
            if (next_port < 0) {
                return bad_arguments(program, "-P wants the next hop's port number 1-65535, got '%s'", optarg);
            }
            break;
        case 'w':
            wait = parse_seconds(optarg, 0.0, 86400.0);
            if (wait < 0.0) {
                return bad_arguments(program, "-w wants seconds, 0-86400, got '%s'", optarg);
            }
            break;
        case 'i':
            io_timeout_seconds = (int)parse_count(optarg, 1, 3600);
            if (io_timeout_seconds < 0) {
                return bad_arguments(program, "-i wants whole seconds, 1-3600, got '%s'", optarg);
            }
            break;
        case 's':
            if (ping) {
                size_count = parse_sizes(optarg, sizes);
                if (size_count < 0) {
                    return bad_arguments(program, "-s wants a comma list of up to %d distinct sizes in bytes, "
                                                  "0-%ld each, got '%s'", MAX_SIZES, MAX_PING_SIZE, optarg);
                }
            } else {
                message_size = parse_count(optarg, MIN_STREAM_MESSAGE, MAX_STREAM_MESSAGE);
                if (message_size < 0) {
                    return bad_arguments(program, "-s wants a message size in bytes, %d-%ld, got '%s'",
                                         MIN_STREAM_MESSAGE, MAX_STREAM_MESSAGE, optarg);
                }
            }
            break;
        case 'T':
            seconds_per_size = parse_seconds(optarg, 1.0e-6, 3600.0);
            if (seconds_per_size < 0.0) {
                return bad_arguments(program, "-T wants seconds per size, > 0 and <= 3600, got '%s'", optarg);
            }
            break;
        case 'd':
            stream_seconds = parse_seconds(optarg, 1.0e-3, 3600.0);
            if (stream_seconds < 0.0) {
                return bad_arguments(program, "-d wants seconds, 0.001-3600, got '%s'", optarg);
            }
            break;
        case 'b':
            both = 1;
            break;
        default:
            return bad_arguments(program, "unknown option or missing value for %s: '%s'", mode, argv[optind]);
        }
    }
    if (optind < argc - 1) {
        return bad_arguments(program, "unexpected argument '%s'", argv[optind + 1]);
    }
    if (port < 0) {
        return bad_arguments(program, "-p PORT is required");
    }
    if (!serve && (host == NULL || host[0] == '\0')) {
        return bad_arguments(program, "-H HOST is required for %s", mode);
    }
    if (relay && next_port < 0) {
        return bad_arguments(program, "-P NEXT_PORT is required for relay");
    }
    if (serve)
        return run_serve((int)port, wait);
    if (relay)
        return run_relay((int)port, host, (int)next_port, wait);
    if (ping)
        return run_ping(host, (int)port, sizes, size_count, seconds_per_size, wait);
    return run_stream(host, (int)port, (size_t)message_size, stream_seconds, both, wait);
}
