/*
 * NUMA placement for oddnode's kernels, through the system calls alone (no
 * libnuma, no numactl): the CPUs of a NUMA node as sysfs lists them, the
 * CPUs this process may use (its cpuset), pinning the calling thread to one
 * CPU, binding a range of memory to one node (mbind, MPOL_BIND) and reading
 * back the node a page landed on (get_mempolicy, MPOL_F_NODE|MPOL_F_ADDR).
 * Included after "oddnode_kernel.h"; Linux only (sched.h's cpu_set_t).
 *
 * A kernel built without NUMA support (no /sys/devices/system/node) is
 * one node, 0, holding every CPU and all memory: binding to it is asking for
 * what every run gets.
 */
#ifndef ODDNODE_NUMA_H
#define ODDNODE_NUMA_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* <linux/mempolicy.h>'s values, written out so that no NUMA header is needed. */
#define ODDNODE_MPOL_BIND 2
#define ODDNODE_MPOL_F_NODE (1 << 0)
#define ODDNODE_MPOL_F_ADDR (1 << 1)
#define ODDNODE_MPOL_MF_STRICT (1 << 0)
/* The highest NUMA node number accepted (Linux's MAX_NUMNODES is at most 1024). */
#define ODDNODE_MAX_NUMA_NODE 1023
#define ODDNODE_NODEMASK_WORDS ((ODDNODE_MAX_NUMA_NODE + 1) / (8 * (int)sizeof(unsigned long)))
#define ODDNODE_SYSFS_NODES "/sys/devices/system/node"

/* Whether the kernel shows NUMA nodes at all. */
static inline int numa_in_kernel(void)
{
    return access(ODDNODE_SYSFS_NODES "/online", R_OK) == 0;
}

/* The first line of a sysfs file into text (newline cut); 0, or -1 when unreadable. */
static inline int read_sysfs_line(const char *path, char *text, size_t capacity)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return -1;
    char *got = fgets(text, (int)capacity, file);
    fclose(file);
    if (got == NULL)
        return -1;
    text[strcspn(text, "\n")] = '\0';
    return 0;
}

/* A CPU list as sysfs and /proc write them ("0-3,8-11", "" for none) into
 * set; 0, or -1 when the text is not one. */
static inline int parse_cpu_list(const char *text, cpu_set_t *set)
{
    CPU_ZERO(set);
    const char *p = text;
    while (*p != '\0') {
        char *end = NULL;
        long first = strtol(p, &end, 10), last;
        if (end == p || first < 0)
            return -1;
        p = end;
        last = first;
        if (*p == '-') {
            last = strtol(p + 1, &end, 10);
            if (end == p + 1 || last < first)
                return -1;
            p = end;
        }
        for (long cpu = first; cpu <= last && cpu < CPU_SETSIZE; cpu++)
            CPU_SET((int)cpu, set);
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return -1;
    }
    return 0;
}

/* A CPU set as a list, "0-3,8-11", into text ("none" when empty). */
static inline void format_cpu_list(const cpu_set_t *set, char *text, size_t capacity)
{
    size_t used = 0;
    text[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int wrote = last > cpu ? snprintf(text + used, capacity - used, "%s%d-%d", used ? "," : "", cpu, last)
                               : snprintf(text + used, capacity - used, "%s%d", used ? "," : "", cpu);
        if (wrote < 0 || (size_t)wrote >= capacity - used)
            break; /* cut: a header line, not a datum */
        used += (size_t)wrote;
        cpu = last;
    }
    if (used == 0)
        snprintf(text, capacity, "none");
}

/* The CPUs of NUMA node `node` that this process may use (its affinity,
 * which a cpuset or a batch system's binding limits), into usable; the
 * node's whole list as sysfs gives it into listed.  0; -1 when the node
 * does not exist.  Without NUMA in the kernel node 0 is every CPU. */
static inline int numa_node_cpus(int node, cpu_set_t *listed, cpu_set_t *usable)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -1;
    if (!numa_in_kernel()) {
        if (node != 0)
            return -1;
        *listed = allowed;
        *usable = allowed;
        return 0;
    }
    char path[96], text[4096];
    snprintf(path, sizeof path, ODDNODE_SYSFS_NODES "/node%d/cpulist", node);
    if (read_sysfs_line(path, text, sizeof text) != 0 || parse_cpu_list(text, listed) != 0)
        return -1;
    CPU_AND(usable, listed, &allowed);
    return 0;
}

