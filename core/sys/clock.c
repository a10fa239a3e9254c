/* clock.c — the monotonic, the wall and the process's CPU clock in seconds (sys.h). */
#include "sys.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static int read_clock(clockid_t id, const char *name, double *seconds, tr_error *err)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return tr_fail(err, TR_EINTERNAL, "clock_gettime(%s): %s", name, strerror(errno));
    *seconds = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    return TR_OK;
}

int tr_sys_monotonic_seconds(double *seconds, tr_error *err)
{
    return read_clock(CLOCK_MONOTONIC, "CLOCK_MONOTONIC", seconds, err);
}

int tr_sys_wall_seconds(double *seconds, tr_error *err) { return read_clock(CLOCK_REALTIME, "CLOCK_REALTIME", seconds, err); }

int tr_sys_process_cpu_seconds(double *seconds, tr_error *err)
{
    return read_clock(CLOCK_PROCESS_CPUTIME_ID, "CLOCK_PROCESS_CPUTIME_ID", seconds, err);
}
