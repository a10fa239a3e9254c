-- `trainer mine MODEL_DIR FILE`: hard negatives for the (anchor, positive) rows of FILE (JSONL,
-- TSV or CSV) by MODEL_DIR's embeddings, as sentence-transformers' mine_hard_negatives
-- (trainer.train.mine): JSONL on stdout (or --out FILE), one row per triplet
-- {anchor, positive, negative, scores = [positive's, negative's]} (the file's own column
-- names), or with --format n-tuple one per pair {anchor, positive, negative_1 .. negative_N,
-- scores}. A progress line on stderr (not with --quiet), then the counts.
local usage = "trainer mine MODEL_DIR FILE [--columns A,P] [--corpus FILE] [--num-negatives N] [--range-min N] "
  .. "[--range-max N] [--max-score X] [--min-score X] [--margin X] [--relative-margin X] [--sampling top|random] "
  .. "[--seed N] [--format triplet|n-tuple] [--query-prompt NAME] [--corpus-prompt NAME] [--batch N] "
  .. "[--chunk N] [--out FILE] [--device D] [--adapter DIR] [--quiet]   hard negatives, JSONL"

local function number(flags, name)
  local v = flags[name]
  if v == nil then return nil end
  local n = tonumber(v)
  if not n then require("trainer.core.errors").user("--%s must be a number, got %q", name, v) end
  return n
end

local function nonneg_int(flags, name)
  local n = number(flags, name)
  if n and (n < 0 or n ~= math.floor(n)) then
    require("trainer.core.errors").user("--%s must be a non-negative integer, got %q", name, flags[name])
  end
  return n
end

