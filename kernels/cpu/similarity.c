/* similarity.c — instantiates the L2-normalisation and cosine-similarity kernels
 * (similarity_impl.h) for float (the runtime) and double (the tests' finite-difference
 * reference). */
#include "cpu/similarity.h"

#include <cblas.h>
#include <math.h>

#define KERNEL_IMPL "cpu/similarity_impl.h"
#include "cpu/instantiate.h"
