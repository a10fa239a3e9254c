return { extends = "batch_hard_triplet.lua", loss = { name = "batch_semi_hard_triplet" } }
