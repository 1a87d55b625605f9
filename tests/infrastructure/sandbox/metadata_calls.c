/* Issues every metadata system call the seccomp filter covers, directly.
 * Usage: metadata_calls PATH [i386]; prints "NAME ERRNO" per call (0: succeeded);
 * with "i386" it also makes 32-bit calls through int 0x80.
 * Built by tests/infrastructure/sandbox/test_landlock_seccomp.py with -no-pie,
 * so that the static path buffer has an address the 32-bit int 0x80 entry
 * can take. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static char path32[4096];

static void report(const char *name, long rc) {
    printf("%s %d\n", name, rc < 0 ? errno : 0);
}

#ifdef __x86_64__
static long int80(long nr, long a, long b) {
    long rc;
    __asm__ volatile ("int $0x80" : "=a"(rc) : "a"(nr), "b"(a), "c"(b) : "memory");
    return rc;
}
#endif

int main(int argc, char **argv) {
    const char *p = argv[1];
    int fd = open(p, O_RDONLY);
    uid_t u = getuid(); gid_t g = getgid();
    struct timeval tv[2] = {{1, 0}, {1, 0}};
    struct timespec ts[2] = {{1, 0}, {1, 0}};
    errno = 0; report("chmod", syscall(SYS_chmod, p, 0600));
    errno = 0; report("fchmod", syscall(SYS_fchmod, fd, 0600));
    errno = 0; report("fchmodat", syscall(SYS_fchmodat, AT_FDCWD, p, 0600));
    errno = 0; report("fchmodat2", syscall(452, AT_FDCWD, p, 0600, 0));
    errno = 0; report("chown", syscall(SYS_chown, p, u, g));
    errno = 0; report("fchown", syscall(SYS_fchown, fd, u, g));
    errno = 0; report("lchown", syscall(SYS_lchown, p, u, g));
    errno = 0; report("fchownat", syscall(SYS_fchownat, AT_FDCWD, p, u, g, 0));
    errno = 0; report("utime", syscall(SYS_utime, p, NULL));
    errno = 0; report("utimes", syscall(SYS_utimes, p, tv));
    errno = 0; report("futimesat", syscall(SYS_futimesat, AT_FDCWD, p, tv));
    errno = 0; report("utimensat", syscall(SYS_utimensat, AT_FDCWD, p, ts, 0));
    errno = 0; report("setxattr", syscall(SYS_setxattr, p, "user.t", "v", 1, 0));
    errno = 0; report("lsetxattr", syscall(SYS_lsetxattr, p, "user.t", "v", 1, 0));
    errno = 0; report("fsetxattr", syscall(SYS_fsetxattr, fd, "user.t", "v", 1, 0));
    errno = 0; report("removexattr", syscall(SYS_removexattr, p, "user.none"));
    errno = 0; report("lremovexattr", syscall(SYS_lremovexattr, p, "user.none"));
    errno = 0; report("fremovexattr", syscall(SYS_fremovexattr, fd, "user.none"));
    errno = 0; report("setxattrat", syscall(463, -1, NULL, 0, NULL, NULL, 0));
    errno = 0; report("removexattrat", syscall(466, -1, NULL, 0, NULL));
    errno = 0; report("file_setattr", syscall(469, -1, NULL, NULL, 0, 0));
    long flags = 0;
    errno = 0; report("ioctl_getflags", ioctl(fd, FS_IOC_GETFLAGS, &flags));
    errno = 0; report("ioctl_setflags", ioctl(fd, FS_IOC_SETFLAGS, &flags));
    errno = 0; report("ioctl_setflags32", ioctl(fd, 0x40046602, &flags));
    errno = 0; report("ioctl_fssetxattr", ioctl(fd, 0x401c5820, &flags));
#ifdef __x86_64__
    errno = 0; report("x32_chmod", syscall(0x40000000 | SYS_chmod, p, 0600));
    if (argc < 3 || strcmp(argv[2], "i386") != 0) return 0;
    strncpy(path32, p, sizeof path32 - 1);
    long rc = int80(15, (long)path32, 0600);
    printf("i386_chmod %ld\n", rc < 0 ? -rc : 0);
    rc = int80(20, 0, 0);
    printf("i386_getpid %s\n", rc == getpid() ? "ok" : "wrong");
#endif
    return 0;
}
