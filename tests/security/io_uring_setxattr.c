/* Set the extended attribute user.goatherd on argv[1] through io_uring's
 * IORING_OP_SETXATTR, with raw system calls (no liburing). Prints
 * "setup ERRNO" when io_uring_setup fails, "enter ERRNO" when
 * io_uring_enter fails, else "setxattr RES" (0: the attribute was set). */
#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    static const char name[] = "user.goatherd";
    static const char value[] = "io_uring";
    struct io_uring_params p;
    if (argc != 2) return 2;
    memset(&p, 0, sizeof p);
    int fd = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (fd < 0) {
        printf("setup %d\n", errno);
        return 0;
    }
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (cq_size > sq_size) sq_size = cq_size;
    int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED | MAP_POPULATE;
    char *sq = mmap(NULL, sq_size, prot, flags, fd, IORING_OFF_SQ_RING);
    char *cq = sq;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP))
        cq = mmap(NULL, cq_size, prot, flags, fd, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(NULL, p.sq_entries * sizeof *sqes, prot,
                                     flags, fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
        printf("mmap %d\n", errno);
        return 0;
    }
    memset(&sqes[0], 0, sizeof sqes[0]);
    sqes[0].opcode = IORING_OP_SETXATTR;
    sqes[0].addr = (uint64_t)(uintptr_t)name;
    sqes[0].addr2 = (uint64_t)(uintptr_t)value;
    sqes[0].addr3 = (uint64_t)(uintptr_t)argv[1];
    sqes[0].len = sizeof value - 1;
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned mask = *(unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(sq + p.sq_off.array);
    array[*tail & mask] = 0;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) {
        printf("enter %d\n", errno);
        return 0;
    }
    unsigned head = __atomic_load_n((unsigned *)(cq + p.cq_off.head), __ATOMIC_ACQUIRE);
    unsigned cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    printf("setxattr %d\n", cqes[head & cq_mask].res);
    return 0;
}
