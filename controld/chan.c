/* chan — channel kinds and the formatters of Slack, PagerDuty and email (see chan.h). */
#include "chan.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "hostname.h"
#include "json.h"

const char *const chan_kind_names[CHAN_KINDS] = {
    [CHAN_WEBHOOK] = "webhook",
    [CHAN_SLACK] = "slack",
    [CHAN_PAGERDUTY] = "pagerduty",
    [CHAN_EMAIL] = "email",
};

#define TEST_TYPE "webhook.test"

int chan_kind_parse(const char *s) {
  for (int i = 0; s && i < CHAN_KINDS; i++)
    if (strcmp(chan_kind_names[i], s) == 0) return i;
  return -1;
}

/* Length of the UTF-8 sequence starting at p (n bytes left), 1 for a stray byte. */
static size_t u8len(const unsigned char *p, size_t n) {
  size_t want = p[0] < 0x80             ? 1
                : (p[0] & 0xE0) == 0xC0 ? 2
                : (p[0] & 0xF0) == 0xE0 ? 3
                : (p[0] & 0xF8) == 0xF0 ? 4
                                        : 1;
  if (want > n) return 1;
  for (size_t i = 1; i < want; i++)
    if ((p[i] & 0xC0) != 0x80) return 1;
  return want;
}

size_t chan_utf8_prefix(const char *s, size_t len, size_t max_chars, size_t *chars) {
  size_t at = 0, c = 0;
  while (at < len && c < max_chars) {
    at += u8len((const unsigned char *)s + at, len - at);
    c++;
  }
  if (chars) *chars = c;
  return at;
}

int chan_email_addr_ok(const char *s) {
  static const char atext[] = "!#$%&'*+-/=?^_`{|}~";
  const char *at;
  size_t local;
  if (!s || strlen(s) > CHAN_EMAIL_ADDR_MAX) return 0;
  at = strchr(s, '@');
  if (!at || strchr(at + 1, '@')) return 0;
  local = (size_t)(at - s);
  if (local == 0 || local > 64 || s[0] == '.' || s[local - 1] == '.') return 0;
  for (size_t i = 0; i < local; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '.' && s[i + 1] == '.') return 0;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          (c && strchr(atext, c))))
      return 0;
  }
  {
    char dom[CHAN_EMAIL_ADDR_MAX + 1];
    snprintf(dom, sizeof dom, "%s", at + 1);
    hostname_lower(dom);
    return hostname_valid(dom);
  }
}

int chan_host_loopback(const char *host) {
  unsigned char v4[4];
  if (!host) return 0;
  if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 || strcmp(host, "[::1]") == 0)
    return 1;
  return inet_pton(AF_INET, host, v4) == 1 && v4[0] == 127;
}

int chan_pd_key_ok(const char *key) {
  size_t n = 0;
  for (; key && key[n]; n++)
    if (!((key[n] >= 'a' && key[n] <= 'z') || (key[n] >= 'A' && key[n] <= 'Z') ||
          (key[n] >= '0' && key[n] <= '9')))
      return 0;
  return n == CHAN_PD_KEY_LEN;
}

enum event_page chan_pd_action(const char *type) {
  int t = event_type_value(type);
  if (t >= 0) return event_type_rules[t].page;
  return strcmp(type, TEST_TYPE) == 0 ? EVENT_PAGE_TRIGGER : EVENT_PAGE_NONE;
}

int chan_pd_types(const char **out) {
  int n = 0;
  for (int t = 0; t < EVENT_TYPES; t++)
    if (event_type_rules[t].page != EVENT_PAGE_NONE) out[n++] = event_type_names[t];
  out[n] = NULL;
  return n;
}

/* ---- what an event says, in words ---- */

struct what {
  cJSON *data;        /* the event's data (owned) */
  int from, to;       /* levels, 0 = not known */
  const char *reason; /* borrowed from data, or NULL */
  int64_t incident_id;
  char levels[48]; /* "1 → 2", "2", or "" */
};

static int data_int(const cJSON *d, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, key);
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e6 ? (int)v->valuedouble : 0;
}

