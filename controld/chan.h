/* chan — notification channels (docs/design.md, Notification channels): their kinds, and the pure
   formatters of what each kind sends — a Slack message, a PagerDuty Events v2 body, an email.
   No SQL, no network, no clock: every time is an argument. */
#ifndef CDNCA_CHAN_H
#define CDNCA_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

enum chan_kind { CHAN_WEBHOOK = 0, CHAN_SLACK = 1, CHAN_PAGERDUTY = 2, CHAN_EMAIL = 3 };
#define CHAN_KINDS 4
extern const char *const chan_kind_names[CHAN_KINDS];

#define CHAN_PD_SUMMARY_MAX 1024 /* characters of payload.summary (Events API v2) */
#define CHAN_PD_KEY_LEN 32       /* an integration's routing key */
#define CHAN_EMAIL_MAX_TO 20     /* recipients of one email channel */
#define CHAN_EMAIL_ADDR_MAX 254  /* one address (RFC 5321 path limit) */
#define CHAN_MAX_SITES 64        /* sites in one channel's filter */
#define CHAN_PD_URL "https://events.pagerduty.com/v2/enqueue"

/* What a PagerDuty channel does with an event type. */

/* The kind named s, or -1. */
int chan_kind_parse(const char *s);

/* Bytes of the longest prefix of s (len bytes of UTF-8) holding at most max_chars characters,
   never splitting one; *chars (may be NULL) gets their count. */
size_t chan_utf8_prefix(const char *s, size_t len, size_t max_chars, size_t *chars);

/* 1 when s is an address the email kind accepts: local@domain, dot-atom local part, a host name
   domain, no display name, at most CHAN_EMAIL_ADDR_MAX bytes; 0 otherwise. */
int chan_email_addr_ok(const char *s);

/* 1 when host (a URL's host, IPv6 with or without brackets) is loopback: localhost, 127.0.0.0/8
   or ::1. */
int chan_host_loopback(const char *host);

/* 1 when key is a PagerDuty routing key: CHAN_PD_KEY_LEN letters and digits. */
int chan_pd_key_ok(const char *key);

/* The PagerDuty action of an event type: its type's page (event_type_rules: trigger on
   incident.opened and site.all_levels_unhealthy, resolve on incident.resolved and site.recovered),
   trigger for the test event, none for the rest. */
enum event_page chan_pd_action(const char *type);

/* The types with a PagerDuty action, in event_type_names' order, into out (room for
   EVENT_TYPES + 1), NULL-terminated: what a pagerduty channel may subscribe to and subscribes to
   when its body names none. The count. */
int chan_pd_types(const char **out);

/* The dedup_key of an event into out: "cdnca-incident-<id>" when its data carries incident_id,
   else "cdnca-site-<site id>", "cdnca-test-<event id>" for the test event. */
void chan_pd_dedup_key(const struct event_rec *e, char *out, size_t cap);

/* The Slack incoming-webhook body of e: a text fallback and blocks (site, what happened, levels,
   reason, a dashboard link when public_url is set — NULL or "" = none). Malloc'd JSON, caller
   frees; NULL when memory runs out. */
char *chan_slack_body(const struct event_rec *e, const char *public_url);

/* The PagerDuty Events API v2 body of e for routing_key, or NULL when the event has no action
   (chan_pd_action) or memory runs out. Malloc'd JSON, caller frees (and wipes: it holds the
   key). */
char *chan_pd_body(const struct event_rec *e, const char *routing_key, const char *public_url);

/* The RFC 5322 message of e from `from` to to[0..nto), CRLF lines: RFC 2047 UTF-8 subject,
   Date of the event, Message-ID <msgid@domain of from>, a plain-text UTF-8 body. Malloc'd, caller
   frees; NULL when memory runs out. */
char *chan_email_message(const struct event_rec *e, const char *from, const char *const *to,
                         int nto, const char *msgid, const char *public_url);

/* The subject alone, undecoded (the message's Subject before RFC 2047 encoding). Malloc'd. */
char *chan_email_subject(const struct event_rec *e);

#endif
