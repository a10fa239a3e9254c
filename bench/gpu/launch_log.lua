-- bench/gpu/launch_log.lua: the emulator's launch log (tools/cudacpu, cudacpu_launch_log) declared
-- to the FFI once for the scripts that read it (bench/gpu/step_budget.lua,
-- tests/cudacpu/test_linear_gelu.lua): `dofile` it; it returns true where the binary exports the
-- log (a trainer built against the emulator), false elsewhere (a real GPU, a CPU build).
local ffi = require("ffi")
return pcall(function()
  ffi.cdef [[
    struct cudacpu_launch { const char *name; unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z;
      unsigned long long mma_syncs; };
    void cudacpu_launch_log(int on);
    int cudacpu_launch_log_count(void);
    int cudacpu_launch_log_get(int i, struct cudacpu_launch *out);
    int cudaDeviceSynchronize(void);
  ]]
  return ffi.C.cudacpu_launch_log
end) and pcall(function() return ffi.C.cudacpu_launch_log end)
