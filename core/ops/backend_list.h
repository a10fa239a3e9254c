/* backend_list.h — every backend of the op table, once (X-macro: op_table.c defines
 * TR_BACKEND). A backend `n` is the tr_op_backend tr_n_backend in its own folder
 * (core/cpu_ops/cpu_backend.c, core/cuda_ops/cuda_backend.c): its slots by op id and the
 * device numbers it owns. The dispatcher asks them in this order which one owns a device. */
TR_BACKEND(cpu)
#ifdef TR_HAVE_CUDA
TR_BACKEND(cuda)
#endif
