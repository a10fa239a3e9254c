-- trainer.cli (skeleton, being replaced)
local M = {}
function M.main(args)
  if args[1] == "run" then
    local f = assert(loadfile(args[2]))
    arg = { select(3, unpack(args)) }
    local r = f(select(3, unpack(args)))
    return type(r) == "number" and r or 0
  end
  return 0
end
return M
