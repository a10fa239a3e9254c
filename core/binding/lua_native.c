/* lua_native.c — the module `trainer.native`: line editing through libedit, history,
 * terminal checks and a protected call that Ctrl-C interrupts.
 *
 * The one piece of process-wide state is `interrupt_target`, the Lua state a SIGINT
 * handler may arm a hook in; a signal handler can reach nothing else (luajit.c does the
 * same). It is set only while a chunk runs under native.icall.
 * `completion_target` is its twin for Tab: libedit's completion hook takes no user data,
 * so the Lua state whose completer answers is set only while native.readline waits.
 * The training loop's stop flag (`stop_signal`) is the other: a sig_atomic_t that the
 * SIGINT/SIGTERM handler installed by native.watch_stop sets and native.stop_requested
 * reads, so a run finishes its step, saves and exits instead of dying mid-write.
 * The file helpers (write_file, append_file, fsync, truncate, free_space) exist so that
 * trainer.outputs can check every write, flush and close and make a checkpoint durable
 * before its rename: Lua's io library can neither fsync nor truncate, and its checked
 * flush is not reliable under the JIT (see append_file). Each returns a value or nil, message.
 * The folder helpers (mkdir_p, remove_tree, list_dir, copy_tree) replace shell commands.
 * lock_file and unlock_file hold a run folder for one run (flock: the kernel drops the lock
 * when the process dies, however it dies, so no stale lock is ever left behind).
 * wall_time, hostname and pid name and stamp TensorBoard event files (trainer.tensorboard). */
#include "lua_native.h"
#include "lua_json.h"

#include <lauxlib.h>
#include <lualib.h>

#include <dirent.h>
#include <editline/readline.h>
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static lua_State *volatile interrupt_target;
static lua_State *completion_target;

/* The registry key of the completer function native.readline was given. */
#define COMPLETER_KEY "trainer.completer"

/* ---------------------------------------------------------------- interrupts */

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted (Ctrl-C)");
}

static void on_sigint(int sig)
{
    (void)sig;
    lua_State *L = interrupt_target;
    if (L) lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg && !lua_isnoneornil(L, 1)) {
        /* A non-string error object (a table from trainer.errors): hand it back as is. */
        return 1;
    }
    luaL_traceback(L, L, msg ? msg : "(error without a message)", 1);
    return 1;
}

/* native.icall(f, ...) -> true, results... | false, message_with_traceback
 * Like xpcall with a traceback, and Ctrl-C during f raises "interrupted". */
static int l_icall(lua_State *L)
{
    int nargs = lua_gettop(L) - 1;
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_pushcfunction(L, traceback);
    lua_insert(L, 1);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    interrupt_target = L;
    sigaction(SIGINT, &sa, &old);
    int rc = lua_pcall(L, nargs, LUA_MULTRET, 1);
    sigaction(SIGINT, &old, NULL);
    interrupt_target = NULL;
    lua_sethook(L, NULL, 0, 0);
    lua_remove(L, 1);
    lua_pushboolean(L, rc == 0);
    lua_insert(L, 1);
    return lua_gettop(L);
}

/* ---------------------------------------------------------------- line editing */

/* A SIGINT at the prompt must not end the REPL: it only marks the line as abandoned. */
static volatile sig_atomic_t prompt_interrupted;
static void on_sigint_prompt(int sig)
{
    (void)sig;
    prompt_interrupted = 1;
}

/* libedit reads keys as wide characters (mbrtowc), so LC_CTYPE decides what a typed
 * byte sequence is: under the C locale every non-ASCII character is dropped ("värld" reads
 * as "vrld"). The environment's locale is taken; when it is C/POSIX (or not installed),
 * C.UTF-8 keeps UTF-8 input working. Only LC_CTYPE: LC_NUMERIC would change the decimal
 * point of Lua's tonumber and %g, and with it every number the REPL reads or prints.
 * Returns the LC_CTYPE locale now in effect. */
static const char *set_ctype_locale(void)
{
    const char *loc = setlocale(LC_CTYPE, "");
    if (loc && strcmp(loc, "C") != 0 && strcmp(loc, "POSIX") != 0) return loc;
    static const char *const utf8[] = { "C.UTF-8", "C.utf8", "en_US.UTF-8" };
    for (size_t i = 0; i < sizeof utf8 / sizeof utf8[0]; i++) {
        loc = setlocale(LC_CTYPE, utf8[i]);
        if (loc) return loc;
    }
    loc = setlocale(LC_CTYPE, NULL);
    return loc ? loc : "C";
}

