-- trainer.train.multi_data: several training datasets, as sentence-transformers' dict of datasets.
--
--   data = {
--     train = { nli = { file = "data/nli.jsonl", columns = { "anchor", "positive", "negative" } },
--               sts = { file = "data/sts.jsonl", prompts = { sentence1 = "query: " } } },
--     sampler = "proportional",   -- or "round_robin"
--   }
--
-- Every dataset is read by trainer.train.data with the data table's settings and its own file,
-- columns and prompts (and trained with its own loss, if it names one), and cut into batches by
-- its own loader; a batch never mixes datasets
-- (batch.dataset names its dataset). The sampler orders the datasets' batches within an epoch
-- as sentence-transformers' multi-dataset batch samplers:
--   proportional  every batch of every dataset once, the datasets drawn in a seeded random
--                 order (a dataset with twice the batches comes twice as often);
--   round_robin   one batch of each dataset in turn (sorted by name) until one runs out.
-- The datasets are taken in name order. The loader's state holds the epoch and the batches
-- taken in it; restore replays them, so a resumed run reads what the uninterrupted one would.
local errors = require("trainer.core.errors")
local data = require("trainer.train.data")

local M = {}

local PURPOSE_DATASETS = 4   -- tr_shuffle_below purposes: 1 rows, 2 batches, 3 NLI choices

local MultiDataset = {}
MultiDataset.__index = MultiDataset

local MultiLoader = {}
MultiLoader.__index = MultiLoader

-- The names of a data.train map, sorted.
function M.names(train)
  local names = {}
  for name in pairs(train) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- opens the datasets of recipe.data.train (a map); returns the datasets and the loader
function M.train(recipe, opts, nodup)
  local d = recipe.data
  local parts, names = {}, M.names(d.train)
  if #names == 0 then errors.user("data.train: an empty table; name at least one dataset, e.g. { nli = { file = ... } }") end
  for i, name in ipairs(names) do
    local spec = d.train[name]
    local cfg = {}
    for k, v in pairs(d) do cfg[k] = v end
    -- group_by_label orders each dataset's own batches; the others order the datasets
    cfg.train, cfg.sampler = nil, d.sampler == "group_by_label" and "group_by_label" or nil
    cfg.columns = spec.columns or d.columns
    cfg.prompts = spec.prompts
    if spec.format then cfg.format = spec.format end
    if spec.max_rows then cfg.max_rows = spec.max_rows end
    local ds = data.open(spec.file, cfg, { seed = recipe.seed, shuffle_buffer = opts.shuffle_buffer,
      label_map = opts.label_map })
    -- its prompts: its own, else data.prompts' entry for it (data.prompts keyed by dataset, as
    -- sentence-transformers' nested prompts), else data.prompts for every dataset
    local top = d.prompts
    if type(top) == "table" then
      local by_dataset = false
      for _, n in ipairs(names) do if top[n] ~= nil then by_dataset = true end end
      if by_dataset then top = top[name] end
    end
    ds.name, ds.prompts_spec = name, spec.prompts or top
    if spec.loss then
      -- the loss keys' defaults, as the recipe's own loss has them
      local schema, keys = require("trainer.recipe.schema"), require("trainer.recipe.keys")
      ds.loss_spec = schema.apply_defaults(keys.fields.loss, schema.copy(spec.loss))
    end
    -- a dataset with its own loss: no duplicate texts in a batch where that loss uses in-batch negatives
    local dnodup = nodup
    if ds.loss_spec then dnodup = data.in_batch_negatives(ds.loss_spec) end
    local ld = ds:loader { batch_size = recipe.batch.size * (opts.world or 1), seed = recipe.seed, shuffle = d.shuffle,
      bucket = d.bucket, no_duplicates = dnodup, length = opts.length }
    parts[i] = { name = name, ds = ds, loader = ld }
  end
  local n = 0
  for _, p in ipairs(parts) do n = n + p.ds.n end
  local mds = setmetatable({ parts = parts, n = n, multi = true }, MultiDataset)
  local ml = setmetatable({ parts = parts, sampler = (d.sampler == "round_robin" or d.sampler == "proportional") and d.sampler or "proportional", seed = recipe.seed or 42,
    epoch = 0, position = 0 }, MultiLoader)
  return mds, ml
