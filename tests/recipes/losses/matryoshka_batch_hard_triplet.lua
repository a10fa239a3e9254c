-- MatryoshkaLoss around BatchHardTripletLoss (sizes for the tests' 32-wide tiny encoder).
return { extends = "batch_hard_triplet.lua",
         loss = { name = "matryoshka", inner = "batch_hard_triplet", margin = 1, dims = { 32, 16, 8 } } }
