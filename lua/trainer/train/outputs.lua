-- trainer.train.outputs: the files a run writes into its `out` folder (README.md, "Training"):
-- metrics.jsonl, summary.json, resolved_recipe.lua and checkpoint-STEP/ folders.
--
-- Invariant: no reader ever sees a half-written file. Every whole file is written to
-- "<path>.tmp", fsync'ed and renamed over its name (rename is atomic within a folder); a
-- checkpoint is built in "checkpoint-STEP.tmp/", its files and the folder fsync'ed, then
-- renamed when complete, so a folder named checkpoint-STEP is always whole. metrics.jsonl
-- grows by whole lines (one checked native append each, not Lua's io: see Metrics:write;
-- a failed append is cut back to the last whole line); on resume it is rewritten
-- (atomically) to the lines up to the resumed step. Every write, flush, fsync and close is
-- checked: a failure is a user error naming the file and the free space on its file
-- system (M.write_failed), exit 1.
--
-- Tests make a write fail on purpose with TRAINER_FAIL_WRITE=TEXT: every write through
-- this module to a path containing TEXT fails as on a full disk.
--
-- trainer_state (in each checkpoint) is a gzip (zlib) stream of a safetensors file: the
-- optimizer state tensors under "optimizer.<param>.<slot>" and, in its __metadata__
-- entry "trainer_state", JSON with step, micro-batch count, data cursor, scaler state,
-- RNG counters and the optimizer's step counts.
local ffi = require("ffi")
local json = require("trainer.core.json")
local native = require("trainer.native")
local fs = require("trainer.core.fs")
local sys = require("trainer.core.sys")
local errors = require("trainer.core.errors")
local pretty = require("trainer.cli.pretty")

local M = {}

local C = require("trainer.core.ffi") -- declares zlib's gz* functions (its system block)

-- ---------------------------------------------------------------- files
local function q(p) return "'" .. p:gsub("'", "'\\''") .. "'" end
M.quote = q

function M.mkdir(p)
  if sys.is_dir(p) then return end
  local ok, err = sys.mkdir_p(p)
  if not ok then errors.user("%s: cannot create the folder (%s; check permissions, or set out = ...)", p, err) end
end

-- Removes p and all it holds (a missing p is fine); a failure is a user error naming the entry.
function M.remove_tree(p)
  if p and p ~= "" and p ~= "/" then
    local ok, err = sys.remove_tree(p)
    if not ok then errors.user("%s: cannot remove it (%s); remove it by hand", p, err) end
  end
end

M.read = fs.must_read

-- "12.0 MiB free on the file system of runs/x" for the folder that holds path.
function M.free_text(path)
  local dir = path:match("^(.*)/[^/]*$") or "."
  if dir == "" then dir = "/" end
  while not sys.is_dir(dir) and dir:find("/") do dir = dir:match("^(.*)/[^/]*$") end
  local n = sys.free_space(dir)
  if not n then return "free space unknown on the file system of " .. dir end
  return ("%s free on the file system of %s"):format(require("trainer.recipe.schema").format_size(n), dir)
end

-- Raises the user error for a write to path that failed with why (strerror text).
function M.write_failed(path, why)
  errors.user("%s: cannot write (%s); %s. Nothing half-written was left under that name: free some space "
    .. "(or set out = ... to a folder on another disk) and run again.", path, tostring(why), M.free_text(path))
end

-- The injected failure of TRAINER_FAIL_WRITE (tests only): the error text, or nil.
local function injected(path)
  local pat = os.getenv("TRAINER_FAIL_WRITE")
  if pat and pat ~= "" and path:find(pat, 1, true) then
    return "No space left on device (injected by TRAINER_FAIL_WRITE)"
  end
  return nil
end
M.injected = injected

-- One checked append of data (whole records) to an append-only file f: f.path, f.size (its
-- size after its last whole record), f.is_open; append is the write (sys.append_file, or a
-- test's seam). Success sets f.size and returns true. A failure (TRAINER_FAIL_WRITE's
-- included) closes f, cuts the file back to f.size, so it never ends mid-record, and returns
-- false, the append's reason, and the truncate's result (true, or nil and its reason).
function M.append_records(f, append, data)
  local size, err = nil, injected(f.path)
  if not err then
    local msg, why
    size, msg, why = append(f.path, data)
    err = why or msg
  end
  if not size then
    f.is_open = false
    local tok, _, terr = sys.truncate(f.path, f.size)
    return false, err, tok, terr
  end
  f.size = size
  return true
