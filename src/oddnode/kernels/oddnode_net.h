/*
 * What oddnode's network kernels (pingpong.c, alltoall.c) share: their exit
 * statuses and argument errors, big-endian words, whole sends and receives
 * on blocking sockets, socket settings, listening on every address, and
 * connecting with retries while the partner is not listening yet.
 *
 * A kernel includes it as "oddnode_net.h" after "oddnode_kernel.h" (whose
 * clock it uses): the package pastes both into the source it sends to a node
 * (see kernel_source), one level deep, so this file includes no header of
 * ours.  The kernel defines die(), its error line and exit, and usage(), its
 * help after an argument error, declared here.
 */
#ifndef ODDNODE_NET_H
#define ODDNODE_NET_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

/* Compile-time settings of every network kernel (each guarded):
 * -w of the end that connects (a client, a rank) when not given: how long
 * it retries a refused connection; and -i when not given: a partner silent
 * this long is gone, no read or write makes progress. */
#ifndef ODDNODE_DEFAULT_CONNECT_WAIT
#define ODDNODE_DEFAULT_CONNECT_WAIT 30.0
#endif
#ifndef ODDNODE_DEFAULT_IO_TIMEOUT
#define ODDNODE_DEFAULT_IO_TIMEOUT 30
#endif

#define EXIT_BAD_ARGUMENTS 2
#define EXIT_NO_PARTNER 3
#define EXIT_NETWORK 4

/* Pause between connection attempts while the partner is not yet listening. */
#define RETRY_MILLISECONDS 50
/* recv_fully's answer when the peer closed the connection. */
#define PEER_CLOSED (-1)
/* The sockets a listening end holds at the most: one per address family. */
#define MAX_LISTENERS 8

/* An error message on stderr, what was printed so far kept, and out. */
static void die(int status, const char *format, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* How to use the kernel, on stderr. */
static void usage(const char *program);

/* die()'s body: "error: ", `who` (how the kernel names itself, or ""), the
 * message and a newline on stderr, what stdout holds so far flushed first;
 * then exit with `status`. */
static inline void exit_with_error(int status, const char *who, const char *format, va_list args)
    __attribute__((noreturn, format(printf, 3, 0)));

static inline void exit_with_error(int status, const char *who, const char *format, va_list args)
{
    fflush(stdout);
    fputs("error: ", stderr);
    fputs(who, stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    exit(status);
}

/* Say what is wrong with the command line, then how to use it: exit status 2. */
static inline int bad_arguments(const char *program, const char *format, ...) __attribute__((format(printf, 2, 3)));

static inline int bad_arguments(const char *program, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("error: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    usage(program);
    return EXIT_BAD_ARGUMENTS;
}

/* --- the wire ------------------------------------------------------------------ */

static inline void put_be64(unsigned char *out, uint64_t value)
{
    uint64_t big = htobe64(value);
    memcpy(out, &big, 8);
}

static inline uint64_t get_be64(const unsigned char *in)
{
    uint64_t big;
    memcpy(&big, in, 8);
    return be64toh(big);
}

/* Writes all of buf on a blocking socket; 0, ETIMEDOUT when no byte could go
 * for the socket's send timeout (configure_socket), or an errno. */
static inline int send_fully(int fd, const void *buf, size_t length)
{
    const char *p = buf;
    while (length > 0) {
        ssize_t n = send(fd, p, length, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? ETIMEDOUT : errno;
        }
        p += n;
        length -= (size_t)n;
    }
    return 0;
}

/* Reads exactly length bytes on a blocking socket; 0, PEER_CLOSED, ETIMEDOUT or an errno. */
static inline int recv_fully(int fd, void *buf, size_t length)
{
    char *p = buf;
    while (length > 0) {
        ssize_t n = recv(fd, p, length, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? ETIMEDOUT : errno;
        }
        if (n == 0)
            return PEER_CLOSED;
        p += n;
        length -= (size_t)n;
    }
    return 0;
}

/* MB/s, MB = 10^6 bytes; 0 for no time. */
static inline double rate_mbps(uint64_t bytes, double seconds)
{
    return seconds > 0.0 ? 1.0e-6 * (double)bytes / seconds : 0.0;
}

/* --- sockets --------------------------------------------------------------------- */

/* "HOST:PORT", an IPv6 address in brackets, for the header and messages. */
static inline void address_text(const struct sockaddr *address, socklen_t length, char *out, size_t size)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (getnameinfo(address, length, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, size, "(unknown address)");
        return;
    }
    if (address->sa_family == AF_INET6)
        snprintf(out, size, "[%s]:%s", host, port);
    else
        snprintf(out, size, "%s:%s", host, port);
}

/* TCP_NODELAY (every message or record leaves at once, no Nagle delay) and
 * the I/O limits: a blocking call on a partner silent for io_timeout
 * seconds fails with ETIMEDOUT (see send_fully, recv_fully). */
static inline void configure_socket(int fd, int io_timeout)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die(EXIT_NETWORK, "cannot set TCP_NODELAY: %s", strerror(errno));
    struct timeval limit = {.tv_sec = io_timeout, .tv_usec = 0};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0
        || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit) != 0)
        die(EXIT_NETWORK, "cannot set the socket's I/O timeouts: %s", strerror(errno));
}

