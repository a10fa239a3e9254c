-- trainer.plan.fit: a run that fits itself to its budget before anything is allocated.
--
--   batch.size = "auto"   the largest micro-batch the memory plan fits in the budget, with
--                         batch.accumulate set so that each optimizer step still takes
--                         batch.effective rows (default batch.size x accumulate; 16 x
--                         accumulate when the size is "auto"). A loss that compares the rows
--                         of a micro-batch (MNRL's, GISTEmbed's in-batch negatives) keeps its
--                         batch whole and turns on its cached variant (GradCache) instead.
--   memory.fit = true     when the recipe as written does not fit, the change of least
--                         predicted step time (trainer.plan.time) among those that fit and
--                         keep what is trained: checkpoint = "auto", the loss's cached variant
--                         and its mini-batch, a smaller micro-batch with more accumulation
--                         (the same rows a step; never for a loss that compares the rows of a
--                         micro-batch), and half precision where the device computes in it
--                         (bf16, fp16 on a card before Ampere; under LoRA it also stores the
--                         frozen base in half).
-- Each configuration is planned (trainer.plan.estimate), not tried: nothing is allocated to
-- find it. A chosen configuration must fit within HEADROOM of the budget, the plan's
-- tolerance (tests/lua/test_plan.lua holds it within 15 % per tag, and the totals closer), so
-- that the measured peak stays under the budget. The choice is written into the recipe the
-- run keeps (resolved_recipe.lua holds the chosen values, with a comment saying what changed;
-- summary.json its record under `fit`), so a resume continues with the same choice.
local errors = require("trainer.core.errors")
local schema = require("trainer.recipe.schema")

local M = {}

-- The share of the budget a chosen configuration's plan may fill, less SEGMENT_SLACK: the
-- budget (memory.limit) bounds the allocator's reserved segments, not its live bytes, and a
-- step may open one more small-pool segment (2 MiB) and one large-pool segment (20 MiB, for
-- requests of 1 to 10 MiB; core/mem/alloc.c) than its live bytes need.
M.HEADROOM = 0.9
M.SEGMENT_SLACK = 22 * 2 ^ 20

-- Losses whose value depends on which rows share a micro-batch, and those of them that have a
-- cached variant with the same value (trainer.losses: GradCache).
local in_batch = { mnrl = true, cosent = true, matryoshka = true, gist = true, adaptive_layer = true }
local cachable = { mnrl = true, gist = true }

-- Whether a recipe asks for fitting: batch.size = "auto" or memory.fit = true.
function M.wanted(recipe)
  return (recipe.batch and recipe.batch.size == "auto") or (recipe.memory and recipe.memory.fit == true) or false
end

local set, get = schema.set_path, schema.get_path

-- The keys a fit may change, in the order its changes are told.
M.KEYS = { "batch.size", "batch.accumulate", "checkpoint", "loss.cached", "loss.mini_batch", "precision" }