end

function MultiDataset:summary()
  local out = { datasets = {} }
  for _, p in ipairs(self.parts) do out.datasets[p.name] = p.ds:summary() end
  out.rows = self.n
  return out
end

function MultiDataset:close()
  for _, p in ipairs(self.parts) do p.ds:close() end
end

-- The dataset of a batch (its part: name, ds, loader).
function MultiDataset:part(name)
  for _, p in ipairs(self.parts) do if p.name == name then return p end end
  return nil
end

-- The order of the datasets' batches in an epoch (proportional): a list of part indices.
function MultiLoader:_plan(epoch)
  local plan = {}
  for i, p in ipairs(self.parts) do
    for _ = 1, p.loader:batches_per_epoch() do plan[#plan + 1] = i end
  end
  local below = data.below
  for i = #plan - 1, 1, -1 do
    local j = below(self.seed, epoch, PURPOSE_DATASETS, #plan - 1 - i, i + 1)
    plan[i + 1], plan[j + 1] = plan[j + 1], plan[i + 1]
  end
  return plan
end

-- Every dataset's loader at the start of epoch.
function MultiLoader:_start(epoch)
  for _, p in ipairs(self.parts) do p.loader:restore({ epoch = epoch, position = 0 }) end
  self._plan_list = self.sampler == "proportional" and self:_plan(epoch) or nil
  self._k = 0
  self._open = true
end

-- One batch of the epoch, or nil at its end.
function MultiLoader:_take()
  if self.sampler == "round_robin" then
    local i = self._k % #self.parts + 1
    self._k = self._k + 1
    return self.parts[i].loader:next(), self.parts[i].name
  end
  while true do
    self._k = self._k + 1
    local i = self._plan_list[self._k]
    if i == nil then return nil end
    local b = self.parts[i].loader:next()
    -- with no_duplicates a dataset may end a batch early: the planned slot is skipped
    if b then return b, self.parts[i].name end
  end
end

function MultiLoader:next()
  if not self._open then self:_start(self.epoch) end
  local b, name = self:_take()
  if b == nil then
    self._open = false
    self.epoch, self.position = self.epoch + 1, 0
    return nil
  end
  self.position = self.position + 1
  b.dataset = name
  return b
end

-- Iterates the rest of the current epoch, as one dataset's loader does.
MultiLoader.batches = data.Loader.batches

function MultiLoader:batches_per_epoch()
  if self.sampler == "round_robin" then
    local least = math.huge
    for _, p in ipairs(self.parts) do least = math.min(least, p.loader:batches_per_epoch()) end
    return least * #self.parts
  end
  local n = 0
  for _, p in ipairs(self.parts) do n = n + p.loader:batches_per_epoch() end
  return n
end

function MultiLoader:state()
  local rows, bs = {}, nil
  for _, p in ipairs(self.parts) do rows[p.name] = p.ds.n bs = p.loader.batch_size end
  return { epoch = self.epoch, position = self.position, seed = self.seed, sampler = self.sampler, rows = rows,
           batch_size = bs, datasets = M.names(rows) }
end

function MultiLoader:restore(st)
  data.check_cursor(st)
  if type(st.rows) ~= "table" then
    errors.user("data.train: the run being resumed trained on one dataset, this recipe names several; resume with "
      .. "the same data")
  end
  for _, p in ipairs(self.parts) do
    if st.rows[p.name] ~= p.ds.n then
      errors.user("data.train.%s: the run being resumed saw %s rows of it, this file gives %d; resume with the same "
        .. "data", p.name, tostring(st.rows[p.name] or "no"), p.ds.n)
    end
  end
  if st.sampler and st.sampler ~= self.sampler then
    errors.user("data.sampler: the run being resumed used %q, this recipe %q; resume with the same sampler",
      st.sampler, self.sampler)
  end
  self.seed = st.seed or self.seed
  self.epoch, self.position = st.epoch, 0
  self:_start(self.epoch)
  data.replay_cursor(self, st, function() return self:_take() end)
end

function MultiLoader:close()
  for _, p in ipairs(self.parts) do p.loader:close() end
  self._open = false
end

return M
