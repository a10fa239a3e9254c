/* elementwise.c — instantiates the elementwise kernels (elementwise_impl.h) for float
 * (the runtime) and double (the tests' finite-difference reference). */
#include "cpu/elementwise.h"
#include "cpu/fast_math.h"

/* Elements per vectorised span call; the spans are what threads share. Up to ELEM_SERIAL
 * elements an op runs on the calling thread with no OpenMP region at all: `parallel for
 * if (0)` still makes and frees a libgomp team per call, and ops call these kernels per
 * chunk from inside their own parallel loops. */
enum { ELEM_SPAN = 16384, ELEM_SERIAL = 65536 };

#define KERNEL_IMPL "cpu/elementwise_impl.h"
#include "cpu/instantiate.h"
