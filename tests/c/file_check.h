/* file_check.h — whole-file reads and writes for the C tests that make and damage files.
 * Header-only and static, like check.h. */
#ifndef TR_FILE_CHECK_H
#define TR_FILE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/* The bytes of the file at path, with a NUL after them (so a text file reads as a string),
 * and their count in *len; NULL when the file cannot be opened or read (the caller frees). */
static inline void *fc_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* Writes n bytes to path (replacing it): 0, or -1 when it cannot be written whole. */
static inline int fc_spit(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

#endif
