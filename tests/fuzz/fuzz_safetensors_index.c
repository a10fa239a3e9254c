/* fuzz_safetensors_index.c — libFuzzer target: any bytes as model.safetensors.index.json
 * in a folder holding two valid shards (tests/data/safetensors/sharded). Opening the
 * folder either succeeds, and then every listed tensor lies in a shard, or fails with
 * TR_EUSER (or TR_EOOM). */
#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        fuzz_copy("tests/data/safetensors/sharded/model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors");
        fuzz_copy("tests/data/safetensors/sharded/model-00002-of-00002.safetensors", "model-00002-of-00002.safetensors");
        ready = 1;
    }
    fuzz_write("model.safetensors.index.json", data, size);
    tr_error err;
    tr_error_clear(&err);
    tr_st_sharded *s = NULL;
    int rc = tr_st_sharded_open(&s, fuzz_dir(), &err);
    if (rc != TR_OK) {
        if (rc != TR_EUSER && rc != TR_EOOM) FUZZ_FAIL("status %d: %s", rc, err.msg);
        if (s) FUZZ_FAIL("folder set on failure");
        if (!err.msg[0]) FUZZ_FAIL("empty message");
        return 0;
    }
    for (size_t i = 0; i < tr_st_sharded_count(s); i++) {
        tr_st_info info;
        if (tr_st_sharded_get(s, i, &info) != TR_OK) FUZZ_FAIL("tensor %zu not readable", i);
        if ((size_t)info.shard >= tr_st_sharded_nshards(s)) FUZZ_FAIL("tensor %zu in shard %d of %zu", i, info.shard,
                                                                    tr_st_sharded_nshards(s));
        if (tr_st_sharded_find(s, info.name) < 0) FUZZ_FAIL("'%s' listed but not found", info.name);
    }
    tr_st_sharded_close(s);
    return 0;
}
