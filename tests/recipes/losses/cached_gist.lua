-- Cached GISTEmbedLoss (GradCache): gist.lua's triplets embedded 5 texts at a time.
return {
  extends = "gist.lua",
  loss = { cached = true, mini_batch = 5 },
}