local function literal(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then return require("trainer.cli.pretty").literal(v):gsub("%s+", " ") end
  return tostring(v)
end

local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  return literal(a) == literal(b)
end

-- The half precision the device computes in: bf16 on the CPU and on a card from Ampere up,
-- fp16 before; nil when it has none that the run could use.
local function half_of(device, card)
  if not device:match("^cuda") then return "bf16" end
  if not card then return "bf16" end
  return require("trainer.core.card").has_bf16(card) and "bf16" or "fp16"
end

-- The configurations to plan: a list of { sets = { { key, value }, ... } } over the recipe
-- with its schema defaults. what: { auto = batch.size is "auto", fit = memory.fit }.
local function candidates(r, what, device, card)
  local loss = r.loss or {}
  local acc = r.batch.accumulate or 1
  local size = r.batch.size
  local effective = r.batch.effective or (size == "auto" and 16 or size) * acc
  local compares = in_batch[loss.name] or false
  local can_cache = cachable[loss.name] and r.model.task ~= "classification" and r.model.task ~= "cross_encoder"
  -- micro-batches: divisors of the effective batch (the same rows a step), largest first
  local sizes = {}
  if compares and (can_cache or what.fit) then
    -- the loss compares a micro-batch's rows: keep them together (cached, below)
    sizes = { size == "auto" and effective or size }
  else
    local top = size == "auto" and effective or size
    -- data.sampler = "group_by_label" draws pairs of each label: an even batch of at least 4
    local paired = r.data and r.data.sampler == "group_by_label"
    for b = top, 1, -1 do
      if effective % b == 0 and (size == "auto" or what.fit or b == size) and (not paired or (b % 2 == 0 and b >= 4)) then
        sizes[#sizes + 1] = b
      end
    end
  end
  local checkpoints = { r.checkpoint }
  if what.fit and r.checkpoint ~= "auto" then checkpoints[#checkpoints + 1] = "auto" end
  local caches = { { cached = loss.cached, mini_batch = loss.mini_batch } }
  if can_cache and (what.fit or size == "auto") then
    local m = loss.mini_batch or 32
    if not loss.cached then caches[#caches + 1] = { cached = true, mini_batch = m } end
    m = math.floor(m / 2)
    while m >= 1 do
      caches[#caches + 1] = { cached = true, mini_batch = m }
      m = m == 1 and 0 or math.floor(m / 2)
    end
  end
  local precisions = { r.precision }
  local half = half_of(device, card)
  if what.fit and r.precision == "fp32" and half then precisions[#precisions + 1] = half end
  local list = {}
  for _, b in ipairs(sizes) do
    for _, ck in ipairs(checkpoints) do
      for _, c in ipairs(caches) do
        for _, p in ipairs(precisions) do
          list[#list + 1] = { sets = {
            { "batch.size", b }, { "batch.accumulate", effective / b }, { "checkpoint", ck },
            { "loss.cached", c.cached }, { "loss.mini_batch", c.mini_batch }, { "precision", p } } }
        end
      end
    end
  end
  return list, effective, compares
end

-- The changes of a configuration against the recipe as written: a list of { key, from, to }.
local function changes_of(written, chosen)
  local out = {}
  for _, k in ipairs(M.KEYS) do
    local a, b = get(written, k), get(chosen, k)
    if not same(a, b) and not (k == "loss.mini_batch" and not get(chosen, "loss.cached")) then
      out[#out + 1] = { key = k, from = a, to = b }
    end
  end
  return out
end

local function override(k, v)
  if type(v) == "string" and k == "precision" then return k .. "=" .. v end
  return k .. "=" .. (type(v) == "table" and require("trainer.plan.alternatives").shell_word(literal(v):gsub(" ", ""))
    or literal(v))
end

-- Chooses the configuration. recipe: resolved (schema defaults filled in); opts: device
-- ("cpu", "cuda", "cuda:0"), budget (bytes), budget_what (words), card (trainer.core.card's),
-- estimate_opts (trainer.plan.estimate's), rates (trainer.plan.time's; measured when absent),
-- path (the recipe, for messages). Returns a record:
--   { recipe = the chosen recipe (a copy), changes = { { key, from, to } }, args = overrides,
--     plan, seconds (predicted step time), written = { bytes, seconds } (nil when as written
--     cannot be planned: batch.size "auto"), fits_as_written, considered, fitting, reasons }
-- or raises errors.oom (exit 2) when no configuration fits.
function M.choose(recipe, opts)
  local plan = require("trainer.plan")
  local time = require("trainer.plan.time")
  local keys = require("trainer.recipe.keys")
  local r = keys.with_defaults(recipe)
  local what = { auto = r.batch.size == "auto", fit = r.memory and r.memory.fit == true or false }
  local eopts = opts.estimate_opts or {}
  local budget = opts.budget
  local device = opts.device or r.device
  local card = opts.card
  local rates
  local function seconds_of(p)
    p.card = p.card or card
    rates = rates or opts.rates or time.rates(p)
    return time.predict(p, rates).seconds
  end
  -- the model's config read once for every configuration
  local first
  local function estimate(rec)
    local p = plan.estimate(rec, eopts)
    if not eopts.model_config then eopts.model_config = p.model_config end
    first = first or p
    return p
  end

  local record = { considered = 0, fitting = 0, reasons = {}, budget = budget, budget_what = opts.budget_what,
                   key = what.fit and "memory.fit" or "batch.size = \"auto\"" }
  local limit = budget and (M.HEADROOM * budget - M.SEGMENT_SLACK)
  -- the recipe as written, when it can be planned as it is: kept when it fits with the same
  -- headroom as any other choice
  if not what.auto then
    local p = estimate(r)
    record.written = { bytes = p.total_bytes, seconds = seconds_of(p) }
    if not budget or p.total_bytes <= limit then
      record.recipe, record.plan, record.changes, record.args = r, p, {}, {}
      record.seconds, record.fits_as_written = record.written.seconds, true
      return record
    end
  end
  if not budget then
    errors.user("%sbatch.size = \"auto\" needs a budget: set memory.limit (e.g. memory.limit=8GiB), or run where "
      .. "the device's memory is known", opts.path and (opts.path .. ": ") or "")
  end
  local list, effective, compares = candidates(r, what, device, card)
  if #list == 0 then
    errors.user("%sbatch.effective = %d: no micro-batch of data.sampler = \"group_by_label\" (an even size of at least "
      .. "4) divides it; make batch.effective a multiple of 4", opts.path and (opts.path .. ": ") or "", effective)
  end
  local best, smallest
  for _, c in ipairs(list) do
    local rec = schema.copy(r)
    for _, s in ipairs(c.sets) do set(rec, s[1], s[2]) end
    if rec.loss and not rec.loss.cached then rec.loss.mini_batch = r.loss.mini_batch end
    local p = estimate(rec)
    record.considered = record.considered + 1
    if not smallest or p.total_bytes < smallest.plan.total_bytes then smallest = { recipe = rec, plan = p } end
    if p.total_bytes <= limit then
      record.fitting = record.fitting + 1
      local t = seconds_of(p)
      -- the techniques it changes (the batch's size and accumulation are one), and whether
      -- one of them changes the numerics (precision)
      local n, inexact = 0, rec.precision ~= r.precision
      local seen = {}
      for _, ch in ipairs(changes_of(r, rec)) do
        local tech = ch.key:match("^batch") and "batch" or ch.key:match("^loss") and "loss" or ch.key
        if not seen[tech] then seen[tech], n = true, n + 1 end
      end
      local better
      if not best then better = true
      elseif what.fit then
        -- least predicted time; within 2 % (the model's resolution) the exact one, then the
        -- fewer techniques, then the smaller plan
        if t < best.seconds * 0.98 then better = true
        elseif t <= best.seconds * 1.02 then
          if inexact ~= best.inexact then better = not inexact
          else better = n < best.n or (n == best.n and p.total_bytes < best.plan.total_bytes) end
        end
      else
        -- batch.size = "auto" alone: the largest micro-batch (then the largest cached
        -- mini-batch, the order of the list), as the key says
        better = false
      end
      if better then best = { recipe = rec, plan = p, seconds = t, n = n, inexact = inexact } end
    end
  end
  if not best then
    local fs = schema.format_size
    local mx = r.model.max_length
    local min_b = math.huge
    for _, c in ipairs(list) do min_b = math.min(min_b, c.sets[1][2]) end
    local asked = what.auto and what.fit and "batch.size = \"auto\" and memory.fit = true"
      or what.auto and "batch.size = \"auto\"" or "memory.fit = true"
    local args = {}
    for _, ch in ipairs(changes_of(r, smallest.recipe)) do args[#args + 1] = override(ch.key, ch.to) end
    errors.oom(("%s%s: nothing fits the budget of %s (%s). Of the %d configuration%s planned (micro-batches "
      .. "down to %d row%s%s), the smallest needs %s (%s), and a run keeps %d %% of the budget and 22 MiB "
      .. "free for the plan's error and the allocator's segments. Raise memory.limit or run on a device with more memory, shorten model.max_length%s, "
      .. "use LoRA (lora = { r = 8 }), or train a smaller model; `trainer plan %s --fit` shows the ledger.")
      :format(opts.path and (opts.path .. ": ") or "", asked, fs(budget), opts.budget_what or "the budget",
        record.considered, record.considered == 1 and "" or "s", min_b, min_b == 1 and "" or "s",
        what.fit and ", with checkpointing, the cached loss where there is one and half precision" or "",
        fs(smallest.plan.total_bytes), #args > 0 and table.concat(args, " ") or "the recipe as written",
        math.floor(100 * (1 - M.HEADROOM) + 0.5), mx and (" (now %d)"):format(mx) or "", opts.path or "RECIPE.lua"))
  end
  record.recipe, record.plan, record.seconds = best.recipe, best.plan, best.seconds
  record.changes = changes_of(r, best.recipe)
  record.args = {}
  for _, ch in ipairs(record.changes) do record.args[#record.args + 1] = override(ch.key, ch.to) end
  record.effective = effective
  local loss = best.recipe.loss or {}
  if compares and cachable[loss.name] and loss.cached and not r.loss.cached then
    record.reasons[#record.reasons + 1] = ("loss %s compares the rows of a micro-batch (in-batch negatives): its %d "
      .. "rows stay one micro-batch with loss.cached = true (GradCache: the same loss, %d texts embedded at once), "
      .. "not accumulated micro-batches, which would change the loss"):format(loss.name, best.recipe.batch.size,
        loss.mini_batch)
    record.reasons[#record.reasons] = record.reasons[#record.reasons]:gsub(" 1 texts ", " 1 text ")
  elseif compares and best.recipe.batch.size < effective then
    record.reasons[#record.reasons + 1] = ("loss %s compares the rows of a micro-batch: it now compares %d rows at a "
      .. "time, not %d"):format(loss.name, best.recipe.batch.size, effective)
  end
  if best.recipe.precision ~= r.precision then
    record.reasons[#record.reasons + 1] = ("precision %s: half activations%s; the numerics change (the only change "
      .. "here that is not exact)"):format(best.recipe.precision, best.recipe.lora and " and a half copy of the frozen base" or "")
  end
  return record
end

-- One paragraph saying what was chosen and why, for stderr and `trainer plan --fit`.
function M.describe(record)
  local fs = schema.format_size
  local time = require("trainer.plan.time")
  local r = record.recipe
  if record.fits_as_written then
    return ("memory.fit: the recipe fits as written (%s of %s, %s, with the headroom of a fitted run); nothing "
      .. "changed"):format(fs(record.plan.total_bytes), fs(record.budget or 0), record.budget_what or "the budget")
  end
  local parts = {}
  for _, ch in ipairs(record.changes) do
    parts[#parts + 1] = ("%s %s -> %s"):format(ch.key, ch.from == nil and "nil" or literal(ch.from), literal(ch.to))
  end
  local head = record.written
    and ("the recipe as written needs %s, and a run fitted to %s (%s) may plan %s"):format(fs(record.written.bytes),
      fs(record.budget), record.budget_what or "the budget", fs(M.HEADROOM * record.budget - M.SEGMENT_SLACK))
    or ("the largest micro-batch within %s (%s)"):format(fs(record.budget), record.budget_what or "the budget")
  local price = record.written and (", %s against the recipe as written"):format(time.relative(record.seconds,
    record.written.seconds)) or ""
  local text = ("%s: %s; changed %s (%d rows per optimizer step, as %d x %d): planned %s, predicted %s a "
    .. "step%s; the %s of %d configurations that fit (of %d planned)"):format(record.key or "memory.fit", head,
    #parts > 0 and table.concat(parts, ", ") or "nothing", r.batch.size * r.batch.accumulate, r.batch.size,
    r.batch.accumulate, fs(record.plan.total_bytes), time.format_seconds(record.seconds), price,
    record.key == "memory.fit" and "fastest" or "largest micro-batch", record.fitting,
    record.considered)
  if #record.reasons > 0 then text = text .. ". " .. table.concat(record.reasons, ". ") end
  return text
end

-- What summary.json records under `fit`.
function M.summary(record)
  local changes = {}
  for i, ch in ipairs(record.changes) do changes[i] = { key = ch.key, from = ch.from, to = ch.to } end
  return { changes = changes, overrides = record.args, planned_bytes = record.plan.total_bytes,
    budget_bytes = record.budget, budget = record.budget_what, predicted_step_s = record.seconds,
    written_bytes = record.written and record.written.bytes or nil, reasons = record.reasons,
    text = M.describe(record) }
end

-- The lines resolved_recipe.lua carries above the recipe, as Lua comments.
function M.comment(record)
  if not record or #record.changes == 0 then return nil end
  return "-- memory.fit chose: " .. table.concat(record.args, " ") .. "\n-- " ..
    M.describe(record):gsub("\n", "\n-- ") .. "\n"
end

-- For a resume of a fitted run (resume = "latest" or a checkpoint, the run's folder holding
-- its resolved_recipe.lua): the stored choice, copied into recipe, instead of fitting again
-- (a changed budget must not change the micro-batch halfway). Returns true when it did.
function M.keep_stored(recipe, stored, overridden)
  if type(stored) ~= "table" or type(get(stored, "batch.size")) ~= "number" then return false end
  overridden = overridden or {}
  for _, k in ipairs(M.KEYS) do
    if not overridden[k] then set(recipe, k, schema.copy(get(stored, k))) end
  end
  if not overridden["batch.size"] and not overridden["batch.accumulate"] then
    set(recipe, "batch.effective", get(stored, "batch.effective"))
  end
  return type(recipe.batch.size) == "number"
end

-- Fits resolved.recipe in place for a run on `device` (build's first step): nothing unless
-- the recipe asks (M.wanted). Prints the choice (unless quiet) and returns the record, or nil.
function M.apply(resolved, device, opts)
  opts = opts or {}
  local recipe = resolved.recipe
  local quiet = opts.quiet
  -- a resume continues with the run's own choice (and its record)
  if recipe.resume and recipe.out then
    local old
    local ok, s = pcall(require("trainer.core.json").read, recipe.out .. "/summary.json")
    if ok and type(s) == "table" and type(s.fit) == "table" then old = s.fit end
    local kept = false
    if M.wanted(recipe) then
      local stored = require("trainer.train.resume").stored_recipe(recipe.out)
      -- keys set on the command line of the resume change the run on purpose
      local overridden = {}
      for _, o in ipairs(resolved.overrides or {}) do
        local k, v = o:match("^([%w_%.]+)=(.*)$")
        if k and not (k == "batch.size" and (v == "auto" or v == '"auto"')) then overridden[k] = true end
      end
      kept = M.keep_stored(recipe, stored, overridden)
    end
    if kept or (old and not M.wanted(recipe)) then return old and { kept = true, summary = old } or nil end
  end
  if not M.wanted(recipe) then return nil end
  require("trainer.plan.check").check_config(recipe.model)
  local budget, what = require("trainer.plan.check").capacity(recipe, device)
  local card = device ~= "cpu" and require("trainer.core.card").of(device) or nil
  local record = M.choose(recipe, { device = device, budget = budget, budget_what = what, card = card,
    estimate_opts = { cuda_available = device ~= "cpu" }, path = resolved.path })
  for _, k in ipairs(M.KEYS) do set(recipe, k, schema.copy(get(record.recipe, k))) end
  recipe.batch.effective = recipe.batch.size * recipe.batch.accumulate
  if not quiet and not record.fits_as_written then io.stderr:write("trainer: ", M.describe(record), "\n") end
  return record
end

return M
