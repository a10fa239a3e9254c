/* op_list.h — every op of the table, once, with its arguments in signature order (X-macro:
 * the includer defines TR_OP(name, tensors, scalars), TR_A(name, role, dtype rule, nullable)
 * and TR_S(name, slot, index, default)). This is the one place an op's arguments are
 * written: op_table.c builds each description tr_opd_<op> from its line (with the family's
 * check tr_check_<op> and, where the family defines one, its infer step tr_infer_<op>),
 * op_table.h gives every slot the tensors' names (call->layernorm.x) and an id
 * (TR_OPID_layernorm), each backend's table has a slot per line, and trainer.ops binds the
 * ops that have an infer step from it (lua/trainer/core/op_binding.lua).
 *   TR_A: role IN read, OUT overwritten (=), ACC accumulated (+=) or updated in place; dtype
 *         rule FLOAT, F32, INDEX, MASK, HALF, ANY (op_table.h); nullable 1: NULL is allowed.
 *   TR_S: a scalar in call->f[index] (slot f) or call->i[index] (slot i), in the order of the
 *         C wrapper's parameters; default: the binding's value when the caller gives none (NAN:
 *         the caller must give it). Pointers, tensor lists and host results are the wrappers'. */
TR_OP(matmul, TR_A(out, ACC, FLOAT, 0) TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0) TR_A(bias, IN, FLOAT, 1), \
      TR_S(trans_a, i, 0, 0) TR_S(trans_b, i, 1, 0) TR_S(alpha, f, 0, 1) TR_S(beta, f, 1, 0))
TR_OP(linear, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0) TR_A(w, IN, FLOAT, 0) TR_A(bias, IN, FLOAT, 1),)
TR_OP(linear_backward, TR_A(dx, OUT, FLOAT, 1) TR_A(dw, ACC, F32, 1) TR_A(dbias, ACC, F32, 1) \
      TR_A(dout, IN, FLOAT, 0) TR_A(x, IN, FLOAT, 1) TR_A(w, IN, FLOAT, 1),)
TR_OP(layernorm, TR_A(out, OUT, FLOAT, 0) TR_A(mean, OUT, F32, 0) TR_A(rstd, OUT, F32, 0) TR_A(x, IN, FLOAT, 0) \
      TR_A(weight, IN, FLOAT, 0) TR_A(bias, IN, FLOAT, 1), TR_S(eps, f, 0, 1e-12))
TR_OP(layernorm_backward, TR_A(dx, OUT, FLOAT, 1) TR_A(dweight, ACC, F32, 1) TR_A(dbias, ACC, F32, 1) \
      TR_A(dout, IN, FLOAT, 0) TR_A(x, IN, FLOAT, 0) TR_A(weight, IN, FLOAT, 0) TR_A(mean, IN, F32, 0) \
      TR_A(rstd, IN, F32, 0),)
TR_OP(gelu, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(kind, i, 0, 0))
TR_OP(gelu_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(kind, i, 0, 0))
TR_OP(softmax, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0),)
TR_OP(softmax_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(y, IN, FLOAT, 0),)
TR_OP(tanh, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0),)
TR_OP(tanh_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(y, IN, FLOAT, 0),)
TR_OP(attention, TR_A(out, OUT, FLOAT, 0) TR_A(lse, OUT, F32, 0) TR_A(q, IN, FLOAT, 0) TR_A(k, IN, FLOAT, 0) \
      TR_A(v, IN, FLOAT, 0) TR_A(mask, IN, ANY, 1) TR_A(rel_bias, IN, FLOAT, 1), TR_S(scale, f, 0, 0) \
      TR_S(dropout_p, f, 1, 0) TR_S(max_distance, i, 0, 128) TR_S(bidirectional, i, 1, 1) TR_S(window, i, 2, 0) \
      TR_S(query_rows, i, 3, 0))
