-- tests/cli/check_ptxas_readers.lua — the two readers of check_ptxas_resources.lua on small
-- fixtures, so that a reader that misreads passes no kernel (run by test_ptxas_resources.sh
-- through `trainer run`):  check_ptxas_readers.lua TMPDIR
-- ptxas_report.lua: figures of the entry only (not of a callee's block), an incomplete block
-- is an error. cuda_launch_sites.lua: a block it cannot evaluate counts as 1024,
-- __launch_bounds__ and std::min caps count, constants resolve through enums, #defines and
-- const locals, and what it cannot bound (dynamic shared memory, a launch of an unknown name,
-- cudaLaunchKernel) is reported.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cli"
local report = dofile(here .. "/ptxas_report.lua")
local sites = dofile(here .. "/cuda_launch_sites.lua")
local tmp = arg[1]

local failed = 0
local function check(name, ok, why)
  if ok then print("PASS " .. name) else failed = failed + 1; print("FAIL " .. name .. ": " .. tostring(why)) end
end
local function write(name, text)
  local path = tmp .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- ------------------------------------------------------------ ptxas_report.lua

local good = write("good.res", [[
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'
ptxas info    : Function properties for _Z6helperv
    64 bytes stack frame, 40 bytes spill stores, 40 bytes spill loads
ptxas info    : Function properties for _Z6kernelPf
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 8 bytes cumulative stack size, 2048 bytes smem, 356 bytes cmem[0]
ptxas info    : Compile time = 10.0 ms
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_100'
ptxas info    : Function properties for _Z6kernelPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
]])
local e, why = report.read(good)
check("ptxas_report_reads_entries", e and #e == 2 and e[1].target == "sm_90" and e[1].regs == 72 and e[1].smem == 2048
  and e[1].spill_stores == 4 and e[1].spill_loads == 12 and e[2].target == "sm_100" and e[2].regs == 40 and e[2].smem == 0,
  why or "figures misread")
local bad = write("bad.res", [[
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'
ptxas info    : Function properties for _Z6kernelPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z7kernel2Pf' for 'sm_90'
]])
e, why = report.read(bad)
check("ptxas_report_refuses_incomplete", e == nil and tostring(why):match("no \"Used N registers\""), why or "read as complete")
check("ptxas_report_base_name", report.base_name("void ns::attn_kernel<__half, 64>") == "attn_kernel",
  report.base_name("void ns::attn_kernel<__half, 64>"))

-- ------------------------------------------------------------ cuda_launch_sites.lua

write("fixture.cuh", "#define HDR_THREADS (2 * 64)\n")
local cu = write("fixture.cu", [[
#include "fixture.cuh"
enum { A_THREADS = 256, B_WARPS = 4, C_NEXT };
static const int per_block = 512;
extern __shared__ float dynamic_smem[];
__global__ void a_kernel(float *x) {}
template <int D> __global__ void __launch_bounds__(B_WARPS * 32) b_kernel(float *x) {}
__global__ void c_kernel(float *x) {}
__global__ void d_kernel(float *x) {}
__global__ void e_kernel(float *x) {}
__global__ void f_kernel(float *x) {}
__global__ void g_kernel(float *x) {}
static int launch(float *x, long C, int n)
{
    /* a comment: z_kernel<<<1, 2048>>>(x) */
    a_kernel<<<n, A_THREADS, 0, 0>>>(x);
    b_kernel<64>
        <<<n, tr_cuda_row_threads(C)>>>(x);
    int threads = 64;
    c_kernel<<<n, threads>>>(x);
    const int fixed = HDR_THREADS + 32;
    d_kernel<<<dim3(n), dim3(32, C_NEXT)>>>(x);
    e_kernel<<<n, fixed, 0, s>>>(x);
    f_kernel<<<n, std::min<int>(tr_cuda_row_threads(C), per_block)>>>(x);
    g_kernel<<<n, 128, 64 * sizeof(float)>>>(x);
    some_pointer<<<n, 32>>>(x);
    cudaLaunchKernel((void *)a_kernel, 1, 32, 0, 0, 0);
    return 0;
}
]])
local r = sites.scan({ cu })
local function bound(name) return r.kernels[name] and sites.bound(r.kernels[name]) end
check("launch_sites_enum_constant", bound("a_kernel") == 256, bound("a_kernel"))
check("launch_sites_launch_bounds_cap", bound("b_kernel") == 128, bound("b_kernel"))
check("launch_sites_variable_is_1024", bound("c_kernel") == 1024, bound("c_kernel"))
check("launch_sites_dim3_product", bound("d_kernel") == 32 * 5, bound("d_kernel"))
check("launch_sites_header_define_and_const", bound("e_kernel") == 160, bound("e_kernel"))
check("launch_sites_min_cap", bound("f_kernel") == 512, bound("f_kernel"))
local text = table.concat(r.problems, "\n") .. "\n" .. table.concat(r.dynamic_shared, "\n")
check("launch_sites_comment_ignored", not text:match("z_kernel") and not r.kernels.z_kernel, text)
check("launch_sites_dynamic_shared_memory", text:match("g_kernel is launched with dynamic shared memory"), text)
check("launch_sites_extern_shared", text:match("extern __shared__ %(dynamic shared memory%)"), text)
check("launch_sites_unknown_callee", text:match("a launch of some_pointer"), text)
check("launch_sites_launch_api", text:match("cudaLaunchKernel: the check bounds only"), text)

os.exit(failed == 0 and 0 or 1)
