// Process handles for Swift: pidfd_open has no glibc wrapper on every system
// this builds on, and Swift cannot call the variadic syscall(2).
#ifndef EARMUFF_CLINUX_PROCESS_H
#define EARMUFF_CLINUX_PROCESS_H

#include <sys/types.h>

/// A pidfd for `pid` (close-on-exec), readable once the process exits; -1 with errno.
int earmuff_pidfd_open(pid_t pid);

/// Names the calling thread (the first 15 bytes), as `top -H` and gdb show it; -1 with errno.
int earmuff_set_thread_name(const char *name);

/// Lets thread `tid` run only on the lowest CPU this process may use, or (`pinned` 0) on
/// every CPU the process may use again (the CPU_* macros do not reach Swift); -1 with errno.
int earmuff_pin_thread(pid_t tid, int pinned);

#endif
