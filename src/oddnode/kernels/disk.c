/*
 * oddnode disk kernel v1: sequential write and read bandwidth of one
 * directory's file system, every byte read back checked.
 *
 * In the directory given, a new file of SIZE bytes is written sequentially
 * in BLOCK-sized writes, then synced (fdatasync, timed with the writes), then
 * read back sequentially in BLOCK-sized reads.  Both passes use O_DIRECT, so
 * the page cache neither absorbs the writes nor serves the reads.  A file
 * system that refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE file
 * systems) gets buffered I/O instead: the same writes and fdatasync, then
 * posix_fadvise(DONTNEED) to drop the file's pages before the read pass; the
 * header says "# direct: no (<why>)".
 *
 * Every 64-bit word written is splitmix64(seed + its byte offset in the
 * file), with a seed drawn per run: a lost write, a block written to the
 * wrong place or stale data from an earlier run all read back wrong.  The
 * read pass compares every word with what was written and counts the bad
 * blocks; a Fletcher-64 checksum of everything written and of everything read
 * sums the two passes up.
 *
 * The file is unlinked as soon as it is open, so nothing is left behind, even
 * when the kernel is killed: its space is freed when the kernel exits.
 *
 * Usage: disk -d DIRECTORY [-s SIZE_BYTES] [-b BLOCK_BYTES]
 *   BLOCK is a multiple of 4096 (any logical block size up to 4 KiB then
 *   divides it), SIZE a whole number of blocks.
 *
 * Output (stdout): '#' header lines "# key: value", then
 *   result seq_write <MBps> <seconds> <bytes>
 *   result seq_read <MBps> <seconds> <bytes>
 * (MB = 10^6 bytes; seconds = the time spent in the write or read system
 * calls, fdatasync included, filling and checking buffers not counted), and
 * finally "validation ok" or "validation failed <bad_blocks> <first_bad_offset>".
 * Exit status: 0 when both passes ran (even if validation failed: the parser
 * decides what a failed run means), 2 for bad arguments, 3 when the directory
 * cannot hold the file (cannot create it, not enough space, a quota or a file
 * size limit), 4 for any other I/O error.  Errors go to stderr, naming the
 * directory.
 *
 * Compile-time settings (each with a guarded default):
 *   ODDNODE_DEFAULT_SIZE    bytes written when -s is not given
 *   ODDNODE_DEFAULT_BLOCK   bytes per write and read when -b is not given
 *   ODDNODE_CFLAGS          string literal of the flags used, for the header
 *   ODDNODE_CORRUPT_READ    test only: byte offset in the file whose byte is
 *                           flipped after it is read, so validation must fail
 *   ODDNODE_REFUSE_DIRECT   test only: act as if the file system refused
 *                           O_DIRECT, to run the buffered fallback anywhere
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "oddnode_kernel.h"

/*
 * 4 GiB: more than the write-back cache of common RAID controllers (1-8 GiB,
 * usually 2-4) and the DRAM cache of most drives (about 1 GiB per TB), so
 * most of the file goes to the media, not into a cache that would flatter
 * the write rate.  It takes under a minute per pass on a 100 MB/s disk.  A
 * node whose directory is small (tmpfs on a diskless node) needs -s smaller.
 */
#ifndef ODDNODE_DEFAULT_SIZE
#define ODDNODE_DEFAULT_SIZE (4LL << 30)
#endif
/* 1 MiB: a streaming request size, large enough that per-call overhead is
 * small next to the transfer, and what storage vendors quote rates for. */
#ifndef ODDNODE_DEFAULT_BLOCK
#define ODDNODE_DEFAULT_BLOCK (1LL << 20)
#endif
#ifndef ODDNODE_CFLAGS
#define ODDNODE_CFLAGS "unknown"
#endif

#define KERNEL_VERSION 1
/* Blocks are multiples of this: it covers logical block sizes of 512 and
 * 4096 bytes, the two that disks and file systems use. */
#define BLOCK_MULTIPLE 4096LL
/* The largest block: one buffer of it is allocated. */
#define MAX_BLOCK (1LL << 30)
/* A pass shorter than this mostly measures caches and start-up costs. */
#define MIN_PASS_SECONDS 1.0
#define FILE_PREFIX "oddnode-disk."

