/* config.cpp (cudacpu) — the emulator's settings, read from the environment once at start.
 * Each variable has one meaning and a default; a value outside its set ends the process with
 * a message naming the variable and what it accepts (a run under an order or stream mode
 * nobody asked for would pass for a check it never made). */
#include "internal.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cudacpu {

[[noreturn]] static void bad_setting(const char *name, const char *value, const char *accepted)
{
    fprintf(stderr, "cudacpu: %s=%s is not valid (accepted: %s)\n", name, value, accepted);
    exit(2);
}

/* the value of name as an unsigned integer in [lo, hi], or def when unset or empty */
static unsigned long long setting_uint(const char *name, unsigned long long def, unsigned long long lo,
                                       unsigned long long hi, const char *accepted)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || *s == '-' || v < lo || v > hi) bad_setting(name, s, accepted);
    return v;
}

/* the index of name's value in names (a null-terminated list), or def when unset or empty */
static int setting_word(const char *name, int def, const char *const *names, const char *accepted)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    bad_setting(name, s, accepted);
}

/* CUDACPU_ARCH: one of the compute capabilities the emulator can pretend (as 10 * major +
 * minor); 90 when unset. bin/nvcc reads the same variable to compile the kernels with that
 * __CUDA_ARCH__. */
static int setting_arch()
{
    static const char *const archs[] = {"70", "75", "80", "86", "89", "90", "100", "120", nullptr};
    static const int values[] = {70, 75, 80, 86, 89, 90, 100, 120};
    return values[setting_word("CUDACPU_ARCH", 5, archs, "70|75|80|86|89|90|100|120")];
}

static config_t read_config()
{
    static const char *const orders[] = {"fwd", "rev", "rand", "warpfwd", "warprev", nullptr};
    static const char *const modes[] = {"sync", "deferred", nullptr};
    config_t c;
    c.order = (schedule_order)setting_word("CUDACPU_SCHEDULE", ORDER_FWD, orders, "fwd|rev|rand|warpfwd|warprev");
    c.seed = setting_uint("CUDACPU_SEED", 1, 0, ~0ull, "an unsigned integer");
    c.stats = (int)setting_uint("CUDACPU_STATS", 0, 0, 2, "0|1|2");
    c.strict_exit = setting_uint("CUDACPU_STRICT_EXIT", 1, 0, 1, "0|1") != 0;
    c.mem = setting_uint("CUDACPU_MEM_MIB", 16384, 1, 1ull << 30, "a size in MiB, 1 or more") << 20;
    c.devices = (int)setting_uint("CUDACPU_DEVICES", 1, 0, 64, "0 to 64");
    c.deferred = setting_word("CUDACPU_STREAMS", 0, modes, "sync|deferred") == 1;
    c.shared_poison = setting_uint("CUDACPU_SHARED_POISON", 1, 0, 1, "0|1") != 0;
    c.arch = setting_arch();
    c.driver = (int)setting_uint("CUDACPU_DRIVER", RUNTIME_VERSION, 1000, 99990, "a CUDA version as 1000 * major + 10 * minor, such as 12040");
    c.launch_log = getenv("CUDACPU_LAUNCH_LOG") && *getenv("CUDACPU_LAUNCH_LOG") ? getenv("CUDACPU_LAUNCH_LOG") : nullptr;
    return c;
}

const config_t &cfg()
{
    static const config_t c = read_config();
    return c;
}

/* read at start, so that a bad value stops a program before it does anything */
__attribute__((constructor)) static void read_config_at_start() { (void)cfg(); }

} // namespace cudacpu
