-- `trainer keys`: the recipe key reference (the same as `trainer check --keys`).
return {
  usage = "trainer keys                              the recipe key reference (Markdown)",
  run = function()
    io.write(require("trainer.recipe.keys_doc").markdown())
    return 0
  end,
}
