#define _GNU_SOURCE
#include "CLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

const uint32_t EARMUFF_EPOLLIN = EPOLLIN;
const uint32_t EARMUFF_EPOLLOUT = EPOLLOUT;
const uint32_t EARMUFF_EPOLLERR = EPOLLERR;
const uint32_t EARMUFF_EPOLLHUP = EPOLLHUP;
const uint32_t EARMUFF_EPOLLRDHUP = EPOLLRDHUP;
const uint32_t EARMUFF_EPOLLET = EPOLLET;

int earmuff_peercred(int fd, earmuff_ucred *out) {
    struct ucred c;
    socklen_t len = sizeof(c);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) return -1;
    out->pid = c.pid;
    out->uid = c.uid;
    out->gid = c.gid;
    return 0;
}

ssize_t earmuff_recv_closing_fds(int fd, void *buf, size_t len, int *fds_closed, int *sender_pid) {
    // Room for several SCM_RIGHTS messages of up to 2 fds each plus creds.
    union { char buf[CMSG_SPACE(sizeof(int) * 16) + CMSG_SPACE(sizeof(struct ucred))]; struct cmsghdr align; } ctl;
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    int closed = 0;
    int pid = 0;
    if (n >= 0 && msg.msg_controllen > 0) {
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
                struct ucred u;
                memcpy(&u, CMSG_DATA(c), sizeof(u));
                pid = u.pid;
            }
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int *fds = (int *)CMSG_DATA(c);
                for (size_t i = 0; i < count; i++) {
                    int f;
                    memcpy(&f, fds + i, sizeof(int));
                    close(f);
                    closed++;
                }
            }
        }
    }
    if (fds_closed) *fds_closed = closed;
    if (sender_pid) *sender_pid = pid;
    return n;
}

ssize_t earmuff_send2(int fd, const void *a, size_t alen, const void *b, size_t blen) {
    struct iovec iov[2] = { { .iov_base = (void *)a, .iov_len = alen }, { .iov_base = (void *)b, .iov_len = blen } };
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = blen > 0 ? 2 : 1;
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t earmuff_sendv(int fd, const struct iovec *iov, int count) {
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = (struct iovec *)iov;
    msg.msg_iovlen = (size_t)count;
    ssize_t r;
    do {
        r = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    return r;
}

/* Sends `len` bytes with one SOL_SOCKET control message of `type` carrying `data`. */
static ssize_t send_with_control(int fd, const void *buf, size_t len, int type, const void *data, size_t datalen) {
    union { char buf[CMSG_SPACE(sizeof(struct ucred))]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = CMSG_SPACE(datalen);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(datalen);
    memcpy(CMSG_DATA(c), data, datalen);
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t earmuff_send_with_creds(int fd, const void *buf, size_t len) {
    struct ucred u = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
    return send_with_control(fd, buf, len, SCM_CREDENTIALS, &u, sizeof(u));
}

ssize_t earmuff_send_with_fd(int fd, const void *buf, size_t len, int passfd) {
    return send_with_control(fd, buf, len, SCM_RIGHTS, &passfd, sizeof(passfd));
}

int earmuff_set_passcred(int fd) {
    int one = 1;
    return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
}

int earmuff_unix_socket(void) {
    return socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static int fill_addr(struct sockaddr_un *addr, const char *path) {
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof(addr->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(addr->sun_path, path, n);
    return 0;
}

int earmuff_unix_listen(int fd, const char *path, int backlog) {
    struct sockaddr_un addr;
    if (fill_addr(&addr, path) != 0) return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) return -1;
    return listen(fd, backlog);
}

int earmuff_unix_connect(int fd, const char *path) {
    struct sockaddr_un addr;
    if (fill_addr(&addr, path) != 0) return -1;
    int r;
    do {
        r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
    } while (r < 0 && errno == EINTR);
    return r;
}

int earmuff_accept(int fd) {
    int r;
    do {
        r = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    return r;
}

int earmuff_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int earmuff_epoll_add(int ep, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev = { .events = events, .data.u64 = data };
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int earmuff_epoll_mod(int ep, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev = { .events = events, .data.u64 = data };
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

int earmuff_epoll_del(int ep, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    return epoll_ctl(ep, EPOLL_CTL_DEL, fd, &ev);
}

int earmuff_epoll_wait(int ep, uint32_t *events, uint64_t *datas, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(ep, evs, max, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        events[i] = evs[i].events;
        datas[i] = evs[i].data.u64;
    }
    return n;
}

int earmuff_epoll_sleep(int ep, int64_t timeout_ns) {
    struct epoll_event ev[8];
    if (timeout_ns < 0) timeout_ns = 0;
    int n = -1;
#ifdef SYS_epoll_pwait2
    static int missing = 0;
    if (!__atomic_load_n(&missing, __ATOMIC_RELAXED)) {
        struct timespec ts = { .tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000 };
        n = (int)syscall(SYS_epoll_pwait2, ep, ev, 8, &ts, NULL, 0);
        if (n < 0 && errno == ENOSYS) __atomic_store_n(&missing, 1, __ATOMIC_RELAXED);
    }
    if (n < 0 && errno == ENOSYS)
#endif
        n = epoll_wait(ep, ev, 8, (int)((timeout_ns + 999999) / 1000000));
    if (n < 0) return errno == EINTR ? 0 : -1;
    return n;
}

int earmuff_pipe(int fds[2], int size) {
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
    (void)fcntl(fds[1], F_SETPIPE_SZ, size);
    int capacity = fcntl(fds[1], F_GETPIPE_SZ);
    if (capacity < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return -1;
    }
    return capacity;
}

ssize_t earmuff_splice(int in, int out, size_t len) {
    ssize_t n;
    do {
        n = splice(in, NULL, out, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    } while (n < 0 && errno == EINTR);
    return n;
}

int earmuff_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int earmuff_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t r;
    do {
        r = write(fd, &one, sizeof(one));
    } while (r < 0 && errno == EINTR);
    return r == sizeof(one) || (r < 0 && errno == EAGAIN) ? 0 : -1;
}

int earmuff_eventfd_drain(int fd) {
    uint64_t v;
    ssize_t r;
    do {
        r = read(fd, &v, sizeof(v));
    } while (r < 0 && errno == EINTR);
    return r == sizeof(v) || (r < 0 && errno == EAGAIN) ? 0 : -1;
}

int earmuff_watch_directory(const char *directory) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    if (inotify_add_watch(fd, directory, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int earmuff_directory_events_name(int fd, const char *name) {
    char buffer[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int named = 0;
    for (;;) {
        ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (char *p = buffer; p < buffer + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            if (e->len > 0 && strcmp(e->name, name) == 0) named = 1;
            if (e->mask & IN_Q_OVERFLOW) named = 1; /* events were lost: look again */
            p += sizeof(struct inotify_event) + e->len;
        }
    }
    return named;
}

int earmuff_gettid(void) {
    return (int)syscall(SYS_gettid);
}

long earmuff_raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    }
    return (long)rl.rlim_cur;
}

int earmuff_become_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -errno;
}
