/* folders.c — mkdir -p, rm -rf, ls and cp -R without a shell (sys.h). The walks use
 * opendir/readdir on an explicit state (nftw's callback cannot carry one without
 * process-wide state); the first failure stops a walk and names the entry it happened on. */
#include "sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Reports w's failure in err (or TR_OK) and frees what w holds but its buffer. */
static int fs_result(struct fs_walk *w, tr_error *err)
{
    int rc = TR_OK;
    if (w->err)
        rc = tr_fail(err, w->err == ENOMEM ? TR_EOOM : TR_EINTERNAL, "%s: %s", w->where ? w->where : "?",
                     strerror(w->err));
    free(w->where);
    w->where = NULL;
    return rc;
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

static int is_dot(const char *name) { return strcmp(name, ".") == 0 || strcmp(name, "..") == 0; }

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

int tr_sys_mkdir_p(const char *path, tr_error *err)
{
    struct fs_walk w = { 0, NULL, NULL };
    char *p = strdup(path);
    if (!p) return tr_fail(err, TR_EOOM, "%s: out of memory", path);
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
    return fs_result(&w, err);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

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

int tr_sys_list_dir(const char *path, tr_sys_names *out, tr_error *err)
{
    struct fs_walk w = { 0, NULL, NULL };
    fs_names(&w, path, &out->names, &out->count);
    return fs_result(&w, err);
}

void tr_sys_names_free(tr_sys_names *names)
{
    if (!names) return;
    for (size_t i = 0; i < names->count; i++) free(names->names[i]);
    free(names->names);
    names->names = NULL;
    names->count = 0;
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
    tr_sys_names list;
    if (fs_names(w, path, &list.names, &list.count) != 0) return;
    for (size_t i = 0; i < list.count && !w->err; i++) {
        char *child = fs_join(w, path, list.names[i]);
        if (child) fs_remove(w, child);
        free(child);
    }
    tr_sys_names_free(&list);
    if (!w->err && rmdir(path) != 0) fs_fail(w, path, errno);
}

int tr_sys_remove_tree(const char *path, tr_error *err)
{
    if (path[0] == '\0' || strcmp(path, "/") == 0)
        return tr_fail(err, TR_EUSER, "remove_tree: refusing to remove '%s'", path);
    struct fs_walk w = { 0, NULL, NULL };
    fs_remove(&w, path);
    return fs_result(&w, err);
}

enum { COPY_CHUNK = 1 << 20 };
/* Folders nested deeper than this are taken for a symbolic-link loop. */
enum { COPY_MAX_DEPTH = 64 };

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
        int e = tr_sys_write_all(out, w->buf, (size_t)r);
        if (e) {
            fs_fail(w, dst, e);
            break;
        }
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

int tr_sys_copy_tree(const char *src, const char *dst, tr_error *err)
{
    struct fs_walk w = { 0, NULL, malloc(COPY_CHUNK) };
    if (!w.buf) return tr_fail(err, TR_EOOM, "%s: out of memory for the copy buffer", src);
    struct stat st;
    if (stat(src, &st) != 0) fs_fail(&w, src, errno);
    else if (!S_ISDIR(st.st_mode)) fs_fail(&w, src, ENOTDIR);
    else fs_copy(&w, src, dst, 0);
    free(w.buf);
    return fs_result(&w, err);
}
