/* files.c — checked file writes, fsync, truncate, free space and path queries (sys.h).
 * They exist so that trainer.outputs can check every write, flush and close and make a
 * checkpoint durable before its rename: Lua's io library can neither fsync nor truncate, and
 * its checked flush is not reliable under the JIT (see tr_sys_append_file). */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int sys_fail(tr_error *err, const char *path, int e)
{
    return tr_fail(err, e == ENOMEM ? TR_EOOM : TR_EINTERNAL, "%s: %s", path, strerror(e));
}

/* After a failure with errno e on the open descriptor fd: closes it (close's own result does
 * not matter then: e is the error to report) and reports e. */
static int close_failed(tr_error *err, const char *path, int fd, int e)
{
    close(fd);
    return sys_fail(err, path, e);
}

int tr_sys_write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : ENOSPC;
        done += (size_t)w;
    }
    return 0;
}

int tr_sys_write_file(const char *path, const void *data, size_t n, int sync, tr_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return sys_fail(err, path, errno);
    int e = tr_sys_write_all(fd, data, n);
    if (e) return close_failed(err, path, fd, e);
    if (sync && fsync(fd) != 0 && errno != EINVAL) return close_failed(err, path, fd, errno);
    if (close(fd) != 0) return sys_fail(err, path, errno);
    return TR_OK;
}

/* metrics.jsonl and TensorBoard event files grow through this rather than Lua's io library:
 * LuaJIT compiles a hot f:flush() into a call plus a guard on its result, and when the guard
 * fails the interpreter runs the flush again, which finds stdio's buffer already dropped and
 * reports success, so a full disk went unnoticed. */
int tr_sys_append_file(const char *path, const void *data, size_t n, int64_t *size, tr_error *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return sys_fail(err, path, errno);
    int e = tr_sys_write_all(fd, data, n);
    if (e) return close_failed(err, path, fd, e);
    struct stat st;
    if (fstat(fd, &st) != 0) return close_failed(err, path, fd, errno);
    if (close(fd) != 0) return sys_fail(err, path, errno);
    *size = (int64_t)st.st_size;
    return TR_OK;
}

/* Linux flushes the inode whichever descriptor asks, so a read-only open serves files and
 * folders alike. */
int tr_sys_fsync(const char *path, tr_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sys_fail(err, path, errno);
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) return close_failed(err, path, fd, errno);
    if (close(fd) != 0) return sys_fail(err, path, errno);
    return TR_OK;
}

int tr_sys_truncate(const char *path, int64_t size, tr_error *err)
{
    if (size < 0) return tr_fail(err, TR_EUSER, "%s: truncate to a negative size", path);
    if (truncate(path, (off_t)size) != 0) return sys_fail(err, path, errno);
    return TR_OK;
}

int tr_sys_free_space(const char *path, uint64_t *bytes, tr_error *err)
{
    struct statvfs sv;
    if (statvfs(path, &sv) != 0) return sys_fail(err, path, errno);
    *bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    return TR_OK;
}

int tr_sys_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tr_sys_realpath(const char *path, char *out, size_t cap, tr_error *err)
{
    char *p = realpath(path, NULL);
    if (!p) return sys_fail(err, path, errno);
    size_t n = strlen(p);
    if (n >= cap) {
        free(p);
        return sys_fail(err, path, ENAMETOOLONG);
    }
    memcpy(out, p, n + 1);
    free(p);
    return TR_OK;
}
