-- cdnca schema 10 (PostgreSQL): cheaper probe-round writes. A round rewrites every probed
-- origin's health row and its site's probe times, and inserts one verdict per origin.
-- * origins and sites leave half of each page free, so those UPDATEs stay on the row's page and
--   add no index entries (heap-only tuples). It applies to pages written from now on; an existing
--   installation gets it for all rows with VACUUM FULL origins, sites (or pg_repack).
-- * sites_probe_order goes: no statement reads it (the due-sites query orders by an expression
--   it cannot serve), and indexing last_probed_at made every probe-time UPDATE a non-HOT update.
-- * verdicts lose their two foreign keys: each inserted row cost two key checks and a row lock
--   on the site and the origin. They are evidence rows written only by the round's transaction,
--   for origins it has just read under the ordered-write lock; the store deletes an origin's
--   (or a site's) verdicts itself before it deletes the origin (or the site).
ALTER TABLE origins SET (fillfactor = 50);
ALTER TABLE sites SET (fillfactor = 50);
DROP INDEX sites_probe_order;
ALTER TABLE verdicts DROP CONSTRAINT verdicts_site_id_fkey,
  DROP CONSTRAINT verdicts_origin_id_fkey;
