/* svc — signal loop and systemd notifications over libsystemd's sd_notify. */
#include "svc.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "clock.h"
#include "log.h"

void svc_block_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

int svc_wait(const sigset_t *set, int64_t timeout_ms) {
  for (;;) {
    int sig;
    if (timeout_ms < 0) {
      if (sigwait(set, &sig) == 0) return sig;
      continue;
    }
    struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
    sig = sigtimedwait(set, NULL, &ts);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return 0;
    /* EINTR: a signal outside the set was handled; wait again (the timeout restarts, which
       only delays a ping by less than one period) */
  }
}

int64_t svc_watchdog_ping_ms(void) {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return 0;
  return usec / 2000 > 0 ? (int64_t)(usec / 2000) : 1;
}

static void notify(const char *state) {
  int rc = sd_notify(0, state);
  if (rc < 0) log_warn("sd_notify(%s): %s", state, strerror(-rc));
}

void svc_ready(const char *status) {
  int rc = sd_notifyf(0, "READY=1\nSTATUS=%s", status ? status : "running");
  if (rc < 0) log_warn("sd_notify(READY=1): %s", strerror(-rc));
}

void svc_reloading(void) {
  struct timespec ts;
  int rc;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  /* MONOTONIC_USEC lets systemd >= 253 (Type=notify-reload) match this reload to its request */
  rc = sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
                  (unsigned long long)ts.tv_sec * 1000000ULL +
                      (unsigned long long)ts.tv_nsec / 1000);
  if (rc < 0) log_warn("sd_notify(RELOADING=1): %s", strerror(-rc));
}

void svc_stopping(void) {
  notify("STOPPING=1");
}

void svc_watchdog_ping(void) {
  notify("WATCHDOG=1");
}

int svc_loop(const sigset_t *set, const char *status, void (*reload)(void *arg), void *arg) {
  int64_t ping_ms = svc_watchdog_ping_ms(), next_ping = clock_mono_ms() + ping_ms;
  if (ping_ms > 0) log_info("systemd watchdog on: a ping every %lld ms", (long long)ping_ms);
  for (;;) {
    int64_t wait = -1;
    int sig;
    if (ping_ms > 0) {
      wait = next_ping - clock_mono_ms();
      if (wait < 0) wait = 0;
    }
    sig = svc_wait(set, wait);
    /* on time even when signals keep coming */
    if (ping_ms > 0 && clock_mono_ms() >= next_ping) {
      svc_watchdog_ping();
      next_ping = clock_mono_ms() + ping_ms;
    }
    if (sig == 0) continue;
    if (sig == SIGHUP) {
      svc_reloading();
      reload(arg);
      svc_ready(status);
      continue;
    }
    svc_stopping();
    return sig;
  }
}
