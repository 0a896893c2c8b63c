/* incident — one record per outage of a site (docs/design.md#incidents): the record, its field
   table, its timeline entry, and the pure rules that open, reopen, mitigate and resolve it. No
   SQL, no JSON, no clock: every rule takes `now`. */
#ifndef CDNCA_INCIDENT_H
#define CDNCA_INCIDENT_H

#include <stdint.h>

#include "fields.h"

enum incident_state {
  INCIDENT_OPEN = 0,      /* visitors may be affected, nothing has mitigated it yet */
  INCIDENT_MITIGATED = 1, /* served from a healthy level other than the one it opened on */
  INCIDENT_RESOLVED = 2,  /* back, and clear for the quiet time; or resolved by an operator */
};
#define INCIDENT_STATES 3
extern const char *const incident_state_names[INCIDENT_STATES];

/* What opened it. */
enum incident_trigger {
  INCIDENT_TRIGGER_ORIGIN = 0,   /* "origin_unhealthy": an origin of the current level turned
                                    unhealthy */
  INCIDENT_TRIGGER_SWITCH = 1,   /* "switch": an automatic switch away from the current level */
  INCIDENT_TRIGGER_ALL_DOWN = 2, /* "all_levels_unhealthy" */
};
#define INCIDENT_TRIGGERS 3
extern const char *const incident_trigger_names[INCIDENT_TRIGGERS];

/* At most this many timeline entries per incident; later ones are counted in `dropped`. */
#define INCIDENT_MAX_ENTRIES 10000
/* The switches of an incident whose propagation to every node is recorded: the first this many
   (each is a row per node; a site flapping for hours switched hundreds of times). Every switch
   is on the timeline. */
#define INCIDENT_MAX_SWITCHES 64
/* A switch's propagation lists at most this many nodes, the slowest (the last to apply it), in
   the order they applied it; its figures count every node (docs/design.md#incidents). */
#define INCIDENT_PROP_NODES_MAX 100
/* Longest operator note, in bytes of UTF-8. */
#define INCIDENT_NOTE_MAX 4096

struct incident_rec {
  int64_t id, site_id;
  char site_name[65];
  int state;   /* enum incident_state */
  int trigger; /* enum incident_trigger */
  int64_t opened_at, mitigated_at, resolved_at;
  int64_t clear_since;      /* the resolution's conditions have held since (0: they do not now) */
  int opened_level;         /* the level the site was on when it opened */
  char levels_served[48];   /* "1,2": every level it was served from, in order of first use */
  int reopened;             /* times a trigger within the quiet time reopened it */
  int64_t first_failure_at; /* the first failed verdict that led to the trigger (0: unknown) */
  int64_t switched_at;      /* the first switch during it (0: none) */
  int64_t switch_seq;       /* the publication of its newest switch (0: none) */
  char resolved_by[65];     /* the operator's token name when an operator resolved it */
  int entries, dropped;     /* timeline entries stored, and those over INCIDENT_MAX_ENTRIES */
};

/* The record's field table: its columns (the order the store reads them) and its API form
   (FORM_OUT). */
extern const struct field_def incident_fields[];

/* One timeline entry: an event of the site while the incident was active (its type, title and
   data, the votes of a state change included) or an operator's note. */
struct incident_entry {
  int64_t id, incident_id, at;
  char kind[16];    /* "event" or "note" */
  int64_t event_id; /* kind event: the event's id */
  char type[48];    /* the event's type, or "note" / "resolve" */
  char title[160];  /* the event's title, or the operator's name */
  char *data;       /* JSON text, owned */
};
extern const struct field_def incident_entry_fields[];

/* What a rule did to the record. */
enum incident_change {
  INCIDENT_SAME = 0,     /* nothing the operator would be told of (a time may have moved) */
  INCIDENT_OPENED,       /* a new incident: the caller stores it and announces incident.opened */
  INCIDENT_REOPENED,     /* a resolved one within the quiet time is open again (reopened + 1) */
  INCIDENT_MITIGATED_AT, /* it turned mitigated: announce incident.mitigated */
  INCIDENT_RESOLVED_AT,  /* it turned resolved: announce incident.resolved */
  INCIDENT_UNMITIGATED,  /* mitigated → open: the level serving it is no longer healthy */
};

/* The levels of r->levels_served into out[0..cap), in order; their count. */
int incident_levels(const struct incident_rec *r, int *out, int cap);

