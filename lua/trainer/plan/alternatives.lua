-- trainer.plan.alternatives: when a plan does not fit its budget, the changes to the recipe
-- that would make it fit, each planned (not guessed) and written as command-line overrides
-- a user can paste after the recipe (`trainer RECIPE.lua batch.size=4 batch.accumulate=4`).
--
-- A "move" is one memory technique the recipe does not use yet (or uses less than it could):
--   precision  bf16 (fp16 plans the same)           checkpoint  more segments
--   loss       cached MNRL or GISTEmbed (GradCache), smaller mini-batches
--   batch      a smaller batch.size, batch.accumulate raised to keep the effective batch
--   optimizer  Adafactor                             lora        adapters on query, value
-- Each move has variants, least disruptive first (the largest micro-batch, the largest cached
-- mini-batch), and a rank: how much it changes training (1: compute only, or the same
-- gradient; 2: numerics; 3: the optimizer, or which rows a loss compares; 4: what trains). A
-- move is offered with its first variant that fits, the lowest ranks first. When no single
-- move fits, the combination offered is the one of fewest moves, then lowest ranks, that fits
-- with every move at its strongest; each move is then eased back to its least disruptive
-- variant that still fits together with the others.
local schema = require("trainer.recipe.schema")

local M = {}

-- ---------------------------------------------------------------- override texts
-- A recipe value as the override parser reads it back (trainer.recipe parse_value): a plain
-- word stays bare at the top (precision=bf16), strings inside tables are quoted.
local function literal(v, nested)
  if type(v) == "string" then
    if not nested and v:match("^[%a_][%w_]*$") and v ~= "nil" and v ~= "true" and v ~= "false" then return v end
    return ("%q"):format(v)
  end
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for _, x in ipairs(v) do parts[#parts + 1] = literal(x, true) end
  local keys = {}
  for k in pairs(v) do if type(k) == "string" then keys[#keys + 1] = k end end
  table.sort(keys, function(a, b)
    local order = { r = 1, alpha = 2, targets = 3, modules_to_save = 4, segments = 1 }
    return (order[a] or 9) < (order[b] or 9) or ((order[a] or 9) == (order[b] or 9) and a < b)
  end)
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. literal(v[k], true) end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- One word of a POSIX shell command line, quoted only when it needs it.
function M.shell_word(s)
  if s:match("^[%w_%./:=,+%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function override(path, value)
  return path .. "=" .. literal(value)
end

-- ---------------------------------------------------------------- recipe copies
local set = schema.set_path

local function apply(recipe, variants)
  local r = schema.copy(recipe)
  for _, v in ipairs(variants) do
    for _, s in ipairs(v.sets) do set(r, s[1], s[2]) end
  end
  return r
end

-- ---------------------------------------------------------------- the moves
-- Losses whose value depends on which rows share a micro-batch (in-batch negatives or
-- pairs): accumulation does not give them the gradient of the whole batch.
local in_batch = { mnrl = true, cosent = true, matryoshka = true, gist = true, adaptive_layer = true }

-- The segment count and the largest segment's layer count of ck, as training segments L
-- layers (trainer.checkpoint.segments); 0, 0 without checkpointing.
local function segments_of(ck, L)
  local sizes = require("trainer.train.grad_checkpoint").segments(L, ck)
  if not sizes then return 0, 0 end
  local largest = 0
  for _, n in ipairs(sizes) do largest = math.max(largest, n) end
  return #sizes, largest
end

local function moves(recipe, base, estimate)
  local list = {}
  local L = base.layers
  local function variant(sets, note)
    local args = {}
    for _, s in ipairs(sets) do if not s.silent then args[#args + 1] = override(s[1], s[2]) end end
    return { sets = sets, args = args, note = note }
  end

  if recipe.precision == "fp32" then
    list[#list + 1] = { name = "precision", rank = 2, variants = {
      variant({ { "precision", "bf16" } }, "half-precision activations and frozen weights; fp16 plans the same") } }
  end

  -- more checkpoint segments: every layer is recomputed once whatever their number, so the
  -- one offered is the number with the smallest plan
  local have, have_largest = segments_of(recipe.checkpoint, L)
  if have < L then
    local best, best_total
    for s = have + 1, L do
      local p = estimate(apply(recipe, { { sets = { { "checkpoint", { segments = s } } } } }))
      if not best_total or p.total_bytes < best_total then best, best_total = s, p.total_bytes end
    end
    list[#list + 1] = { name = "checkpoint", rank = 1, variants = {
      variant({ { "checkpoint", { segments = best } } },
        have == 0 and "recomputes each segment's forward during the backward: about a third more compute"
          or ("%d checkpoint segments of %d layers, not %d of %d"):format(best,
            select(2, segments_of({ segments = best }, L)), have, have_largest)) } }
  end

  local loss = recipe.loss
  local model = recipe.model or {}   -- a test's partial recipe may have none
  local cachable = loss.name == "mnrl" or loss.name == "gist"
  if cachable and model.task ~= "classification" and model.task ~= "cross_encoder" then
    local texts = base.micro_batch * base.texts
    local v = {}
    local current = loss.mini_batch
    local m = loss.cached and math.floor(current / 2) or current
    while m >= 1 do
      if m < texts then
        local sets = { { "loss.cached", true, silent = loss.cached == true } }
        if m ~= current then sets[#sets + 1] = { "loss.mini_batch", m } end
        v[#v + 1] = variant(sets, ("GradCache: the same loss and in-batch negatives, %d text%s embedded at once")
          :format(m, m == 1 and "" or "s"))
      end
      m = m == 1 and 0 or math.max(1, math.floor(m / 2))
    end
    if #v > 0 then list[#list + 1] = { name = "loss", rank = 1, variants = v } end
  end

  local size, acc = recipe.batch.size, recipe.batch.accumulate
  local bv = {}
  local changes_loss = in_batch[loss.name] and not (cachable and loss.cached)
  for s = size - 1, 1, -1 do
    if size % s == 0 then
      local note
      if changes_loss then
        note = ("the same %d rows per step, but %s then compares %d rows at a time, not %d%s")
          :format(size * acc, loss.name, s, size, cachable and "; loss.cached=true keeps them together" or "")
      else
        note = ("the same %d rows per optimizer step"):format(size * acc)
      end
      bv[#bv + 1] = variant({ { "batch.size", s }, { "batch.accumulate", acc * size / s } }, note)
    end
  end
  if #bv > 0 then list[#list + 1] = { name = "batch", rank = changes_loss and 3 or 1, variants = bv } end

  local oname = recipe.optim.name
  if oname ~= "adafactor" and base.by_tag.optimizer > 0 then
    list[#list + 1] = { name = "optimizer", rank = 3, variants = {
      variant({ { "optim.name", "adafactor" } }, "factored second moments, no first moment (as transformers' Adafactor)") } }
  end

  if not recipe.lora then
    local spec = { r = 8, alpha = 16, targets = { "query", "value" } }
    if model.task == "classification" or model.task == "cross_encoder" then spec.modules_to_save = { "classifier" } end
    list[#list + 1] = { name = "lora", rank = 4, variants = {
      variant({ { "lora", spec } }, "trains rank-8 adapters on query and value, not the whole model") } }
  end
  return list
end

-- ---------------------------------------------------------------- the search
-- The alternatives for `recipe` under `budget` bytes: a list of { args = { "batch.size=4",
-- ... } (command-line overrides, unquoted), text (the same as one shell-quoted line), note,
-- total_bytes, fits, combined }: the single moves that fit; else one combination (combined =
-- true; fits = false when even every move together does not fit); nothing when the plan fits.
-- `estimate(recipe)` is trainer.plan's estimate with the run's options.
function M.search(recipe, budget, estimate)
  local base = estimate(recipe)
  recipe = base.recipe or recipe   -- with the schema's defaults filled in
  if not budget or base.total_bytes <= budget then return {} end
  local list = moves(recipe, base, estimate)
  local function total(variants) return estimate(apply(recipe, variants)).total_bytes end
  local function entry(variants, combined)
    local args, words, notes = {}, {}, {}
    for _, v in ipairs(variants) do
      for _, a in ipairs(v.args) do args[#args + 1] = a; words[#words + 1] = M.shell_word(a) end
      notes[#notes + 1] = v.note
    end
    local p = estimate(apply(recipe, variants))
    local t = p.total_bytes
    return { args = args, text = table.concat(words, " "), note = table.concat(notes, "; "), total_bytes = t, plan = p,
             fits = t <= budget, combined = combined or nil }
  end

  for i, mv in ipairs(list) do mv.order = i end
  table.sort(list, function(x, y) return x.rank < y.rank or (x.rank == y.rank and x.order < y.order) end)
  local out = {}
  for _, mv in ipairs(list) do
    for _, v in ipairs(mv.variants) do
      if total({ v }) <= budget then out[#out + 1] = entry({ v }) break end
    end
  end
  if #out > 0 then return out end

  -- no single move fits: every subset of moves, each at its strongest variant
  local strongest = {}
  for i, mv in ipairs(list) do
    local best, best_t
    for _, v in ipairs(mv.variants) do
      local t = total({ v })
      if not best_t or t < best_t then best, best_t = v, t end
    end
    strongest[i] = best_t < base.total_bytes and best or nil
  end
  local pick
  for mask = 1, 2 ^ #list - 1 do
    local vs, n, rank, usable = {}, 0, 0, true
    for i = 1, #list do
      if math.floor(mask / 2 ^ (i - 1)) % 2 == 1 then
        if not strongest[i] then usable = false break end
        vs[#vs + 1] = { i = i, v = strongest[i] }
        n, rank = n + 1, rank + list[i].rank
      end
    end
    if usable then
      local plain = {}
      for k, c in ipairs(vs) do plain[k] = c.v end
      local t = total(plain)
      if t <= budget and (not pick or n < pick.n or (n == pick.n and (rank < pick.rank
          or (rank == pick.rank and t < pick.t)))) then
        pick = { vs = vs, n = n, rank = rank, t = t }
      end
    end
  end
  if not pick then
    -- nothing fits: the smallest plan the moves reach, to say how far off it stays
    local vs = {}
    for i = 1, #list do if strongest[i] then vs[#vs + 1] = strongest[i] end end
    if #vs == 0 then return {} end
    return { entry(vs, true) }
  end
  -- ease each move back to its least disruptive variant that still fits with the others
  local chosen = {}
  for k, c in ipairs(pick.vs) do chosen[k] = c.v end
  for k, c in ipairs(pick.vs) do
    for _, v in ipairs(list[c.i].variants) do
      chosen[k] = v
      if total(chosen) <= budget then break end
      chosen[k] = c.v
    end
  end
  return { entry(chosen, true) }
end

return M
