/* sys.h — the system calls the Lua layer needs and Lua's io and os libraries cannot make
 * safely: checked file writes with fsync and truncate (files.c), folder walks (folders.c), a
 * run folder's lock (lock.c), clocks (clock.c), the training loop's stop flag
 * (stop_signal.c) and the process's name and terminal (process.c). Plain C, part of
 * core/trainer.h, reached from Lua through the FFI (lua/trainer/core/sys.lua); nothing here
 * needs a Lua state.
 *
 * Errors: each fallible function returns a tr_status and fills err with one line that names
 * the file, "PATH: strerror" (for a walk, PATH is the entry that failed, which may lie inside
 * the tree). Every system call's result is checked, close included: on a full disk the error
 * comes from write, fsync or close, never from nowhere. */
#ifndef TR_SYS_H
#define TR_SYS_H

#include "tr_base.h"

/* ---------------------------------------------------------------- files (files.c) */

/* Creates or truncates path and writes all n bytes of data (retrying short writes and
 * EINTR); with sync non-zero, fsyncs it before the close. */
int tr_sys_write_file(const char *path, const void *data, size_t n, int sync, tr_error *err);

/* Appends all n bytes of data to the existing file path (O_APPEND) and closes it; *size is
 * the file's size after it. On failure part of data may have reached the file: the caller
 * cuts it back (tr_sys_truncate). */
int tr_sys_append_file(const char *path, const void *data, size_t n, int64_t *size, tr_error *err);

/* fsyncs a file or a folder by path. File systems that cannot sync it (EINVAL, EROFS) count
 * as success. */
int tr_sys_fsync(const char *path, tr_error *err);

/* Cuts the file path back to size bytes (size >= 0). */
int tr_sys_truncate(const char *path, int64_t size, tr_error *err);

/* *bytes = the bytes available to this user on the file system that holds path. */
int tr_sys_free_space(const char *path, uint64_t *bytes, tr_error *err);

/* 1 when path names a folder (following symbolic links), else 0 (missing included). */
int tr_sys_is_dir(const char *path);

/* The canonical absolute path of path (every link resolved) in out, cap bytes (4096 is
 * always enough on Linux). */
int tr_sys_realpath(const char *path, char *out, size_t cap, tr_error *err);

/* Writes all n bytes of data to the descriptor fd at its offset, retrying short writes and
 * EINTR. Returns 0, or the errno of the failure (ENOSPC for a write that wrote nothing). */
int tr_sys_write_all(int fd, const void *data, size_t n);

/* ---------------------------------------------------------------- folders (folders.c)
 * These replace `mkdir -p`, `rm -rf`, `ls` and `cp -R` through a shell: a name with a space
 * or a quote needs no quoting. */

/* path and every missing parent (mode 0755); an existing folder is success, an existing
 * file where a folder should be is ENOTDIR. */
int tr_sys_mkdir_p(const char *path, tr_error *err);

/* Removes a file or a folder with all it holds, like rm -rf: a missing path is success;
 * symbolic links are removed, never followed. Refuses "" and "/" (TR_EUSER). */
int tr_sys_remove_tree(const char *path, tr_error *err);

/* The entry names of a folder, without "." and "..", sorted bytewise. */
typedef struct tr_sys_names {
    char **names;
    size_t count;
} tr_sys_names;
/* Fills *out (freed with tr_sys_names_free); on failure *out is empty. */
int tr_sys_list_dir(const char *path, tr_sys_names *out, tr_error *err);
void tr_sys_names_free(tr_sys_names *names);

/* Copies the folder src into dst (created if missing), like cp -R but following symbolic
 * links, so that a Hugging Face cache snapshot (files linked to ../../blobs) copies as real
 * files; entries that are neither files nor folders (sockets, FIFOs) are skipped. On failure
 * part of dst may exist: the caller removes it. */
int tr_sys_copy_tree(const char *src, const char *dst, tr_error *err);

/* ---------------------------------------------------------------- locks (lock.c) */

/* A run folder's lock: flock, so the kernel drops it when the process dies, however it
 * dies, and no stale lock is ever left behind. */
typedef struct tr_sys_lock {
    int fd;              /* the held lock's descriptor; -1 when another holds the lock */
    int holder_len;      /* bytes of holder */
    char holder[4096];   /* when another holds it: the text the holder wrote ("" if none yet) */
} tr_sys_lock;

/* Opens (creating) path and takes an exclusive flock on it without waiting. Taken: the
 * file's contents are replaced by the n bytes of text (who holds it) and lock->fd is the
 * descriptor, open (and the lock held) until tr_sys_unlock_file or the process ends. Held by
 * another open file (another process, or an earlier call in this one): TR_OK with
 * lock->fd = -1 and lock->holder its text. The descriptor is close-on-exec, so a child that
 * execs never holds the lock. */
int tr_sys_lock_file(const char *path, const char *text, size_t n, tr_sys_lock *lock, tr_error *err);

/* Releases a lock of tr_sys_lock_file (closes fd). */
int tr_sys_unlock_file(int fd, tr_error *err);

/* ---------------------------------------------------------------- clocks (clock.c) */

/* *seconds on the monotonic clock (never goes back, whatever the wall clock does): tokens/s,
 * ETA and a run's wall time. */
int tr_sys_monotonic_seconds(double *seconds, tr_error *err);

/* *seconds since the Unix epoch, with its fraction: the time stamps of TensorBoard events. */
int tr_sys_wall_seconds(double *seconds, tr_error *err);

/* *seconds of CPU this process has used, all its threads together: the work a timing did,
 * which a shared machine's other processes do not stretch (the plan's measured CPU rates). */
int tr_sys_process_cpu_seconds(double *seconds, tr_error *err);

/* ---------------------------------------------------------------- stop flag (stop_signal.c) */

/* SIGINT and SIGTERM set the stop flag instead of ending the process, so that a run
 * finishes its step, saves and exits instead of dying mid-write; a second signal ends the
 * process the default way. Clears the flag. */
int tr_sys_watch_stop(tr_error *err);
/* Default SIGINT and SIGTERM handling again; clears the flag. */
void tr_sys_unwatch_stop(void);
/* The signal number that asked to stop, or 0. */
int tr_sys_stop_requested(void);

/* ---------------------------------------------------------------- process (process.c) */

int tr_sys_pid(void);
/* 1 when the descriptor fd is a terminal. */
int tr_sys_isatty(int fd);
/* This machine's name in out (cap bytes, always terminated): event file names carry it. */
int tr_sys_hostname(char *out, size_t cap, tr_error *err);
/* The version the binary was built as ("0.0.0" when the build did not say). */
const char *tr_sys_version(void);

#endif