-- The texts of a corpus file: a .jsonl's "text" fields (a BEIR corpus: title and text joined
-- as the IR evaluator does), else one text a line.
local function read_corpus(path, cl)
  local lines = cl.read_lines(path)
  if not path:match("%.jsonl$") then return lines end
  local json, errors = require("trainer.core.json"), require("trainer.core.errors")
  local out = {}
  for i, line in ipairs(lines) do
    if line:match("%S") then
      local ok, r = pcall(json.decode, line)
      if not ok or type(r) ~= "table" or type(r.text) ~= "string" then
        errors.user("%s: line %d: a JSON object with a \"text\" string", path, i)
      end
      local title = type(r.title) == "string" and r.title:match("%S") and r.title or nil
      out[#out + 1] = title and (title .. " " .. r.text) or r.text
    end
  end
  return out
end

-- The first two text fields of a JSONL file's first row in the order they are written (as
-- sentence-transformers takes a dataset's first two columns), or nil.
local function first_two_fields(path)
  if not path:match("%.jsonl$") then return nil end
  local f = io.open(path, "rb")
  if not f then return nil end
  local line
  for l in f:lines() do if l:match("%S") then line = l break end end
  f:close()
  local ok, r = pcall(require("trainer.core.json").decode, line or "")
  if not ok or type(r) ~= "table" then return nil end
  local keys = {}
  for k, v in pairs(r) do
    if type(k) == "string" and type(v) == "string" then
      keys[#keys + 1] = { k = k, at = line:find('"' .. k .. '"', 1, true) or math.huge }
    end
  end
  if #keys < 2 then return nil end
  table.sort(keys, function(a, b) return a.at < b.at end)
  return { keys[1].k, keys[2].k }
end

return {
  usage = usage,
  run = function(args)
    local cl = require("trainer.cli.model_args")
    local errors = require("trainer.core.errors")
    local json = require("trainer.core.json")
    local tk = require("trainer.core.tokenizer")
    local prompts = require("trainer.models.prompts")
    local flags, _, model, tok, bs = cl.load_for("mine", "embedding", args, usage, {
      columns = "value", corpus = "value", ["num-negatives"] = "value", ["range-min"] = "value",
      ["range-max"] = "value", ["max-score"] = "value", ["min-score"] = "value", margin = "value",
      ["relative-margin"] = "value", sampling = "value", seed = "value", format = "value",
      ["query-prompt"] = "value", ["corpus-prompt"] = "value", chunk = "value", out = "value", quiet = "bool" })
    local file = flags._positional[2]
    local columns
    if flags.columns then
      columns = {}
      for c in flags.columns:gmatch("[^,]+") do columns[#columns + 1] = c end
      if #columns ~= 2 then errors.user("--columns takes the anchor and the positive column: A,P\nusage: %s", usage) end
    else
      columns = first_two_fields(file)
    end
    local ds = require("trainer.train.data").open(file, { columns = columns }, { seed = 0 })
    if ds.ntexts < 2 then
      errors.user("%s: the anchor and positive columns are needed (it has %s); name them with --columns A,P", file,
        table.concat(ds.columns, ", "))
    end
    local acol, pcol = ds.columns[1], ds.columns[2]
    local rows = {}
    for r in ds:iter() do rows[#rows + 1] = { r[1], r[2] } end
    ds:close()
    local qp = prompts.resolve(model, flags["query-prompt"] or "query")
    local cp = prompts.resolve(model, flags["corpus-prompt"] or "document")
    local function embed(texts, eopts)
      local pl = eopts and prompts.pool_length(model, tok, eopts.prompt) or 0
      local b = tok:batch(texts, { max_length = model.max_length, device = flags.device, prompt_length = pl })
      local ok, e = pcall(model.forward, model, b)
      tk.free_batch(b)
      if not ok then error(e, 0) end
      return e
    end
    local quiet = flags.quiet
    -- the bar is redrawn when it grows a mark (at most 31 times) and at the end
    local last_fill = -1
    local function progress(done, total, what)
      if quiet then return end
      local width = 30
      local fill = total > 0 and math.floor(width * done / total) or width
      if done < total and fill == last_fill then return end
      last_fill = fill
      io.stderr:write(("\rmine: %s [%s%s] %d/%d"):format(what, ("#"):rep(fill), ("."):rep(width - fill), done, total))
      if done >= total then io.stderr:write("\n") end
    end
    local out, stats = require("trainer.train.mine").run(embed, rows, {
      corpus = flags.corpus and read_corpus(flags.corpus, cl), num_negatives = cl.int(flags, "num-negatives", 3),
      range_min = nonneg_int(flags, "range-min"), range_max = cl.int(flags, "range-max", nil),
      max_score = number(flags, "max-score"), min_score = number(flags, "min-score"), margin = number(flags, "margin"),
      relative_margin = number(flags, "relative-margin"), sampling = flags.sampling, seed = number(flags, "seed"),
      format = flags.format, query_prompt = qp, corpus_prompt = cp, batch_size = bs,
      corpus_chunk_size = cl.int(flags, "chunk", nil), progress = progress })
    local f = io.stdout
    if flags.out then
      local err
      f, err = io.open(flags.out, "w")
      if not f then errors.user("%s: cannot write (%s)", flags.out, tostring(err)) end
    end
    local n = 0
    for _, r in ipairs(out) do
      local o = { [acol] = r[1], [pcol] = r[2], scores = r.scores }
      if r.negatives then
        for i, t in ipairs(r.negatives) do o["negative_" .. i] = t end
      else
        o.negative = r[3]
      end
      f:write(json.encode(o), "\n")
      n = n + 1
    end
    if f ~= io.stdout then f:close() end
    if not quiet then
      local sk = {}
      for _, k in ipairs({ "margin", "relative_margin", "max_score", "min_score" }) do
        if stats.skipped[k] > 0 then sk[#sk + 1] = ("%d by --%s"):format(stats.skipped[k], k:gsub("_", "-")) end
      end
      io.stderr:write(("mine: %d rows from %d anchors over a corpus of %d (range_max %d)%s%s\n"):format(n,
        stats.queries, stats.corpus, stats.range_max, #sk > 0 and ("; candidates skipped: " .. table.concat(sk, ", ")) or "",
        stats.missing > 0 and ("; %d anchors have fewer negatives than asked"):format(stats.missing) or ""))
    end
    tok:free()
    model:free()
    return 0
  end,
}
