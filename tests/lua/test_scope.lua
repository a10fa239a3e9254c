-- tests/lua/test_scope.lua: T.scope frees what its function made, except what it returns or
-- marks T.keep; on an error it frees everything it made and raises the same error; scopes
-- nest, a returned tensor passing to the enclosing scope. The allocator's live bytes prove
-- every free (memory.stats), so nothing here relies on the garbage collector.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local memory = require("trainer.core.memory")
local errors = require("trainer.core.errors")

local function live() return memory.stats("cpu").allocated end

return {
  { "frees_what_was_made_and_hands_back_what_is_returned", function()
    local before = live()
    local x = T.ones({ 4, 4 })
    local y = T.scope(function()
      local a = ops.scale_(T.ones({ 4, 4 }), 2)
      local b = x:reshape({ 16 })            -- a view: its own handle, freed too
      assert(b:numel() == 16)
      return ops.add(a, x)                   -- returned: survives
    end)
    assert(not x:is_freed() and not y:is_freed(), "the argument or the result was freed")
    assert(y:tolist()[1][1] == 3)
    y:free(); x:free()
    assert(live() == before, ("live bytes %d, expected %d"):format(live(), before))
    assert(T.scope_depth() == 0)
  end },

  { "returned_tables_and_several_values_are_kept", function()
    local before = live()
    local list, n, z = T.scope(function()
      local tmp = T.zeros({ 8 })
      assert(not tmp:is_freed())
      return { T.ones({ 2 }), nested = { T.ones({ 3 }) } }, 7, T.zeros({ 1 })
    end)
    assert(n == 7 and not list[1]:is_freed() and not list.nested[1]:is_freed() and not z:is_freed())
    list[1]:free(); list.nested[1]:free(); z:free()
    assert(live() == before)
  end },

  { "keep_escapes_every_scope", function()
    local before = live()
    local cache = {}
    T.scope(function()
      T.scope(function() cache.t = T.keep(T.ones({ 5 })) end)
      T.ones({ 7 })
    end)
    assert(not cache.t:is_freed(), "a kept tensor was freed")
    cache.t:free()
    assert(live() == before)
  end },

  { "nested_scopes_free_at_their_own_end", function()
    local before = live()
    local inner_freed_early
    local out = T.scope(function()
      local mid = T.scope(function()
        local t = T.ones({ 100 })
        return ops.scale_(t, 3)
      end)
      local tmp
      T.scope(function() tmp = T.ones({ 1000 }) end)
      inner_freed_early = tmp:is_freed()     -- freed at the inner scope's end, not the outer's
      return mid
    end)
    assert(inner_freed_early, "an inner scope's temporary outlived it")
    assert(out:tolist()[1] == 3)
    out:free()
    assert(live() == before)
  end },

  { "an_error_frees_everything_and_raises_the_same_error", function()
    local before = live()
    local made
    local ok, err = pcall(T.scope, function()
      made = T.ones({ 64 })
      T.scope(function()
        T.ones({ 32 })
        errors.user("boom at %d", 3)
      end)
    end)
    assert(not ok and errors.is_user_error(err) and errors.message(err) == "boom at 3", tostring(err))
    assert(made:is_freed(), "a tensor made before the error leaked")
    assert(live() == before and T.scope_depth() == 0)
    -- a plain Lua error passes through unchanged too, and the kept tensor stays
    local kept
    ok, err = pcall(T.scope, function() kept = T.keep(T.ones({ 2 })) error("plain", 0) end)
    assert(not ok and err == "plain" and not kept:is_freed())
    kept:free()
    assert(live() == before)
  end },

  { "a_tensor_freed_by_hand_inside_is_not_freed_again", function()
    local before = live()
    T.scope(function()
      local t = T.ones({ 16 })
      t:free()
      T.ones({ 16 })
    end)
    assert(live() == before)
  end },

  { "parameters_grads_and_saved_activations_outlive_a_scope", function()
    local Linear = require("trainer.nn.linear")
    local lin
    local y = T.scope(function()
      lin = Linear.new(4, 3)
      local x = T.ones({ 2, 4 })
      local out = lin:forward(x)
      return out
    end)
    assert(not lin.weight.value:is_freed(), "a parameter was freed")
    local dx = T.scope(function() return lin:backward(T.ones({ 2, 3 })) end)
    assert(lin.weight.grad and not lin.weight.grad:is_freed(), "a grad buffer was freed")
    dx:free(); y:free(); lin:free()
  end },
}