/* The TCP addresses of host:port, or with host NULL every local address to
 * listen on; 0, or getaddrinfo's error. */
static inline int tcp_addresses(const char *host, int port, struct addrinfo **out)
{
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = host == NULL ? AI_PASSIVE : 0;
    *out = NULL;
    return getaddrinfo(host, port_text, &hints, out);
}

/* The sockets a listening end waits on, ready for poll(). */
struct listeners {
    struct pollfd fd[MAX_LISTENERS];
    int count;
};

/* Listens on port on every address (IPv4 and IPv6), `backlog` connections
 * queued; where, as "ADDRESS ADDRESS ...", in `where` unless it is NULL. */
static inline void listen_everywhere(int port, int backlog, struct listeners *out, char *where, size_t where_size)
{
    struct addrinfo *addresses = NULL;
    int status = tcp_addresses(NULL, port, &addresses);
    if (status != 0)
        die(EXIT_NETWORK, "cannot find the addresses to listen on: %s", gai_strerror(status));
    int last_error = 0;
    if (where != NULL && where_size > 0)
        where[0] = '\0';
    out->count = 0;
    for (struct addrinfo *ai = addresses; ai != NULL && out->count < MAX_LISTENERS; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_error = errno; /* e.g. no IPv6 in this kernel */
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        /* [::] serves IPv6 only, so that 0.0.0.0 can be bound beside it. */
        if (ai->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
            int error = errno;
            close(fd);
            if (error == EADDRINUSE)
                die(EXIT_NETWORK, "cannot listen on port %d: it is already in use", port);
            last_error = error;
            continue;
        }
        if (where != NULL) {
            char text[NI_MAXHOST + NI_MAXSERV + 4];
            address_text(ai->ai_addr, ai->ai_addrlen, text, sizeof text);
            size_t used = strlen(where);
            snprintf(where + used, where_size - used, "%s%s", used ? " " : "", text);
        }
        out->fd[out->count].fd = fd;
        out->fd[out->count].events = POLLIN;
        out->count++;
    }
    freeaddrinfo(addresses);
    if (out->count == 0)
        die(EXIT_NETWORK, "cannot listen on port %d: %s", port, strerror(last_error));
}

/* Connects to the first of `addresses` that accepts, trying them all again
 * every RETRY_MILLISECONDS while some refuse (the partner is up and may be
 * starting) until `deadline` on now_seconds()'s clock; counts every try in
 * *attempts.  The connected socket, blocking; or -1 with *error_out:
 * ECONNREFUSED (refused until the deadline), ETIMEDOUT (a host that drops
 * the connection) or another errno. */
static inline int connect_until(const struct addrinfo *addresses, double deadline, int *attempts, int *error_out)
{
    int last_error = 0;
    for (;;) {
        /* A refusal anywhere means the host is up and the partner may be starting. */
        int refused = 0;
        for (const struct addrinfo *ai = addresses; ai != NULL; ai = ai->ai_next) {
            (*attempts)++;
            int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) {
                last_error = errno; /* e.g. an IPv6 address on a host without IPv6 */
                continue;
            }
            int error = 0;
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
                error = errno;
                if (error == EINPROGRESS) {
                    /* A host that drops the SYN: wait out the deadline, at least a second. */
                    double remaining = deadline - now_seconds();
                    int milliseconds = remaining > 1.0 ? (int)(remaining * 1000.0) : 1000;
                    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                    int ready;
                    do
                        ready = poll(&pfd, 1, milliseconds);
                    while (ready < 0 && errno == EINTR);
                    if (ready == 0) {
                        error = ETIMEDOUT;
                    } else {
                        socklen_t length = sizeof error;
                        if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0)
                            error = errno;
                    }
                }
            }
            if (error == 0) {
                int flags = fcntl(fd, F_GETFL);
                if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
                    die(EXIT_NETWORK, "cannot make the socket blocking: %s", strerror(errno));
                return fd;
            }
            close(fd);
            if (error == ECONNREFUSED)
                refused = 1;
            else
                last_error = error;
        }
        double remaining = deadline - now_seconds();
        if (!refused || remaining <= 0.0) {
            if (refused)
                last_error = ECONNREFUSED;
            break;
        }
        long pause_ms = remaining * 1000.0 < RETRY_MILLISECONDS ? (long)(remaining * 1000.0) + 1 : RETRY_MILLISECONDS;
        struct timespec pause = {.tv_sec = 0, .tv_nsec = pause_ms * 1000000L};
        nanosleep(&pause, NULL);
    }
    *error_out = last_error;
    return -1;
}

#endif
