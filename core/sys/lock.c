/* lock.c — a run folder's lock (sys.h): flock on a file that says who holds it. */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int tr_sys_lock_file(const char *path, const char *text, size_t n, tr_sys_lock *lock, tr_error *err)
{
    lock->fd = -1;
    lock->holder_len = 0;
    lock->holder[0] = '\0';
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return tr_fail(err, TR_EINTERNAL, "%s: %s", path, strerror(errno));
    int r;
    do r = flock(fd, LOCK_EX | LOCK_NB);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
        int e = errno;
        if (e != EWOULDBLOCK) {
            close(fd);
            return tr_fail(err, TR_EINTERNAL, "%s: %s", path, strerror(e));
        }
        /* Held by another: its text is what it wrote; a failed read leaves it empty (the
         * caller says "not written yet"), and the descriptor was only read from. */
        ssize_t got;
        do got = pread(fd, lock->holder, sizeof lock->holder - 1, 0);
        while (got < 0 && errno == EINTR);
        lock->holder_len = got > 0 ? (int)got : 0;
        lock->holder[lock->holder_len] = '\0';
        close(fd);
        return TR_OK;
    }
    /* the descriptor's offset is still 0: pread does not move it */
    int e = ftruncate(fd, 0) == 0 ? tr_sys_write_all(fd, text, n) : errno;
    if (e) {
        close(fd);
        return tr_fail(err, TR_EINTERNAL, "%s: %s", path, strerror(e));
    }
    lock->fd = fd;
    return TR_OK;
}

int tr_sys_unlock_file(int fd, tr_error *err)
{
    if (fd < 0) return tr_fail(err, TR_EUSER, "unlock_file: bad descriptor %d", fd);
    if (close(fd) != 0) return tr_fail(err, TR_EINTERNAL, "unlock_file (descriptor %d): %s", fd, strerror(errno));
    return TR_OK;
}
