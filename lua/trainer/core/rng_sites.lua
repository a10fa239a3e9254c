-- trainer.core.rng_sites: the one registry of the keys the keyed RNG (core/rng.h, Philox over
-- { seed, step, layer, op }) and the seeded shuffles are drawn with. Every number here is
-- part of the bit-exact contract: a resumed run, a golden test and a run of an older build
-- draw the same values only while these stay as they are. Add a site with a new number;
-- never change or reuse one.
local M = {}

-- Dropout masks: key.op is the site inside a layer, key.layer the layer it lies in
-- (encoder layer i has layer i, see layer below); key.step the training step.
M.dropout = {
  embeddings = 0,        -- embeddings.dropout (layer 0)
  attention_probs = 1,   -- the attention probabilities (inside the attention op)
  attention_output = 2,  -- attention.output.dropout
  feedforward_output = 3, -- output.dropout of the feed-forward block
  head = 4,              -- the dropout before a classification head (layer: head_layer)
  head_input = 5,        -- a head's dropout of the first token before its dense (RoBERTa's)
  lora = 7,              -- lora_dropout of an adapter (layer: lora_layer)
}

-- The key.layer of the sites that lie outside the encoder layers.
function M.head_layer(num_hidden_layers) return num_hidden_layers + 1 end
function M.lora_layer(index) return 10000 + (index or 0) end

-- Initial weights (key.op = stream, step and layer 0): one stream per tensor.
-- bert_param(k): the k-th parameter (1-based, model:parameters() order) of a random init.
function M.bert_param(k) return 1000 + k end
-- lora_A(index): the A matrix of adapter index (0-based); B starts at zero.
function M.lora_A(index) return 5000 + 2 * (index or 0) end
M.softmax_weight = 0x50f7 -- the SoftmaxLoss classifier's weight
M.softmax_bias = 0x50f8   -- and its bias

-- Purposes of tr_shuffle_below / the row-index order (trainer.train.data).
M.shuffle = { rows = 1, batches = 2, nli = 3 }

return M
