/* test_sys.c — core/sys/ (sys.h): the system calls the Lua layer reaches through the FFI.
 * Writes, appends, truncates and fsyncs a file; lists, copies and removes a tree with odd
 * names; a second lock on a held run folder reports its holder; every failure names the
 * file in "PATH: strerror"; the clocks run. */
#include "check.h"
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char base[256];

static void path_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", base, name); }

static void test_write_append_truncate(void)
{
    tr_error err;
    char p[512], back[64] = { 0 };
    path_of(p, sizeof p, "a file");
    CHECK(tr_sys_write_file(p, "hello\n", 6, 1, &err) == TR_OK, "%s", err.msg);
    int64_t size = 0;
    CHECK(tr_sys_append_file(p, "more\n", 5, &size, &err) == TR_OK && size == 11, "size %lld: %s",
          (long long)size, err.msg);
    CHECK(tr_sys_truncate(p, 6, &err) == TR_OK, "%s", err.msg);
    FILE *f = fopen(p, "rb");
    CHECK(f && fread(back, 1, sizeof back - 1, f) == 6 && strcmp(back, "hello\n") == 0, "read back '%s'", back);
    if (f) fclose(f);
    CHECK(tr_sys_fsync(p, &err) == TR_OK && tr_sys_fsync(base, &err) == TR_OK, "%s", err.msg);
    uint64_t free_bytes = 0;
    CHECK(tr_sys_free_space(base, &free_bytes, &err) == TR_OK, "%s", err.msg);
    CHECK(tr_sys_is_dir(base) && !tr_sys_is_dir(p), "is_dir");
    char real[4096];
    CHECK(tr_sys_realpath(p, real, sizeof real, &err) == TR_OK && real[0] == '/', "%s", err.msg);
}

static void test_failures_name_the_file(void)
{
    tr_error err;
    char p[512], want[600];
    path_of(p, sizeof p, "missing/x");
    int64_t size;
    CHECK(tr_sys_append_file(p, "x", 1, &size, &err) != TR_OK, "append to a missing file");
    snprintf(want, sizeof want, "%s: No such file", p);
    CHECK(strncmp(err.msg, want, strlen(want)) == 0, "message: %s", err.msg);
    CHECK(tr_sys_write_file(p, "x", 1, 0, &err) != TR_OK && strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
    CHECK(tr_sys_truncate(p, 0, &err) != TR_OK && strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
    tr_sys_names names;
    CHECK(tr_sys_list_dir(p, &names, &err) != TR_OK && names.count == 0 && strstr(err.msg, p), "%s", err.msg);
    path_of(p, sizeof p, "a file/below");
    CHECK(tr_sys_mkdir_p(p, &err) != TR_OK && strstr(err.msg, "a file: Not a directory"), "%s", err.msg);
    CHECK(tr_sys_remove_tree("/", &err) == TR_EUSER && tr_sys_remove_tree("", &err) == TR_EUSER, "refuses / and \"\"");
}

static void test_folders(void)
{
    tr_error err;
    char d[512], p[600], copy[512];
    path_of(d, sizeof d, "it's a dir/sub 'two'");
    CHECK(tr_sys_mkdir_p(d, &err) == TR_OK && tr_sys_mkdir_p(d, &err) == TR_OK, "%s", err.msg);
    snprintf(p, sizeof p, "%s/b file", d);
    CHECK(tr_sys_write_file(p, "B", 1, 0, &err) == TR_OK, "%s", err.msg);
    snprintf(p, sizeof p, "%s/a'file", d);
    CHECK(tr_sys_write_file(p, "A", 1, 0, &err) == TR_OK, "%s", err.msg);
    tr_sys_names names;
    CHECK(tr_sys_list_dir(d, &names, &err) == TR_OK && names.count == 2, "%s", err.msg);
    if (names.count == 2) CHECK(strcmp(names.names[0], "a'file") == 0 && strcmp(names.names[1], "b file") == 0, "sorted");
    tr_sys_names_free(&names);
    path_of(copy, sizeof copy, "copy");
    CHECK(tr_sys_copy_tree(d, copy, &err) == TR_OK, "%s", err.msg);
    CHECK(tr_sys_list_dir(copy, &names, &err) == TR_OK && names.count == 2, "%s", err.msg);
    tr_sys_names_free(&names);
    path_of(p, sizeof p, "it's a dir");
    CHECK(tr_sys_remove_tree(p, &err) == TR_OK && !tr_sys_is_dir(p), "%s", err.msg);
    CHECK(tr_sys_remove_tree(p, &err) == TR_OK, "a missing path is success: %s", err.msg);
    CHECK(tr_sys_is_dir(copy), "removed only its own tree");
}

static void test_lock(void)
{
    tr_error err;
    char p[512];
    path_of(p, sizeof p, ".lock");
    tr_sys_lock a, b;
    CHECK(tr_sys_lock_file(p, "pid 1\n", 6, &a, &err) == TR_OK && a.fd >= 0, "%s", err.msg);
    CHECK(tr_sys_lock_file(p, "pid 2\n", 6, &b, &err) == TR_OK && b.fd == -1, "a second lock is refused");
    CHECK(b.holder_len == 6 && strcmp(b.holder, "pid 1\n") == 0, "holder '%s'", b.holder);
    CHECK(tr_sys_unlock_file(a.fd, &err) == TR_OK, "%s", err.msg);
    CHECK(tr_sys_lock_file(p, "pid 3\n", 6, &b, &err) == TR_OK && b.fd >= 0, "free again: %s", err.msg);
    CHECK(tr_sys_unlock_file(b.fd, &err) == TR_OK, "%s", err.msg);
    CHECK(tr_sys_unlock_file(-1, &err) == TR_EUSER, "a bad descriptor");
}

static void test_clocks_and_process(void)
{
    tr_error err;
    double a = 0, b = 0, wall = 0;
    CHECK(tr_sys_monotonic_seconds(&a, &err) == TR_OK && tr_sys_monotonic_seconds(&b, &err) == TR_OK && b >= a,
          "monotonic %g then %g", a, b);
    CHECK(tr_sys_wall_seconds(&wall, &err) == TR_OK && wall > 1.6e9, "wall %g", wall);
    char host[256];
    CHECK(tr_sys_hostname(host, sizeof host, &err) == TR_OK && host[0], "%s", err.msg);
    CHECK(tr_sys_pid() == (int)getpid(), "pid");
    CHECK(tr_sys_version()[0] != '\0', "version");
    CHECK(tr_sys_stop_requested() == 0, "no stop asked");
    CHECK(tr_sys_watch_stop(&err) == TR_OK, "%s", err.msg);
    tr_sys_unwatch_stop();
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/test_sys_XXXXXX");
    if (!mkdtemp(base)) {
        printf("FAIL test_sys: mkdtemp\n");
        return 1;
    }
    RUN(test_write_append_truncate);
    RUN(test_failures_name_the_file);
    RUN(test_folders);
    RUN(test_lock);
    RUN(test_clocks_and_process);
    tr_error err;
    if (tr_sys_remove_tree(base, &err) != TR_OK) printf("FAIL cleanup: %s\n", err.msg);
    return check_done();
}
