-- trainer.core.sys: the system calls of core/sys/sys.h (checked file writes, folder walks,
-- the run folder's lock, clocks, the stop flag, the process), through the FFI.
--
-- A failure a caller may handle returns nil, message, reason: message names the file
-- ("PATH: No space left on device"; for a walk, the entry that failed), reason is the part
-- after "PATH: ", for callers whose own message names the file already. Misuse (removing ""
-- or "/", a broken clock) raises.
local ffi = require("ffi")
local C = require("trainer.core.ffi")

local M = {}

-- One error record for every call: Lua runs one call at a time, and each message is copied
-- out before the next call.
local err = ffi.new("tr_error")
local int64_out = ffi.new("int64_t[1]")
local uint64_out = ffi.new("uint64_t[1]")
local double_out = ffi.new("double[1]")

local function failed(path)
  local msg = ffi.string(err.msg)
  local reason = msg
  if path and msg:sub(1, #path + 2) == path .. ": " then reason = msg:sub(#path + 3) end
  return nil, msg, reason
end

-- The result of a call that returns only a status: true, or failed(path)'s three values.
local function done(rc, path)
  if rc ~= 0 then return failed(path) end
  return true
end

-- ---------------------------------------------------------------- files

-- Creates or truncates path with data; with sync, fsyncs it before the close.
function M.write_file(path, data, sync)
  return done(C.tr_sys_write_file(path, data, #data, sync and 1 or 0, err), path)
end

-- Appends data to the existing file path; returns the file's size after it.
function M.append_file(path, data)
  if C.tr_sys_append_file(path, data, #data, int64_out, err) ~= 0 then return failed(path) end
  return tonumber(int64_out[0])
end

function M.fsync(path) return done(C.tr_sys_fsync(path, err), path) end

-- Cuts path back to size bytes.
function M.truncate(path, size) return done(C.tr_sys_truncate(path, size, err), path) end

-- Bytes available to this user on the file system of path.
function M.free_space(path)
  if C.tr_sys_free_space(path, uint64_out, err) ~= 0 then return failed(path) end
  return tonumber(uint64_out[0])
end

function M.is_dir(path) return C.tr_sys_is_dir(path) ~= 0 end

local path_buf = ffi.new("char[4096]")
-- The canonical absolute path of path (links resolved) | nil, message.
function M.realpath(path)
  if C.tr_sys_realpath(path, path_buf, 4096, err) ~= 0 then return failed(path) end
  return ffi.string(path_buf)
end

-- ---------------------------------------------------------------- folders

function M.mkdir_p(path) return done(C.tr_sys_mkdir_p(path, err), path) end

-- Like rm -rf (a missing path is success; links are removed, not followed). Raises for
-- "" and "/".
function M.remove_tree(path)
  if path == "" or path == "/" then error(("remove_tree: refusing to remove '%s'"):format(path), 2) end
  return done(C.tr_sys_remove_tree(path, err), path)
end

-- { name, ... } sorted bytewise, without "." and ".." | nil, message.
function M.list_dir(path)
  local names = ffi.new("tr_sys_names")
  if C.tr_sys_list_dir(path, names, err) ~= 0 then return failed(path) end
  local out = {}
  for i = 0, tonumber(names.count) - 1 do out[i + 1] = ffi.string(names.names[i]) end
  C.tr_sys_names_free(names)
  return out
end

-- Copies the folder src into dst, following symbolic links (sys.h).
function M.copy_tree(src, dst) return done(C.tr_sys_copy_tree(src, dst, err), src) end

-- ---------------------------------------------------------------- locks

-- Takes the lock file path and writes text into it: fd | nil, "locked", the holder's text
-- | nil, message, reason.
function M.lock_file(path, text)
  local lock = ffi.new("tr_sys_lock")
  if C.tr_sys_lock_file(path, text, #text, lock, err) ~= 0 then return failed(path) end
  if lock.fd < 0 then return nil, "locked", ffi.string(lock.holder, lock.holder_len) end
  return lock.fd
end

function M.unlock_file(fd) return done(C.tr_sys_unlock_file(fd, err)) end

-- ---------------------------------------------------------------- clocks

-- Seconds on the monotonic clock: tokens/s, ETA, a run's wall time.
function M.now()
  if C.tr_sys_monotonic_seconds(double_out, err) ~= 0 then error("trainer.core.sys.now: " .. ffi.string(err.msg), 0) end
  return double_out[0]
end

-- Seconds of CPU this process has used, all its threads together.
function M.cpu_time()
  if C.tr_sys_process_cpu_seconds(double_out, err) ~= 0 then
    error("trainer.core.sys.cpu_time: " .. ffi.string(err.msg), 0)
  end
  return double_out[0]
end

-- Seconds since the Unix epoch | nil, message.
function M.wall_time()
  if C.tr_sys_wall_seconds(double_out, err) ~= 0 then return failed() end
  return double_out[0]
end

-- ---------------------------------------------------------------- stop flag

-- SIGINT and SIGTERM set the stop flag instead of ending the process.
function M.watch_stop()
  if C.tr_sys_watch_stop(err) ~= 0 then error(ffi.string(err.msg), 2) end
end

function M.unwatch_stop() C.tr_sys_unwatch_stop() end

-- The signal number that asked to stop, or false.
function M.stop_requested()
  local sig = C.tr_sys_stop_requested()
  return sig ~= 0 and sig or false
end

-- ---------------------------------------------------------------- process

function M.pid() return C.tr_sys_pid() end

function M.isatty(fd) return C.tr_sys_isatty(fd) ~= 0 end

local host_buf = ffi.new("char[256]")
-- This machine's name | nil, message.
function M.hostname()
  if C.tr_sys_hostname(host_buf, 256, err) ~= 0 then return failed() end
  return ffi.string(host_buf)
end

function M.version() return ffi.string(C.tr_sys_version()) end

return M