/* libedit's hook: `text` is the word before the cursor (word breaks below keep '.' and ':'
 * inside it, so "trainer.mem" arrives whole). Asks the Lua completer for full words and
 * answers in readline's format: [0] the common prefix that replaces text, then the
 * matches, NULL-terminated, all malloc'ed (libedit frees them). Never file names. */
static char **complete_word(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1;
    lua_State *L = completion_target;
    if (!L || !lua_checkstack(L, 4)) return NULL;
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, COMPLETER_KEY);
    lua_pushstring(L, text);
    /* A completer's error must not unwind through libedit: a failed completion is none. */
    if (lua_pcall(L, 1, 1, 0) != 0 || !lua_istable(L, -1)) {
        lua_settop(L, top);
        return NULL;
    }
    size_t n = lua_objlen(L, -1);
    char **matches = n ? calloc(n + 2, sizeof *matches) : NULL;
    if (!matches) {
        lua_settop(L, top);
        return NULL;
    }
    size_t count = 0, common = 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, (int)i);
        const char *word = lua_tostring(L, -1);
        char *copy = word ? strdup(word) : NULL;
        lua_pop(L, 1);
        if (!copy) continue;
        if (count == 0) {
            common = strlen(copy);
        } else {
            size_t k = 0;
            while (k < common && copy[k] == matches[1][k]) k++;
            common = k;
        }
        matches[1 + count++] = copy;
    }
    lua_settop(L, top);
    if (count == 0) {
        free(matches);
        return NULL;
    }
    if (count == 1) { /* one match: it alone, readline's convention */
        matches[0] = matches[1];
        matches[1] = NULL;
        return matches;
    }
    matches[0] = strndup(matches[1], common);
    if (!matches[0]) {
        for (size_t i = 1; i <= count; i++) free(matches[i]);
        free(matches);
        return NULL;
    }
    return matches;
}

/* Lua's operators and brackets end a word; '.' and ':' do not (fields and methods). */
static const char lua_word_breaks[] = " \t\n\"'`<>=;|&{}()[],+-*/%^#~";

/* native.init_line_editing() -> LC_CTYPE locale name
 * Call once before any other line-editing function (libedit reads the locale when it
 * starts, on the first readline or history call). */
static int l_init_line_editing(lua_State *L)
{
    const char *loc = set_ctype_locale();
    rl_readline_name = "trainer";
    rl_attempted_completion_function = complete_word;
    rl_basic_word_break_characters = lua_word_breaks;
    rl_completion_append_character = '\0'; /* "trainer.core.memory" then "." or ":" */
    lua_pushstring(L, loc);
    return 1;
}

/* native.readline(prompt [, completer]) -> line | nil at end of input | false when Ctrl-C
 * abandoned it. completer(word) -> list of full words, called on Tab. */
static int l_readline(lua_State *L)
{
    const char *prompt = luaL_optstring(L, 1, "> ");
    int has_completer = lua_isfunction(L, 2);
    if (has_completer) {
        lua_pushvalue(L, 2);
        lua_setfield(L, LUA_REGISTRYINDEX, COMPLETER_KEY);
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint_prompt;
    sigemptyset(&sa.sa_mask);
    prompt_interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    completion_target = has_completer ? L : NULL;
    char *line = readline(prompt);
    completion_target = NULL;
    sigaction(SIGINT, &old, NULL);
    if (prompt_interrupted) {
        free(line);
        lua_pushboolean(L, 0);
        return 1;
    }
    if (!line) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushstring(L, line);
    free(line);
    return 1;
}

static int l_add_history(lua_State *L)
{
    add_history(luaL_checkstring(L, 1));
    return 0;
}

static int l_read_history(lua_State *L)
{
    lua_pushboolean(L, read_history(luaL_checkstring(L, 1)) == 0);
    return 1;
}

static int l_write_history(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    stifle_history((int)luaL_optinteger(L, 2, 1000));
    lua_pushboolean(L, write_history(path) == 0);
    return 1;
}

/* ---------------------------------------------------------------- stop flag */

static volatile sig_atomic_t stop_signal;

/* The first signal asks the loop to stop after its step; a second one ends the process
 * the default way (a user who presses Ctrl-C twice means it). Only async-signal-safe calls. */
static void on_stop_signal(int sig)
{
    static const char msg[] = "\ntrainer: stopping after this step and saving a checkpoint "
                              "(press Ctrl-C again to quit at once, without saving)\n";
    if (stop_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
}

/* native.watch_stop(): SIGINT and SIGTERM set the stop flag instead of ending the process. */
static int l_watch_stop(lua_State *L)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return luaL_error(L, "sigaction: %s", strerror(errno));
    stop_signal = 0;
    return 0;
}

/* native.unwatch_stop(): default SIGINT/SIGTERM handling again; clears the flag. */
static int l_unwatch_stop(lua_State *L)
{
    (void)L;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    stop_signal = 0;
    return 0;
}

/* native.stop_requested() -> the signal number that asked to stop, or false. */
static int l_stop_requested(lua_State *L)
{
    int sig = stop_signal;
    if (sig) lua_pushinteger(L, sig);
    else lua_pushboolean(L, 0);
    return 1;
}

/* ---------------------------------------------------------------- process */

static int l_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
    return 1;
}