/* The n-th CPU (from 0) of a set, or -1. */
static inline int nth_cpu(const cpu_set_t *set, int n)
{
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set) && n-- == 0)
            return cpu;
    return -1;
}

/* Pin the calling thread to one CPU; 0, or an errno value.  Linux moves a
 * running thread off a CPU it may no longer use before the call returns. */
static inline int pin_to_cpu(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0 ? 0 : errno;
}

/* Bind [addr, addr + length) (page-aligned, not yet touched) to NUMA node
 * `node`: MPOL_BIND, so that every page faulted in later comes from that
 * node or the fault fails; 0, or an errno value.  mbind reads maxnode - 1
 * bits of the mask, hence the + 1. */
static inline int bind_memory(void *addr, size_t length, int node)
{
    unsigned long mask[ODDNODE_NODEMASK_WORDS];
    memset(mask, 0, sizeof mask);
    mask[node / (8 * (int)sizeof(unsigned long))] |= 1UL << (node % (8 * (int)sizeof(unsigned long)));
    long done = syscall(SYS_mbind, addr, length, ODDNODE_MPOL_BIND, mask,
                        (unsigned long)(ODDNODE_MAX_NUMA_NODE + 2), ODDNODE_MPOL_MF_STRICT);
    return done == 0 ? 0 : errno;
}

/* The NUMA node holding the (touched) page at addr, or -1 when the kernel
 * cannot say. */
static inline int page_node(const void *addr)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, addr, ODDNODE_MPOL_F_NODE | ODDNODE_MPOL_F_ADDR) != 0)
        return -1;
    return node;
}

/* Sample `samples` pages spread evenly over [addr, addr + length), the
 * first and the last among them: how many were asked about (*checked), how
 * many are on `node` (*on_node), and one other node seen (*elsewhere, -1
 * when none; -2 when the kernel could not say). */
static inline void sample_page_nodes(const void *addr, size_t length, int node, int samples, int *checked,
                                     int *on_node, int *elsewhere)
{
    const long page = sysconf(_SC_PAGESIZE);
    const size_t pages = (length + (size_t)page - 1) / (size_t)page;
    if (pages == 0)
        return;
    for (int k = 0; k < samples; k++) {
        size_t index = samples > 1 ? (size_t)k * (pages - 1) / (size_t)(samples - 1) : 0;
        int found = page_node((const char *)addr + index * (size_t)page);
        (*checked)++;
        if (found == node)
            (*on_node)++;
        else if (*elsewhere == -1)
            *elsewhere = found < 0 ? -2 : found;
    }
}

/* Bytes of NUMA node `node`'s memory, total and free, from its meminfo;
 * 0, or -1 when sysfs does not say. */
static inline int node_memory_bytes(int node, unsigned long long *total, unsigned long long *free_bytes)
{
    char path[96], line[256];
    snprintf(path, sizeof path, ODDNODE_SYSFS_NODES "/node%d/meminfo", node);
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return -1;
    int found = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        unsigned long long kb;
        int id;
        if (sscanf(line, "Node %d MemTotal: %llu kB", &id, &kb) == 2) {
            *total = kb * 1024ULL;
            found |= 1;
        } else if (sscanf(line, "Node %d MemFree: %llu kB", &id, &kb) == 2) {
            *free_bytes = kb * 1024ULL;
            found |= 2;
        }
    }
    fclose(file);
    return found == 3 ? 0 : -1;
}

/* Page-aligned anonymous memory of at least `length` bytes, not touched;
 * NULL when it cannot be had.  Its length, rounded up to whole pages, goes
 * to *mapped (for munmap and mbind). */
static inline void *map_pages(size_t length, size_t *mapped)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    *mapped = (length + page - 1) / page * page;
    if (*mapped == 0)
        *mapped = page;
    void *addr = mmap(NULL, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return addr == MAP_FAILED ? NULL : addr;
}

/* The online NUMA nodes as sysfs lists them ("0-1"), or "0" without NUMA. */
static inline void online_nodes(char *text, size_t capacity)
{
    if (read_sysfs_line(ODDNODE_SYSFS_NODES "/online", text, capacity) != 0)
        snprintf(text, capacity, "0");
}

#endif
