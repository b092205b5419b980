-- retired.sql: function signatures stockpool no longer has.
-- Applied on every deploy, last in the transaction that re-applies the
-- functions, so a database upgraded from an older release ends up with the
-- same functions as a fresh install, and no caller ever sees the old
-- signature gone before its replacement is there. A function whose argument
-- list changes gets a new signature from CREATE OR REPLACE; the old one is
-- dropped here (never with CASCADE: nothing may depend on it).

-- _record_hold gained p_reopen (one hold-row insert for reserve_units,
-- reserve_cart and re-opened holds).
DROP FUNCTION IF EXISTS stockpool._record_hold(bigint, uuid, bigint, bigint, integer, interval);

-- _top_up_low gained p_quiet (a pool about to cool is not topped up).
DROP FUNCTION IF EXISTS stockpool._top_up_low(integer);

-- _record_hold gained p_labels (a named key's hold records its units).
DROP FUNCTION IF EXISTS stockpool._record_hold(bigint, uuid, bigint, bigint, integer, interval, boolean);

-- _pooled_note's p_pooled became p_buckets (the note records each pooled
-- key's buckets for reserve_units' pool's path).
DROP FUNCTION IF EXISTS stockpool._pooled_note(bigint, bigint, bigint, boolean);

-- _maintain_step gained p_until (maintain's expiry batches in one step).
DROP FUNCTION IF EXISTS stockpool._maintain_step(text, integer, interval);
