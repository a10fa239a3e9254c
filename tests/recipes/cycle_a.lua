return { extends = "cycle_b.lua", model = { arch = "bert", config = "tiny", init = "random" } }
