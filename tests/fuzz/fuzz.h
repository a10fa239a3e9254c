/* fuzz.h — what the libFuzzer targets (tests/fuzz/fuzz_*.c) share. The parsers under test
 * read files, so each input is written to a file in a private temporary folder (under
 * FUZZ_TMPDIR, else /dev/shm when there is one) and the parser opens it. A target calls FUZZ_FAIL for a
 * broken contract (a failure that is not TR_EUSER or TR_EOOM, a message that does not
 * name the file): libFuzzer reports it as a crash, like a sanitizer report. */
#ifndef TR_FUZZ_H
#define TR_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_FAIL(...)                                                   \
    do {                                                                 \
        fprintf(stderr, "fuzz contract broken at %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                    \
        fputc('\n', stderr);                                             \
        abort();                                                         \
    } while (0)

static char fuzz_dir_path[256];

static inline void fuzz_cleanup(void)
{
    char cmd[300];
    if (!fuzz_dir_path[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}

/* The target's temporary folder, made on first use and removed at exit. */
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        /* FUZZ_TMPDIR: where tests/fuzz/run.sh wants it (and removes it, after a crash too) */
        const char *base = getenv("FUZZ_TMPDIR");
        if (!base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/trainer-fuzz.XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup);
    }
    return fuzz_dir_path;
}

/* dir/name, in a static buffer. */
static inline const char *fuzz_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    return path;
}

/* Writes n bytes to dir/name; returns its path (static buffer). */
static inline const char *fuzz_write(const char *name, const uint8_t *data, size_t n)
{
    const char *path = fuzz_path(name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        abort();
    }
    if (n && fwrite(data, 1, n, f) != n) {
        perror(path);
        abort();
    }
    fclose(f);
    return path;
}

/* Copies the file at src (relative to the repository root, the working directory of
 * `make fuzz`, or FUZZ_ROOT) to dir/name. */
static inline void fuzz_copy(const char *src, const char *name)
{
    char from[1024];
    const char *root = getenv("FUZZ_ROOT");
    snprintf(from, sizeof from, "%s/%s", root ? root : ".", src);
    FILE *f = fopen(from, "rb");
    if (!f) {
        perror(from);
        abort();
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fuzz_write(name, buf, n);
}

#endif
