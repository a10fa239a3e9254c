/* lua_native.c — the module `trainer.native`: what needs a lua_State and so cannot be a
 * plain C function behind the FFI (core/sys/ holds the rest): a protected call that Ctrl-C
 * interrupts (a hook armed in the running Lua state), line editing through libedit with
 * history and Tab completion by a Lua function, the root folder the host put in the
 * registry (ffi.lua needs it to find the header before there is an FFI), and the JSON
 * binding (lua_json.c: it builds Lua tables).
 *
 * The one piece of process-wide state is `interrupt_target`, the Lua state a SIGINT
 * handler may arm a hook in; a signal handler can reach nothing else (luajit.c does the
 * same). It is set only while a chunk runs under native.icall.
 * `completion_target` is its twin for Tab: libedit's completion hook takes no user data,
 * so the Lua state whose completer answers is set only while native.readline waits. */
#include "lua_native.h"
#include "lua_json.h"

#include <lauxlib.h>
#include <lualib.h>

#include <editline/readline.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---------------------------------------------------------------- the host */

/* native.root() -> the folder that holds lua/, recipes/ and core/ (set by the host). */
static int l_root(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "trainer.root");
    return 1;
}

void tr_lua_use_root(lua_State *L, const char *root, const char *extra_path)
{
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua", root, root);
    if (extra_path) {
        lua_pushfstring(L, ";%s", extra_path);
        lua_concat(L, 2);
    }
    lua_setfield(L, -2, "path");
    lua_pushstring(L, "");
    lua_setfield(L, -2, "cpath");
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, tr_lua_open_native);
    lua_setfield(L, -2, "trainer.native");
    lua_pop(L, 2);
    lua_pushstring(L, root);
    lua_setfield(L, LUA_REGISTRYINDEX, "trainer.root");
}

int tr_lua_open_native(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "icall", l_icall },
        { "readline", l_readline },
        { "init_line_editing", l_init_line_editing },
        { "add_history", l_add_history },
        { "read_history", l_read_history },
        { "write_history", l_write_history },
        { "root", l_root },
        { NULL, NULL },
    };
    lua_newtable(L);
    luaL_register(L, NULL, fns);
    tr_lua_json_register(L);
    return 1;
}
