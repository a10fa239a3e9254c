-- trainer.train.tensorboard: the run's TensorBoard event files, so that `tensorboard
-- --logdir runs` shows a run live, beside runs of the Hugging Face Trainer.
--
--   local tb = tensorboard.open(out, { step = N, resumed = bool, recipe_text = text })
--   tb:row(row)               the scalars of one metrics.jsonl row (one append, flushed)
--   tb:eval(step, scores)     eval/<metric> for each number in scores
--   tb:close()
--
-- Files: out/tb/events.out.tfevents.<seconds>.<host>.<pid>, one per process that trains
-- in the folder. TensorBoard reads a folder's event files in name order, so the seconds
-- field is the start time, or one past the newest event file's there when that is not
-- earlier (two runs within one second), and names sort in the order the files were
-- begun. A run that starts from step 0 removes the folder's earlier event files (it
-- replaces metrics.jsonl too). A resumed run from step N keeps them, cut back as
-- metrics.jsonl is to the events of steps <= N (a run that died after its last
-- checkpoint, or a resume from an earlier one, left later points; a torn last record is
-- dropped too), and adds its own file, which opens with SessionLog START at step N + 1
-- (TensorBoard's own marker of a restart, on which its reader drops any later point it
-- still holds), so the curve continues unbroken from the checkpoint's step.
--
-- Each file opens with the file_version event, then the resolved recipe as a text
-- summary (tag "recipe", at the step the file starts from). Tags (TRAIN_TAGS below) follow
-- the Hugging Face Trainer's TensorBoard names where it has one (train/loss,
-- train/learning_rate, train/grad_norm, train/epoch, eval/<metric>); the memory ledger is
-- memory/<tag>/current_bytes and memory/<tag>/peak_bytes (the step's peak) per allocator
-- tag, and memory/{allocated,reserved,peak_allocated}_bytes. Values are float32, as
-- TensorBoard's simple_value stores them.
--
-- Writes are checked as metrics.jsonl's are (trainer.outputs): the file is created under
-- a temporary name and renamed; each step's events are one sys.append_file (open,
-- write all, close, each checked), so they are in the file system, where TensorBoard
-- reads them, when the step is logged; a failed append cuts the file back to its last
-- whole record and stops the run with a user error naming the file and the free space
-- (exit 1). TRAINER_FAIL_WRITE=tfevents makes every write fail, for tests.
local sys = require("trainer.core.sys")
local errors = require("trainer.core.errors")
local outputs = require("trainer.train.outputs")
local memory = require("trainer.core.memory")
local proto = require("trainer.train.event_proto")

local M = {}

M.DIR = "tb"
M.PREFIX = "events.out.tfevents."

-- metrics.jsonl row key -> TensorBoard tag, in the order they are written.
M.TRAIN_TAGS = {
  { "loss", "train/loss" }, { "lr", "train/learning_rate" }, { "grad_norm", "train/grad_norm" },
  { "epoch", "train/epoch" }, { "tokens_per_s", "train/tokens_per_s" }, { "loss_scale", "train/loss_scale" },
  { "allreduce_s", "train/allreduce_s" },
  { "mem_allocated", "memory/allocated_bytes" }, { "mem_reserved", "memory/reserved_bytes" },
  { "mem_peak", "memory/peak_allocated_bytes" },
}

local function now()
  local t, err = sys.wall_time()
  if not t then error("trainer.tensorboard: " .. tostring(err), 0) end
  return t
end

-- The user error of a write to path that failed with why; cut_back: what happened to the
-- file's tail (nil when nothing of it was kept).
local function write_failed(path, why, cut_back)
  errors.user("%s: cannot write (%s); %s. %sFree some space (or set out = ... to a folder on another disk, or "
    .. "log.tensorboard = false to write no event files) and run again.", path, tostring(why),
    outputs.free_text(path), cut_back or "")
end

-- The event files in dir, sorted by name (the order TensorBoard reads them).
local function event_files(dir)
  local list, names, err = {}, sys.list_dir(dir)
  if not names then errors.user("%s: cannot list the folder (%s); check its permissions, or set out = ...", dir, err) end
  for _, name in ipairs(names) do
    if name:sub(1, #M.PREFIX) == M.PREFIX and not name:find("%.tmp$") then list[#list + 1] = name end
  end
  table.sort(list)
  return list
end
M.event_files = event_files

-- The file name for a file begun now: see the top of this file for the seconds field.
local function file_name(dir)
  local secs = math.floor(now())
  for _, name in ipairs(event_files(dir)) do
    local s = tonumber(name:sub(#M.PREFIX + 1):match("^(%d+)"))
    if s and s >= secs then secs = s + 1 end
  end
  local host = sys.hostname() or "localhost"   -- a name part only: a failure is not fatal
  host = host:gsub("[/%s]", "_")
  return ("%s%010d.%s.%d"):format(M.PREFIX, secs, host, sys.pid())
end

-- The resolved recipe as Markdown for the text plugin: a fenced Lua block.
local function recipe_markdown(text)
  return "```lua\n" .. text:gsub("\n$", "") .. "\n```\n"
end

-- Writes text to path through path.tmp, fsync and rename; a failure is write_failed.
local function write_whole(path, text)
  local tmp = path .. ".tmp"
  local ok, msg, err = nil, nil, outputs.injected(path)
  if not err then ok, msg, err = sys.write_file(tmp, text, true) end
  err = err or msg
  if not ok then os.remove(tmp) write_failed(path, err) end
  local rok, rerr = os.rename(tmp, path)
  if not rok then os.remove(tmp) write_failed(path, "rename: " .. tostring(rerr)) end
end

-- Cuts an earlier event file back to its whole records of steps <= step (rewritten whole,
-- and only when it holds anything else).
local function cut_back(path, step)
  local text = outputs.read(path)
  local list, keep = proto.records(text), {}
  for _, r in ipairs(list) do
    if proto.step_of(r.event) <= step then keep[#keep + 1] = text:sub(r.first, r.last) end
  end
  local kept = table.concat(keep)
  if kept ~= text then write_whole(path, kept) end
end

local Writer = {}
Writer.__index = Writer

function M.open(out, opts)
  local dir = out .. "/" .. M.DIR
  outputs.mkdir(dir)
  local step = opts.step or 0
  for _, name in ipairs(event_files(dir)) do
    if opts.resumed then
      cut_back(dir .. "/" .. name, step)
    else
      local ok, err = os.remove(dir .. "/" .. name)
      if not ok then
        errors.user("%s/%s: cannot remove this earlier run's event file (%s); remove it by hand, or give this run "
          .. "its own out folder", dir, name, tostring(err))
      end
    end
  end
  local path = dir .. "/" .. file_name(dir)
  local t = now()
  local head = { proto.file_version(t) }
  if opts.resumed then head[#head + 1] = proto.session_start(t, step + 1) end
  if opts.recipe_text then head[#head + 1] = proto.text(t, step, "recipe", recipe_markdown(opts.recipe_text)) end
  local text = table.concat(head)
  write_whole(path, text)   -- created whole under a temporary name, as every file of the run
  outputs.sync(dir)
  return setmetatable({ path = path, size = #text, is_open = true, append_fn = sys.append_file }, Writer)
end

-- Appends records (framed events) in one checked write; on failure cuts the file back to
-- its last whole record and raises the user error. After a failure the writer is closed.
function Writer:append(records)
  if not self.is_open then return end
  local ok, err, tok, terr = outputs.append_records(self, self.append_fn, records)
  if not ok then
    write_failed(self.path, err, tok and "The file was cut back to its last whole record, so TensorBoard reads "
      .. "all of it. " or ("Cutting it back to its last whole record failed too (truncate: %s); TensorBoard stops "
      .. "reading at the cut-off record. "):format(tostring(terr)))
  end
end

local function number(v) return type(v) == "number" end

-- The scalars of one metrics.jsonl row (trainer.train.run's step metrics), at row.step.
function Writer:row(row)
  local list = {}
  for _, kt in ipairs(M.TRAIN_TAGS) do
    local v = row[kt[1]]
    if number(v) then list[#list + 1] = { kt[2], v } end
  end
  for _, tag in ipairs(memory.tags) do
    local cur, peak = row.mem_by_tag and row.mem_by_tag[tag], row.mem_peak_by_tag and row.mem_peak_by_tag[tag]
    if number(cur) then list[#list + 1] = { "memory/" .. tag .. "/current_bytes", cur } end
    if number(peak) then list[#list + 1] = { "memory/" .. tag .. "/peak_bytes", peak } end
  end
  if #list > 0 then self:append(proto.scalars(now(), row.step, list)) end
end

-- eval/<name> for each number in scores, at step (0: the evaluation before training).
function Writer:eval(step, scores)
  local names = {}
  for k, v in pairs(scores or {}) do
    if type(k) == "string" and number(v) then names[#names + 1] = k end
  end
  if #names == 0 then return end
  table.sort(names)
  local list = {}
  for i, k in ipairs(names) do list[i] = { "eval/" .. k, scores[k] } end
  self:append(proto.scalars(now(), step, list))
end

-- Ends the appends (each one was complete and checked when it returned).
function Writer:close()
  self.is_open = false
end

return M
