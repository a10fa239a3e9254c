/* path_join.h — "dir/name" in a new string, for the files of a sharded safetensors
 * folder (reading its index, writing its shards). Internal to core/io. */
#ifndef TR_PATH_JOIN_H
#define TR_PATH_JOIN_H

#include <stdlib.h>
#include <string.h>

/* dir, '/', name in a new string the caller frees; NULL when out of memory. */
static inline char *tr_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

#endif
