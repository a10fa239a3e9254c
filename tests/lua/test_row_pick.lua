-- The last layer on the first rows only (trainer.nn.row_pick): a classifier, or CLS pooling,
-- reads each sequence's first row of the last hidden state, so past its attention core the
-- last layer computes that row alone. For every family, with dropout on (hidden, attention,
-- head; ModernBERT's attention and MLP dropout) and padded or packed rows, under LoRA and
-- checkpointing: the loss and every gradient equal the whole layer's within float rounding,
-- eval outputs are the same, nothing is left allocated, and the activations' peak is lower.
-- A batch whose first row is padding (left padding) runs the layer whole. A hook on
-- row_pick.first counts the picks, so a path that silently ran whole would fail.
local T = require("trainer.core.tensor")
local registry = require("trainer.models.registry")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local row_pick = require("trainer.nn.row_pick")
local packing = require("trainer.nn.packing")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local DROP = 0.1
-- small configs of every family, dropout on everywhere the family has it
local CONFIGS = {
  bert = { model_type = "bert", hidden_size = 32, num_hidden_layers = 3, num_attention_heads = 4, intermediate_size = 64,
    vocab_size = 60, max_position_embeddings = 64, hidden_dropout_prob = DROP, attention_probs_dropout_prob = DROP },
  roberta = { model_type = "roberta", hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
    intermediate_size = 64, vocab_size = 60, max_position_embeddings = 70, pad_token_id = 1,
    hidden_dropout_prob = DROP, attention_probs_dropout_prob = DROP },
  distilbert = { model_type = "distilbert", dim = 32, n_layers = 2, n_heads = 4, hidden_dim = 64, vocab_size = 60,
    max_position_embeddings = 64, dropout = DROP, attention_dropout = DROP, seq_classif_dropout = DROP },
  mpnet = { model_type = "mpnet", hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
    intermediate_size = 64, vocab_size = 60, max_position_embeddings = 70, pad_token_id = 1,
    hidden_dropout_prob = DROP, attention_probs_dropout_prob = DROP },
  modernbert = { model_type = "modernbert", hidden_size = 32, num_hidden_layers = 3, num_attention_heads = 4,
    intermediate_size = 48, vocab_size = 60, max_position_embeddings = 64, pad_token_id = 0,
    global_attn_every_n_layers = 2, local_attention = 6, attention_dropout = DROP, mlp_dropout = DROP,
    embedding_dropout = DROP, classifier_dropout = DROP },
}

local function build(family, task, pooling)
  local cfg = registry.config(CONFIGS[family], family)
  return registry.family(cfg.model_type or family).build(task, { config = cfg, seed = 5, num_labels = 3,
    pooling = pooling })
end

-- [B, Tn] ids; lengths from Tn down (pad = true: most rows padded at the end; "left": the
-- first row of row 1 is padding); and a loss weight [B, width].
local function batch(B, Tn, width, pad)
  local ids, mask = {}, {}
  for b = 0, B - 1 do
    local len = pad and math.max(2, Tn - (b * 3) % Tn) or Tn
    for t = 1, Tn do
      local i = b * Tn + t
      local real = t <= len
      if pad == "left" and b == 1 then real = t > 2 end
      ids[i] = real and (((b * 7 + t * 13) % 50) + 5) or 0
      mask[i] = real and 1 or 0
    end
  end
  return { input_ids = lib.int_matrix(ids, B, Tn), attention_mask = lib.int_matrix(mask, B, Tn) },
    T.randn({ B, width }, { seed = 9, stream = 1, tag = "activations" })
end

-- the picks made (row_pick.first's non-nil results), to know the picked path ran
local picks = 0
local first = row_pick.first
row_pick.first = function(...)
  local p = first(...)
  if p then picks = picks + 1 end
  return p
end

-- loss = sum(output * w), its gradients and the activations' peak (lib.loss_grads_peak); the
-- picked path must have run exactly when asked for and possible.
local function run(model, x, w, pick, want_pick)
  model.pick_rows = pick
  picks = 0
  return lib.loss_grads_peak(model, x, w, "pick=" .. tostring(pick), function()
    assert((picks > 0) == (pick and want_pick), ("pick=%s: %d picks"):format(tostring(pick), picks))
  end)
end

-- The first-row run against the whole one; lower_peak: the picked run's activation peak
-- must be below the whole run's.
local function same_as_whole(model, x, w, what, lower_peak, left)
  local l0, g0, peak0 = run(model, x, w, false)
  local l1, g1, peak1 = run(model, x, w, true, not left)
  lib.same_loss_and_grads(l0, g0, l1, g1, what .. " picked", 5)
  assert(peak1 <= peak0, ("%s: picked peak activations %d above the whole layer's %d"):format(what, peak1, peak0))
  if lower_peak then
    assert(peak1 < peak0, ("%s: picked peak activations %d not below the whole layer's %d"):format(what, peak1, peak0))
  end
  -- eval: the same outputs
  model:eval()
  model.pick_rows = false
  local e0 = model:forward(x)
  model.pick_rows = true
  local e1 = model:forward(x)
  lib.close_to_scale(e0:values(), e1:values(), 1e-5, what .. ": eval output")
  e0:free(); e1:free()
  model.pick_rows = nil
end

local function check(family, task, pooling, pad, extra)
  local model = build(family, task, pooling)
  local x, w = batch(4, 11, task == "classification" and 3 or 32, pad)
  local what = ("%s %s%s%s"):format(family, task, pooling and (" " .. pooling) or "", pad and " padded" or "")
  -- a padded batch's peak may lie where the picked rows change nothing (tiny shapes)
  same_as_whole(model, x, w, what, not pad, pad == "left")
  if extra then
    extra(model)
    same_as_whole(model, x, w, what .. " lora+checkpoint", false, pad == "left")
  end
  lib.free_input(x)
  w:free()
  model:free()
end

local function lora_ckpt(targets)
  return function(model)
    lora.apply(model, { r = 4, alpha = 8, dropout = 0.2, targets = targets })
    checkpoint.apply(model, { every = 1 })
  end
end

return {
  { "picked_rows_are_the_first_row_of_each_sequence", function()
    local pick = row_pick.first(3, 4)
    local x = T.randn({ 3, 4, 5 }, { seed = 2, tag = "activations" })
    local g = pick:gather(x)
    local xv, gv = x:values(), g:values()
    for b = 0, 2 do
      for c = 1, 5 do assert(gv[b * 5 + c] == xv[b * 20 + c], "gather: row " .. b) end
    end
    local s = pick:scatter(g, { 3, 4, 5 })
    local sv = s:values()
    for i = 1, 60 do
      local row = math.floor((i - 1) / 5)
      assert(sv[i] == (row % 4 == 0 and xv[i] or 0), "scatter element " .. i)
    end
    -- under a packing: the packed row of each first token; none when one is padding
    local mask = lib.int_matrix({ 1, 1, 0, 0,  1, 1, 1, 0,  1, 0, 0, 0 }, 3, 4)
    local pk = assert(packing.from_mask(mask))
    local pp = assert(row_pick.first(3, 4, pk))
    assert(pp.src[2] == 0 and pp.src[5] == 2 and pp.src[8] == 5, "packed first rows 0, 2, 5")
    pk:close(); mask:free()
    local left = lib.int_matrix({ 1, 1, 0, 1 }, 2, 2)
    pk = assert(packing.from_mask(left))
    assert(row_pick.first(2, 2, pk) == nil, "a padded first row: no pick")
    pk:close(); left:free()
    for _, t in ipairs({ x, g, s }) do t:free() end
  end },

  { "bert_classifier_first_row_matches_the_whole_layer", function()
    check("bert", "classification", nil, false, lora_ckpt({ "query", "value" }))
    check("bert", "classification", nil, true)
    check("bert", "classification", nil, "left")
  end },

  { "bert_cls_pooling_first_row_matches_the_whole_layer", function()
    check("bert", "embedding", "cls", true, lora_ckpt({ "query", "value", "dense" }))
  end },

  { "roberta_distilbert_mpnet_heads_first_row_match_the_whole_layer", function()
    check("roberta", "classification", nil, true)
    check("distilbert", "classification", nil, false, lora_ckpt({ "q_lin", "v_lin" }))
    check("mpnet", "classification", nil, true, lora_ckpt({ "q", "v" }))
  end },

  { "modernbert_first_row_matches_the_whole_layer", function()
    check("modernbert", "classification", nil, false, lora_ckpt({ "Wqkv", "Wo", "Wi" }))
    check("modernbert", "embedding", "cls", true)
  end },
}
