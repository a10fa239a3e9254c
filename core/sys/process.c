/* process.c — this process's id, terminal, machine name and version (sys.h). */
#include "sys.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int tr_sys_pid(void) { return (int)getpid(); } /* getpid cannot fail */

int tr_sys_isatty(int fd) { return isatty(fd) == 1; }

int tr_sys_hostname(char *out, size_t cap, tr_error *err)
{
    if (cap == 0) return tr_fail(err, TR_EUSER, "gethostname: no room for the name");
    if (gethostname(out, cap) != 0) return tr_fail(err, TR_EINTERNAL, "gethostname: %s", strerror(errno));
    out[cap - 1] = '\0'; /* POSIX leaves a truncated name unterminated */
    return TR_OK;
}

const char *tr_sys_version(void)
{
#ifdef TR_VERSION
    return TR_VERSION;
#else
    return "0.0.0";
#endif
}
