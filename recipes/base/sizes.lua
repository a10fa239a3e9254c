-- recipes/base/sizes.lua — numbers a team agrees on once and shares: a module recipes
-- `require("sizes")` (found next to the requiring recipe).
return {
  gpu_budget = "24GiB",     -- the smallest card the team trains on
  max_length = 512,
}