/* 1 when the record is open or mitigated. */
int incident_active(const struct incident_rec *r);

/* A trigger for site (id, name) on level at now. *r is the site's latest incident (have = 1) or
   nothing (have = 0). An active incident absorbs the trigger (SAME); a resolved one whose
   resolution is less than quiet_ms old is reopened (REOPENED: state open, resolved fields
   cleared, reopened + 1); otherwise *r becomes a new incident (OPENED, id 0) opened on level,
   with first_failure_at (0: now). */
enum incident_change incident_trigger_at(struct incident_rec *r, int have, int64_t site_id,
                                         const char *site_name, enum incident_trigger t, int level,
                                         int64_t first_failure_at, int64_t now, int64_t quiet_ms);

/* A switch of an active incident's site to level at now: the level joins levels_served, and the
   first switch sets switched_at. */
void incident_switched(struct incident_rec *r, int level, int64_t now);

/* The site as the rules see it at the end of an evaluation. */
struct incident_view {
  int current_level;
  int current_healthy;  /* the current level is healthy */
  int failed_unhealthy; /* origins that failed during the incident and are not healthy now */
  int all_unhealthy;    /* every level is unhealthy */
};

/* An active incident at the end of an evaluation (docs/design.md#incidents):
   - open → mitigated when the current level is healthy and is not the one it opened on;
   - mitigated → open when the current level is no longer healthy;
   - resolved when the site is on the level it opened on or an earlier one, that level is
     healthy, no failed origin is unhealthy and not every level is: these have held since
     clear_since for quiet_ms (0: at once).
   A resolved record is left as it is (SAME). */
enum incident_change incident_evaluate(struct incident_rec *r, const struct incident_view *v,
                                       int64_t now, int64_t quiet_ms);

/* An operator resolves it at now (by: the token's name). 0, or -1 when it is resolved already. */
int incident_resolve_by(struct incident_rec *r, const char *by, int64_t now);

/* Figures of a record, in ms (-1 when not known): time to detect (first failure → opened),
   to switch (opened → first switch), to mitigate, to resolve (opened → resolved). */
struct incident_figures {
  int64_t detect_ms, switch_ms, mitigate_ms, resolve_ms;
};
void incident_figures(const struct incident_rec *r, struct incident_figures *out);

/* One node's first ask for the config holding a switch publication (seq): a row of an
   incident's propagation (incident_applied) or a drill's (drill_applied). */
struct applied_row {
  int64_t seq, published_at, node_id, applied_at;
  char node_name[65];
  /* when a reader gives only some of a seq's rows (an incident's: its slowest and its median,
     store_applied_rows): the row's place among them all by applied_at (1 = the first) and their
     number; 0 and 0 when every row is given */
  int64_t rank, count;
};

/* A switch publication of the incident's site. */
struct incident_pub {
  int64_t seq, created_at;
  char reason[32];
};

/* Visitor traffic one node reported for one origin while the incident was active. */
struct incident_impact {
  int64_t node_id, origin_id, requests, failures, backup_picks, fail_open;
  int64_t first_failure_at, last_failure_at; /* 0 = none */
  char node_name[65];
};

/* A webhook delivery of an event on the timeline. */
struct incident_delivery {
  int64_t event_id, webhook_id, attempts, last_attempt_at;
  char state[16];
  int last_status;
  char event_type[48];
};

/* One switch's propagation: how many nodes applied publication seq, how fast. */
struct incident_prop {
  int64_t seq, published_at;
  int applied;             /* nodes that asked holding it */
  int64_t p50_ms, max_ms;  /* after published_at; -1 when none applied */
  int64_t last_applied_at; /* 0 when none */
  char slowest[65];        /* the node of max_ms */
};

/* The propagation of seq (published at published_at) from the rows a[0..n) (any seqs): every
   row of seq, or (count > 0) some of them that hold the median and the slowest. Pure. */
void incident_propagation(const struct applied_row *a, int n, int64_t seq, int64_t published_at,
                          struct incident_prop *out);

/* Visitor impact summed over nodes and origins (store_incident_impact_totals). */
struct incident_totals {
  int64_t requests, failures, backup_picks, fail_open;
  int64_t first_failure_at, last_failure_at; /* 0 = none */
  int nodes;                                 /* distinct nodes that reported */
};

/* Release what an entry owns. */
void incident_entry_fini(struct incident_entry *e);

#endif
