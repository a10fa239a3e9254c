return { extends = "batch_hard_triplet.lua", loss = { name = "batch_all_triplet", distance = "cosine", margin = 0.5 } }
