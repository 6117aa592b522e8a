/*
 * Where the ranks of a TCP kernel listen: -R's comma list of HOST:PORT or
 * [IPV6]:PORT, parsed the same way by every kernel with ranks (alltoall,
 * tcp_sync).  Apart from oddnode_net.h so that the kernels without ranks do
 * not carry it: a kernel's job travels to the node as one command line,
 * which a remote shell takes only up to 128 KiB.
 */
#ifndef ODDNODE_RANKS_H
#define ODDNODE_RANKS_H

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* parse_count comes from oddnode_kernel.h and PEER_CLOSED from oddnode_net.h,
 * included before this. */

/* Where a rank of a TCP kernel listens. */
struct rank_address {
    char host[NI_MAXHOST];
    int port;
};

/* One HOST:PORT or [IPV6]:PORT; 0, or -1 when it is not one. */
static inline int parse_rank_address(const char *text, size_t length, struct rank_address *out)
{
    const char *colon;
    const char *host = text;
    size_t host_length;
    if (length > 0 && text[0] == '[') {
        const char *close_bracket = memchr(text, ']', length);
        if (close_bracket == NULL || close_bracket + 1 >= text + length || close_bracket[1] != ':')
            return -1;
        host = text + 1;
        host_length = (size_t)(close_bracket - host);
        colon = close_bracket + 1;
    } else {
        colon = memchr(text, ':', length);
        if (colon == NULL || memchr(colon + 1, ':', length - (size_t)(colon + 1 - text)) != NULL)
            return -1; /* none, or an IPv6 address without brackets */
        host_length = (size_t)(colon - text);
    }
    size_t port_length = length - (size_t)(colon + 1 - text);
    char port_text[8];
    if (host_length == 0 || host_length >= sizeof out->host || port_length == 0 || port_length >= sizeof port_text)
        return -1;
    memcpy(out->host, host, host_length);
    out->host[host_length] = '\0';
    memcpy(port_text, colon + 1, port_length);
    port_text[port_length] = '\0';
    long long port = parse_count(port_text, 1, 65535);
    if (port < 0)
        return -1;
    out->port = (int)port;
    return 0;
}

/* A comma list of rank addresses (-R), at most max_ranks; the rank count, or -1
 * at the first bad entry (its index in *bad). */
static inline int parse_rank_addresses(const char *text, int max_ranks, struct rank_address **out, int *bad)
{
    int capacity = 16, count = 0;
    struct rank_address *list = malloc((size_t)capacity * sizeof *list);
    if (list == NULL)
        return -1;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t length = comma ? (size_t)(comma - p) : strlen(p);
        if (count == max_ranks) {
            *bad = count;
            free(list);
            return -1;
        }
        if (count == capacity) {
            capacity *= 2;
            struct rank_address *grown = realloc(list, (size_t)capacity * sizeof *list);
            if (grown == NULL) {
                free(list);
                return -1;
            }
            list = grown;
        }
        if (parse_rank_address(p, length, &list[count]) != 0) {
            *bad = count;
            free(list);
            return -1;
        }
        count++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = list;
    return count;
}

/* "rank 3 (node04:29172)", for messages (a static buffer: one at a time). */
static inline const char *rank_address_text(const struct rank_address *a, int rank)
{
    static char text[NI_MAXHOST + 48];
    snprintf(text, sizeof text, strchr(a->host, ':') ? "rank %d ([%s]:%d)" : "rank %d (%s:%d)", rank, a->host,
             a->port);
    return text;
}

/* Why an I/O call with another rank failed, in words; io_timeout is the -i limit. */
static inline const char *rank_io_error_text(int error, int io_timeout)
{
    static char text[160];
    if (error == PEER_CLOSED)
        return "the connection was closed: that rank stopped or failed";
    if (error == ETIMEDOUT) {
        snprintf(text, sizeof text, "nothing for %d s (the -i limit): that rank stopped", io_timeout);
        return text;
    }
    if (error == ECONNRESET || error == EPIPE)
        return "the connection was reset: that rank stopped or failed";
    return strerror(error);
}

#endif