static void what_init(struct what *w, const struct event_rec *e) {
  static const char *const reasons[] = {"reason", "why", "trigger", "error", NULL};
  const cJSON *v;
  memset(w, 0, sizeof *w);
  w->data = e->data ? json_parse(e->data, strlen(e->data)) : NULL;
  if (!cJSON_IsObject(w->data)) {
    cJSON_Delete(w->data);
    w->data = cJSON_CreateObject();
  }
  w->from = data_int(w->data, "from_level");
  if (!w->from) w->from = data_int(w->data, "opened_level");
  w->to = data_int(w->data, "to_level");
  if (!w->to) w->to = data_int(w->data, "current_level");
  if (!w->to) w->to = data_int(w->data, "level");
  for (int i = 0; reasons[i] && !w->reason; i++) {
    v = cJSON_GetObjectItemCaseSensitive(w->data, reasons[i]);
    if (cJSON_IsString(v) && v->valuestring[0]) w->reason = v->valuestring;
  }
  v = cJSON_GetObjectItemCaseSensitive(w->data, "incident_id");
  if (cJSON_IsNumber(v) && v->valuedouble >= 1) w->incident_id = (int64_t)v->valuedouble;
  if (w->from && w->to && w->from != w->to)
    snprintf(w->levels, sizeof w->levels, "%d \xE2\x86\x92 %d", w->from, w->to);
  else if (w->to)
    snprintf(w->levels, sizeof w->levels, "%d", w->to);
}

static const char *site_of(const struct event_rec *e) {
  return e->site_name[0] ? e->site_name : e->site_id > 0 ? "(unnamed site)" : "(no site)";
}

/* The dashboard page of the event into b ("" when public_url is unset). 0 or -1. */
static int link_of(struct buf *b, const struct event_rec *e, const struct what *w,
                   const char *public_url) {
  size_t n;
  if (!public_url || !public_url[0]) return 0;
  n = strlen(public_url);
  while (n > 0 && public_url[n - 1] == '/')
    n--;
  if (buf_append(b, public_url, n) < 0) return -1;
  if (w->incident_id) return buf_printf(b, "/ui/#/incidents/%" PRId64, w->incident_id);
  if (e->site_id > 0) return buf_printf(b, "/ui/#/sites/%" PRId64, e->site_id);
  return buf_puts(b, "/ui/#/notifications");
}

/* "<site>: <title> (level 1 → 2, reason x)" into b. 0 or -1. */
static int one_line(struct buf *b, const struct event_rec *e, const struct what *w) {
  if (buf_printf(b, "%s: %s", site_of(e), e->title) < 0) return -1;
  if (w->levels[0] && w->reason) return buf_printf(b, " (level %s, %s)", w->levels, w->reason);
  if (w->levels[0]) return buf_printf(b, " (level %s)", w->levels);
  if (w->reason) return buf_printf(b, " (%s)", w->reason);
  return 0;
}