#define EXIT_BAD_ARGUMENTS 2
#define EXIT_NO_ROOM 3
#define EXIT_IO_ERROR 4

static const char *directory = NULL;

/* Fletcher-64 over 64-bit words: a sums the words, b sums the running a, so
 * the checksum also changes when two words trade places. */
struct fletcher64 {
    uint64_t a, b;
};

static void fill_block(uint64_t *words, long long count, uint64_t seed, long long offset, struct fletcher64 *sum)
{
    uint64_t a = sum->a, b = sum->b;
    for (long long i = 0; i < count; i++) {
        uint64_t w = mix64(seed + (uint64_t)(offset + 8 * i));
        words[i] = w;
        a += w;
        b += a;
    }
    sum->a = a;
    sum->b = b;
}

/* Adds the block to the checksum; returns 1 if any word differs from what
 * was written at that offset. */
static int check_block(const uint64_t *words, long long count, uint64_t seed, long long offset,
                       struct fletcher64 *sum)
{
    uint64_t a = sum->a, b = sum->b, differs = 0;
    for (long long i = 0; i < count; i++) {
        uint64_t w = words[i];
        differs |= w ^ mix64(seed + (uint64_t)(offset + 8 * i));
        a += w;
        b += a;
    }
    sum->a = a;
    sum->b = b;
    return differs != 0;
}

struct fs_name {
    unsigned long magic;
    const char *name;
};

/* f_type values from linux/magic.h and the file systems' own sources. */
static const struct fs_name FILE_SYSTEMS[] = {
    {0xEF53UL, "ext2/ext3/ext4"}, {0x58465342UL, "xfs"},        {0x9123683EUL, "btrfs"},
    {0x2FC12FC1UL, "zfs"},        {0xF2F52010UL, "f2fs"},       {0x01021994UL, "tmpfs"},
    {0x858458F6UL, "ramfs"},      {0x794C7630UL, "overlay"},    {0x6969UL, "nfs"},
    {0x0BD00BD0UL, "lustre"},     {0x47504653UL, "gpfs"},       {0x19830326UL, "beegfs"},
    {0x00C36400UL, "ceph"},       {0xFF534D42UL, "cifs"},       {0xFE534D42UL, "smb2"},
    {0x65735546UL, "fuse"},       {0x5346414FUL, "afs"},        {0x013111A8UL, "ibrix"},
    {0x4D44UL, "vfat"},           {0x2011BAB0UL, "exfat"},      {0x5346544EUL, "ntfs"},
    {0x3153464AUL, "jfs"},        {0x52654973UL, "reiserfs"},   {0x6E667364UL, "nfsd"},
    {0x73717368UL, "squashfs"},   {0x9FA0UL, "proc"},           {0x62656572UL, "sysfs"},
};

static const char *file_system_name(unsigned long magic)
{
    for (size_t i = 0; i < sizeof FILE_SYSTEMS / sizeof FILE_SYSTEMS[0]; i++)
        if (FILE_SYSTEMS[i].magic == magic)
            return FILE_SYSTEMS[i].name;
    return "unknown";
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s -d DIRECTORY [-s SIZE_BYTES] [-b BLOCK_BYTES]\n"
            "  -d DIRECTORY  where the test file is written (and removed)\n"
            "  -s SIZE       bytes written then read, a whole number of blocks (default %lld)\n"
            "  -b BLOCK      bytes per write and read, a multiple of %lld (default %lld)\n",
            program, (long long)ODDNODE_DEFAULT_SIZE, BLOCK_MULTIPLE, (long long)ODDNODE_DEFAULT_BLOCK);
}

/* Out of room: no space, a quota, or a file size limit (ulimit -f). */
static int no_room(int error)
{
    return error == ENOSPC || error == EDQUOT || error == EFBIG;
}

static int fail_io(const char *what, long long offset, int error)
{
    fprintf(stderr, "error: %s %s at offset %lld failed: %s\n", what, directory, offset, strerror(error));
    if (no_room(error)) {
        fprintf(stderr, "error: %s has no room for the test file; choose a smaller size or another directory\n",
                directory);
        return EXIT_NO_ROOM;
    }
    return EXIT_IO_ERROR;
}