end

-- fsyncs a file or folder; raises the write error naming it on failure.
function M.sync(path)
  local ok, _, why = sys.fsync(path)
  if not ok then M.write_failed(path, "fsync: " .. tostring(why)) end
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

-- Writes text to path through path.tmp + fsync + rename (+ fsync of the folder, so that
-- the rename survives a crash). Any failure removes path.tmp and raises write_failed.
function M.write_atomic(path, text)
  local tmp = path .. ".tmp"
  local ok, msg, err = nil, nil, injected(path)
  if not err then ok, msg, err = sys.write_file(tmp, text, true) end
  err = err or msg
  if not ok then os.remove(tmp) M.write_failed(path, err) end
  local rok, rerr = os.rename(tmp, path)
  if not rok then os.remove(tmp) M.write_failed(path, "rename: " .. tostring(rerr)) end
  M.sync(dirname(path))
end

function M.copy_file(src, dst)
  M.write_atomic(dst, M.read(src))
end

-- Builds the folder dst whole or not at all: fn(tmp, ...) writes it as dst .. ".tmp" (a
-- leftover of an earlier failure is removed first), which is then renamed over dst and the
-- parent folder fsync'ed. Any failure removes the .tmp folder, so dst stays the old folder
-- or becomes the whole new one; `what` names it in the message of a failed rename.
function M.build_folder(dst, what, fn, ...)
  local tmp = dst .. ".tmp"
  M.remove_tree(tmp)
  local ok, err = pcall(fn, tmp, ...)
  if not ok then M.remove_tree(tmp) error(err, 0) end
  M.remove_tree(dst)
  local rok, rerr = os.rename(tmp, dst)
  if not rok then
    M.remove_tree(tmp)
    errors.user("%s: cannot rename %s into place (%s)", dst, what, tostring(rerr))
  end
  M.sync(dirname(dst))
end