static void iso_time(int64_t ms, char out[64]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ---- Slack ---- */

/* s with Slack's three control characters escaped (&, <, >) into b. 0 or -1. */
static int slack_escape(struct buf *b, const char *s) {
  for (; *s; s++) {
    int rc = *s == '&'   ? buf_puts(b, "&amp;")
             : *s == '<' ? buf_puts(b, "&lt;")
             : *s == '>' ? buf_puts(b, "&gt;")
                         : buf_append(b, s, 1);
    if (rc < 0) return -1;
  }
  return 0;
}

/* Add a mrkdwn field "*label*\nvalue" (value escaped) to the array. 0 or -1. */
static int slack_field(cJSON *fields, const char *label, const char *value) {
  struct buf b;
  cJSON *f = cJSON_CreateObject();
  int rc = -1;
  buf_init(&b, 0);
  if (!f || !cJSON_AddItemToArray(fields, f)) {
    cJSON_Delete(f);
    goto out;
  }
  if (buf_printf(&b, "*%s*\n", label) < 0 || slack_escape(&b, value) < 0) goto out;
  cJSON_AddStringToObject(f, "type", "mrkdwn");
  cJSON_AddStringToObject(f, "text", b.data);
  rc = 0;
out:
  buf_fini(&b);
  return rc;
}

char *chan_slack_body(const struct event_rec *e, const char *public_url) {
  struct what w;
  struct buf raw, line, link, ctx;
  cJSON *j = cJSON_CreateObject(), *blocks, *blk, *fields, *el;
  char when[64], *out = NULL, header[160];
  size_t cut;
  what_init(&w, e);
  buf_init(&raw, 0);
  buf_init(&line, 0);
  buf_init(&link, 0);
  buf_init(&ctx, 0);
  if (!j || one_line(&raw, e, &w) < 0 || slack_escape(&line, raw.data) < 0 ||
      link_of(&link, e, &w, public_url) < 0)
    goto out;
  iso_time(e->created_at, when);
  cJSON_AddStringToObject(j, "text", line.data);
  blocks = cJSON_AddArrayToObject(j, "blocks");
  /* a header is plain text of at most 150 characters */
  snprintf(header, sizeof header, "%s", site_of(e));
  cut = chan_utf8_prefix(header, strlen(header), 150, NULL);
  header[cut] = '\0';
  blk = cJSON_CreateObject();
  cJSON_AddItemToArray(blocks, blk);
  cJSON_AddStringToObject(blk, "type", "header");
  el = cJSON_AddObjectToObject(blk, "text");
  cJSON_AddStringToObject(el, "type", "plain_text");
  cJSON_AddStringToObject(el, "text", header);
  blk = cJSON_CreateObject();
  cJSON_AddItemToArray(blocks, blk);
  cJSON_AddStringToObject(blk, "type", "section");
  fields = cJSON_AddArrayToObject(blk, "fields");
  if (slack_field(fields, "What happened", e->title) < 0 ||
      slack_field(fields, "Site", site_of(e)) < 0)
    goto out;
  if (w.levels[0] && slack_field(fields, "Level", w.levels) < 0) goto out;
  if (w.reason && slack_field(fields, "Reason", w.reason) < 0) goto out;
  if (link.len) {
    struct buf t;
    buf_init(&t, 0);
    blk = cJSON_CreateObject();
    cJSON_AddItemToArray(blocks, blk);
    cJSON_AddStringToObject(blk, "type", "section");
    el = cJSON_AddObjectToObject(blk, "text");
    cJSON_AddStringToObject(el, "type", "mrkdwn");
    if (buf_puts(&t, "<") < 0 || slack_escape(&t, link.data) < 0 ||
        buf_puts(&t, "|Open in the cdnca dashboard>") < 0) {
      buf_fini(&t);
      goto out;
    }
    cJSON_AddStringToObject(el, "text", t.data);
    buf_fini(&t);
  }
  if (buf_printf(&ctx, "`%s` \xC2\xB7 event %" PRId64 " \xC2\xB7 %s", e->type, e->id, when) < 0)
    goto out;
  blk = cJSON_CreateObject();
  cJSON_AddItemToArray(blocks, blk);
  cJSON_AddStringToObject(blk, "type", "context");
  fields = cJSON_AddArrayToObject(blk, "elements");
  el = cJSON_CreateObject();
  cJSON_AddItemToArray(fields, el);
  cJSON_AddStringToObject(el, "type", "mrkdwn");
  cJSON_AddStringToObject(el, "text", ctx.data);
  out = json_print(j);
out:
  cJSON_Delete(j);
  cJSON_Delete(w.data);
  buf_fini(&raw);
  buf_fini(&line);
  buf_fini(&link);
  buf_fini(&ctx);
  return out;
}

/* ---- PagerDuty ---- */

void chan_pd_dedup_key(const struct event_rec *e, char *out, size_t cap) {
  struct what w;
  if (strcmp(e->type, TEST_TYPE) == 0) {
    snprintf(out, cap, "cdnca-test-%" PRId64, e->id);
    return;
  }
  what_init(&w, e);
  if (w.incident_id)
    snprintf(out, cap, "cdnca-incident-%" PRId64, w.incident_id);
  else
    snprintf(out, cap, "cdnca-site-%" PRId64, e->site_id);
  cJSON_Delete(w.data);
}

char *chan_pd_body(const struct event_rec *e, const char *routing_key, const char *public_url) {
  enum event_page act = chan_pd_action(e->type);
  struct what w;
  struct buf sum, link;
  cJSON *j, *p, *cd, *site;
  char key[64], when[64], *out = NULL;
  size_t cut, chars;
  const char *sev;
  if (act == EVENT_PAGE_NONE) return NULL;
  what_init(&w, e);
  buf_init(&sum, 0);
  buf_init(&link, 0);
  chan_pd_dedup_key(e, key, sizeof key);
  j = cJSON_CreateObject();
  if (!j) goto out;
  cJSON_AddStringToObject(j, "routing_key", routing_key);
  cJSON_AddStringToObject(j, "event_action", act == EVENT_PAGE_TRIGGER ? "trigger" : "resolve");
  cJSON_AddStringToObject(j, "dedup_key", key);
  if (act == EVENT_PAGE_RESOLVE) { /* a resolve needs nothing more (Events API v2) */
    out = json_print(j);
    goto out;
  }
  if (one_line(&sum, e, &w) < 0 || link_of(&link, e, &w, public_url) < 0) goto out;
  cut = chan_utf8_prefix(sum.data, sum.len, CHAN_PD_SUMMARY_MAX, &chars);
  if (cut < sum.len) { /* cut at a character boundary, leaving room for the ellipsis */
    cut = chan_utf8_prefix(sum.data, sum.len, CHAN_PD_SUMMARY_MAX - 1, NULL);
    sum.data[cut] = '\0';
    sum.len = cut;
    if (buf_puts(&sum, "\xE2\x80\xA6") < 0) goto out;
  }
  iso_time(e->created_at, when);
  sev = strcmp(e->type, TEST_TYPE) == 0 ? "info"
        : strcmp(e->type, "site.all_levels_unhealthy") == 0 ||
                (w.reason && strcmp(w.reason, "all_levels_unhealthy") == 0)
            ? "critical"
            : "error";
  p = cJSON_AddObjectToObject(j, "payload");
  cJSON_AddStringToObject(p, "summary", sum.data);
  cJSON_AddStringToObject(p, "severity", sev);
  cJSON_AddStringToObject(p, "source", site_of(e));
  cJSON_AddStringToObject(p, "timestamp", when);
  cJSON_AddStringToObject(p, "component", site_of(e));
  cJSON_AddStringToObject(p, "group", "cdnca");
  cJSON_AddStringToObject(p, "class", e->type);
  cd = cJSON_Duplicate(w.data, 1);
  if (!cd) goto out;
  cJSON_AddItemToObject(p, "custom_details", cd);
  cJSON_DeleteItemFromObjectCaseSensitive(cd, "votes");
  json_add_i64(cd, "event_id", e->id);
  site = cJSON_AddObjectToObject(cd, "site");
  json_add_i64(site, "id", e->site_id);
  cJSON_AddStringToObject(site, "name", e->site_name);
  cJSON_AddStringToObject(j, "client", "cdnca");
  if (link.len) {
    cJSON *links = cJSON_AddArrayToObject(j, "links"), *l = cJSON_CreateObject();
    cJSON_AddItemToArray(links, l);
    cJSON_AddStringToObject(l, "href", link.data);
    cJSON_AddStringToObject(l, "text", "cdnca dashboard");
    cJSON_AddStringToObject(j, "client_url", link.data);
  }
  out = json_print(j);
out:
  cJSON_Delete(j);
  cJSON_Delete(w.data);
  buf_fini(&sum);
  buf_fini(&link);
  return out;
}

/* ---- email ---- */

static int b64(struct buf *b, const unsigned char *p, size_t n) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63], i + 1 < n ? tab[v >> 6 & 63] : '=',
                 i + 2 < n ? tab[v & 63] : '='};
    if (buf_append(b, q, 4) < 0) return -1;
  }
  return 0;
}

