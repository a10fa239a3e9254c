/* lua_json.c — JSON for the Lua layer through jansson (never by hand):
 *   native.json_decode(text [, source]) -> value | nil, message
 *   native.json_encode(value [, indent]) -> text | nil, message
 *   native.json_null                       the value JSON null decodes to
 * Objects decode to tables, arrays to sequences (1-based), numbers to Lua numbers.
 * Encoding: a table is an array when its keys are exactly 1..n (an empty table is an
 * object), object keys are sorted (deterministic files), NaN and infinities are refused,
 * and every real is written as the shortest of %.15g, %.16g and %.17g that reads back as
 * the same double (0.1, not 0.10000000000000001). */
#include "lua_json.h"

#include <lauxlib.h>

#include <jansson.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The address of this byte is the light userdata that stands for JSON null. */
static const char json_null_marker = 0;

/* ---------------------------------------------------------------- decoding */

static void push_json(lua_State *L, json_t *v)
{
    luaL_checkstack(L, 4, "JSON nested too deeply");
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *item;
        lua_createtable(L, 0, (int)json_object_size(v));
        json_object_foreach(v, key, item) {
            push_json(L, item);
            lua_setfield(L, -2, key);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *item;
        lua_createtable(L, (int)json_array_size(v), 0);
        json_array_foreach(v, i, item) {
            push_json(L, item);
            lua_rawseti(L, -2, (int)i + 1);
        }
        break;
    }
    case JSON_STRING:
        lua_pushlstring(L, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        lua_pushnumber(L, (lua_Number)json_integer_value(v));
        break;
    case JSON_REAL:
        lua_pushnumber(L, json_real_value(v));
        break;
    case JSON_TRUE:
        lua_pushboolean(L, 1);
        break;
    case JSON_FALSE:
        lua_pushboolean(L, 0);
        break;
    case JSON_NULL:
        lua_pushlightuserdata(L, (void *)&json_null_marker);
        break;
    }
}

static int l_json_decode(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *source = luaL_optstring(L, 2, "JSON text");
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: invalid JSON at line %d, column %d: %s", source, jerr.line, jerr.column,
                        jerr.text);
        return 2;
    }
    push_json(L, root);
    json_decref(root);
    return 1;
}

/* ---------------------------------------------------------------- encoding */

/* Builds a jansson value from the Lua value at idx; NULL with a message pushed on error. */
static json_t *to_json(lua_State *L, int idx, int depth, const char **why)
{
    if (depth > 200) {
        *why = "nested too deeply (a cycle?)";
        return NULL;
    }
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return json_null();
    case LUA_TBOOLEAN:
        return json_boolean(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
        double x = lua_tonumber(L, idx);
        if (!isfinite(x)) {
            *why = "NaN and infinities have no JSON form";
            return NULL;
        }
        if (x == floor(x) && fabs(x) < 9007199254740992.0) return json_integer((json_int_t)x);
        return json_real(x);
    }
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        json_t *j = json_stringn(s, len);
        if (!j) *why = "a string is not valid UTF-8";
        return j;
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == (void *)&json_null_marker) return json_null();
        *why = "a userdata value has no JSON form";
        return NULL;
    case LUA_TTABLE: {
        size_t n = lua_objlen(L, idx), count = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            count++;
            lua_pop(L, 1);
        }
        if (n > 0 && count == n) {
            json_t *arr = json_array();
            for (size_t i = 1; i <= n; i++) {
                lua_rawgeti(L, idx, (int)i);
                json_t *item = to_json(L, -1, depth + 1, why);
                lua_pop(L, 1);
                if (!item) {
                    json_decref(arr);
                    return NULL;
                }
                json_array_append_new(arr, item);
            }
            return arr;
        }
        json_t *obj = json_object();
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            if (lua_type(L, -2) != LUA_TSTRING && lua_type(L, -2) != LUA_TNUMBER) {
                lua_pop(L, 2);
                json_decref(obj);
                *why = "object keys must be strings";
                return NULL;
            }
            lua_pushvalue(L, -2);
            const char *key = lua_tostring(L, -1); /* converts a copy, not the iteration key */
            json_t *item = to_json(L, -2, depth + 1, why);
            if (!item) {
                lua_pop(L, 3);
                json_decref(obj);
                return NULL;
            }
            json_object_set_new(obj, key, item);
            lua_pop(L, 2);
        }
        return obj;
    }
    default:
        *why = "functions and other Lua values have no JSON form";
        return NULL;
    }
}

