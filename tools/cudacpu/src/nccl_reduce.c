/* nccl_reduce.c (cudacpu) — the arithmetic of the NCCL stand-in's reductions: every type and
 * built-in operator of nccl.h but fp8, over the ranks' chunks in rank order.
 *
 * Each step is rounded to the type, as NCCL's device code rounds: f16 and bf16 are widened to
 * f32 (exact), combined, and rounded back to nearest even (cudacpu_half_bits.h). ncclAvg is
 * what NCCL makes of it: on floating types a pre-multiplication of every input by 1/nranks
 * (rounded to the type) before the sum, on integer types the sum divided by nranks. The order
 * is fixed (rank 0, then 1, ...), so every rank computes the same bits; NCCL's own order (ring
 * or tree chunks) is not modelled. */
#include "nccl_internal.h"

#include "cudacpu_half_bits.h"

#include <stdint.h>
#include <string.h>

const char *nc_type_name(int dtype)
{
    static const char *const names[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                        "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                        "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    return dtype >= 0 && dtype < (int)(sizeof names / sizeof names[0]) ? names[dtype] : "an unknown type";
}

const char *nc_op_name(int op)
{
    static const char *const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
    return op >= 0 && op < ncclNumOps ? names[op] : "an unknown operator";
}

/* ------------------------------------------------------------ one type at a time */

/* a op b for types C adds exactly as the GPU does (integers wrap as unsigned arithmetic) */
#define COMBINE(a, b, op)                                                                                              \
    ((op) == ncclProd  ? (a) * (b)                                                                                     \
     : (op) == ncclMax ? ((a) > (b) ? (a) : (b))                                                                       \
     : (op) == ncclMin ? ((a) < (b) ? (a) : (b))                                                                       \
                       : (a) + (b))

#define REDUCE_INT(T, U)                                                                                               \
    static void reduce_##T(int op, int nranks, const void *const *in, void *out, size_t n)                             \
    {                                                                                                                  \
        for (size_t i = 0; i < n; i++) {                                                                               \
            T acc;                                                                                                     \
            memcpy(&acc, (const char *)in[0] + i * sizeof(T), sizeof(T));                                              \
            for (int r = 1; r < nranks; r++) {                                                                         \
                T x;                                                                                                   \
                memcpy(&x, (const char *)in[r] + i * sizeof(T), sizeof(T));                                            \
                if (op == ncclSum || op == ncclAvg)                                                                    \
                    acc = (T)((U)acc + (U)x);                                                                          \
                else if (op == ncclProd)                                                                               \
                    acc = (T)((U)acc * (U)x);                                                                          \
                else                                                                                                   \
                    acc = COMBINE(acc, x, op);                                                                         \
            }                                                                                                          \
            if (op == ncclAvg) acc = (T)(acc / (T)nranks);                                                             \
            memcpy((char *)out + i * sizeof(T), &acc, sizeof(T));                                                      \
        }                                                                                                              \
    }
REDUCE_INT(int8_t, uint8_t)
REDUCE_INT(uint8_t, uint8_t)
REDUCE_INT(int32_t, uint32_t)
REDUCE_INT(uint32_t, uint32_t)
REDUCE_INT(int64_t, uint64_t)
REDUCE_INT(uint64_t, uint64_t)

#define REDUCE_FLOAT(T)                                                                                                \
    static void reduce_##T(int op, int nranks, const void *const *in, void *out, size_t n)                             \
    {                                                                                                                  \
        const T scale = (T)1 / (T)nranks;                                                                              \
        for (size_t i = 0; i < n; i++) {                                                                               \
            T acc;                                                                                                     \
            memcpy(&acc, (const char *)in[0] + i * sizeof(T), sizeof(T));                                              \
            if (op == ncclAvg) acc = acc * scale;                                                                      \
            for (int r = 1; r < nranks; r++) {                                                                         \
                T x;                                                                                                   \
                memcpy(&x, (const char *)in[r] + i * sizeof(T), sizeof(T));                                            \
                if (op == ncclAvg) x = x * scale;                                                                      \
                acc = COMBINE(acc, x, op);                                                                             \
            }                                                                                                          \
            memcpy((char *)out + i * sizeof(T), &acc, sizeof(T));                                                      \
        }                                                                                                              \
    }
REDUCE_FLOAT(float)
REDUCE_FLOAT(double)

/* f16 and bf16: every step in f32, rounded back to the 16-bit type */
static void reduce_half(int bf16, int op, int nranks, const void *const *in, void *out, size_t n)
{
    float (*widen)(uint16_t) = bf16 ? cudacpu_bf16_to_f32 : cudacpu_f16_to_f32;
    uint16_t (*narrow)(float) = bf16 ? cudacpu_f32_to_bf16 : cudacpu_f32_to_f16;
    const float scale = widen(narrow(1.0f / (float)nranks));
    for (size_t i = 0; i < n; i++) {
        uint16_t bits;
        memcpy(&bits, (const char *)in[0] + i * 2, 2);
        float acc = widen(bits);
        if (op == ncclAvg) acc = widen(narrow(acc * scale));
        for (int r = 1; r < nranks; r++) {
            memcpy(&bits, (const char *)in[r] + i * 2, 2);
            float x = widen(bits);
            if (op == ncclAvg) x = widen(narrow(x * scale));
            acc = widen(narrow(COMBINE(acc, x, op)));
        }
        bits = narrow(acc);
        memcpy((char *)out + i * 2, &bits, 2);
    }
}

static void reduce_f16(int op, int nranks, const void *const *in, void *out, size_t n)
{
    reduce_half(0, op, nranks, in, out, n);
}
static void reduce_bf16(int op, int nranks, const void *const *in, void *out, size_t n)
{
    reduce_half(1, op, nranks, in, out, n);
}

/* Each type's size in bytes and its reduction; fp8 has neither (size 0: refused at the call). */
static const struct {
    size_t size;
    void (*reduce)(int op, int nranks, const void *const *in, void *out, size_t n);
} types[ncclNumTypes] = {
    [ncclInt8] = {1, reduce_int8_t},     [ncclUint8] = {1, reduce_uint8_t}, [ncclInt32] = {4, reduce_int32_t},
    [ncclUint32] = {4, reduce_uint32_t}, [ncclInt64] = {8, reduce_int64_t}, [ncclUint64] = {8, reduce_uint64_t},
    [ncclFloat16] = {2, reduce_f16},     [ncclBfloat16] = {2, reduce_bf16}, [ncclFloat32] = {4, reduce_float},
    [ncclFloat64] = {8, reduce_double},
};

size_t nc_type_size(int dtype)
{
    return dtype >= 0 && dtype < ncclNumTypes ? types[dtype].size : 0;
}

void nc_reduce(int dtype, int op, int nranks, const void *const *in, void *out, size_t n)
{
    if (nc_type_size(dtype) > 0) types[dtype].reduce(op, nranks, in, out, n);
}
