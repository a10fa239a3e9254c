-- trainer.train.beir: an information-retrieval evaluation set in BEIR's layout, read for
-- trainer.train.evaluate.ir.
--
--   beir.load{ folder = "data/scifact", split = "test" }
--   beir.load{ corpus = "c.jsonl", queries = "q.jsonl", qrels = "qrels.tsv" }
--     -> queries, corpus, relevant, summary
--
-- corpus.jsonl: one JSON object a line with `_id` and `text` (and an optional `title`; a
-- document's text is "title text" when the title is not empty, as sentence-transformers'
-- BEIR examples join them). queries.jsonl: `_id` and `text`. qrels/<split>.tsv: tab-separated
-- `query-id corpus-id score` (a first line naming the columns is skipped); a pair with score
-- > 0 is relevant. Ids are read as text (a JSON number id becomes its decimal text; a whole
-- number above 2^53, which JSON readers round, is refused: such an id must be a string).
-- Every problem is a user error naming the file and the line: a line that is not a JSON
-- object, a missing or repeated `_id`, a missing `text`, a qrel line without three fields
-- or naming a query or document the files do not have, an empty corpus.
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")

local M = {}

local function open(path, what)
  local f, why = io.open(path, "rb")
  if not f then errors.user("%s: %s: cannot open (%s)", what, path, tostring(why)) end
  return f
end

-- An id as text, or nil; a whole number is read exactly only up to 2^53 (beyond, the JSON
-- number is already rounded, and ("%d") wraps past 2^63): false for one beyond.
local function id_text(v)
  if type(v) == "string" and v ~= "" then return v end
  if type(v) == "number" then
    if v ~= math.floor(v) then return tostring(v) end
    if math.abs(v) > 2 ^ 53 then return false end
    return ("%d"):format(v)
  end
  return nil
end

-- The records of a JSONL file as { id =, text = } in file order, and the index id -> item.
local function read_jsonl(path, what, with_title)
  local f = open(path, what)
  local list, by_id = {}, {}
  local n = 0
  for line in f:lines() do
    n = n + 1
    if line:match("%S") then
      local ok, rec = pcall(json.decode, line, ("%s: line %d"):format(path, n))
      if not ok then f:close() error(rec, 0) end
      if type(rec) ~= "table" then
        f:close()
        errors.user("%s: line %d: expected a JSON object with _id and text", path, n)
      end
      local id = id_text(rec._id)
      if id == false then
        f:close()
        errors.user("%s: line %d: _id %.17g is a number too large to read exactly (above 2^53); write the id as a "
          .. "string", path, n, rec._id)
      end
      if not id then f:close() errors.user("%s: line %d: no _id (each line needs \"_id\" and \"text\")", path, n) end
      if by_id[id] then
        f:close()
        errors.user("%s: line %d: _id %q repeats line %d", path, n, id, by_id[id].line)
      end
      local text = rec.text
      if type(text) ~= "string" then
        f:close()
        errors.user("%s: line %d: _id %q has no \"text\" string", path, n, id)
      end
      if with_title and type(rec.title) == "string" and rec.title:match("%S") then
        text = rec.title .. " " .. text
      end
      local item = { id = id, text = text, line = n }
      list[#list + 1] = item
      by_id[id] = item
    end
  end
  f:close()
  return list, by_id
end

-- The relevant sets of a qrels TSV file, checked against the queries and the corpus.
local function read_qrels(path, q_by_id, c_by_id, what)
  local f = open(path, what)
  local relevant, n, pairs_n = {}, 0, 0
  for line in f:lines() do
    n = n + 1
    line = line:gsub("\r$", "")
    if line:match("%S") then
      local qid, cid, score = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)$")
      if not qid then
        f:close()
        errors.user("%s: line %d: expected three tab-separated fields query-id, corpus-id, score", path, n)
      end
      local s = tonumber(score)
      local header = not s and n == 1   -- the first line may name the columns
      if not s and not header then
        f:close()
        errors.user("%s: line %d: score %q is not a number", path, n, score)
      elseif s then
        if not q_by_id[qid] then
          f:close()
          errors.user("%s: line %d: query %q is not in the queries file", path, n, qid)
        end
        if not c_by_id[cid] then
          f:close()
          errors.user("%s: line %d: document %q is not in the corpus file", path, n, cid)
        end
        if s > 0 then
          relevant[qid] = relevant[qid] or {}
          if not relevant[qid][cid] then pairs_n = pairs_n + 1 end
          relevant[qid][cid] = true
        end
      end
    end
  end
  f:close()
  return relevant, pairs_n
end

-- The three paths of a spec (a BEIR folder and split, or the three files).
function M.paths(spec, what)
  what = what or "eval"
  if spec.folder then
    local split = spec.split or "test"
    return spec.folder .. "/corpus.jsonl", spec.folder .. "/queries.jsonl",
      ("%s/qrels/%s.tsv"):format(spec.folder, split)
  end
  if not (spec.corpus and spec.queries and spec.qrels) then
    errors.user("%s: an information-retrieval set needs folder (a BEIR folder) or corpus, queries and qrels", what)
  end
  return spec.corpus, spec.queries, spec.qrels
end

function M.load(spec, what)
  what = what or "eval"
  local cpath, qpath, rpath = M.paths(spec, what)
  local corpus, c_by_id = read_jsonl(cpath, what, true)
  if #corpus == 0 then errors.user("%s: the corpus is empty (no documents)", cpath) end
  local queries, q_by_id = read_jsonl(qpath, what, false)
  if #queries == 0 then errors.user("%s: no queries", qpath) end
  local relevant, npairs = read_qrels(rpath, q_by_id, c_by_id, what)
  local nq = 0
  for _, q in ipairs(queries) do if relevant[q.id] then nq = nq + 1 end end
  if nq == 0 then errors.user("%s: no query has a relevant document (a pair with score > 0)", rpath) end
  return queries, corpus, relevant, {
    corpus = cpath, queries = qpath, qrels = rpath, documents = #corpus, queries_count = #queries,
    queries_with_relevant = nq, relevant_pairs = npairs,
  }
end

return M
