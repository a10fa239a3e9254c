-- the smallest valid recipe: a random tiny BERT
return { model = { arch = "bert", config = "tiny", init = "random" } }