-- ---------------------------------------------------------------- gzip
function M.gzip_file(src, dst)
  local data = M.read(src)
  local tmp = dst .. ".tmp"
  local gz = C.gzopen(tmp, "wb6")
  if gz == nil then M.write_failed(dst, "cannot create " .. tmp) end
  local n = injected(dst) and -1 or C.gzwrite(gz, data, #data)
  local c = C.gzclose(gz)
  if n ~= #data or c ~= 0 then
    os.remove(tmp)
    M.write_failed(dst, injected(dst) or "gzip write or close failed")
  end
  M.sync(tmp)
  local ok, err = os.rename(tmp, dst)
  if not ok then os.remove(tmp) M.write_failed(dst, "rename: " .. tostring(err)) end
end

-- The decompressed bytes of the gzip file path, or nil and what is wrong with it (a file
-- without the gzip magic, which zlib would pass through as plain bytes; a damaged, cut or
-- empty stream; more than `limit` bytes, checked while reading, so a gzip bomb ends early).
function M.gunzip(path, limit)
  local f = io.open(path, "rb")
  if not f then return nil, "cannot open it" end
  local magic = f:read(2)
  f:close()
  if magic ~= "\31\139" then return nil, "not a gzip stream: it does not start with the gzip magic bytes" end
  local gz = C.gzopen(path, "rb")
  if gz == nil then return nil, "cannot open it" end
  local parts, total, buf = {}, 0, ffi.new("char[65536]")
  while true do
    local n = C.gzread(gz, buf, 65536)
    if n < 0 then C.gzclose(gz) return nil, "not a valid gzip stream" end
    if n == 0 then break end
    total = total + n
    if limit and total > limit then
      C.gzclose(gz)
      return nil, ("it decompresses to more than %d bytes, the most it may hold"):format(limit)
    end
    parts[#parts + 1] = ffi.string(buf, n)
  end
  -- gzclose reports a bad trailer (CRC or length) of a cut or altered stream
  if C.gzclose(gz) ~= 0 then return nil, "the gzip stream is cut short or its checksum does not match" end
  if total == 0 then return nil, "it is empty" end
  return table.concat(parts)
end

-- ---------------------------------------------------------------- metrics.jsonl
local Metrics = {}
Metrics.__index = Metrics

-- Opens out/metrics.jsonl for appending; keep_until: on resume, the lines with
-- step <= keep_until are kept and the rest dropped (nil: start a new file).
function M.open_metrics(out, keep_until)
  local path = out .. "/metrics.jsonl"
  local kept = {}
  if keep_until and fs.exists(path) then
    for line in io.lines(path) do
      local ok, obj = pcall(json.decode, line, path)
      if ok and type(obj) == "table" and type(obj.step) == "number" and obj.step <= keep_until then
        kept[#kept + 1] = line
      end
    end
  end
  local text = #kept > 0 and (table.concat(kept, "\n") .. "\n") or ""
  M.write_atomic(path, text)
  return setmetatable({ path = path, size = #text, is_open = true, append = sys.append_file }, Metrics)
end

-- Appends one line. Each line is one sys.append_file (open, write all, close, each
-- checked), not Lua's f:write + f:flush: under the JIT a failed fflush is retried by the
-- interpreter and then reports success (stdio had dropped the buffer), so lines were lost
-- on a full disk without an error. self.size is the file's size after the last whole line
-- (as the file system reports it); a failed append cuts the file back to it (so it never
-- ends mid-object) and raises write_failed. self.append is the seam tests replace.
function Metrics:write(obj)
  if not self.is_open then error(self.path .. ": written after it was closed", 2) end
  local ok, err, tok, terr = M.append_records(self, self.append, json.encode(obj) .. "\n")
  if not ok then
    if not tok then
      errors.user("%s: cannot write (%s); %s. Cutting it back to its last whole line failed too (truncate: %s): "
        .. "its last line may be cut off; delete that line, free some space and run again.", self.path,
        tostring(err), M.free_text(self.path), tostring(terr))
    end
    M.write_failed(self.path, err)
  end
end

-- Ends the appends. Every append already checked its own write and close, so nothing is
-- left to fail here (callers pass quietly = true for cleanup after another error; it no
-- longer changes anything).
function Metrics:close()
  self.is_open = false
end

-- The records of out/metrics.jsonl, one per line; a line that is not a JSON object is a
-- user error naming the file and that line (the record's number), not jansson's "line 1"
-- of the one-line text it was given.
function M.read_metrics(out)
  local path = out .. "/metrics.jsonl"
  local list = {}
  if not fs.exists(path) then return list end
  local n = 0
  for line in io.lines(path) do
    n = n + 1
    if line ~= "" then
      local v, err = native.json_decode(line, path)
      if err then
        local why = err:match("column %d+: .*$") or err
        if not line:find("}%s*$") then   -- records are whole objects: this one stops early
          errors.user("%s: line %d (record %d) is cut off (%s): the run stopped while writing it, or the disk was "
            .. "full; delete that line and run the command again", path, n, #list + 1, why)
        end
        errors.user("%s: line %d (record %d) is not valid JSON (%s); fix or delete that line", path, n, #list + 1, why)
      end
      if type(v) ~= "table" then
        errors.user("%s: line %d is %s, not a JSON object (metrics.jsonl holds one object per step)", path, n,
          tostring(v))
      end
      list[#list + 1] = v
    end
  end
  return list
end

-- ---------------------------------------------------------------- resolved_recipe.lua
local FN = "\1FUNCTION\1"

local function without_functions(v, seen)
  if type(v) == "function" then
    local info = debug.getinfo(v, "S")
    local src = info.what == "C" and "builtin" or (info.source:gsub("^[@=]", "") .. ":" .. info.linedefined)
    return FN .. src .. FN
  end
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local out = {}
  for k, x in pairs(v) do out[k] = without_functions(x, seen) end
  seen[v] = nil
  return out
end

-- The recipe as loadable Lua; each function is `nil --[[ function defined at FILE:LINE ]]`.
-- command (a list: the recipe path and its overrides) is recorded in a "-- command:" line
-- (JSON), so that `trainer resume` can reload a recipe's functions from their file.
function M.recipe_text(recipe, source, command, note)
  local body = pretty.literal(without_functions(recipe))
  body = body:gsub('"\\1FUNCTION\\1(.-)\\1FUNCTION\\1"', function(src)
    return "nil --[[ function defined at " .. src:gsub("%]%]", "] ]") .. " ]]"
  end)
  body = body:gsub('"\1FUNCTION\1(.-)\1FUNCTION\1"', function(src)
    return "nil --[[ function defined at " .. src:gsub("%]%]", "] ]") .. " ]]"
  end)
  return ("-- The fully resolved recipe of this run (from %s): defaults filled in, extends merged,\n" ..
    "-- command-line overrides applied. `trainer resume THIS_FOLDER` continues the run from its latest\n" ..
    "-- checkpoint; `trainer THIS_FILE` reruns it. Functions are not serialisable, so each is shown as a\n" ..
    "-- comment naming where it was defined (resume takes them from that file).\n" ..
    "-- command: %s\n%sreturn %s\n"):format(source, json.encode(command or { source }), note or "", body)
end

-- ---------------------------------------------------------------- the run's lock
-- A run holds out/.trainer.lock, flock'ed, for its whole life, so that two runs never write
-- into one folder at once. The kernel drops the lock when the process ends, however it ends
-- (kill -9 included), so a lock is never stale; the file itself stays (removing it would let
-- a run that opened it just before lock a file no one else sees). It holds the holder's pid
-- and command line, for the message a second run gets.
M.LOCK = ".trainer.lock"

-- The text of /proc/PID/NAME (pid: a number or "self"), or nil where there is none.
function M.proc_text(pid, name)
  return (fs.read(("/proc/%s/%s"):format(pid, name)))
end

-- This process's command line as ps shows it (the words joined by spaces).
local function own_command()
  local s = (M.proc_text("self", "cmdline") or ""):gsub("%z$", ""):gsub("%z", " ")
  return s ~= "" and s or "trainer"
end

-- Takes out's lock (out exists); returns the descriptor for M.unlock. A folder locked by
-- another run is a user error naming that run's pid and command.
function M.lock(out)
  local path = out .. "/" .. M.LOCK
  -- nil, "locked", the holder's text | nil, "PATH: reason", reason
  local fd, why, holder = sys.lock_file(path, ("pid %d\ncommand %s\n"):format(sys.pid(), own_command()))
  if fd then return fd end
  if why ~= "locked" then
    errors.user("%s: cannot create the run's lock file (%s); check the folder's permissions, or set out = ... to "
      .. "another folder", path, tostring(holder))
  end
  local pid = holder:match("pid (%d+)")
  local cmd = holder:match("command ([^\n]*)")
  errors.user("%s is in use by another run: process %s (%s) holds its lock %s, and two runs in one folder would mix "
    .. "their metrics and checkpoints; nothing was written. Wait for that run to end (or stop it: kill %s), or give "
    .. "this run its own folder: out=runs/NEW_NAME.", out, pid or "(pid not written yet)", cmd or "command unknown",
    path, pid or "PID")
end

function M.unlock(fd)
  if fd then sys.unlock_file(fd) end
end

-- ---------------------------------------------------------------- checkpoints
-- checkpoint-STEP folders of out, sorted by step: { { step = n, dir = path }, ... }
function M.checkpoints(out)
  local list = {}
  for _, name in ipairs(sys.list_dir(out) or {}) do -- a missing out has none
    local n = name:match("^checkpoint%-(%d+)$")
    if n then list[#list + 1] = { step = tonumber(n), dir = out .. "/" .. name } end
  end
  table.sort(list, function(a, b) return a.step < b.step end)
  return list
end

-- The files and folders a run writes into out (for overwrite = true): its recipe, metrics,
-- summary, report, TensorBoard event files (tb/) and checkpoints, finished or half-built. Anything else in out is the
-- user's and is left alone.
local RUN_FILES = { ["resolved_recipe.lua"] = true, ["metrics.jsonl"] = true, ["summary.json"] = true,
  ["report.svg"] = true, ["report.html"] = true, tb = true, best = true }
function M.run_files(out)
  local list = {}
  for _, name in ipairs(sys.list_dir(out) or {}) do
    local base = name:gsub("%.tmp$", "")
    if RUN_FILES[base] or base:match("^checkpoint%-%d+$") then list[#list + 1] = out .. "/" .. name end
  end
  return list
end

-- Removes all but the last `keep` checkpoints, never the folder `protect` (the best one).
function M.prune(out, keep, protect)
  local list = M.checkpoints(out)
  for i = 1, #list - keep do
    if list[i].dir ~= protect then M.remove_tree(list[i].dir) end
  end
end

return M
