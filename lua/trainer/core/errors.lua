-- trainer.core.errors: errors a user can act on.
--
-- A user error is a table { kind = "user" | "oom", msg = "..." } raised with error().
-- trainer.cli prints msg alone (no traceback: the message already names the file, key or
-- line and the fix) and exits 1, or 2 for "oom". Any other error is a bug in trainer and
-- is printed with its traceback.
local M = {}

local UserError = {}
UserError.__index = UserError
UserError.__tostring = function(e) return e.msg end

-- Raises a user error; extra arguments format msg like string.format.
function M.user(msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  error(setmetatable({ kind = "user", msg = msg }, UserError), 0)
end

-- Raises a user error about row `row` (1-based) of a batch: e.row is that row and
-- e.detail the message without its position, so that a caller that knows where the row
-- came from (trainer.step: the data file and line) can say that instead.
function M.user_row(row, msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  error(setmetatable({ kind = "user", msg = ("%s (row %d of the batch)"):format(msg, row), detail = msg, row = row },
    UserError), 0)
end

-- Raises an out-of-memory error carrying the allocator's ledger in msg.
function M.oom(msg)
  error(setmetatable({ kind = "oom", msg = msg }, UserError), 0)
end

function M.is_user_error(e)
  return getmetatable(e) == UserError
end

-- The text to show for any error object.
function M.message(e)
  if M.is_user_error(e) then return e.msg end
  return tostring(e)
end

return M