/* native.pid() -> this process's id (getpid cannot fail). */
static int l_pid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

static int l_root(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "trainer.root");
    return 1;
}

static int l_version(lua_State *L)
{
#ifdef TR_VERSION
    lua_pushstring(L, TR_VERSION);
#else
    lua_pushstring(L, "0.0.0");
#endif
    return 1;
}

static int l_realpath(lua_State *L)
{
    char *p = realpath(luaL_checkstring(L, 1), NULL);
    if (!p) {
        lua_pushnil(L);
        lua_pushstring(L, strerror(errno));
        return 2;
    }
    lua_pushstring(L, p);
    free(p);
    return 1;
}

static int l_is_dir(lua_State *L)
{
    struct stat st;
    lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode));
    return 1;
}

/* ---------------------------------------------------------------- files */

static int push_errno(lua_State *L, int e)
{
    lua_pushnil(L);
    lua_pushstring(L, strerror(e));
    return 2;
}

/* After a failure with errno e on the open descriptor fd: closes it (close's own result
 * does not matter then: e is the error to report) and pushes nil, strerror(e). */
static int close_failed(lua_State *L, int fd, int e)
{
    close(fd);
    return push_errno(L, e);
}

/* Writes all n bytes of data to fd at its offset, retrying short writes and EINTR.
 * Returns 0, or the errno of the failure (ENOSPC for a write that wrote nothing). */
static int write_all(int fd, const char *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : ENOSPC;
        done += (size_t)w;
    }
    return 0;
}

/* native.write_file(path, data [, sync]) -> true | nil, strerror
 * Creates or truncates path and writes all of data (retrying short writes and EINTR);
 * with sync, fsyncs it before the close. Every call's result is checked, close included:
 * on a full disk the error comes from write, fsync or close, never from nowhere. */
static int l_write_file(lua_State *L)
{
    size_t n;
    const char *path = luaL_checkstring(L, 1);
    const char *data = luaL_checklstring(L, 2, &n);
    int sync = lua_toboolean(L, 3);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return push_errno(L, errno);
    int e = write_all(fd, data, n);
    if (e) return close_failed(L, fd, e);
    if (sync && fsync(fd) != 0 && errno != EINVAL) return close_failed(L, fd, errno);
    if (close(fd) != 0) return push_errno(L, errno);
    lua_pushboolean(L, 1);
    return 1;
}

/* native.append_file(path, data) -> the file's size after it | nil, strerror
 * Appends all of data to the existing file path (O_APPEND; retrying short writes and
 * EINTR) and closes it, every call checked. metrics.jsonl grows through this rather than
 * Lua's io library: LuaJIT compiles a hot f:flush() into a call plus a guard on its
 * result, and when the guard fails the interpreter runs the flush again, which finds
 * stdio's buffer already dropped and reports success, so a full disk went unnoticed. On
 * failure part of data may have reached the file: the caller cuts it back. */
static int l_append_file(lua_State *L)
{
    size_t n;
    const char *path = luaL_checkstring(L, 1);
    const char *data = luaL_checklstring(L, 2, &n);
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return push_errno(L, errno);
    int e = write_all(fd, data, n);
    if (e) return close_failed(L, fd, e);
    struct stat st;
    if (fstat(fd, &st) != 0) return close_failed(L, fd, errno);
    if (close(fd) != 0) return push_errno(L, errno);
    lua_pushnumber(L, (lua_Number)st.st_size);
    return 1;
}

/* native.fsync(path) -> true | nil, strerror
 * fsyncs a file or a folder by path (Linux flushes the inode, whichever descriptor asks).
 * File systems that cannot sync a folder (EINVAL) count as success. */
