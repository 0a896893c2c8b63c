/* store_signal — the store's side of the signals between replicas (signals.h): the caches a
   notification invalidates, and the dedicated listening connection. Only signals.c uses the
   listener; NOTIFY is sent by the store itself inside the transactions (store_core.h
   store_signal_locked). */
#ifndef CDNCA_STORE_SIGNAL_H
#define CDNCA_STORE_SIGNAL_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct store_tx;
struct store_listener;

/* 1 when the store is on PostgreSQL, where several replicas may share the database. */
int store_cluster_mode(struct store *st);

/* Turn the store's caches on or off. Off: every token lookup reads the database and
   store_generation() answers a new value on every call (so no rendered reply is reused); the
   token cache is emptied. On PostgreSQL they start off (nothing listens yet); on SQLite on. */
void store_caches_set(struct store *st, int on);
int store_caches_on(struct store *st);

/* Forget every cached token (another replica removed tokens). */
void store_caches_clear_tokens(struct store *st);

/* Another replica committed an ordered write with cdnca_meta.gen = gen (or a poll read it): when
   gen is newer than any seen, store_generation() moves. Thread-safe. */
void store_gen_observe(struct store *st, int64_t gen);

/* A connection of its own for LISTEN (PostgreSQL); NULL on failure (logged at debug: the caller
   retries with backoff). */
struct store_listener *store_listener_open(struct store *st);
void store_listener_close(struct store_listener **l);

/* LISTEN on channel; 0 or -1. */
int store_listener_listen(struct store_listener *l, const char *channel);

/* The next notification within timeout_ms: 1 (channel, payload copied), 0 (none), -1 (the
   connection is lost or failed: close it and open another). */
int store_listener_wait(struct store_listener *l, int timeout_ms, char *channel, size_t chcap,
                        char *payload, size_t plcap);

/* On the listener's connection: the newest publication seq and cdnca_meta.gen; 0 or -1. */
int store_listener_state(struct store_listener *l, int64_t *seq, int64_t *gen);

/* The reason of the listener's last failure. */
const char *store_listener_errmsg(struct store_listener *l);

/* Inside a write transaction (PostgreSQL; a no-op returning 0 on SQLite): NOTIFY channel with
   payload, delivered to every listening replica when the transaction commits, never if it rolls
   back. 0 or -1 (the transaction has failed). */
int store_signal_locked(struct store_tx *tx, const char *channel, const char *payload);

/* Add the participant that, just before each COMMIT, sends the notifications the transaction owes
   (cdnca_pub "seq=… gen=…" for an ordered one, cdnca_inval "tokens" when tokens were removed and
   "events" when events were recorded) and, after it, observes its gen (store_open does it). 0 or
   -1. */
int store_signal_attach(struct store *st);

#endif
