/* responder — instant HTTP origins for the store and round benchmarks: N_ORIGINS loopback
 * listeners served by one epoll thread that answers every request 200 at once. */
#ifndef CDNCA_BENCH_RESPONDER_H
#define CDNCA_BENCH_RESPONDER_H

#include <pthread.h>

#define N_ORIGINS 3

struct responder {
  int lfd[N_ORIGINS];
  int port[N_ORIGINS];
  int ep;
  int stop_pipe[2];
  pthread_t thr;
};

/* Listen on N_ORIGINS loopback ports (r->port) and start answering; 0 or -1 (errno). */
int responder_start(struct responder *r);

/* Stop the thread and close everything responder_start opened. */
void responder_stop(struct responder *r);

#endif