static int l_fsync(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return push_errno(L, errno);
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) return close_failed(L, fd, errno);
    if (close(fd) != 0) return push_errno(L, errno);
    lua_pushboolean(L, 1);
    return 1;
}

/* native.truncate(path, size) -> true | nil, strerror: cuts a file back to size bytes
 * (metrics.jsonl after a failed append, so that it never ends in half a line). */
static int l_truncate(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Number size = luaL_checknumber(L, 2);
    if (size < 0) return luaL_error(L, "truncate: negative size");
    if (truncate(path, (off_t)size) != 0) return push_errno(L, errno);
    lua_pushboolean(L, 1);
    return 1;
}

/* native.free_space(path) -> bytes available to this user on path's file system | nil, strerror */
static int l_free_space(lua_State *L)
{
    struct statvfs sv;
    if (statvfs(luaL_checkstring(L, 1), &sv) != 0) return push_errno(L, errno);
    lua_pushnumber(L, (lua_Number)sv.f_bavail * (lua_Number)sv.f_frsize);
    return 1;
}

/* ---------------------------------------------------------------- locks */

/* native.lock_file(path, text) -> fd | nil, "locked", holder_text | nil, strerror
 * Opens (creating) path and takes an exclusive flock on it without waiting. Taken: the
 * file's contents are replaced by text (who holds it) and the descriptor is returned; it
 * stays open, and the lock held, until native.unlock_file(fd) or the process ends. Held by
 * another open file (another process, or another lock_file call in this one): nil,
 * "locked" and the holder's text as it wrote it ("" if it has not written it yet). The
 * descriptor is close-on-exec, so a child that execs never holds the lock. */
static int l_lock_file(lua_State *L)
{
    size_t n;
    const char *path = luaL_checkstring(L, 1);
    const char *text = luaL_checklstring(L, 2, &n);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return push_errno(L, errno);
    int r;
    do r = flock(fd, LOCK_EX | LOCK_NB);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
        int e = errno;
        if (e != EWOULDBLOCK) return close_failed(L, fd, e);
        char buf[4096];
        ssize_t got;
        do got = pread(fd, buf, sizeof buf, 0);
        while (got < 0 && errno == EINTR);
        close(fd);
        lua_pushnil(L);
        lua_pushstring(L, "locked");
        lua_pushlstring(L, buf, got > 0 ? (size_t)got : 0);
        return 3;
    }
    /* the descriptor's offset is still 0: pread does not move it */
    int e = ftruncate(fd, 0) == 0 ? write_all(fd, text, n) : errno;
    if (e) return close_failed(L, fd, e);
    lua_pushinteger(L, fd);
    return 1;
}

/* native.unlock_file(fd) -> true | nil, strerror: releases a lock_file lock (closes fd). */
static int l_unlock_file(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    if (fd < 0) return luaL_error(L, "unlock_file: bad descriptor %d", fd);
    if (close(fd) != 0) return push_errno(L, errno);
    lua_pushboolean(L, 1);
    return 1;
}

/* ---------------------------------------------------------------- folders
 * mkdir_p, remove_tree, list_dir and copy_tree replace `mkdir -p`, `rm -rf`, `ls` and
 * `cp -R` through a shell: a name with a space or a quote needs no quoting, and every
 * system call is checked. Each returns a value or nil, "PATH: strerror", naming the
 * entry that failed (which may lie inside the tree). The walks use opendir/readdir on an
 * explicit state (nftw's callback cannot carry one without process-wide state). */


/* The first failure of a walk: errno and the path it happened on. */
struct fs_walk {
    int err;
    char *where;
    char *buf; /* copy_tree's transfer buffer */
};

static void fs_fail(struct fs_walk *w, const char *path, int e)
{
    if (w->err) return;
    w->err = e ? e : EIO;
    w->where = strdup(path);
}