TR_OP(attention_backward, TR_A(dq, OUT, FLOAT, 0) TR_A(dk, OUT, FLOAT, 0) TR_A(dv, OUT, FLOAT, 0) \
      TR_A(dout, IN, FLOAT, 0) TR_A(q, IN, FLOAT, 0) TR_A(k, IN, FLOAT, 0) TR_A(v, IN, FLOAT, 0) \
      TR_A(out, IN, FLOAT, 1) TR_A(lse, IN, F32, 0) TR_A(mask, IN, ANY, 1) TR_A(drel_bias, ACC, F32, 1) \
      TR_A(rel_bias, IN, FLOAT, 1), TR_S(scale, f, 0, 0) TR_S(dropout_p, f, 1, 0) TR_S(max_distance, i, 0, 128) \
      TR_S(bidirectional, i, 1, 1) TR_S(window, i, 2, 0) TR_S(query_rows, i, 3, 0))
TR_OP(add, TR_A(out, OUT, FLOAT, 0) TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0),)
TR_OP(mul, TR_A(out, OUT, FLOAT, 0) TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0),)
TR_OP(mul_backward, TR_A(da, OUT, FLOAT, 1) TR_A(db, OUT, FLOAT, 1) TR_A(dout, IN, FLOAT, 0) TR_A(a, IN, FLOAT, 0) \
      TR_A(b, IN, FLOAT, 0),)
TR_OP(scale, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(alpha, f, 0, NAN))
TR_OP(axpy, TR_A(y, ACC, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(alpha, f, 0, 1))
TR_OP(fill, TR_A(out, OUT, FLOAT, 0), TR_S(value, f, 0, NAN))
TR_OP(embedding, TR_A(out, OUT, FLOAT, 0) TR_A(ids, IN, INDEX, 0) TR_A(table, IN, FLOAT, 0),)
TR_OP(embedding_backward, TR_A(dtable, ACC, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(ids, IN, INDEX, 0), \
      TR_S(padding_idx, i, 0, -1))
TR_OP(dropout, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(p, f, 0, NAN))
TR_OP(dropout_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0), TR_S(p, f, 0, NAN))
TR_OP(cross_entropy, TR_A(loss, OUT, FLOAT, 0) TR_A(lse, OUT, F32, 0) TR_A(logits, IN, FLOAT, 0) \
      TR_A(targets, IN, INDEX, 0), TR_S(ignore_index, i, 0, -100) TR_S(label_smoothing, f, 0, 0))
TR_OP(cross_entropy_backward, TR_A(dlogits, OUT, FLOAT, 0) TR_A(logits, IN, FLOAT, 0) TR_A(lse, IN, F32, 0) \
      TR_A(targets, IN, INDEX, 0), TR_S(dloss, f, 1, 1) TR_S(ignore_index, i, 0, -100) \
      TR_S(label_smoothing, f, 0, 0))
TR_OP(pool, TR_A(out, OUT, FLOAT, 0) TR_A(hidden, IN, FLOAT, 0) TR_A(mask, IN, MASK, 1), TR_S(mode, i, 0, NAN))
TR_OP(pool_backward, TR_A(dhidden, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(hidden, IN, FLOAT, 0) \
      TR_A(mask, IN, MASK, 1), TR_S(mode, i, 0, NAN))
TR_OP(l2norm, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(eps, f, 0, 1e-12))
TR_OP(l2norm_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(x, IN, FLOAT, 0), \
      TR_S(eps, f, 0, 1e-12))
TR_OP(cosine_sim, TR_A(sim, OUT, FLOAT, 0) TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0),)
TR_OP(cosine_sim_backward, TR_A(da, OUT, FLOAT, 1) TR_A(db, OUT, FLOAT, 1) TR_A(dsim, IN, FLOAT, 0) \
      TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0),)
TR_OP(sum, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(lastdim, i, 0, NAN))
TR_OP(mean, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(lastdim, i, 0, NAN))
TR_OP(global_norm,,)
TR_OP(scale_check_finite,, TR_S(scale, f, 0, NAN))
TR_OP(cast, TR_A(out, OUT, ANY, 0) TR_A(in, IN, ANY, 0),)
TR_OP(adamw, TR_A(param, ACC, F32, 0) TR_A(grad, IN, FLOAT, 0) TR_A(m, ACC, F32, 0) TR_A(v, ACC, F32, 0) \
      TR_A(half_copy, OUT, FLOAT, 1), TR_S(lr, f, 0, NAN) TR_S(beta1, f, 1, 0.9) TR_S(beta2, f, 2, 0.999) \
      TR_S(eps, f, 3, 1e-8) TR_S(weight_decay, f, 4, 0) TR_S(step, i, 0, NAN) TR_S(grad_scale, f, 5, 1))
