/* Make sockets through 32-bit system calls (int 0x80) from a 64-bit x86_64
 * program: socket (359) for TCP, MPTCP and UDP, and socketcall (102) for
 * TCP. Prints "NAME ERRNO" per call (0: the socket was made). Built with
 * -no-pie so the socketcall argument block has a 32-bit address. */
#include <stdio.h>
#include <unistd.h>

static long call32(long nr, long a, long b, long c) {
    long rc;
    __asm__ volatile ("int $0x80" : "=a"(rc) : "a"(nr), "b"(a), "c"(b), "d"(c)
                      : "memory");
    return rc;
}

static unsigned int block[3] = {2, 1, 0}; /* AF_INET, SOCK_STREAM, 0 */

static void report(const char *name, long rc) {
    printf("%s %ld\n", name, rc < 0 ? -rc : 0);
    if (rc >= 0) call32(6, rc, 0, 0); /* close */
}

int main(void) {
    report("i386_tcp", call32(359, 2, 1, 0));
    report("i386_mptcp", call32(359, 2, 1, 262));
    report("i386_udp", call32(359, 2, 2, 0));
    report("i386_socketcall", call32(102, 1, (long)block, 0));
    return 0;
}
