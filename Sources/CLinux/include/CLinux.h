// C shims for Linux socket features that Swift cannot import directly:
// CMSG_* macros, SO_PEERCRED, SCM_RIGHTS/SCM_CREDENTIALS, epoll and eventfd.
#ifndef EARMUFF_CLINUX_H
#define EARMUFF_CLINUX_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "CLinuxProcess.h"

/// Peer credentials of a connected Unix socket (SO_PEERCRED).
typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} earmuff_ucred;

/// Returns 0 and fills `out`, or -1 with errno set.
int earmuff_peercred(int fd, earmuff_ucred *out);

/// recvmsg() with a control buffer. Every SCM_RIGHTS fd that arrives is closed
/// at once; `fds_closed` (may be NULL) receives how many were closed.
/// `sender_pid` (may be NULL) receives the pid of SCM_CREDENTIALS (the process
/// that sent these bytes, when SO_PASSCRED is on), else 0.
/// Returns bytes read, 0 on EOF, or -1 with errno set. Retries EINTR.
ssize_t earmuff_recv_closing_fds(int fd, void *buf, size_t len, int *fds_closed, int *sender_pid);

/// sendmsg() of up to two buffers (for a ring that wraps), MSG_NOSIGNAL.
/// Returns bytes sent or -1 with errno set. Retries EINTR.
ssize_t earmuff_send2(int fd, const void *a, size_t alen, const void *b, size_t blen);

/// sendmsg() of `count` buffers (what a ring holds, then what one read let
/// through), MSG_NOSIGNAL. Returns bytes sent or -1 with errno set. Retries EINTR.
ssize_t earmuff_sendv(int fd, const struct iovec *iov, int count);

/// Sends `len` bytes with an SCM_CREDENTIALS message of this process's own
/// pid/uid/gid attached (what libpulse does for AUTH). Retries EINTR.
ssize_t earmuff_send_with_creds(int fd, const void *buf, size_t len);

/// Sends `len` bytes with one SCM_RIGHTS fd attached (tests only).
ssize_t earmuff_send_with_fd(int fd, const void *buf, size_t len, int passfd);

/// Sets SO_PASSCRED on a socket. Returns 0 or -1.
int earmuff_set_passcred(int fd);

/// Creates a non-blocking, close-on-exec Unix stream socket. Returns fd or -1.
int earmuff_unix_socket(void);

/// Binds and listens at `path` (unlinking a stale socket first). Returns 0 or -1.
int earmuff_unix_listen(int fd, const char *path, int backlog);

/// Connects to `path`. Returns 0, or -1 with errno (EINPROGRESS/EAGAIN for a
/// non-blocking socket that is still connecting).
int earmuff_unix_connect(int fd, const char *path);

/// accept4() with SOCK_NONBLOCK | SOCK_CLOEXEC; retries EINTR.
int earmuff_accept(int fd);

/// epoll helpers: the 64-bit user data is passed through unchanged.
int earmuff_epoll_create(void);
int earmuff_epoll_add(int ep, int fd, uint32_t events, uint64_t data);
int earmuff_epoll_mod(int ep, int fd, uint32_t events, uint64_t data);
int earmuff_epoll_del(int ep, int fd);
/// Waits; fills parallel arrays. Returns count, 0 on timeout, -1 on error (EINTR gives 0).
int earmuff_epoll_wait(int ep, uint32_t *events, uint64_t *datas, int max, int timeout_ms);
/// Sleeps until `ep` has an event or `timeout_ns` nanoseconds pass, without
/// reporting which (epoll_pwait2; where the kernel lacks it, epoll_wait with
/// the timeout rounded up to a millisecond). Returns >0, 0 on timeout or EINTR, -1 on error.
int earmuff_epoll_sleep(int ep, int64_t timeout_ns);

extern const uint32_t EARMUFF_EPOLLIN;
extern const uint32_t EARMUFF_EPOLLOUT;
extern const uint32_t EARMUFF_EPOLLERR;
extern const uint32_t EARMUFF_EPOLLHUP;
extern const uint32_t EARMUFF_EPOLLRDHUP;
extern const uint32_t EARMUFF_EPOLLET;

/// eventfd helpers (non-blocking, close-on-exec).
int earmuff_eventfd(void);
int earmuff_eventfd_signal(int fd);
int earmuff_eventfd_drain(int fd);

/// A pipe (both ends non-blocking, close-on-exec) asked to hold `size` bytes: fds[0] reads,
/// fds[1] writes. Returns the capacity it got (the default when the size is refused), or -1
/// with errno set.
int earmuff_pipe(int fds[2], int size);
/// splice(2) of up to `len` bytes from `in` to `out` (one of them a pipe), moving pages
/// rather than copying and never waiting on the pipe. Returns bytes moved, 0 at end of
/// file, or -1 with errno set. Retries EINTR. A socket it writes to may raise SIGPIPE.
ssize_t earmuff_splice(int in, int out, size_t len);

/// An inotify descriptor (non-blocking, close-on-exec) watching `directory` for entries
/// created or moved in; -1 with errno on failure.
int earmuff_watch_directory(const char *directory);
/// Reads every queued inotify event of `fd`; 1 if one of them names `name`, else 0.
int earmuff_directory_events_name(int fd, const char *name);

/// Raises RLIMIT_NOFILE's soft limit to its hard limit. Returns the new soft limit.
long earmuff_raise_nofile(void);

/// The calling thread's kernel id (gettid), what the scheduler knows it by.
int earmuff_gettid(void);

/// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER),
/// so what a child leaves behind can be waited for. Returns 0 or -errno.
int earmuff_become_subreaper(void);

#endif
