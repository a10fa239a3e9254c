/* embedding.c — instantiates the embedding lookup kernels (embedding_impl.h) for float (the
 * runtime) and double (the tests' finite-difference reference). */
#include "cpu/embedding.h"

#include <math.h>

#define KERNEL_IMPL "cpu/embedding_impl.h"
#include "cpu/instantiate.h"
