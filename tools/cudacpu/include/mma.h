/* mma.h (cudacpu) — the WMMA subset of nvcuda::wmma the project's kernels use, on the CPU:
 * fragment<matrix_a | matrix_b | accumulator, 16, 16, 16, __half | __nv_bfloat16 | float,
 * row_major | col_major>, load_matrix_sync, store_matrix_sync, fill_fragment, mma_sync.
 *
 * NVIDIA leaves unspecified which fragment element of which lane holds which matrix element.
 * Here the mapping is a seeded random permutation (CUDACPU_SEED, one per fragment kind), so a
 * kernel that assumes a mapping (element i of lane l is row l / 4 ...) computes garbage and its
 * test fails; a kernel may only treat the elements uniformly (scale all x[i]) or learn the
 * mapping legally (load a matrix whose values are their own row numbers). matrix_a and matrix_b
 * fragments hold each matrix element twice (16 elements a lane, as the hardware's do): mma_sync
 * fails the launch when the two copies differ, which is what writing elements non-uniformly
 * does. load, store and mma are warp collectives: every lane of a full warp must reach the same
 * call (a missing lane is the scheduler's deadlock or divergence message), the pointer must be
 * 32-byte aligned and ldm a multiple of 16 bytes, as the CUDA programming guide requires.
 * Products accumulate in f32, k ascending.
 * Invariant: a warp's lanes are at most one collective apart, so the per-warp exchange buffers
 * alternate by the parity of the lane's collective count. */
#ifndef CUDACPU_MMA_H
#define CUDACPU_MMA_H

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cudacpu_device.h"

#include <stdio.h>

namespace cudacpu {

/* fragment kinds: matrix_a / matrix_b x (half, bf16) x (row, col), and the f32 accumulator */
enum { WMMA_KINDS = 9, WMMA_ACC_KIND = 8 };
enum { WMMA_LOAD = 0, WMMA_STORE = 1, WMMA_MMA = 2 };
/* The slot -> matrix element map of a kind: slot lane * n + i (n = 16 for matrix_a/b, whose
 * 512 slots hold each of the 256 elements twice; 8 for the accumulator) to the element's
 * index r * 16 + c. first[e] is the lowest slot that holds element e. */
struct wmma_map {
    uint16_t elem[512];
    uint16_t first[256];
};
const wmma_map &wmma_map_of(int kind);
/* The parity of the calling lane's next WMMA collective (its count of them so far, mod 2). */
int wmma_parity();
/* The warp collective of a WMMA call (op: WMMA_LOAD, ...) at the caller's line; fails the
 * launch when the block is not whole warps. */
void wmma_collective(int op, const char *file, int line);
/* Fails the launch with msg (the block's threads run on to their end, then it is reported). */
void wmma_fail(const char *msg, const char *file, int line);
/* The calling warp's exchange buffer of the given parity: matrix_a and matrix_b slots (as
 * f32, exact for half and bf16), the accumulator's elements. */
struct wmma_exchange {
    float a[512], b[512], c[256];
};
wmma_exchange &wmma_buffer(int parity);
/* Fails the launch when the two slots of some element of a (kind ka) or b (kind kb) differ. */
void wmma_check_copies(const wmma_exchange &w, int ka, int kb, const char *file, int line);

inline float wmma_to_float(float v) { return v; }
inline float wmma_to_float(__half v) { return __half2float(v); }
inline float wmma_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

} // namespace cudacpu

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> class fragment;

template <class T> struct cudacpu_type_index;
template <> struct cudacpu_type_index<__half> { enum { value = 0 }; };
/* bf16 fragments exist from sm_80: compiled for an older target (CUDACPU_ARCH at build time)
 * the type is incomplete, as nvcc makes it, so a kernel that names one fails to compile. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
template <> struct cudacpu_type_index<__nv_bfloat16> { enum { value = 1 }; };
#endif
template <class L> struct cudacpu_layout_index;
template <> struct cudacpu_layout_index<row_major> { enum { value = 0 }; };
template <> struct cudacpu_layout_index<col_major> { enum { value = 1 }; };

/* matrix_a (16 x 16 of M x K) and matrix_b (K x N): 16 elements a lane */
template <class T, class Layout> struct cudacpu_operand {
    enum { num_elements = 16 };
    typedef T element_type;
    T x[num_elements];
};

template <class T, class Layout>
class fragment<matrix_a, 16, 16, 16, T, Layout> : public cudacpu_operand<T, Layout> {
  public:
    enum { kind = cudacpu_type_index<T>::value * 2 + cudacpu_layout_index<Layout>::value };
};
template <class T, class Layout>
class fragment<matrix_b, 16, 16, 16, T, Layout> : public cudacpu_operand<T, Layout> {
  public:
    enum { kind = 4 + cudacpu_type_index<T>::value * 2 + cudacpu_layout_index<Layout>::value };
};
template <> class fragment<accumulator, 16, 16, 16, float, void> {
  public:
    enum { num_elements = 8, kind = ::cudacpu::WMMA_ACC_KIND };
    typedef float element_type;
    float x[num_elements];
};