TR_OP(sgd, TR_A(param, ACC, F32, 0) TR_A(grad, IN, FLOAT, 0) TR_A(momentum_buf, ACC, F32, 1) \
      TR_A(half_copy, ACC, FLOAT, 1) TR_A(skip_if, IN, ANY, 1) TR_A(skipped, IN, ANY, 1), TR_S(lr, f, 0, NAN) \
      TR_S(momentum, f, 1, NAN) TR_S(dampening, f, 2, NAN) TR_S(weight_decay, f, 3, NAN) TR_S(nesterov, i, 0, NAN) \
      TR_S(step, i, 1, NAN) TR_S(grad_scale, f, 4, NAN) TR_S(skipped_known, i, 2, NAN))
TR_OP(adafactor, TR_A(param, ACC, F32, 0) TR_A(grad, IN, FLOAT, 0) TR_A(exp_avg, ACC, F32, 1) TR_A(row, ACC, F32, 1) \
      TR_A(col, ACC, F32, 1) TR_A(v, ACC, F32, 1) TR_A(half_copy, ACC, FLOAT, 1) TR_A(skip_if, IN, ANY, 1) \
      TR_A(skipped, IN, ANY, 1), TR_S(step, i, 0, NAN) TR_S(grad_scale, f, 0, NAN) TR_S(skipped_known, i, 1, NAN))
TR_OP(copy_cols, TR_A(dst, ACC, FLOAT, 0) TR_A(src, IN, FLOAT, 0), TR_S(dst_col, i, 0, NAN) TR_S(src_col, i, 1, NAN) \
      TR_S(ncols, i, 2, NAN) TR_S(accumulate, i, 3, NAN))
TR_OP(abs_diff, TR_A(out, OUT, FLOAT, 0) TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0),)
TR_OP(abs_diff_backward, TR_A(da, OUT, FLOAT, 1) TR_A(db, OUT, FLOAT, 1) TR_A(dout, IN, FLOAT, 0) \
      TR_A(a, IN, FLOAT, 0) TR_A(b, IN, FLOAT, 0),)
TR_OP(global_norm_into, TR_A(norm, OUT, F32, 0),)
TR_OP(clip_by_norm, TR_A(norm, IN, F32, 0) TR_A(found_inf, ACC, ANY, 1), TR_S(max_norm, f, 0, NAN) \
      TR_S(eps, f, 1, 1e-6))
TR_OP(scale_check_finite_into, TR_A(found_inf, ACC, ANY, 0) TR_A(scale, IN, F32, 1), TR_S(scale, f, 0, NAN))
TR_OP(adamw_multi, TR_A(skip_if, IN, ANY, 1) TR_A(skipped, IN, ANY, 1), TR_S(lr, f, 0, NAN) TR_S(beta1, f, 1, NAN) \
      TR_S(beta2, f, 2, NAN) TR_S(eps, f, 3, NAN) TR_S(weight_decay, f, 4, NAN) TR_S(step, i, 0, NAN) \
      TR_S(grad_scale, f, 5, NAN) TR_S(skipped_known, i, 1, NAN))
TR_OP(loss_scale_update, TR_A(scale, ACC, F32, 0) TR_A(inv_scale, OUT, F32, 0) TR_A(tracker, ACC, ANY, 0) \
      TR_A(skipped, ACC, ANY, 0) TR_A(found_inf, IN, ANY, 0), TR_S(growth_factor, f, 0, NAN) \
      TR_S(backoff_factor, f, 1, NAN) TR_S(growth_interval, i, 0, NAN))
TR_OP(scale_by_scalar, TR_A(x, ACC, FLOAT, 0) TR_A(s, IN, F32, 0), TR_S(factor, f, 0, 1))
TR_OP(dropout_add_layernorm, TR_A(out, OUT, FLOAT, 0) TR_A(sum, OUT, FLOAT, 1) TR_A(mean, OUT, F32, 1) \
      TR_A(rstd, OUT, F32, 1) TR_A(x, IN, FLOAT, 0) TR_A(residual, IN, FLOAT, 0) TR_A(weight, IN, FLOAT, 0) \
      TR_A(bias, IN, FLOAT, 1), TR_S(p, f, 0, 0) TR_S(eps, f, 1, 1e-12))
