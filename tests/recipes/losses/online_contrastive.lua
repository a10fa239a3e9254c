-- OnlineContrastiveLoss on the pairs of contrastive.lua, euclidean distance.
return { extends = "contrastive.lua", loss = { name = "online_contrastive", distance = "euclidean", margin = 4 } }
