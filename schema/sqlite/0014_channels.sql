-- cdnca schema 14: notification channels (docs/design.md#notification-channels). A webhook is the
-- channel of kind 'webhook'; the same table holds the other kinds, so every channel shares the
-- deliveries outbox (webhook_id is the channel's id). Per kind: url is the webhook URL, the Slack
-- incoming-webhook URL, the PagerDuty endpoint or the SMTP URL; secret is the HMAC secret, the
-- PagerDuty routing key or the SMTP password ('' = none); config is the email fields as a JSON
-- object ({"from", "to", "username"}), NULL for the other kinds; site_ids a JSON array of site ids
-- (NULL = every site); name a label for people.
ALTER TABLE webhooks ADD COLUMN kind TEXT NOT NULL DEFAULT 'webhook'
  CHECK (kind IN ('webhook', 'slack', 'pagerduty', 'email'));
ALTER TABLE webhooks ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE webhooks ADD COLUMN site_ids TEXT;
ALTER TABLE webhooks ADD COLUMN config TEXT;