inline unsigned cudacpu_lane()
{
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    return t & 31u;
}

/* ptr 32-byte aligned and ldm a multiple of 16 bytes, or the launch fails */
template <class T> inline bool cudacpu_check_ptr(const T *p, unsigned ldm, const char *what, const char *file, int line)
{
    if (((uintptr_t)p & 31u) == 0 && (ldm * sizeof(T)) % 16 == 0 && ldm >= 16) return true;
    char m[200];
    snprintf(m, sizeof m, "%s with pointer %p and ldm %u: needs a 32-byte aligned pointer and ldm a multiple of %u "
             "elements (16 bytes), at least 16", what, (const void *)p, ldm, (unsigned)(16 / sizeof(T)));
    ::cudacpu::wmma_fail(m, file, line);
    return false;
}

template <class F> inline void fill_fragment(F &f, typename F::element_type v)
{
    for (int i = 0; i < F::num_elements; i++) f.x[i] = v;
}

/* Where the matrix element of the calling lane's slot i (of n a lane) of a fragment of `kind`
 * lies in memory: (r, c) at r * ldm + c in row-major memory, c * ldm + r in column-major. */
inline unsigned cudacpu_slot_offset(int kind, int n, int i, unsigned ldm, bool row_major)
{
    const unsigned e = ::cudacpu::wmma_map_of(kind).elem[cudacpu_lane() * n + i], r = e / 16, c = e % 16;
    return row_major ? r * ldm + c : c * ldm + r;
}

/* the name a failed load of a matrix_a or matrix_b fragment gives; none for the accumulator,
 * whose load takes the memory layout */
template <class Use> struct cudacpu_load_name;
template <> struct cudacpu_load_name<matrix_a> {
    static constexpr const char *value = "wmma::load_matrix_sync(matrix_a)";
};
template <> struct cudacpu_load_name<matrix_b> {
    static constexpr const char *value = "wmma::load_matrix_sync(matrix_b)";
};

template <class Use, class T, class Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::cudacpu::wmma_collective(::cudacpu::WMMA_LOAD, file, line);
    if (!cudacpu_check_ptr(p, ldm, cudacpu_load_name<Use>::value, file, line)) return;
    const bool row = cudacpu_layout_index<Layout>::value == 0;
    for (int i = 0; i < 16; i++) f.x[i] = p[cudacpu_slot_offset(f.kind, 16, i, ldm, row)];
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t l,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::cudacpu::wmma_collective(::cudacpu::WMMA_LOAD, file, line);
    if (!cudacpu_check_ptr(p, ldm, "wmma::load_matrix_sync(accumulator)", file, line)) return;
    for (int i = 0; i < 8; i++) f.x[i] = p[cudacpu_slot_offset(f.kind, 8, i, ldm, l == mem_row_major)];
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l,
                              const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::cudacpu::wmma_collective(::cudacpu::WMMA_STORE, file, line);
    if (!cudacpu_check_ptr(p, ldm, "wmma::store_matrix_sync", file, line)) return;
    for (int i = 0; i < 8; i++) p[cudacpu_slot_offset(f.kind, 8, i, ldm, l == mem_row_major)] = f.x[i];
}

/* d = a b + c: each lane publishes its slots of a and b and its elements of c before the
 * collective, then computes its own elements of d from the whole warp's. */
template <class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c,
                     const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    using namespace ::cudacpu;
    const unsigned lane = cudacpu_lane();
    const wmma_map &ma = wmma_map_of(a.kind), &mb = wmma_map_of(b.kind), &mc = wmma_map_of(c.kind);
    wmma_exchange &w = wmma_buffer(wmma_parity());
    for (int i = 0; i < 16; i++) {
        w.a[lane * 16 + i] = wmma_to_float(a.x[i]);
        w.b[lane * 16 + i] = wmma_to_float(b.x[i]);
    }
    for (int i = 0; i < 8; i++) w.c[mc.elem[lane * 8 + i]] = c.x[i];
    wmma_collective(WMMA_MMA, file, line);
    if (lane == 0) wmma_check_copies(w, a.kind, b.kind, file, line);
    const wmma_map &md = wmma_map_of(d.kind);
    for (int i = 0; i < 8; i++) {
        const unsigned e = md.elem[lane * 8 + i], r = e / 16, cc = e % 16;
        float acc = w.c[e];
        for (int k = 0; k < 16; k++) acc += w.a[ma.first[r * 16 + k]] * w.b[mb.first[k * 16 + cc]];
        d.x[i] = acc;
    }
}

} // namespace wmma
} // namespace nvcuda

#endif
