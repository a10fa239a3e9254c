/* stop_signal.c — the training loop's stop flag (sys.h). The one piece of process-wide
 * state is `stop_signal`, a sig_atomic_t that the SIGINT/SIGTERM handler sets and
 * tr_sys_stop_requested reads, so that a run finishes its step, saves and exits instead of
 * dying mid-write. */
#include "sys.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

/* The first signal asks the loop to stop after its step; a second one ends the process the
 * default way (a user who presses Ctrl-C twice means it). Only async-signal-safe calls. */
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

int tr_sys_watch_stop(tr_error *err)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return tr_fail(err, TR_EINTERNAL, "sigaction(SIGINT, SIGTERM): %s", strerror(errno));
    stop_signal = 0;
    return TR_OK;
}

void tr_sys_unwatch_stop(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    stop_signal = 0;
}

int tr_sys_stop_requested(void) { return stop_signal; }
