/* site — the site and origin records (configuration and health state) and their pure helpers:
   no SQL, no JSON. The domain floor: every layer above names a site through this header. */
#ifndef CDNCA_SITE_H
#define CDNCA_SITE_H

#include <stdint.h>

#include "fields.h"
#include "hcheck.h"
#include "health.h"
#include "ramp.h"
#include "sitewire.h"
#include "skip.h"

#define SITE_MAX_HOSTNAMES 32
#define SITE_MAX_ORIGINS 64
#define SITE_MAX_RETRY_STATUS 16

/* An origin as stored (config and health state). */
/* How controld and nodes talk to an origin. */
enum origin_scheme { SCHEME_HTTP = 0, SCHEME_HTTPS = 1 };
#define ORIGIN_SCHEMES 2
extern const char *const origin_scheme_names[ORIGIN_SCHEMES];

struct origin_rec {
  int64_t id, site_id;
  int level, port, weight, enabled;
  char address[256];
  enum origin_scheme scheme;
  char host_header[256]; /* "" = none (use the site's first hostname) */
  char description[801]; /* free text for operators: 0 to 200 characters (SITE_DESCRIPTION_MAX) */
  /* health state */
  enum health_state health; /* unknown | healthy | unhealthy (never empty) */
  int success_streak, failure_streak;
  int64_t health_changed_at, healthy_since, last_checked_at;
  enum health_verdict last_verdict; /* VERDICT_NONE (stored NULL) | success | failure */
  enum health_source last_source;   /* SOURCE_NONE (stored NULL) | nodes | checkpoints | control */
  int votes_success, votes_failure;
  char last_error[256];
  int64_t created_at;
};

/* The values of a health_check object: the site's own (its hc_* members) or its shadow's. */
struct site_hc {
  int enabled;
  char path[513];
  int64_t timeout_ms, unhealthy_after, healthy_after;
  int checkpoints;
  struct hcheck_opts opts;
};

/* A shadow health policy (docs/design.md, Shadow health policies): the same object as
   health_check, probed by controld alone, acting on nothing; set = 0: none (null). */
struct site_shadow {
  int set;
  struct site_hc hc;
};

/* A site with its hostnames and origins (origins ordered by level, id). */
struct site_rec {
  int64_t id;
  char name[65];
  int n_hostnames;
  char hostnames[SITE_MAX_HOSTNAMES][254];
  enum health_failback failback;
  int64_t failback_hold_ms;
  struct ramp_policy failback_ramp; /* n_steps 0 = none: a failback switches at once */
  int hc_enabled;
  char hc_path[513];
  int64_t hc_timeout_ms, hc_unhealthy_after, hc_healthy_after;
  int hc_checkpoints;
  struct hcheck_opts hc;     /* type, method, headers, expected_*, port, interval_ms, quorum */
  struct site_shadow shadow; /* health_check_shadow: never published */
  int64_t nr_retries, nr_retry_budget_ms, nr_fail_count, nr_fail_window_ms, nr_skip_ms,
      nr_half_open_requests;
  int n_retry_on_status;
  int retry_on_status[SITE_MAX_RETRY_STATUS];
  int nr_backup_levels;
  double nr_failure_ratio; /* 0 = off (NULL in the database) */
  int64_t nr_failure_min_volume;
  int current_level;
  int64_t config_version;
  int64_t last_probed_at, next_probe_at;
  int all_unhealthy, failback_notified;
  int manual_pin; /* 1 = the operator's manual switch suspends automatic failback */
  /* docs/design.md, Failback ramp (the engine's): the running ramp (from_level 0 = none), the
     ramp level's requests and failures the nodes reported since its last window, and after an
     abort the time before which no failback starts */
  struct ramp_run ramp;
  int64_t ramp_requests, ramp_failures, ramp_hold_until;
  /* docs/design.md, Drills: the running drill (0 = none); the engine leaves the level to it */
  int64_t drill_id;
  int64_t revision; /* + 1 on every change of its configuration or origins (the ETag) */
  int64_t created_at, updated_at;
  int n_origins;
  struct origin_rec *origins; /* owned; n_origins entries */
};

#define SITE_DESCRIPTION_MAX SITEWIRE_DESCRIPTION_MAX /* the published config carries it */

/* The origin record's field table: one row per member, naming its column, its JSON key, its type
   and bounds, and the forms it takes part in (FORM_IN: an API body sets it; FORM_OUT: the API's
   JSON; FORM_EXPORT: the export document; FORM_CONFIG: a configuration column). The SQL of
   origins, their JSON in every form and their validation all walk it: a new origin field is one
   row here and a migration. The site config published to nodes takes the origin's keys that
   common/sitewire's origin table lists, each from the row of the same name here; a field becomes
   published with its row there. */
extern const struct field_def site_origin_fields[];

/* The site record's field table: one row per column of sites (and per JSON key of the site's
   own values), in the order of the API's JSON: the top-level keys, the health_check object's
   (.object = "health_check", the probe options through hcheck_codec), the node_retry object's
   (.object = "node_retry", the names of common/noderetry's table), then the levels, versions
   and times. The SQL of sites (column list, row decoding, binds), the site's JSON in the API and
   the export, and the API's validation of its top-level and health_check keys all walk it; the
   hostnames and origins have tables of their own. node_retry is validated by common/noderetry,
   the rule the node applies too. */
extern const struct field_def site_fields[];

/* The health_check_shadow row's codec (a FIELD_JSON row at the top of site_fields, its one key
   "health_check_shadow"): null, or an object validated by site_fields' health_check rows
   exactly as health_check is (errors under health_check_shadow.), applied onto the shadow when
   one is set, else onto the defaults with enabled true; stored as the object's JSON text. */
extern const struct field_codec site_shadow_codec;

/* A site's health_check values, and back (site_hc_put overwrites s's hc_* members and hc). */
void site_hc_get(const struct site_rec *s, struct site_hc *h);
void site_hc_put(struct site_rec *s, const struct site_hc *h);

/* Fill a site record with the defaults of the decision rules (no origins). */
void site_rec_defaults(struct site_rec *s);

/* The site's node_retry settings as the node applies them, and back (fields as in noderetry.h). */
void site_rec_retry(const struct site_rec *s, struct skip_params *p);
void site_rec_set_retry(struct site_rec *s, const struct skip_params *p);

/* Deep copy (origins duplicated); 0 or -1. dst is overwritten. */
int site_rec_copy(struct site_rec *dst, const struct site_rec *src);

/* Free what a site record owns (not the record itself). */
void site_rec_fini(struct site_rec *s);

#endif