static int is_plain_ascii(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7E) return 0;
  return 1;
}

/* 1 when the text is ASCII (printable, tabs and line feeds). */
static int text_ascii(const struct buf *t) {
  for (size_t i = 0; i < t->len; i++) {
    unsigned char c = (unsigned char)t->data[i];
    if (c > 0x7E || (c < 0x20 && c != '\n' && c != '\t')) return 0;
  }
  return 1;
}

/* "Subject: " + s into b: as it is when printable ASCII short enough for one line, else RFC 2047
   B encoded-words of whole characters (at most 75 bytes each), folded. 0 or -1. */
static int subject_header(struct buf *b, const char *s) {
  size_t len = strlen(s), at = 0;
  if (is_plain_ascii(s) && len <= 68) return buf_printf(b, "Subject: %s\r\n", s);
  if (buf_puts(b, "Subject:") < 0) return -1;
  while (at < len) {
    size_t take = 0, room = at ? 45 : 42;
    /* 45 bytes encode to 60: " =?UTF-8?B?" + 60 + "?=" = 73; after "Subject:" 42 (77) */
    while (at + take < len) {
      size_t c = u8len((const unsigned char *)s + at + take, len - at - take);
      if (take + c > room) break;
      take += c;
    }
    if (buf_puts(b, at ? "\r\n =?UTF-8?B?" : " =?UTF-8?B?") < 0 ||
        b64(b, (const unsigned char *)s + at, take) < 0 || buf_puts(b, "?=") < 0)
      return -1;
    at += take;
  }
  return buf_puts(b, "\r\n");
}

/* s with every control character but none dropped (a header value stays one line). */
static int header_value(struct buf *b, const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s >= 0x20 && *s != 0x7F && buf_append(b, s, 1) < 0) return -1;
  return 0;
}

