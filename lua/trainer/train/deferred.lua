-- trainer.train.deferred: a loss value that stays where it was computed (on the device) until
-- the host needs the number, so that a training step does not wait for the device.
--
--   local d = require("trainer.train.deferred")
--   local v = d.leaf(loss_tensor)          -- a copy of a 1-element tensor (tag workspace)
--   v = d.mul(0.5, d.add(v, d.leaf(t2)))   -- arithmetic: numbers stay numbers
--   local x = d.value(v)                   -- the number: reads every leaf once, frees them
--
-- A deferred value is an expression tree over 1-element tensors; add, mul and div on two
-- plain numbers return the plain result, so the eager path (the CPU: losses return numbers)
-- runs exactly the arithmetic it ran before. value() evaluates the tree in double on the
-- host, in the same order, with each leaf read as the eager code reads it (tensor:item()), so
-- a deferred value is bitwise the eager one. The leaves are owned by the tree: value() or
-- free() releases them (free on an error path; a value is read at most once).
local T = require("trainer.core.tensor")

local M = {}

local Node = {}
Node.__index = Node

function M.is(x) return getmetatable(x) == Node end

function M.leaf(t)
  return setmetatable({ op = "leaf", t = T.keep(t:to({ tag = "workspace" })) }, Node)   -- the tree frees it
end

-- A leaf that takes t itself (a 1-element tensor the caller made for it and no longer uses):
-- no copy; the tree frees it.
function M.own(t)
  return setmetatable({ op = "leaf", t = T.keep(t) }, Node)
end

local function node(op, a, b) return setmetatable({ op = op, a = a, b = b }, Node) end

function M.add(a, b)
  if type(a) == "number" and type(b) == "number" then return a + b end
  return node("add", a, b)
end

-- c * a (c a number, a a number or a deferred value)
function M.mul(c, a)
  if type(a) == "number" then return c * a end
  return node("mul", c, a)
end

function M.div(a, n)
  if type(a) == "number" then return a / n end
  return node("div", a, n)
end

local function eval(x)
  if type(x) == "number" then return x end
  if x.op == "leaf" then
    local t = x.t
    x.t = nil
    local ok, v = pcall(t.item, t)
    t:free()
    if not ok then error(v, 0) end
    return v
  elseif x.op == "add" then
    local a = eval(x.a)
    return a + eval(x.b)
  elseif x.op == "mul" then return x.a * eval(x.b)
  else return eval(x.a) / x.b end
end

-- The number (reads the leaves: the one place a deferred value waits for the device); nil
-- stays nil (a step without a clip norm).
function M.value(x)
  if x == nil or type(x) == "number" then return x end
  local ok, v = pcall(eval, x)
  if not ok then M.free(x) error(v, 0) end
  return v
end

-- Releases the leaves without reading them.
function M.free(x)
  if type(x) ~= "table" then return end
  if x.op == "leaf" then
    if x.t and T.is_tensor(x.t) then x.t:free() end
    x.t = nil
  else
    M.free(x.a); M.free(x.b)
  end
end

return M
