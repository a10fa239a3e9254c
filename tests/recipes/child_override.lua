-- extends a parent two folders away and overrides a nested key and a list
return {
  extends = "../../recipes/base/lora_bf16.lua",
  model = { arch = "bert", config = "tiny", init = "random" },
  lora = { targets = { "query", "key", "value" } },
  optim = { lr = 5e-5 },
  hooks = { on_step = function(t, m) end },
}
