/* trainer.h — the one public header of the runtime: C programs include it, and
 * lua/trainer/core/ffi.lua feeds it (following its #include lines, dropping other '#' lines)
 * to ffi.cdef. Each module keeps its own header; this file lists them in dependency
 * order. */
#ifndef TRAINER_H
#define TRAINER_H
#include "tr_base.h"
#include "alloc.h"
#include "ctx.h"
#include "tensor.h"
#include "rng.h"
#include "safetensors.h"
#include "ops_elem.h"
#include "ops_row_segments.h"
#include "ops_optim.h"
#include "op_query.h"
#include "gemm_query.h"
#include "cuda_device.h"
#include "batch_feed.h"
#include "host_sync.h"
#include "device_errors.h"
#include "ops_nn.h"
#include "ops_linear_gelu.h"
#include "ops_dropout_linear.h"
#include "tokenizer.h"
#include "ops_pair_features.h"
#include "ops_multi_tensor.h"
#include "ops_loss_scale.h"
#include "ops_score_loss.h"
#include "reader.h"
#include "crc32c.h"
#include "tfrecord.h"
#include "dist.h"
#endif
