/*
 * What every oddnode kernel shares: its clock, the clock's granularity, the
 * compiler's name for the header, a 64-bit mixing function for data
 * patterns, the readers of its numeric arguments, and qsort's comparison of
 * doubles.  Kernels include it as "oddnode_kernel.h"; the package pastes it
 * into the source it sends to a node (see kernel_source), so a node compiles
 * one self-contained file.
 */
#ifndef ODDNODE_KERNEL_H
#define ODDNODE_KERNEL_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock: never stepped by NTP. */
static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* The smallest non-zero step of the clock, in nanoseconds, as observed. */
static inline long long timer_granularity_ns(void)
{
    long long best = LLONG_MAX;
    for (int trial = 0; trial < 20; trial++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            clock_gettime(CLOCK_MONOTONIC, &t1);
        } while (t1.tv_sec == t0.tv_sec && t1.tv_nsec == t0.tv_nsec);
        long long step = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL
                         + (long long)(t1.tv_nsec - t0.tv_nsec);
        if (step > 0 && step < best)
            best = step;
    }
    return best;
}

static inline const char *compiler_name(void)
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__INTEL_LLVM_COMPILER) || defined(__INTEL_COMPILER)
    return "intel " __VERSION__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}

/* splitmix64's output function: a bijection on 64-bit words whose outputs
 * for consecutive inputs look independent (Steele, Lea, Flood 2014). */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A whole decimal number in [minimum, maximum], or -1 when text is not one. */
static inline long long parse_count(const char *text, long long minimum, long long maximum)
{
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < minimum || value > maximum)
        return -1;
    return value;
}

/* A number of seconds in [minimum, maximum], or -1 when text is not one. */
static inline double parse_seconds(const char *text, double minimum, double maximum)
{
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value >= minimum && value <= maximum))
        return -1.0;
    return value;
}

/* A comma list of at most `capacity` distinct whole numbers in [0, maximum]
 * into values; how many, or -1 when text is not one. */
static inline int parse_count_list(const char *text, long long maximum, long long *values, int capacity)
{
    int count = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t length = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (length == 0 || length >= sizeof item || count == capacity)
            return -1;
        memcpy(item, p, length);
        item[length] = '\0';
        long long value = parse_count(item, 0, maximum);
        if (value < 0)
            return -1;
        for (int i = 0; i < count; i++)
            if (values[i] == value)
                return -1;
        values[count++] = value;
        if (!comma)
            return count;
        p = comma + 1;
    }
}

/* qsort's order of doubles, ascending. */
static inline int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