/* ---------------------------------------------------------------- shortest reals */

/* x as jansson writes a real at precision p, in buf (at least 40 bytes): "%.*g" with the
 * C decimal point whatever the locale, ".0" added when it would read as an integer, no
 * '+' or leading zeros in the exponent. Returns 1 when that text reads back as x. */
static int format_real(char *buf, double x, int p, char point)
{
    snprintf(buf, 40, "%.*g", p, x);
    int exact = strtod(buf, NULL) == x; /* strtod reads the locale's decimal point */
    for (char *c = buf; *c; c++)
        if (*c == point) *c = '.';
    if (!strchr(buf, '.') && !strchr(buf, 'e')) strcat(buf, ".0");
    char *e = strchr(buf, 'e');
    if (e) {
        char *start = e + 1, *digits = start;
        if (*digits == '+' || *digits == '-') digits++;
        char *first = digits;
        while (*first == '0' && first[1]) first++;
        if (*start == '+') {
            memmove(start, first, strlen(first) + 1);
        } else if (first != digits) {
            memmove(digits, first, strlen(first) + 1);
        }
    }
    return exact;
}

/* jansson writes every real of a document at one precision (17 here, which always reads
 * back exactly). Returns a copy of text with each real rewritten at the least precision
 * (15, 16 or 17) that reads back as the same double, or NULL when out of memory. Strings
 * are copied as they are; numbers are the tokens outside strings that begin with '-' or
 * a digit, and reals are those among them with '.' or an exponent. */
static char *shortest_reals(const char *text)
{
    const struct lconv *lc = localeconv();
    char point = lc && lc->decimal_point && lc->decimal_point[0] ? lc->decimal_point[0] : '.';
    size_t n = strlen(text), cap = n + 64, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        char tok[64];
        size_t start = i, tlen = 0;
        int is_real = 0;
        if (text[i] == '"') {
            for (i++; i < n && text[i] != '"'; i++)
                if (text[i] == '\\' && i + 1 < n) i++;
            if (i < n) i++;
        } else if (text[i] == '-' || (text[i] >= '0' && text[i] <= '9')) {
            while (i < n && strchr("0123456789+-.eE", text[i])) {
                if (text[i] == '.' || text[i] == 'e' || text[i] == 'E') is_real = 1;
                i++;
            }
            tlen = i - start;
        } else {
            i++;
        }
        const char *piece = text + start;
        size_t plen = i - start;
        char best[48];
        if (is_real && tlen < sizeof tok) {
            memcpy(tok, piece, tlen);
            tok[tlen] = 0;
            for (char *c = tok; *c; c++)
                if (*c == '.') *c = point;
            double x = strtod(tok, NULL);
            for (int p = 15; p <= 17; p++)
                if (format_real(best, x, p, point) || p == 17) break;
            piece = best;
            plen = strlen(best);
        }
        if (len + plen + 1 > cap) {
            size_t ncap = 2 * cap + plen;
            char *grown = realloc(out, ncap);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
            cap = ncap;
        }
        memcpy(out + len, piece, plen);
        len += plen;
    }
    out[len] = 0;
    return out;
}

static int l_json_encode(lua_State *L)
{
    int indent = (int)luaL_optinteger(L, 2, 0);
    const char *why = "cannot encode";
    lua_settop(L, 2);
    json_t *j = to_json(L, 1, 0, &why);
    if (!j) {
        lua_pushnil(L);
        lua_pushfstring(L, "cannot write JSON: %s", why);
        return 2;
    }
    size_t flags = JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17);
    if (indent > 0) flags |= JSON_INDENT(indent);
    else flags |= JSON_COMPACT;
    char *text = json_dumps(j, flags);
    json_decref(j);
    char *shortest = text ? shortest_reals(text) : NULL;
    free(text);
    if (!shortest) {
        lua_pushnil(L);
        lua_pushstring(L, "cannot write JSON: out of memory");
        return 2;
    }
    lua_pushstring(L, shortest);
    free(shortest);
    return 1;
}

void tr_lua_json_register(lua_State *L)
{
    lua_pushcfunction(L, l_json_decode);
    lua_setfield(L, -2, "json_decode");
    lua_pushcfunction(L, l_json_encode);
    lua_setfield(L, -2, "json_encode");
    lua_pushlightuserdata(L, (void *)&json_null_marker);
    lua_setfield(L, -2, "json_null");
}
