-- What a run holds between its steps and through its forward (trainer.train.build,
-- trainer.train.train_step): on a tiny random encoder's fp32 full fine-tune,
--   - every forward of a step after the first starts with no trainable parameter holding a
--     gradient (Optimizer:zero_grad({ free = true }): the backward makes them);
--   - without accumulation no oneDNN pack of a trained weight is held after a step
--     (Optimizer:transient_packs), where the same run in two micro-batches, which share the
--     packs, holds them;
--   - a frozen weight's packs are never held between steps, with accumulation or without
--     (a LoRA run: the packs would be two more copies of the frozen weights).
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")
local memory = require("trainer.core.memory")
local outputs = require("trainer.train.outputs")

local get, cleanup = lib.tiny_pairs_once({ model_seed = 5, text_seed = 9, rows = 24, max_extra = 6,
  score_format = "%.2f", score = function(rnd) return rnd(100) / 100 end })

-- Trains 3 steps of 4 rows (as size x accumulate); returns the workspace bytes held after each
-- step beyond those held before the run, and the forwards that began with a gradient held.
local function run(name, size, accumulate, extra)
  local dir = get().dir
  local path = lib.tiny_recipe(dir, name, ([[
return {
  model = { from = MODEL, max_length = 16 }, data = { train = TRAIN, columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosine" }, optim = { name = "adamw", lr = 1e-4 }, batch = { size = %d, accumulate = %d },
  steps = 3, precision = "fp32", eval = { at_start = false }, save = { final = false }, log = { quiet = true },
  device = "cpu", out = OUT, %s
}
]]):format(size, accumulate, extra or ""))
  local r = recipe.load(path)
  local held, with_grads, wrapped = {}, 0, false
  collectgarbage("collect")
  collectgarbage("collect")
  local base = memory.stats().by_tag.workspace
  r.recipe.hooks = { on_step = function(t)
    held[#held + 1] = memory.stats().by_tag.workspace - base
    if wrapped then return end
    wrapped = true
    local model, forward = t.model, t.model.forward
    model.forward = function(self, ...)
      if self.grad_enabled then
        for _, p in self:parameters() do
          if p.trainable ~= false and p.grad then with_grads = with_grads + 1 break end
        end
      end
      return forward(self, ...)
    end
  end }
  local rc = loop.train(r, { quiet = true })
  assert(rc == 0, name .. ": exit " .. tostring(rc))
  outputs.remove_tree(dir .. "/" .. name)
  return held, with_grads
end

return {
  { "no_gradient_through_the_forward_no_pack_between_steps", function()
    local held, with_grads = run("plain", 4, 1)
    assert(#held == 3, ("%d steps seen, want 3"):format(#held))
    assert(with_grads == 0, ("%d forwards began with a gradient held"):format(with_grads))
    local shared = run("shared", 2, 2)
    print(("  workspace held after steps 1-3: %d, %d, %d B without accumulation; %d, %d, %d B in two micro-batches")
      :format(held[1], held[2], held[3], shared[1], shared[2], shared[3]))
    if shared[3] <= 0 then
      print("SKIP the packs' part: this CPU's products of the tiny model take no packs (OpenBLAS or their sizes)")
      return
    end
    for k = 1, 3 do assert(held[k] <= 0, ("step %d: %d workspace bytes held without accumulation"):format(k, held[k])) end
    -- LoRA's adapters are too thin to pack: a step of frozen weights leaves nothing packed
    local frozen = run("frozen", 2, 2, 'lora = { r = 4, alpha = 8, targets = { "query", "value" } },')
    for k = 1, 3 do
      assert(frozen[k] <= 0, ("LoRA step %d: %d workspace bytes held between steps"):format(k, frozen[k]))
    end
  end },
  { "cleanup", function() cleanup() end },
}
