-- trainer.core.card: the CUDA card behind a device (tr_cuda_device_card, core/ctx/ctx.h), in
-- words for `trainer plan`, the ledger and messages; and the check that a run's precision is
-- one the card computes in, made before anything is allocated (as the Hugging Face Trainer
-- refuses bf16 before Ampere).
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local errors = require("trainer.core.errors")
local runtime = require("trainer.core.runtime")

local M = {}

-- "12.4" from 12040; nil for 0 (unknown)
local function version(v)
  v = tonumber(v)
  if not v or v <= 0 then return nil end
  return ("%d.%d"):format(math.floor(v / 1000), math.floor(v % 1000 / 10))
end

-- The card of `device` ("cuda", "cuda:1", an ordinal): { name, major, minor, cc = "8.6",
-- memory_bytes, multiprocessors, driver = "12.4", runtime = "13.0" }; nil on the CPU or when
-- the device does not exist.
function M.of(device)
  local d = runtime.parse_device(device)
  if d == C.TR_CPU then return nil end
  local c = ffi.new("tr_cuda_card")
  if C.tr_cuda_device_card(d, c) ~= 0 then return nil end
  return { name = ffi.string(c.name), major = c.major, minor = c.minor, cc = ("%d.%d"):format(c.major, c.minor),
    memory_bytes = tonumber(c.memory_bytes), multiprocessors = c.multiprocessors,
    driver = version(c.driver_version), runtime = version(c.runtime_version) }
end

-- "NVIDIA A10, compute capability 8.6, 22.1 GiB" for a card table (M.of)
function M.describe(card)
  return ("%s, compute capability %s, %s"):format(card.name, card.cc,
    require("trainer.core.memory").format_size(card.memory_bytes))
end

-- Whether a card of compute capability major.minor computes in bf16 (sm_80, Ampere, and up).
function M.has_bf16(card) return card.major >= 8 end

-- Raises the user error for precision = "bf16" on a card (an M.of table) without bf16
-- arithmetic, naming the card and the fix; nothing for another precision. `device` names the
-- device ("cuda:0"), `where` the recipe.
function M.refuse_precision(card, device, precision, where)
  if precision ~= "bf16" or M.has_bf16(card) then return end
  errors.user("%sprecision = \"bf16\": %s is %s (compute capability %s), which has no bf16 arithmetic: bf16 "
    .. "needs compute capability 8.0 (Ampere) or newer. Use precision = \"fp16\" on this card (mixed precision "
    .. "with the dynamic loss scaler, e.g. `trainer RECIPE.lua precision=fp16`), or \"fp32\".",
    where and (where .. ": ") or "", device, card.name, card.cc)
end

-- M.refuse_precision for the card behind `device` (nothing on the CPU).
function M.check_precision(device, precision, where)
  local card = M.of(device)
  if card then M.refuse_precision(card, runtime.device_name(runtime.parse_device(device)), precision, where) end
end

return M