static void rfc5322_date(int64_t ms, char out[64]) {
  static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  snprintf(out, 64, "%s, %02d %s %04d %02d:%02d:%02d +0000", days[tm.tm_wday % 7], tm.tm_mday,
           months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

char *chan_email_subject(const struct event_rec *e) {
  struct buf b;
  struct what w;
  what_init(&w, e);
  buf_init(&b, 0);
  if (buf_puts(&b, "[cdnca] ") < 0 || one_line(&b, e, &w) < 0) {
    buf_fini(&b);
    cJSON_Delete(w.data);
    return NULL;
  }
  cJSON_Delete(w.data);
  return buf_take(&b);
}

/* The plain-text body, LF lines. 0 or -1. */
static int email_text(struct buf *b, const struct event_rec *e, const struct what *w,
                      const char *public_url) {
  static const char *const figures[] = {"detect_ms", "switch_ms", "mitigate_ms", "resolve_ms",
                                        NULL};
  char when[64];
  iso_time(e->created_at, when);
  if (buf_printf(b,
                 "%s\n\nSite:           %s\nWhat happened:  %s\nEvent:          %s (id %" PRId64
                 ")\nAt:             %s\n",
                 e->title, site_of(e), e->title, e->type, e->id, when) < 0)
    return -1;
  if (w->levels[0] && buf_printf(b, "Level:          %s\n", w->levels) < 0) return -1;
  if (w->reason && buf_printf(b, "Reason:         %s\n", w->reason) < 0) return -1;
  if (w->incident_id && buf_printf(b, "Incident:       %" PRId64 "\n", w->incident_id) < 0)
    return -1;
  for (int i = 0; figures[i]; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(w->data, figures[i]);
    if (cJSON_IsNumber(v) &&
        buf_printf(b, "%-16s%.1f s\n", figures[i], v->valuedouble / 1000.0) < 0)
      return -1;
  }
  if (public_url && public_url[0]) {
    if (buf_puts(b, "\nDashboard: ") < 0 || link_of(b, e, w, public_url) < 0 ||
        buf_puts(b, "\n") < 0)
      return -1;
  }
  return buf_puts(b, "\n-- \ncdnca controld\n");
}

char *chan_email_message(const struct event_rec *e, const char *from, const char *const *to,
                         int nto, const char *msgid, const char *public_url) {
  struct buf b, text;
  struct what w;
  char date[64], *subject = NULL, *out = NULL;
  const char *domain = strchr(from, '@');
  what_init(&w, e);
  buf_init(&b, 0);
  buf_init(&text, 0);
  subject = chan_email_subject(e);
  if (!subject || email_text(&text, e, &w, public_url) < 0) goto out;
  rfc5322_date(e->created_at, date);
  if (buf_puts(&b, "From: ") < 0 || header_value(&b, from) < 0 || buf_puts(&b, "\r\nTo: ") < 0)
    goto out;
  for (int i = 0; i < nto; i++)
    if ((i && buf_puts(&b, ",\r\n ") < 0) || header_value(&b, to[i]) < 0) goto out;
  if (buf_puts(&b, "\r\n") < 0 || subject_header(&b, subject) < 0 ||
      buf_printf(&b, "Date: %s\r\nMessage-ID: <", date) < 0 || header_value(&b, msgid) < 0 ||
      buf_puts(&b, "@") < 0 || header_value(&b, domain ? domain + 1 : "cdnca.invalid") < 0 ||
      buf_puts(&b, ">\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=UTF-8\r\n") < 0 ||
      buf_puts(&b, "Auto-Submitted: auto-generated\r\nX-Cdnca-Event: ") < 0 ||
      header_value(&b, e->type) < 0)
    goto out;
  if (text_ascii(&text)) {
    /* ASCII: 7bit, CRLF lines */
    if (buf_puts(&b, "\r\nContent-Transfer-Encoding: 7bit\r\n\r\n") < 0) goto out;
    for (size_t i = 0; i < text.len; i++)
      if ((text.data[i] == '\n' ? buf_puts(&b, "\r\n") : buf_append(&b, text.data + i, 1)) < 0)
        goto out;
  } else {
    /* anything else: base64 in lines of 76 (no 8BITMIME needed on the way) */
    if (buf_puts(&b, "\r\nContent-Transfer-Encoding: base64\r\n\r\n") < 0) goto out;
    for (size_t i = 0; i < text.len; i += 57) {
      size_t n = text.len - i < 57 ? text.len - i : 57;
      if (b64(&b, (const unsigned char *)text.data + i, n) < 0 || buf_puts(&b, "\r\n") < 0)
        goto out;
    }
  }
  out = buf_take(&b);
out:
  free(subject);
  cJSON_Delete(w.data);
  buf_fini(&b);
  buf_fini(&text);
  return out;
}