TR_OP(dropout_add_layernorm_backward, TR_A(dx, OUT, FLOAT, 1) TR_A(dresidual, OUT, FLOAT, 1) \
      TR_A(dweight, ACC, F32, 1) TR_A(dbias, ACC, F32, 1) TR_A(dout, IN, FLOAT, 0) TR_A(sum, IN, FLOAT, 0) \
      TR_A(weight, IN, FLOAT, 0) TR_A(mean, IN, F32, 0) TR_A(rstd, IN, F32, 0), TR_S(p, f, 0, 0))
TR_OP(bias_gelu, TR_A(out, OUT, FLOAT, 0) TR_A(h, ACC, FLOAT, 0) TR_A(bias, IN, FLOAT, 1), TR_S(kind, i, 0, 0))
TR_OP(bias_gelu_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dbias, ACC, F32, 1) TR_A(dout, IN, FLOAT, 0) \
      TR_A(h, IN, FLOAT, 0), TR_S(kind, i, 0, 0))
TR_OP(attention_packed, TR_A(out, OUT, FLOAT, 0) TR_A(lse, OUT, F32, 0) TR_A(q, IN, FLOAT, 0) TR_A(k, IN, FLOAT, 0) \
      TR_A(v, IN, FLOAT, 0), TR_S(scale, f, 0, 0))
TR_OP(cosent_loss, TR_A(loss, OUT, F32, 0) TR_A(dsim, OUT, F32, 0) TR_A(sim, IN, FLOAT, 0), TR_S(scale, f, 0, NAN))
TR_OP(cosine_mse_loss, TR_A(loss, OUT, F32, 0) TR_A(dsim, OUT, F32, 0) TR_A(sim, IN, FLOAT, 0), \
      TR_S(score_scale, f, 0, NAN))
TR_OP(linear_gelu, TR_A(out, OUT, FLOAT, 0) TR_A(h, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0) TR_A(w, IN, FLOAT, 0) \
      TR_A(bias, IN, FLOAT, 1), TR_S(kind, i, 0, 0))
TR_OP(linear_backward_dgelu, TR_A(dh, OUT, FLOAT, 0) TR_A(dw, ACC, F32, 1) TR_A(dbias, ACC, F32, 1) \
      TR_A(dhbias, ACC, F32, 1) TR_A(dout, IN, FLOAT, 0) TR_A(x, IN, FLOAT, 1) TR_A(w, IN, FLOAT, 0) \
      TR_A(h, IN, FLOAT, 0), TR_S(kind, i, 0, 0))
TR_OP(dropout_linear, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0) TR_A(w, IN, FLOAT, 0), TR_S(p, f, 0, NAN))
TR_OP(dropout_linear_backward, TR_A(dx, ACC, FLOAT, 1) TR_A(dw, ACC, F32, 1) TR_A(dout, IN, FLOAT, 0) \
      TR_A(x, IN, FLOAT, 0) TR_A(w, IN, FLOAT, 0), TR_S(p, f, 0, NAN))
/* linear_backward with dx (+=): the input gradient added in the product (ops_nn.h). Last in
 * the list: an op's position is its id and its test seed (test_ops_table.c), so an op put in
 * the middle would change the other ops' draws. */
TR_OP(linear_backward_acc, TR_A(dx, ACC, FLOAT, 0) TR_A(dw, ACC, F32, 1) TR_A(dbias, ACC, F32, 1) \
      TR_A(dout, IN, FLOAT, 0) TR_A(x, IN, FLOAT, 1) TR_A(w, IN, FLOAT, 0),)
/* ModernBERT's GeGLU gate (geglu.c) and rotary position embedding (rotary.c). */
TR_OP(geglu, TR_A(out, OUT, FLOAT, 0) TR_A(h, IN, FLOAT, 0), TR_S(kind, i, 0, 0))
TR_OP(geglu_backward, TR_A(dh, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0) TR_A(h, IN, FLOAT, 0), TR_S(kind, i, 0, 0))
TR_OP(rotary, TR_A(out, OUT, FLOAT, 0) TR_A(x, IN, FLOAT, 0), TR_S(theta, f, 0, NAN))
TR_OP(rotary_backward, TR_A(dx, OUT, FLOAT, 0) TR_A(dout, IN, FLOAT, 0), TR_S(theta, f, 0, NAN))
