#define _GNU_SOURCE
#include "CLinuxProcess.h"

#include <errno.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int earmuff_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int earmuff_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

int earmuff_pin_thread(pid_t tid, int pinned) {
    cpu_set_t allowed;
    if (sched_getaffinity(getpid(), sizeof(allowed), &allowed) != 0) return -1;
    if (!pinned) return sched_setaffinity(tid, sizeof(allowed), &allowed);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        return sched_setaffinity(tid, sizeof(one), &one);
    }
    errno = EINVAL;
    return -1;
}