static int fs_push_result(lua_State *L, struct fs_walk *w)
{
    if (!w->err) {
        free(w->where);
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", w->where ? w->where : "?", strerror(w->err));
    free(w->where);
    return 2;
}

/* dir + "/" + name in a fresh allocation, or NULL (ENOMEM recorded in w). */
static char *fs_join(struct fs_walk *w, const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        fs_fail(w, dir, ENOMEM);
        return NULL;
    }
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static int is_dot(const char *name)
{
    return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/* Creates one folder; an existing folder is success, an existing file is ENOTDIR. */
static int fs_mkdir_one(struct fs_walk *w, const char *path)
{
    if (mkdir(path, 0755) == 0) return 0;
    int e = errno;
    struct stat st;
    if (e == EEXIST && stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        e = ENOTDIR;
    }
    fs_fail(w, path, e);
    return -1;
}

/* native.mkdir_p(path) -> true | nil, message: path and every missing parent (mode 0755). */
static int l_mkdir_p(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct fs_walk w = { 0, NULL, NULL };
    char *p = strdup(path);
    if (!p) return luaL_error(L, "mkdir_p: out of memory");
    size_t n = strlen(p);
    for (size_t i = 1; i <= n && !w.err; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        if (p[i - 1] == '/') continue; /* "a//b" or a trailing slash */
        char c = p[i];
        p[i] = '\0';
        fs_mkdir_one(&w, p);
        p[i] = c;
    }
    free(p);
    return fs_push_result(L, &w);
}

static void fs_remove(struct fs_walk *w, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) fs_fail(w, path, errno);
        return;
    }
    if (!S_ISDIR(st.st_mode)) { /* files and symbolic links (never followed) */
        if (unlink(path) != 0 && errno != ENOENT) fs_fail(w, path, errno);
        return;
    }
    DIR *d = opendir(path);
    if (!d) {
        fs_fail(w, path, errno);
        return;
    }
    struct dirent *e;
    for (;;) {
        errno = 0;
        e = readdir(d);
        if (!e) {
            if (errno) fs_fail(w, path, errno);
            break;
        }
        if (is_dot(e->d_name)) continue;
        char *child = fs_join(w, path, e->d_name);
        if (!child) break;
        fs_remove(w, child);
        free(child);
        if (w->err) break;
    }
    if (closedir(d) != 0) fs_fail(w, path, errno);
    if (!w->err && rmdir(path) != 0) fs_fail(w, path, errno);
}

/* native.remove_tree(path) -> true | nil, message: removes a file or a folder with all it
 * holds, like rm -rf (a missing path is success; symbolic links are removed, not followed).
 * Refuses "" and "/". */
static int l_remove_tree(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    if (path[0] == '\0' || strcmp(path, "/") == 0) return luaL_error(L, "remove_tree: refusing to remove '%s'", path);
    struct fs_walk w = { 0, NULL, NULL };
    fs_remove(&w, path);
    return fs_push_result(L, &w);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entry names of the folder path (no "." or ".."), sorted bytewise, in *out (count in
 * *n); the caller frees each name and the array. 0, or -1 with the failure in w. */
static int fs_names(struct fs_walk *w, const char *path, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d) {
        fs_fail(w, path, errno);
        return -1;
    }
    size_t cap = 0;
    char **names = NULL;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) fs_fail(w, path, errno);
            break;
        }
        if (is_dot(e->d_name)) continue;
        if (*n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **grown = realloc(names, ncap * sizeof *names);
            if (!grown) {
                fs_fail(w, path, ENOMEM);
                break;
            }
            names = grown;
            cap = ncap;
        }
        names[*n] = strdup(e->d_name);
        if (!names[*n]) {
            fs_fail(w, path, ENOMEM);
            break;
        }
        (*n)++;
    }
    if (closedir(d) != 0) fs_fail(w, path, errno);
    if (w->err) {
        for (size_t i = 0; i < *n; i++) free(names[i]);
        free(names);
        *n = 0;
        return -1;
    }
    if (*n > 1) qsort(names, *n, sizeof *names, cmp_names);
    *out = names;
    return 0;
}

/* native.list_dir(path) -> { name, ... } sorted bytewise, without "." and ".." | nil, message */
static int l_list_dir(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct fs_walk w = { 0, NULL, NULL };
    char **names;
    size_t n;
    if (fs_names(&w, path, &names, &n) != 0) return fs_push_result(L, &w);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, (int)i + 1);
        free(names[i]);
    }
    free(names);
    return 1;
}

#define COPY_CHUNK (1 << 20)
/* Folders nested deeper than this are taken for a symbolic-link loop. */
#define COPY_MAX_DEPTH 64

static void fs_copy_file(struct fs_walk *w, const char *src, const char *dst, mode_t mode)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fs_fail(w, src, errno);
        return;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 0777);
    if (out < 0) {
        fs_fail(w, dst, errno);
        close(in);
        return;
    }
    for (;;) {
        ssize_t r = read(in, w->buf, COPY_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            fs_fail(w, src, errno);
            break;
        }
        if (r == 0) break;
        ssize_t done = 0;
        while (done < r) {
            ssize_t k = write(out, w->buf + done, (size_t)(r - done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                fs_fail(w, dst, k < 0 ? errno : ENOSPC);
                break;
            }
            done += k;
        }
        if (w->err) break;
    }
    if (close(in) != 0) fs_fail(w, src, errno);
    if (close(out) != 0) fs_fail(w, dst, errno);
}

