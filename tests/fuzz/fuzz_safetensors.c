/* fuzz_safetensors.c — libFuzzer target: any bytes as a .safetensors file. tr_st_open
 * either succeeds, and then every tensor's bytes lie inside the file, or fails with
 * TR_EUSER (or TR_EOOM) and a message naming the file. */
#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("model.safetensors", data, size);
    tr_error err;
    tr_error_clear(&err);
    tr_st_file *f = NULL;
    int rc = tr_st_open(&f, path, &err);
    if (rc != TR_OK) {
        if (rc != TR_EUSER && rc != TR_EOOM) FUZZ_FAIL("status %d: %s", rc, err.msg);
        if (f) FUZZ_FAIL("file set on failure");
        if (strncmp(err.msg, path, strlen(path)) != 0) FUZZ_FAIL("message does not name the file: %s", err.msg);
        return 0;
    }
    for (size_t i = 0; i < tr_st_count(f); i++) {
        tr_st_info info;
        if (tr_st_get(f, i, &info) != TR_OK) FUZZ_FAIL("tensor %zu of %zu not readable", i, tr_st_count(f));
        if (info.nbytes > size) FUZZ_FAIL("tensor %zu: %zu bytes in a %zu-byte file", i, (size_t)info.nbytes, size);
        volatile uint8_t sum = 0;
        const uint8_t *p = info.data;
        for (size_t b = 0; b < info.nbytes; b++) sum ^= p[b];
        (void)sum;
        tr_st_info again;
        if (tr_st_lookup(f, info.name, &again, &err) != TR_OK) FUZZ_FAIL("lookup of '%s' failed", info.name);
    }
    for (size_t i = 0; i < tr_st_metadata_count(f); i++) {
        const char *k, *v;
        if (tr_st_metadata_at(f, i, &k, &v) == TR_OK && tr_st_metadata(f, k) == NULL) FUZZ_FAIL("metadata key lost");
    }
    tr_st_close(f);
    return 0;
}
