return { extends = "base/does_not_exist.lua", model = { arch = "bert", config = "tiny", init = "random" } }
