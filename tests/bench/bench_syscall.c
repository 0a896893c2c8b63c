/* bench_syscall — what a system call costs on this machine by itself, the part of a proxied
 * request that no proxy's code can remove by being faster:
 *   - getppid: entry and exit, no work;
 *   - peek: recv(MSG_PEEK | MSG_DONTWAIT) of one byte on an idle connected TCP socket (EAGAIN),
 *     the check noded makes when it takes a pooled origin connection;
 *   - io_uring: BATCH no-op requests per io_uring_enter (submit and wait for all), the cost per
 *     request when the entry is shared by a batch, to bound what batching system calls could save.
 * usage: bench_syscall [N (default 2000000)] [ROUNDS (default 5)] [BATCH (default 16)]
 * Prints ns per call, the median over ROUNDS. Run it pinned (taskset -c 1) on an idle core. */
#include <errno.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"

static double run_getppid(long n) {
  double t0 = bench_now_ns();
  for (long i = 0; i < n; i++)
    syscall(SYS_getppid);
  return (bench_now_ns() - t0) / (double)n;
}

/* a connected loopback pair; the client end is returned, nothing is ever written to it */
static int tcp_pair(int *server_end) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &al) != 0 ||
      connect(c, (struct sockaddr *)&a, sizeof a) != 0 || (*server_end = accept(l, NULL, NULL)) < 0)
    return -1;
  close(l);
  return c;
}

static double run_peek(int fd, long n) {
  char b;
  double t0 = bench_now_ns();
  for (long i = 0; i < n; i++)
    if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 || errno != EAGAIN) return -1;
  return (bench_now_ns() - t0) / (double)n;
}

struct ring {
  int fd;
  unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
  struct io_uring_sqe *sqes;
};

static int ring_open(struct ring *r, unsigned entries) {
  struct io_uring_params p;
  void *sq, *cq;
  memset(&p, 0, sizeof p);
  r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
  if (r->fd < 0) return -1;
  sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned), PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
  cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
            PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
  r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED) return -1;
  r->sq_tail = (unsigned *)((char *)sq + p.sq_off.tail);
  r->sq_mask = (unsigned *)((char *)sq + p.sq_off.ring_mask);
  r->sq_array = (unsigned *)((char *)sq + p.sq_off.array);
  r->cq_head = (unsigned *)((char *)cq + p.cq_off.head);
  r->cq_tail = (unsigned *)((char *)cq + p.cq_off.tail);
  r->cq_mask = (unsigned *)((char *)cq + p.cq_off.ring_mask);
  return 0;
}

/* ns per no-op request, batch requests per io_uring_enter */
static double run_uring(struct ring *r, long n, unsigned batch) {
  double t0 = bench_now_ns();
  for (long done = 0; done < n; done += batch) {
    unsigned tail = *r->sq_tail;
    for (unsigned k = 0; k < batch; k++) {
      unsigned i = (tail + k) & *r->sq_mask;
      memset(&r->sqes[i], 0, sizeof r->sqes[i]);
      r->sqes[i].opcode = IORING_OP_NOP;
      r->sq_array[i] = i;
    }
    __atomic_store_n(r->sq_tail, tail + batch, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, r->fd, batch, batch, IORING_ENTER_GETEVENTS, NULL, 0) !=
        (long)batch)
      return -1;
    __atomic_store_n(r->cq_head, __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
  }
  return (bench_now_ns() - t0) / (double)n;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  unsigned batch = argc > 3 ? (unsigned)atoi(argv[3]) : 16;
  double a[64], b[64], c[64];
  int peer, fd = tcp_pair(&peer);
  struct ring r = {0};
  int have_ring;
  if (n < 1 || rounds < 1 || rounds > 64 || batch < 1 || batch > 256 || fd < 0) {
    fprintf(stderr, "usage: bench_syscall [N] [ROUNDS 1..64] [BATCH 1..256]\n");
    return 2;
  }
  have_ring = ring_open(&r, 256) == 0;
  for (int i = 0; i < rounds; i++) {
    a[i] = run_getppid(n);
    b[i] = run_peek(fd, n);
    c[i] = have_ring ? run_uring(&r, n - n % batch, batch) : -1;
    if (b[i] < 0 || (have_ring && c[i] < 0)) {
      fprintf(stderr, "bench_syscall: a call failed: %s\n", strerror(errno));
      return 1;
    }
  }
  printf("getppid: %.1f ns per call (median of %d rounds of %ld)\n", bench_median(a, rounds),
         rounds, n);
  printf("recv MSG_PEEK, nothing to read: %.1f ns per call\n", bench_median(b, rounds));
  if (have_ring)
    printf("io_uring, %u no-ops per io_uring_enter: %.1f ns per request\n", batch,
           bench_median(c, rounds));
  else
    printf("io_uring: not available here (%s)\n", strerror(errno));
  return 0;
}
