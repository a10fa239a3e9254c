-- trainer.core.op_binding: the Lua functions of the op table's plain ops, made from the table
-- itself (core/ops/op_list.h, read through tr_op_arg_info / tr_op_scalar_info) instead of
-- written out by hand. A plain op is one with an infer step in C (tr_op_has_infer): its
-- outputs' shapes and dtypes come from tr_op_infer, so the binding only allocates them and
-- runs the op (tr_op_invoke, the op table's checks and dispatch).
--
-- The function of op `name` takes the op's non-output tensors in signature order, then its
-- scalars in the C wrapper's order (a missing one takes the table's default), then `opts`:
--   opts.tag    the outputs' tag (default "activations");
--   opts.dtype  the dtype of the outputs whose dtype the caller may choose (a forward's
--               activation; default: what the infer step says, the input's);
-- and returns the outputs in signature order, new tensors on the inputs' device that the
-- caller frees. On a C error the outputs are freed and the error is raised naming the op.
--
-- Each function is compiled from a few lines of Lua source made here (load), so that a call
-- passes its arguments positionally and reuses this module's argument arrays: no table or
-- cdata is allocated per call beyond the outputs and their shapes.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local T = require("trainer.core.tensor")

local M = {}

local MAX_TENSORS, MAX_DIMS = 12, 8
local ROLE_OUT = 1
local t_args = ffi.new("tr_tensor*[?]", MAX_TENSORS)
local f_args = ffi.new("float[8]")
local i_args = ffi.new("int64_t[4]")
local shapes = ffi.new("int64_t[?]", MAX_TENSORS * MAX_DIMS)
local ndims = ffi.new("int[?]", MAX_TENSORS)
local dtypes = ffi.new("int[?]", MAX_TENSORS)

local CHOOSE = C.TR_INFER_CHOOSE
local dtype_names = {}
for dt = 0, C.TR_NDTYPES - 1 do dtype_names[dt] = ffi.string(C.tr_dtype_name(dt)) end

-- A new output: argument a's inferred shape and dtype, like's device.
local function output(a, like, opts)
  local shape = {}
  for d = 0, ndims[a] - 1 do shape[d + 1] = tonumber(shapes[a * MAX_DIMS + d]) end
  local dt = dtypes[a]
  local dtype
  if dt >= CHOOSE and opts.dtype then dtype = opts.dtype
  else dtype = dtype_names[dt % CHOOSE] end
  return T.empty(shape, { dtype = dtype, device = like:device(), tag = opts.tag or "activations" })
end

-- The op's description as Lua tables.
local function describe(i)
  local name, role, rule, nullable = ffi.new("const char*[1]"), ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("int[1]")
  local args, scalars = {}, {}
  local a = 0
  while C.tr_op_arg_info(i, a, name, role, rule, nullable) == 1 do
    args[#args + 1] = { name = ffi.string(name[0]), out = role[0] == ROLE_OUT, index = a }
    a = a + 1
  end
  local slot, index, dflt = ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("double[1]")
  local s = 0
  while C.tr_op_scalar_info(i, s, name, slot, index, dflt) == 1 do
    local d = tonumber(dflt[0])
    scalars[#scalars + 1] = { name = ffi.string(name[0]), array = slot[0] == string.byte("f") and "f_args" or "i_args",
      index = index[0], default = d == d and d or nil }
    s = s + 1
  end
  return args, scalars
end

-- The Lua source of op i's function (see the top of this file for what it does).
local function source(i, name, args, scalars)
  local params, lines, outs, first = {}, {}, {}, nil
  for _, a in ipairs(args) do
    if a.out then
      outs[#outs + 1] = a
      lines[#lines + 1] = ("t_args[%d] = nil"):format(a.index)
    else
      params[#params + 1] = a.name
      first = first or a.name
      lines[#lines + 1] = ("t_args[%d] = %s and %s:ptr() or nil"):format(a.index, a.name, a.name)
    end
  end
  for _, s in ipairs(scalars) do
    params[#params + 1] = s.name
    local value = s.default and ("%s or %.17g"):format(s.name, s.default) or s.name
    lines[#lines + 1] = ("%s[%d] = %s"):format(s.array, s.index, value)
  end
  params[#params + 1] = "opts"
  local names, frees = {}, {}
  for k, a in ipairs(outs) do names[k] = "o" .. k end
  for k = 1, #outs do frees[k] = ("o%d:free()"):format(k) end
  local body = {
    "local C, ctx, check, raise, output, empty, t_args, f_args, i_args, shapes, ndims, dtypes = ...",
    ("return function(%s)"):format(table.concat(params, ", ")),
    "  opts = opts or empty",
    "  " .. table.concat(lines, "\n  "),
    ("  check(C.tr_op_infer(ctx, %d, t_args, f_args, i_args, shapes, ndims, dtypes), %q)"):format(i, name),
  }
  for k, a in ipairs(outs) do
    body[#body + 1] = ("  local o%d = output(%d, %s, opts)"):format(k, a.index, first)
  end
  for k, a in ipairs(outs) do body[#body + 1] = ("  t_args[%d] = o%d:ptr()"):format(a.index, k) end
  body[#body + 1] = ("  if C.tr_op_invoke(ctx, %d, t_args, f_args, i_args) ~= 0 then"):format(i)
  body[#body + 1] = "    " .. table.concat(frees, "; ")
  body[#body + 1] = ("    raise(%q)"):format(name)
  body[#body + 1] = "  end"
  body[#body + 1] = "  return " .. table.concat(names, ", ")
  body[#body + 1] = "end"
  return table.concat(body, "\n")
end


-- name -> function, for every op of the table with an infer step.
function M.functions()
  local fns = {}
  for i = 0, C.tr_op_count() - 1 do
    if C.tr_op_has_infer(i) == 1 then
      local name = ffi.string(C.tr_op_name(i))
      local args, scalars = describe(i)
      local chunk = assert(load(source(i, name, args, scalars), "=op_binding:" .. name, "t", {}))
      fns[name] = chunk(C, runtime.ctx, runtime.check, runtime.raise, output, {}, t_args, f_args, i_args, shapes,
        ndims, dtypes)
    end
  end
  return fns
end

return M
