-- trainer.train.data: training and evaluation data — a Dataset over one JSONL, TSV or CSV file
-- (plain or gzip; core/io/reader.h reads it) shaped by the recipe's `data` table, and a
-- Loader that cuts it into seeded, resumable batches.
--
--   local data = require("trainer.train.data")
--   local ds = data.open("data/stsb_train.jsonl.gz", { columns = { "sentence1", "sentence2", "score" } },
--                        { seed = 42 })
--   local ld = ds:loader { batch_size = 16, seed = 42, shuffle = true }
--   for batch in ld:batches() do ... end      -- one epoch; batch = list of rows
--   local st = ld:state(); ...; ld:restore(st) -- exact resume, mid-epoch included
--   ds.n, ds.skipped, ds:summary(); ds:close()
--   data.train(recipe) -> dataset, loader;  data.eval(recipe) -> dataset or nil
--
-- A row is a Lua list: the text columns of `columns` in order, then the score or label
-- (the "target") when there is one; row.file and row.line say where it was read (rows
-- built by nli_triplets have none), so that a later error can name the line. The last column is the target when data.label_map
-- is given or its name is one of score, scores, label, labels, gold_label, similarity,
-- relatedness, relatedness_score, target; every other column must be a string.
-- A target is a number (a JSON number, or a TSV/CSV field that parses as one), or any
-- value that data.label_map maps (numbers are looked up by their decimal text, so a TSV
-- label "0" and a JSON label 0 both use the key "0"). data.filter(record) sees the record
-- as parsed (every field, before columns and label_map) and keeps it when it returns a
-- true value. max_rows keeps the first N rows that pass the filter, in file order.
--
-- Open reads the file once: it validates every line (a malformed one raises a user
-- error "FILE: line N: ..." naming the field, or with data.skip_bad = true is skipped and
-- counted in ds.skipped, the first ten messages in ds.bad), counts the rows (ds.n) and,
-- for a plain file, records the byte offset of each row in a C index (16 bytes a row,
-- outside the Lua heap). Memory does not grow with the file:
--   plain file, shuffled: each epoch visits the index in a seeded permutation (C), seeking
--     to each row — a full shuffle.
--   gzip file, shuffled: one streaming pass per epoch through a shuffle buffer of
--     `shuffle_buffer` rows (default 16384): each row out is drawn uniformly from the
--     buffer, which is refilled from the stream. A file with no more rows than the buffer
--     gets a full shuffle; larger files get a local one.
--   not shuffled: one streaming pass in file order.
--   build = "nli_triplets" is the exception: grouping by premise needs the whole file,
--     so the triplets are held in Lua (as sentence-transformers does).
-- All randomness is tr_shuffle_below (Philox keyed by the seed; see core/io/reader.h), so
-- the order is the same on every machine; purposes: 1 rows, 2 batches, 3 NLI choices.
--
-- build = "nli_triplets" follows sentence-transformers' examples/training/nli/
-- training_nli_v2.py: columns name (premise, hypothesis, label) (default exactly those);
-- every row adds hypothesis to premise's set for its label AND premise to hypothesis's
-- set (the script's "also add the opposite"); then for every sentence, in the order it
-- was first added, that has at least one entailment and one contradiction partner, two
-- triplets are emitted: (sentence, E1, C1) and (E2, sentence, C2), with E1, C1, E2, C2
-- drawn in that order uniformly from the partner lists (kept in first-seen order, where
-- Python iterates a set; drawn by the seeded Philox stream, where Python uses random).
-- Texts are stripped of surrounding whitespace as the script does. A label must be
-- entailment, neutral or contradiction, or be mapped to one by data.label_map.
--
-- Batching (ds:loader): rows come in epoch order; a window of `window` batches (default
-- 100) is gathered; with bucket = true it is sorted by length (bytes of the texts, or
-- opts.length(row)), cut into batches and the batches of the window shuffled, so padding
-- shrinks and batch order stays random. With no_duplicates = true (in-batch-negative
-- losses: data.train sets it for mnrl) no text appears twice in one batch: a row whose
-- text is already in the batch is deferred to a later batch, as sentence-transformers'
-- NoDuplicatesBatchSampler does. Every batch has batch_size rows except the last of an
-- epoch (dropped with drop_last = true) and, with no_duplicates, the last few when the
-- remaining rows collide. Resume: ld:state() is { epoch, position (batches already
-- yielded in that epoch), seed, rows, batch_size }; ld:restore(state) replays the epoch's
-- pipeline up to position, so the next batch is exactly the one an unbroken run yields.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local native = require("trainer.native")
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local utf8 = require("trainer.core.utf8")

local M = {}

M.DEFAULT_SHUFFLE_BUFFER = 16384
M.DEFAULT_WINDOW = 100

local sites = require("trainer.core.rng_sites")
local PURPOSE_ROWS, PURPOSE_BATCHES, PURPOSE_NLI = sites.shuffle.rows, sites.shuffle.batches, sites.shuffle.nli
local FORMAT_ID = { jsonl = 0, tsv = 1, csv = 2 }
local TARGET_NAMES = {
  score = true, scores = true, label = true, labels = true, gold_label = true, similarity = true,
  relatedness = true, relatedness_score = true, target = true, teacher = true, margin = true, margins = true,
}
local NLI_LABELS = { entailment = true, neutral = true, contradiction = true }
local DEFAULT_COLUMNS = {
  { "sentence1", "sentence2", "score" }, { "sentence1", "sentence2", "label" },
  { "premise", "hypothesis", "label" }, { "anchor", "positive", "negative" }, { "anchor", "positive" },
}
local SKIP_HINT = "; fix the line, or set data.skip_bad = true to skip and count malformed lines"

-- ---------------------------------------------------------------- helpers

local function raise(status, err)
  local msg = ffi.string(err.msg)
  if status == 2 then errors.oom(msg) end
  if status == 1 then errors.user("%s", msg) end
  error("data: " .. msg, 0)
end

-- Uniform integer in [0, n): a pure function of its arguments (core/io/reader.h).
local function below(seed, epoch, purpose, counter, n)
  return tonumber(C.tr_shuffle_below(seed, epoch, purpose, counter, n))
end
M.below = below

-- Seeded Fisher-Yates over list t in place, the same permutation tr_shuffle_perm makes.
M.below = below   -- trainer.train.multi_data draws its dataset order with it

local function shuffle_list(t, seed, epoch, purpose)
  local n = #t
  for i = n - 1, 1, -1 do
    local j = below(seed, epoch, purpose, n - 1 - i, i + 1)
    t[i + 1], t[j + 1] = t[j + 1], t[i + 1]
  end
  return t
end
M.shuffle_list = shuffle_list

local function open_reader(path, format)
  local out = ffi.new("tr_reader*[1]")
  local err = ffi.new("tr_error")
  local st = C.tr_reader_open(out, path, FORMAT_ID[format], 0, err)
  if st ~= 0 then raise(st, err) end
  return ffi.gc(out[0], C.tr_reader_close)
end

local function close_reader(r)
  if r ~= nil then
    ffi.gc(r, nil)
    C.tr_reader_close(r)
  end
end

local function key_of(v)
  if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%d"):format(v) end
  return tostring(v)
end

local function type_name(v)
  if v == json.null then return "null" end
  local t = type(v)
  if t == "table" then return "an object or array" end
  return t == "string" and "a string" or t == "number" and "a number" or t == "boolean" and "a boolean" or t
end

local function strip(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- The format of path: data.format unless "auto", else by extension (".gz" ignored).
function M.format_of(path, format)
  if format and format ~= "auto" then
    if not FORMAT_ID[format] then errors.user("data.format: unknown format %q (use jsonl, tsv or csv)", format) end
    return format
  end
  local base = path:lower():gsub("%.gz$", "")
  if base:match("%.jsonl$") or base:match("%.ndjson$") or base:match("%.json$") then return "jsonl" end
  if base:match("%.tsv$") or base:match("%.tab$") then return "tsv" end
  if base:match("%.csv$") then return "csv" end
  errors.user("%s: cannot tell the format from the file name; set data.format = \"jsonl\", \"tsv\" or \"csv\"", path)
end

-- ---------------------------------------------------------------- dataset

local Dataset = {}
Dataset.__index = Dataset
M.Dataset = Dataset

-- Records a malformed line: raises unless skip_bad.
function Dataset:_bad(msg)
  if not self.skip_bad then errors.user("%s%s", msg, SKIP_HINT) end
  self.skipped = self.skipped + 1
  if #self.bad < 10 then self.bad[#self.bad + 1] = msg end
end

-- The record of a tr_record as a Lua table, or nil and a message.
function Dataset:_decode(rec)
  local line = tonumber(rec.lineno)
  if self.format == "jsonl" then
    local v, err = native.json_decode(ffi.string(rec.text, rec.len), "")
    if err ~= nil then
      return nil, ("%s: line %d: invalid JSON (%s)"):format(self.path, line, err:match("column %d+: .*$") or err)
    end
    if type(v) ~= "table" or v[1] ~= nil then
      return nil, ("%s: line %d: expected a JSON object, got %s"):format(self.path, line,
        type(v) == "table" and "an array" or type_name(v))
    end
    return v
  end
  local t = {}
  for i = 0, rec.nfields - 1 do t[self.header[i + 1]] = ffi.string(rec.fields[i], rec.field_len[i]) end
  return t
end

-- Picks the columns (data.columns, else the first known layout the record has).
function Dataset:_resolve_columns(record)
  if self.columns then return end
  for _, cols in ipairs(DEFAULT_COLUMNS) do
    local ok = true
    for _, c in ipairs(cols) do if record[c] == nil then ok = false break end end
    if ok then self:_set_columns(cols) return end
  end
  local names = {}
  for k in pairs(record) do names[#names + 1] = tostring(k) end
  table.sort(names)
  errors.user("%s: set data.columns: the fields fed to the loss, texts first, then the score or label "
    .. "(this file's fields: %s)", self.path, table.concat(names, ", "))
end

function Dataset:_set_columns(cols)
  self.columns = cols
  local last = cols[#cols]
  self.target = #cols >= 2 and (self.label_map ~= nil or TARGET_NAMES[last] == true or self.build == "nli_triplets")
  self.ntexts = self.target and #cols - 1 or #cols
  if self.header then
    local have = {}
    for _, h in ipairs(self.header) do have[h] = true end
    for _, c in ipairs(cols) do
      if not have[c] then
        errors.user("%s: data.columns names '%s', which is not a column of this file (its header: %s)", self.path, c,
          table.concat(self.header, ", "))
      end
    end
  end
end

function Dataset:_target(v, name, line)
  if self.build == "nli_triplets" then
    if type(v) == "string" and NLI_LABELS[v] then return v end
    local m = self.label_map and self.label_map[key_of(v)]
    if NLI_LABELS[m] then return m end
    return nil, ("%s: line %d: field '%s' is %q, not entailment, neutral or contradiction (map it to one with "
      .. "data.label_map)"):format(self.path, line, name, tostring(v))
  end
  -- a list of numbers (or of such lists): a teacher's embeddings, margins or scores (mse, margin_mse)
  if type(v) == "table" and self.label_map == nil then
    for i, x in ipairs(v) do
      local ok = type(x) == "number"
      if type(x) == "table" then
        ok = #x > 0
        for _, y in ipairs(x) do if type(y) ~= "number" then ok = false end end
      end
      if not ok then
        return nil, ("%s: line %d: field '%s' item %d is not a number (or a list of numbers)"):format(self.path,
          line, name, i)
      end
    end
    if #v > 0 then return v end
  end
  if self.label_map then
    local m = self.label_map[key_of(v)]
    if m == nil then
      local keys = {}
      for k in pairs(self.label_map) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      return nil, ("%s: line %d: label %q (field '%s') has no entry in data.label_map (it maps %s); add it, or "
        .. "drop such rows with data.filter"):format(self.path, line, key_of(v), name, table.concat(keys, ", "))
    end
    return m
  end
  if type(v) == "number" then return v end
  if type(v) == "string" and self.format ~= "jsonl" then
    local n = tonumber(v)
    if n then return n end
    return nil, ("%s: line %d: field '%s' is %q, expected a number (for label names give data.label_map)")
      :format(self.path, line, name, v)
  end
  return nil, ("%s: line %d: field '%s' is %s, expected a number%s"):format(self.path, line, name, type_name(v),
    type(v) == "string" and " (for label names give data.label_map)" or "")
end

-- The row of a record, or nil and a message.
function Dataset:_extract(record, line)
  local row, cols = {}, self.columns
  for i = 1, #cols do
    local name, v = cols[i], record[cols[i]]
    if v == nil then return nil, ("%s: line %d: field '%s' is missing"):format(self.path, line, name) end
    if i > self.ntexts then
      local t, why = self:_target(v, name, line)
      if t == nil then return nil, why end
      row[i] = t
    elseif type(v) ~= "string" then
      return nil, ("%s: line %d: field '%s' is %s, expected a string"):format(self.path, line, name, type_name(v))
    else
      local bad = utf8.invalid_at(v)
      if bad then
        return nil, ("%s: line %d: field '%s' is not valid UTF-8 (%s; convert the file to UTF-8, e.g. with iconv)")
          :format(self.path, line, name, utf8.where(v, bad))
      end
      row[i] = v
    end
  end
  return row
end

-- Runs data.filter; an error inside it is the user's and names the line.
function Dataset:_keep(record, line)
  if not self.filter then return true end
  local ok, keep = pcall(self.filter, record)
  if not ok then
    errors.user("%s: line %d: data.filter raised an error: %s", self.path, line, errors.message(keep))
  end
  return keep and true or false
end

-- Reads the next good row from reader r, silently passing malformed and filtered lines
-- (open() has counted them). Returns row, rec or nil at the end.
function Dataset:_next_row(r, rec, err)
  while true do
    local st = C.tr_reader_next(r, rec, err)
    if st ~= 0 then
      if rec.malformed == 0 or not self.skip_bad then raise(st, err) end
    elseif rec.eof ~= 0 then
      return nil
    else
      local record = self:_decode(rec)
      local line = tonumber(rec.lineno)
      if record and self:_keep(record, line) then
        local row, why = self:_extract(record, line)
        if row then
          row.file, row.line = self.path, line   -- where the row came from, for messages
          return row, rec
        end
        if not self.skip_bad then errors.user("%s%s", why, SKIP_HINT) end
      elseif not record and not self.skip_bad then
        errors.user("%s: line %d changed since the file was opened; do not modify data files during a run",
          self.path, line)
      end
    end
  end
end

-- Opens path with cfg (a recipe `data` table: columns, format, build, label_map,
-- filter, max_rows, skip_bad) and opts { seed, shuffle_buffer, columns, label_map }: the
-- opts give what the caller knows better (eval columns; a classifier's label2id when
-- the recipe has no data.label_map).
function M.open(path, cfg, opts)
  cfg, opts = cfg or {}, opts or {}
  if type(path) ~= "string" then errors.user("data: a file path is required (data.train = \"data/x.jsonl.gz\")") end
  local self = setmetatable({
    path = path, format = M.format_of(path, cfg.format), build = cfg.build or "rows",
    label_map = cfg.label_map or opts.label_map, filter = cfg.filter, max_rows = cfg.max_rows, skip_bad = cfg.skip_bad == true,
    seed = opts.seed or 42, shuffle_buffer = opts.shuffle_buffer or M.DEFAULT_SHUFFLE_BUFFER,
    n = 0, skipped = 0, filtered = 0, bad = {},
  }, Dataset)
  if self.build ~= "rows" and self.build ~= "nli_triplets" then
    errors.user("data.build: unknown value %q (use \"rows\" or \"nli_triplets\")", tostring(self.build))
  end
  local r = open_reader(path, self.format)
  self.gzip = C.tr_reader_is_gzip(r) == 1
  local ncol = C.tr_reader_ncolumns(r)
  if ncol > 0 then
    self.header = {}
    for i = 0, ncol - 1 do self.header[i + 1] = ffi.string(C.tr_reader_column(r, i)) end
  end
  local cols = opts.columns or cfg.columns
  if self.build == "nli_triplets" then
    cols = cols or { "premise", "hypothesis", "label" }
    if #cols ~= 3 then
      errors.user("data.columns: build = \"nli_triplets\" takes three fields (premise, hypothesis, label), got %d", #cols)
    end
  end
  if cols then self:_set_columns(cols) end
  if not self.gzip and self.build == "rows" then
    local out, err = ffi.new("tr_row_index*[1]"), ffi.new("tr_error")
    local st = C.tr_row_index_new(out, err)
    if st ~= 0 then raise(st, err) end
    self.index = ffi.gc(out[0], C.tr_row_index_free)
  end
  local nli = self.build == "nli_triplets" and { groups = {}, order = {} } or nil
  local rec, err = ffi.new("tr_record"), ffi.new("tr_error")
  local ok, e = pcall(function()
    while not self.max_rows or self.n < self.max_rows do
      local st = C.tr_reader_next(r, rec, err)
      if st ~= 0 then
        if rec.malformed == 0 then raise(st, err) end
        self:_bad(ffi.string(err.msg))
      elseif rec.eof ~= 0 then
        break
      else
        local line = tonumber(rec.lineno)
        local record, why = self:_decode(rec)
        if not record then
          self:_bad(why)
        else
          self:_resolve_columns(record)
          if not self:_keep(record, line) then
            self.filtered = self.filtered + 1
          else
            local row
            row, why = self:_extract(record, line)
            if not row then
              self:_bad(why)
            else
              self.n = self.n + 1
              if self.index then
                local st2 = C.tr_row_index_push(self.index, rec.offset, rec.lineno, err)
                if st2 ~= 0 then raise(st2, err) end
              elseif nli then
                self:_nli_add(nli, strip(row[1]), strip(row[2]), row[3])
                self:_nli_add(nli, strip(row[2]), strip(row[1]), row[3])
              end
            end
          end
        end
      end
    end
  end)
  close_reader(r)
  if not ok then
    self:close()
    error(e, 0)
  end
  self.input_rows = self.n   -- rows read from the file (before NLI grouping)
  if nli then self:_nli_build(nli) end
  if self.n == 0 then
    local first = self.bad[1] and (" The first skipped line: " .. self.bad[1]) or ""
    errors.user("%s: no usable rows (%d skipped as malformed, %d dropped by data.filter).%s", path, self.skipped,
      self.filtered, first)
  end
  return self
end

-- ---------------------------------------------------------------- NLI triplets

function Dataset:_nli_add(nli, s1, s2, label)
  local g = nli.groups[s1]
  if not g then
    g = { entailment = {}, contradiction = {}, seen = {} }
    nli.groups[s1] = g
    nli.order[#nli.order + 1] = s1
  end
  local list = g[label]
  if list and not g.seen[label .. "\0" .. s2] then
    g.seen[label .. "\0" .. s2] = true
    list[#list + 1] = s2
  end
end

function Dataset:_nli_build(nli)
  local items, counter = {}, 0
  local function choice(list)
    local j = below(self.seed, 0, PURPOSE_NLI, counter, #list)
    counter = counter + 1
    return list[j + 1]
  end
  for _, s in ipairs(nli.order) do
    local g = nli.groups[s]
    if #g.entailment > 0 and #g.contradiction > 0 then
      local e1, c1 = choice(g.entailment), choice(g.contradiction)
      items[#items + 1] = { s, e1, c1 }
      local e2, c2 = choice(g.entailment), choice(g.contradiction)
      items[#items + 1] = { e2, s, c2 }
    end
  end
  self.items = items
  self.n = #items
  self.columns = { "anchor", "positive", "negative" }
  self.target, self.ntexts = false, 3
end

-- ---------------------------------------------------------------- epoch row streams

-- Returns next() -> row or nil, and close(), over the dataset's rows in epoch order.
function Dataset:_stream(epoch, shuffle, seed)
  seed = seed or self.seed
  if self.items then
    local perm = {}
    for i = 1, self.n do perm[i] = i end
    if shuffle then shuffle_list(perm, seed, epoch, PURPOSE_ROWS) end
    local k = 0
    return function()
      k = k + 1
      local i = perm[k]
      return i and self.items[i] or nil
    end, function() end
  end
  local rec, err = ffi.new("tr_record"), ffi.new("tr_error")
  local r = open_reader(self.path, self.format)
  local closed = false
  local function close()
    if not closed then closed = true close_reader(r) end
  end
  local produced = 0
  if shuffle and self.index then
    local st = C.tr_row_index_set_order(self.index, 1, seed, epoch, PURPOSE_ROWS, err)
    if st ~= 0 then close() raise(st, err) end
    self._order_key = seed .. ":" .. epoch
    local key = self._order_key
    return function()
      if closed or produced >= self.n then close() return nil end
      if self._order_key ~= key then   -- another stream re-ordered the shared index
        C.tr_row_index_set_order(self.index, 1, seed, epoch, PURPOSE_ROWS, err)
        self._order_key = key
      end
      local i = C.tr_row_index_order(self.index, produced)
      st = C.tr_reader_seek(r, C.tr_row_index_offset(self.index, i), C.tr_row_index_lineno(self.index, i), err)
      if st ~= 0 then close() raise(st, err) end
      local row = self:_next_row(r, rec, err)
      if not row then close() errors.user("%s: the file is shorter than when it was opened; do not modify data files during a run", self.path) end
      produced = produced + 1
      return row
    end, close
  end
  local function next_in_order()
    if closed or produced >= self.n then close() return nil end
    local row = self:_next_row(r, rec, err)
    if not row then close() return nil end
    produced = produced + 1
    return row
  end
  if not shuffle then return next_in_order, close end
  local buf, cap, counter = {}, self.shuffle_buffer, 0
  return function()
    while #buf < cap do
      local row = next_in_order()
      if not row then break end
      buf[#buf + 1] = row
    end
    local n = #buf
    if n == 0 then return nil end
    local j = below(seed, epoch, PURPOSE_ROWS, counter, n) + 1
    counter = counter + 1
    local row = buf[j]
    buf[j] = buf[n]
    buf[n] = nil
    return row
  end, close
end

-- Iterates every row once in file order (evaluation): for row in ds:iter() do ... end
function Dataset:iter()
  local nxt = self:_stream(0, false)
  return nxt
end

function Dataset:summary()
  return { path = self.path, format = self.format, gzip = self.gzip, build = self.build, rows = self.n,
           input_rows = self.input_rows, skipped = self.skipped, filtered = self.filtered, first_bad = self.bad[1] }
end

function Dataset:close()
  if self.index ~= nil then
    ffi.gc(self.index, nil)
    C.tr_row_index_free(self.index)
    self.index = nil
  end
end

-- ---------------------------------------------------------------- loader

local Loader = {}
Loader.__index = Loader
M.Loader = Loader

-- opts: batch_size (required), seed (default the dataset's), shuffle (true), bucket
-- (false), no_duplicates (false), window (batches per bucketing window, 100),
-- drop_last (false), length (function(row) -> number, for bucketing), group_by_label (false:
-- Loader:_grouped's batches, several rows of each label per batch).
function Dataset:loader(opts)
  opts = opts or {}
  local b = opts.batch_size
  if type(b) ~= "number" or b < 1 or b ~= math.floor(b) then
    errors.user("data loader: batch_size must be a positive integer (batch.size), got %s", tostring(b))
  end
  local ld = setmetatable({
    ds = self, batch_size = b, seed = opts.seed or self.seed, shuffle = opts.shuffle ~= false,
    bucket = opts.bucket == true, no_duplicates = opts.no_duplicates == true,
    group_by_label = opts.group_by_label == true,
    window = opts.window or M.DEFAULT_WINDOW, drop_last = opts.drop_last == true, length = opts.length,
    epoch = 0, position = 0,
  }, Loader)
  return ld
end

function Loader:_text_length(row)
  if self.length then return self.length(row) end
  local n = 0
  for i = 1, self.ds.ntexts do n = n + #row[i] end
  return n
end

-- Cuts pool into batches; returns batches and the rows to carry into the next window.
function Loader:_cut(pool, exhausted)
  local B, batches = self.batch_size, {}
  if not self.no_duplicates then
    local i = 1
    while #pool - i + 1 >= B do
      local b = {}
      for k = 0, B - 1 do b[k + 1] = pool[i + k] end
      batches[#batches + 1] = b
      i = i + B
    end
    local rest = {}
    for k = i, #pool do rest[#rest + 1] = pool[k] end
    if exhausted then
      if #rest > 0 and not self.drop_last then batches[#batches + 1] = rest end
      return batches, {}
    end
    return batches, rest
  end
  local ntexts, remaining = self.ds.ntexts, pool
  while #remaining > 0 do
    local batch, seen, rest = {}, {}, {}
    for _, row in ipairs(remaining) do
      local clash = false
      if #batch < B then
        for t = 1, ntexts do if seen[row[t]] then clash = true break end end
      end
      if #batch < B and not clash then
        batch[#batch + 1] = row
        for t = 1, ntexts do seen[row[t]] = true end
      else
        rest[#rest + 1] = row
      end
    end
    if #batch < B then
      if not exhausted then return batches, remaining end
      if self.drop_last then return batches, {} end
    end
    batches[#batches + 1] = batch
    remaining = rest
  end
  return batches, {}
end

-- group_by_label: the batches of one epoch as sentence-transformers' GroupByLabelBatchSampler
-- makes them, for losses that compare the rows of a batch by label (batch_*_triplet): rows
-- are grouped by their label (the field after the texts), labels with fewer than 2 rows left
-- out; each label's rows are shuffled and cut to an even count; then round by round, in a
-- label order shuffled each round, every label still holding rows gives 2, until fewer than 2
-- labels do; the stream is cut into batches, the last one kept when it has at least 4 rows
-- (and drop_last is false). Seeded per epoch like the other orders.
function Loader:_grouped(epoch)
  local B = self.batch_size
  if B < 4 or B % 2 == 1 then
    errors.user("data.sampler = \"group_by_label\": batch.size must be an even number >= 4, got %d", B)
  end
  local src, close = self.ds:_stream(epoch, false, self.seed)
  local groups, labels, at = {}, {}, self.ds.ntexts + 1
  while true do
    local row = src()
    if row == nil then break end
    local y = row[at]
    if y == nil then
      errors.user("data.sampler = \"group_by_label\": rows need a label after their %d text column(s) (data.columns)",
        self.ds.ntexts)
    end
    if not groups[y] then groups[y] = {} labels[#labels + 1] = y end
    local g = groups[y]
    g[#g + 1] = row
  end
  close()
  local counter = 0
  local function permute(t)
    for i = #t - 1, 1, -1 do
      local j = below(self.seed, epoch, PURPOSE_BATCHES, counter, i + 1)
      counter = counter + 1
      t[i + 1], t[j + 1] = t[j + 1], t[i + 1]
    end
  end
  local queues, remaining = {}, {}
  for _, y in ipairs(labels) do
    local g = groups[y]
    if #g >= 2 then
      permute(g)
      if #g % 2 == 1 then g[#g] = nil end
      queues[y] = { rows = g, next = 1 }
      remaining[#remaining + 1] = y
    end
  end
  if #remaining < 2 then
    errors.user("data.sampler = \"group_by_label\": needs at least 2 labels with 2 or more rows each, the data has %d",
      #remaining)
  end
  local batches, batch, last = {}, {}, nil
  while #remaining >= 2 do
    permute(remaining)
    -- consecutive pairs within a batch come from different labels
    if #batch > 0 and remaining[1] == last then remaining[1], remaining[2] = remaining[2], remaining[1] end
    for _, y in ipairs(remaining) do
      local q = queues[y]
      batch[#batch + 1], batch[#batch + 2] = q.rows[q.next], q.rows[q.next + 1]
      q.next = q.next + 2
      if #batch >= B then
        local rest = {}
        for k = B + 1, #batch do rest[#rest + 1] = batch[k] batch[k] = nil end
        batches[#batches + 1], batch = batch, rest
      end
    end
    last = remaining[#remaining]
    local still = {}
    for _, y in ipairs(remaining) do if queues[y].next <= #queues[y].rows then still[#still + 1] = y end end
    remaining = still
  end
  if not self.drop_last and #batch >= 4 then batches[#batches + 1] = batch end
  local i = 0
  return function()
    i = i + 1
    return batches[i]
  end, function() end
end

-- The pipeline of one epoch: next() -> batch or nil, close().
function Loader:_pipeline(epoch)
  if self.group_by_label then return self:_grouped(epoch) end
  local src, close = self.ds:_stream(epoch, self.shuffle, self.seed)
  local ready, ri, nready, carry, exhausted, bcounter = {}, 1, 0, {}, false, 0
  local target = self.window * self.batch_size
  local function refill()
    while ri > nready do
      if exhausted and #carry == 0 then return false end
      local pool, pulled = carry, 0
      carry = {}
      while (#pool < target or pulled < self.batch_size) and not exhausted do
        local row = src()
        if row == nil then exhausted = true else pool[#pool + 1] = row pulled = pulled + 1 end
      end
      if self.bucket then
        local len, idx = {}, {}
        for i = 1, #pool do len[i] = self:_text_length(pool[i]) idx[i] = i end
        table.sort(idx, function(a, b2)
          if len[a] ~= len[b2] then return len[a] < len[b2] end
          return a < b2
        end)
        local sorted = {}
        for i = 1, #idx do sorted[i] = pool[idx[i]] end
        pool = sorted
      end
      local batches
      batches, carry = self:_cut(pool, exhausted)
      if self.bucket then
        local n = #batches
        for i = n - 1, 1, -1 do
          local j = below(self.seed, epoch, PURPOSE_BATCHES, bcounter, i + 1)
          bcounter = bcounter + 1
          batches[i + 1], batches[j + 1] = batches[j + 1], batches[i + 1]
        end
      end
      ready, ri, nready = batches, 1, #batches
    end
    return true
  end
  return function()
    if not refill() then close() return nil end
    local b = ready[ri]
    ready[ri] = false   -- let the batch go (not nil: the count stays nready)
    ri = ri + 1
    return b
  end, close
end

-- The next batch of the current epoch, or nil when the epoch is over (the cursor then
-- moves to the start of the next epoch).
function Loader:next()
  if not self._next then self._next, self._close = self:_pipeline(self.epoch) end
  local b = self._next()
  if b == nil then
    self._close()
    self._next, self._close = nil, nil
    self.epoch, self.position = self.epoch + 1, 0
    return nil
  end
  self.position = self.position + 1
  return b
end

-- Iterates the rest of the current epoch: for batch in ld:batches() do ... end
function Loader:batches()
  return function() return self:next() end
end

-- Batches in one epoch: exact without no_duplicates and group_by_label; with either, epoch 0's count from a
-- dry run (other epochs may differ by a batch or two).
function Loader:batches_per_epoch()
  if not self.no_duplicates and not self.group_by_label then
    local n, B = self.ds.n, self.batch_size
    return self.drop_last and math.floor(n / B) or math.ceil(n / B)
  end
  if not self._count then
    local nxt, close = self:_pipeline(0)
    local k = 0
    while nxt() do k = k + 1 end
    close()
    self._count = k
  end
  return self._count
end

function Loader:state()
  return { epoch = self.epoch, position = self.position, seed = self.seed, rows = self.ds.n,
           batch_size = self.batch_size }
end

-- Raises the user error for a saved data cursor that is not { epoch, position, ... } (a
-- loader's state(), here or in trainer.train.multi_data).
function M.check_cursor(st)
  if type(st) ~= "table" or type(st.epoch) ~= "number" or type(st.position) ~= "number" then
    errors.user("data: cannot restore the data cursor: expected { epoch, position, ... }, got %s", tostring(st))
  end
end

-- Takes the st.position batches a restored loader's epoch had given before st was saved
-- (take(): the epoch's next batch, nil at its end), counting them in loader.position.
function M.replay_cursor(loader, st, take)
  for _ = 1, st.position do
    if take() == nil then
      errors.user("data: the saved cursor (epoch %d, batch %d) is past the end of the epoch", st.epoch, st.position)
    end
    loader.position = loader.position + 1
  end
end

-- Puts the cursor where state() was taken; the next batch is the one that followed.
function Loader:restore(st)
  M.check_cursor(st)
  if st.rows and st.rows ~= self.ds.n then
    errors.user("%s: the run being resumed saw %d rows, this file gives %d; resume with the same data and data "
      .. "settings (or start a new run)", self.ds.path, st.rows, self.ds.n)
  end
  if st.batch_size and st.batch_size ~= self.batch_size then
    errors.user("data: the run being resumed used batch.size = %d, this recipe %d; resume with the same batch size",
      st.batch_size, self.batch_size)
  end
  if self._close then self._close() end
  self.seed = st.seed or self.seed
  self.epoch, self.position = st.epoch, 0
  self._next, self._close = self:_pipeline(self.epoch)
  M.replay_cursor(self, st, self._next)
end

function Loader:close()
  if self._close then self._close() end
  self._next, self._close = nil, nil
end

-- A batch as columns: { {col 1 of every row}, {col 2 ...}, ... }.
function M.columns(batch)
  local out = {}
  for c = 1, #batch[1] do
    local col = {}
    for i = 1, #batch do col[i] = batch[i][c] end
    out[c] = col
  end
  return out
end

-- ---------------------------------------------------------------- from a recipe

local IN_BATCH_NEGATIVES = { mnrl = true, gist = true }

-- Whether a loss spec ranks against in-batch negatives (its batches hold no text twice); a
-- wrapper (matryoshka, adaptive_layer) as its inner loss.
function M.in_batch_negatives(loss)
  return IN_BATCH_NEGATIVES[loss.name] or ((loss.name == "matryoshka" or loss.name == "adaptive_layer")
    and IN_BATCH_NEGATIVES[loss.inner]) or false
end

-- The training dataset and loader of a recipe (recipe.data.train required; the schema's
-- defaults fill what a partial one leaves out);
-- opts { label_map, length, shuffle_buffer, world } (length: tokens of a row, for bucketing;
-- world: ranks under mpirun, whose global batches of batch.size x world rows trainer.dist
-- shards, every rank reading the same ones).

function M.train(recipe, opts)
  opts = opts or {}
  recipe = require("trainer.recipe.keys").with_defaults(recipe)
  local d = recipe.data or {}
  if not d.train then errors.user("data.train: no training file given; set data.train = \"data/x.jsonl.gz\"") end
  local nodup = M.in_batch_negatives(recipe.loss)
  -- several datasets by name (trainer.train.multi_data)
  if type(d.train) == "table" then return require("trainer.train.multi_data").train(recipe, opts, nodup) end
  if d.sampler == "proportional" or d.sampler == "round_robin" then
    errors.user("data.sampler = %q orders several training datasets, and data.train names one file; name several "
      .. "(data.train = { a = { file = ... }, b = { file = ... } }) or leave data.sampler out", d.sampler)
  end
  local ds = M.open(d.train, d, { seed = recipe.seed, shuffle_buffer = opts.shuffle_buffer, label_map = opts.label_map })
  local ld = ds:loader {
    batch_size = recipe.batch.size * (opts.world or 1), seed = recipe.seed, shuffle = d.shuffle,
    bucket = d.bucket, no_duplicates = nodup, length = opts.length, group_by_label = d.sampler == "group_by_label",
  }
  return ds, ld
end

-- The evaluation dataset of a recipe (data.eval with data.eval_columns), or nil;
-- opts { label_map }.
function M.eval(recipe, opts)
  local d = recipe.data or {}
  if not d.eval then return nil end
  return M.open(d.eval, { columns = d.eval_columns, format = d.format, label_map = d.label_map,
                          skip_bad = d.skip_bad }, { seed = recipe.seed, label_map = (opts or {}).label_map })
end

return M