static void fs_copy(struct fs_walk *w, const char *src, const char *dst, int depth)
{
    if (depth > COPY_MAX_DEPTH) {
        fs_fail(w, src, ELOOP);
        return;
    }
    if (fs_mkdir_one(w, dst) != 0) return;
    char **names;
    size_t n;
    if (fs_names(w, src, &names, &n) != 0) return;
    for (size_t i = 0; i < n; i++) {
        if (!w->err) {
            char *from = fs_join(w, src, names[i]);
            char *to = from ? fs_join(w, dst, names[i]) : NULL;
            struct stat st;
            if (to && stat(from, &st) != 0) fs_fail(w, from, errno);
            else if (to && S_ISDIR(st.st_mode)) fs_copy(w, from, to, depth + 1);
            else if (to && S_ISREG(st.st_mode)) fs_copy_file(w, from, to, st.st_mode);
            free(from);
            free(to);
        }
        free(names[i]);
    }
    free(names);
}

/* native.copy_tree(src, dst) -> true | nil, message: copies the folder src into dst
 * (created if missing), like cp -R but following symbolic links, so that a Hugging Face
 * cache snapshot (files linked to ../../blobs) copies as real files; entries that are
 * neither files nor folders (sockets, FIFOs) are skipped. On failure part of dst may exist:
 * the caller removes it. */
static int l_copy_tree(lua_State *L)
{
    const char *src = luaL_checkstring(L, 1);
    const char *dst = luaL_checkstring(L, 2);
    struct fs_walk w = { 0, NULL, malloc(COPY_CHUNK) };
    if (!w.buf) return luaL_error(L, "copy_tree: out of memory");
    struct stat st;
    if (stat(src, &st) != 0) fs_fail(&w, src, errno);
    else if (!S_ISDIR(st.st_mode)) fs_fail(&w, src, ENOTDIR);
    else fs_copy(&w, src, dst, 0);
    free(w.buf);
    return fs_push_result(L, &w);
}

/* native.clock_monotonic_id() -> CLOCK_MONOTONIC of this C library, for the
 * clock_gettime declared in trainer.core.ffi's system block (the id differs between systems). */
static int l_clock_monotonic_id(lua_State *L)
{
    lua_pushinteger(L, CLOCK_MONOTONIC);
    return 1;
}

/* native.wall_time() -> seconds since the Unix epoch (CLOCK_REALTIME, with its fraction)
 * | nil, strerror: the time stamps of TensorBoard event files. */
static int l_wall_time(lua_State *L)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return push_errno(L, errno);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

/* native.hostname() -> this machine's name | nil, strerror (event file names carry it). */
static int l_hostname(lua_State *L)
{
    char name[256];
    if (gethostname(name, sizeof name) != 0) return push_errno(L, errno);
    name[sizeof name - 1] = '\0';   /* POSIX leaves a truncated name unterminated */
    lua_pushstring(L, name);
    return 1;
}

int tr_lua_open_native(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "icall", l_icall },           { "readline", l_readline },
        { "init_line_editing", l_init_line_editing },
        { "add_history", l_add_history }, { "read_history", l_read_history },
        { "write_history", l_write_history }, { "isatty", l_isatty },
        { "root", l_root },             { "realpath", l_realpath },
        { "is_dir", l_is_dir },         { "version", l_version },
        { "watch_stop", l_watch_stop }, { "unwatch_stop", l_unwatch_stop },
        { "stop_requested", l_stop_requested },
        { "write_file", l_write_file },   { "fsync", l_fsync },
        { "truncate", l_truncate },       { "free_space", l_free_space },
        { "append_file", l_append_file },
        { "mkdir_p", l_mkdir_p },         { "remove_tree", l_remove_tree },
        { "list_dir", l_list_dir },       { "copy_tree", l_copy_tree },
        { "clock_monotonic_id", l_clock_monotonic_id },
        { "lock_file", l_lock_file },     { "unlock_file", l_unlock_file },
        { "wall_time", l_wall_time },     { "hostname", l_hostname },
        { "pid", l_pid },
        { NULL, NULL },
    };
    lua_newtable(L);
    luaL_register(L, NULL, fns);
    tr_lua_json_register(L);
    return 1;
}
