local x = { model = { arch = "bert" } }
