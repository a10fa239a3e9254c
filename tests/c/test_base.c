/* test_base.c — dtype and tag names, error records. */
#include "check.h"
#include "trainer.h"
#include <string.h>

static void test_names(void)
{
    CHECK(tr_dtype_size(TR_BF16) == 2, "bf16 size");
    CHECK(tr_dtype_size(TR_I64) == 8, "i64 size");
    CHECK(tr_dtype_from_name("f16") == TR_F16, "f16 name");
    CHECK(tr_dtype_from_name("f8") == -1, "unknown dtype");
    CHECK(strcmp(tr_tag_name(TR_TAG_ACTIVATIONS), "activations") == 0, "tag name");
    CHECK(tr_tag_from_name("optimizer") == TR_TAG_OPTIMIZER, "tag lookup");
}

static void test_error(void)
{
    tr_error e;
    tr_error_clear(&e);
    int rc = tr_fail(&e, TR_EUSER, "bad %s", "thing");
    CHECK(rc == TR_EUSER && e.status == TR_EUSER, "status");
    CHECK(strcmp(e.msg, "bad thing") == 0, "message: %s", e.msg);
    CHECK(tr_fail(NULL, TR_EOOM, "x") == TR_EOOM, "NULL err");
}

int main(void)
{
    RUN(test_names);
    RUN(test_error);
    return check_done();
}