/* Writes all of buf at offset, resuming after short writes; 0 or an errno. */
static int write_fully(int fd, const char *buf, long long length, long long offset)
{
    long long done = 0;
    while (done < length) {
        ssize_t n = pwrite(fd, buf + done, (size_t)(length - done), (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        done += n;
    }
    return 0;
}

/* Reads all of buf from offset; 0, an errno, or -1 at a premature end of file. */
static int read_fully(int fd, char *buf, long long length, long long offset)
{
    long long done = 0;
    while (done < length) {
        ssize_t n = pread(fd, buf + done, (size_t)(length - done), (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return -1;
        done += n;
    }
    return 0;
}

/* Turns O_DIRECT on or off for an open file; 0 or an errno. */
static int set_direct(int fd, int on)
{
#ifdef ODDNODE_REFUSE_DIRECT
    if (on)
        return EINVAL;
#endif
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return errno;
    flags = on ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
    return fcntl(fd, F_SETFL, flags) < 0 ? errno : 0;
}

int main(int argc, char **argv)
{
    long long size = ODDNODE_DEFAULT_SIZE;
    long long block = ODDNODE_DEFAULT_BLOCK;
    int option;

    opterr = 0;
    while ((option = getopt(argc, argv, "d:s:b:")) != -1) {
        switch (option) {
        case 'd':
            directory = optarg;
            break;
        case 's':
            size = parse_count(optarg, 1, LLONG_MAX / 2);
            if (size < 0) {
                fprintf(stderr, "error: -s wants a whole number of bytes >= 1, got '%s'\n", optarg);
                usage(argv[0]);
                return EXIT_BAD_ARGUMENTS;
            }
            break;
        case 'b':
            block = parse_count(optarg, BLOCK_MULTIPLE, MAX_BLOCK);
            if (block < 0 || block % BLOCK_MULTIPLE != 0) {
                fprintf(stderr, "error: -b wants a multiple of %lld bytes, at most %lld, got '%s'\n",
                        BLOCK_MULTIPLE, MAX_BLOCK, optarg);
                usage(argv[0]);
                return EXIT_BAD_ARGUMENTS;
            }
            break;
        default:
            fprintf(stderr, "error: unknown option or missing value: '%s'\n", argv[optind - 1]);
            usage(argv[0]);
            return EXIT_BAD_ARGUMENTS;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
        usage(argv[0]);
        return EXIT_BAD_ARGUMENTS;
    }
    if (directory == NULL || directory[0] == '\0') {
        fprintf(stderr, "error: -d DIRECTORY is required\n");
        usage(argv[0]);
        return EXIT_BAD_ARGUMENTS;
    }
    if (size % block != 0 || size < block) {
        fprintf(stderr, "error: the size (%lld bytes) must be a whole number of blocks of %lld bytes\n", size, block);
        usage(argv[0]);
        return EXIT_BAD_ARGUMENTS;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%sXXXXXX", directory, FILE_PREFIX) >= (int)sizeof path) {
        fprintf(stderr, "error: the directory name is too long: %s\n", directory);
        return EXIT_BAD_ARGUMENTS;
    }
    const long long blocks = size / block;

    /* A file size limit (ulimit -f) must fail the write with EFBIG, which is
     * reported, rather than kill the kernel with SIGXFSZ. */
    signal(SIGXFSZ, SIG_IGN);

    int fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "error: cannot create a file in %s: %s\n", directory, strerror(errno));
        return EXIT_NO_ROOM;
    }
    /* The open descriptor keeps the file: unlinked now, nothing is left behind
     * whatever ends the kernel. */
    if (unlink(path) != 0) {
        fprintf(stderr, "error: cannot remove the test file %s: %s\n", path, strerror(errno));
        close(fd);
        return EXIT_IO_ERROR;
    }

    struct statfs fs;
    struct stat st;
    struct statvfs vfs;
    if (fstatfs(fd, &fs) != 0 || fstat(fd, &st) != 0 || fstatvfs(fd, &vfs) != 0) {
        fprintf(stderr, "error: cannot read the file system facts of %s: %s\n", directory, strerror(errno));
        close(fd);
        return EXIT_IO_ERROR;
    }
    /* Refuse up front rather than fill the file system and fail half-way. */
    unsigned long long available = (unsigned long long)vfs.f_bavail * (unsigned long long)vfs.f_frsize;
    if (available < (unsigned long long)size) {
        fprintf(stderr, "error: not enough space in %s: the test needs %lld bytes, %llu are available; "
                        "choose a smaller size or another directory\n", directory, size, available);
        close(fd);
        return EXIT_NO_ROOM;
    }

    /* What direct I/O needs here, when the kernel says (statx, Linux 6.1+);
     * otherwise 4096 bytes, enough for every common logical block size. */
    long long mem_align = BLOCK_MULTIPLE, offset_align = BLOCK_MULTIPLE;
    const char *align_source = "assumed";
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)
        && sx.stx_dio_offset_align > 0) {
        mem_align = sx.stx_dio_mem_align;
        offset_align = sx.stx_dio_offset_align;
        align_source = "statx";
    }
#endif
    long page = sysconf(_SC_PAGESIZE);
    long long buffer_align = page > BLOCK_MULTIPLE ? page : BLOCK_MULTIPLE;
    if (mem_align > buffer_align)
        buffer_align = mem_align;
    uint64_t *buffer = NULL;
    if (posix_memalign((void **)&buffer, (size_t)buffer_align, (size_t)block) != 0) {
        fprintf(stderr, "error: cannot allocate a buffer of %lld bytes\n", block);
        close(fd);
        return EXIT_IO_ERROR;
    }

    char direct_refused[200] = "";
    int error = 0;
    if (block % offset_align != 0)
        snprintf(direct_refused, sizeof direct_refused,
                 "the block size is not a multiple of the %lld-byte direct I/O alignment", offset_align);
    else if ((error = set_direct(fd, 1)) != 0)
        snprintf(direct_refused, sizeof direct_refused, "O_DIRECT refused by the file system: %s",
                 strerror(error));
    int direct = direct_refused[0] == '\0';

    /* A random seed per run: data left by an earlier run never reads back right. */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    const uint64_t seed = mix64(((uint64_t)wall.tv_sec << 32) ^ (uint64_t)wall.tv_nsec ^ ((uint64_t)getpid() << 48));
    const long long words = block / 8;

    /* Write pass: only the write calls and the final fdatasync are timed. */
    struct fletcher64 written = {0, 0};
    double write_seconds = 0.0;
    for (long long i = 0; i < blocks; i++) {
        long long offset = i * block;
        fill_block(buffer, words, seed, offset, &written);
        double t0 = now_seconds();
        error = write_fully(fd, (const char *)buffer, block, offset);
        write_seconds += now_seconds() - t0;
        if (error == EINVAL && direct && i == 0) {
            /* Some file systems accept O_DIRECT at open and refuse the I/O. */
            snprintf(direct_refused, sizeof direct_refused, "O_DIRECT write refused: %s", strerror(error));
            direct = 0;
            if ((error = set_direct(fd, 0)) == 0) {
                write_seconds = 0.0;
                t0 = now_seconds();
                error = write_fully(fd, (const char *)buffer, block, offset);
                write_seconds += now_seconds() - t0;
            }
        }
        if (error != 0) {
            free(buffer);
            close(fd);
            return fail_io("writing the test file in", offset, error);
        }
    }
    double t_sync = now_seconds();
    if (fdatasync(fd) != 0) {
        error = errno;
        free(buffer);
        close(fd);
        return fail_io("syncing the test file in", size, error);
    }
    write_seconds += now_seconds() - t_sync;

    /* Buffered I/O: the synced pages are clean, so the kernel can drop them,
     * and the read pass must then go to the device (not on tmpfs, whose pages
     * are the data). */
    if (!direct)
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);

    /* Read pass: only the read calls are timed; every block is then checked. */
    struct fletcher64 read_back = {0, 0};
    double read_seconds = 0.0;
    long long bad_blocks = 0, first_bad_offset = -1;
    for (long long i = 0; i < blocks; i++) {
        long long offset = i * block;
        double t0 = now_seconds();
        error = read_fully(fd, (char *)buffer, block, offset);
        read_seconds += now_seconds() - t0;
        if (error != 0) {
            free(buffer);
            close(fd);
            if (error < 0) {
                fprintf(stderr, "error: the test file in %s ends before offset %lld, where %lld bytes were written\n",
                        directory, offset + block, size);
                return EXIT_IO_ERROR;
            }
            return fail_io("reading the test file in", offset, error);
        }
#ifdef ODDNODE_CORRUPT_READ
        long long corrupt_offset = (long long)(ODDNODE_CORRUPT_READ) % size;
        if (corrupt_offset >= offset && corrupt_offset < offset + block)
            ((unsigned char *)buffer)[corrupt_offset - offset] ^= 0xFF;
#endif
        if (check_block(buffer, words, seed, offset, &read_back)) {
            if (bad_blocks == 0)
                first_bad_offset = offset;
            bad_blocks++;
        }
    }
    free(buffer);
    close(fd);

    printf("# oddnode disk kernel v%d\n", KERNEL_VERSION);
    printf("# directory: %s\n", directory);
    printf("# filesystem: %s\n", file_system_name((unsigned long)fs.f_type));
    printf("# filesystem_magic: 0x%lx\n", (unsigned long)fs.f_type);
    printf("# device: %u:%u\n", major(st.st_dev), minor(st.st_dev));
    printf("# file: %s (unlinked once open)\n", path);
    printf("# size_bytes: %lld\n", size);
    printf("# block_bytes: %lld\n", block);
    printf("# blocks: %lld\n", blocks);
    if (direct)
        printf("# direct: yes\n");
    else
        printf("# direct: no (%s)\n", direct_refused);
#ifdef ODDNODE_REFUSE_DIRECT
    printf("# refuse_direct: test build\n");
#endif
    printf("# dio_alignment: memory %lld offset %lld (%s)\n", mem_align, offset_align, align_source);
    printf("# buffer_alignment: %lld\n", buffer_align);
    printf("# sync: fdatasync after the last write, timed with the writes\n");
    printf("# timed: the write and read calls only; filling and checking buffers is not counted\n");
    printf("# pattern: splitmix64 of seed + byte offset, per 64-bit word\n");
    printf("# seed: 0x%016llx\n", (unsigned long long)seed);
    printf("# timer: clock_gettime(CLOCK_MONOTONIC)\n");
    printf("# timer_granularity_ns: %lld\n", timer_granularity_ns());
    printf("# mb: 10^6 bytes\n");
    printf("# compiler: %s\n", compiler_name());
    printf("# cflags: %s\n", ODDNODE_CFLAGS);
#ifdef ODDNODE_CORRUPT_READ
    printf("# corrupt_read_offset: %lld\n", (long long)(ODDNODE_CORRUPT_READ) % size);
#endif
    if (write_seconds < MIN_PASS_SECONDS)
        printf("# warning: the write pass took %.3f s (< %.1f s): caches weigh heavily; use a larger size\n",
               write_seconds, MIN_PASS_SECONDS);
    if (read_seconds < MIN_PASS_SECONDS)
        printf("# warning: the read pass took %.3f s (< %.1f s): caches weigh heavily; use a larger size\n",
               read_seconds, MIN_PASS_SECONDS);
    /* A pass can take no measurable time only on a broken clock; never divide by 0. */
    write_seconds = write_seconds > 1.0e-9 ? write_seconds : 1.0e-9;
    read_seconds = read_seconds > 1.0e-9 ? read_seconds : 1.0e-9;
    printf("result seq_write %.3f %.9f %lld\n", 1.0e-6 * (double)size / write_seconds, write_seconds, size);
    printf("result seq_read %.3f %.9f %lld\n", 1.0e-6 * (double)size / read_seconds, read_seconds, size);
    printf("# checksum: fletcher64 written %016llx%016llx read %016llx%016llx\n",
           (unsigned long long)written.b, (unsigned long long)written.a,
           (unsigned long long)read_back.b, (unsigned long long)read_back.a);
    int checksums_agree = written.a == read_back.a && written.b == read_back.b;
    if (bad_blocks == 0 && checksums_agree)
        printf("validation ok\n");
    else
        printf("validation failed %lld %lld\n", bad_blocks, first_bad_offset);
    return 0;
}
