return { { "arith", function() assert(6 * 7 == 42) end } }
