/* ctx_check.h — main() for a test program whose cases share one context: the program's
 * `static tr_ctx *ctx` is made, every case of the table runs in order (check.h's PASS and
 * FAIL lines), the context is freed, and the exit status is check_done()'s (1 when the
 * context cannot be made). Include after check.h.
 *
 *   int main(void)
 *   {
 *       static const check_case cases[] = { CASE(test_a), CASE(test_b) };
 *       return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
 *   }
 */
#ifndef TR_CTX_CHECK_H
#define TR_CTX_CHECK_H

#include <stddef.h>

#include "trainer.h"

static inline int check_with_ctx(tr_ctx **ctx, const check_case *cases, size_t n)
{
    *ctx = tr_ctx_new();
    if (!*ctx) return 1;
    check_run_all(cases, n);
    tr_ctx_free(*ctx);
    *ctx = NULL;
    return check_done();
}

#endif
