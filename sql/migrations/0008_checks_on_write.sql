-- 0008_checks_on_write: a key's pool settings and a hold row's shape are
-- checked when those columns are written, by a trigger, instead of by CHECK
-- constraints that ran at every write of the row.
--
-- Why: PostgreSQL 15 rebuilds every CHECK constraint of a table from its
-- stored text (stringToNode, then planning) at each statement that writes the
-- table, whichever columns the statement sets. A reservation that took its
-- unit from the ledger row paid that for stock's seven constraints and holds'
-- three: 29% of the instructions of the whole call, measured with
-- scripts/instructions (docs/commands.md, run 13). A trigger with
-- UPDATE OF names its columns, and PostgreSQL does not run it when a
-- statement sets none of them (it still fetches the row's old version, from
-- the page the update has just read: about 1,000 instructions, measured); when
-- it does run, it is one PL/pgSQL call with its expressions kept for the
-- session.
--
-- What moves:
-- - stock: pool_cap > 0, 0 <= low_water < pool_cap, 1 <= buckets <= 1024,
--   pool_target >= 0. Written by set_stock (a new key), configure_pool,
--   replenish_pool, refills and _cool; never by a reservation, a claim or a
--   release, so those no longer pay for them.
-- - holds: quantity > 0, a known status, labels as many as the quantity (or
--   none). Every write of a hold row sets one of them, so the trigger runs on
--   every write; it still costs less than the three constraints did.
-- What stays a CHECK constraint: stock's on_hand >= 0, allocated >= 0 and
-- allocated <= on_hand, the no-oversell property itself, which every write of
-- the ledger row must pass and which a reader of the table's definition should
-- see there.
--
-- A write that breaks a moved rule fails as the constraint did: SQLSTATE 23514
-- (check_violation) naming the same constraint, and nothing of the statement
-- stays. The triggers are AFTER ROW triggers, so they see the row as stored
-- (defaults applied), and they run for the table's owner too.

CREATE FUNCTION stockpool._stock_settings_valid()
RETURNS trigger
LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.pool_cap <= 0 THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_pool_cap_positive"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_pool_cap_positive',
                  DETAIL = pg_catalog.format('pool_cap %s is not positive', NEW.pool_cap);
    END IF;
    IF NEW.low_water < 0 OR NEW.low_water >= NEW.pool_cap THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_low_water_within_cap"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_low_water_within_cap',
                  DETAIL = pg_catalog.format('low_water %s is not in [0, pool_cap %s)', NEW.low_water, NEW.pool_cap);
    END IF;
    IF NEW.buckets < 1 OR NEW.buckets > 1024 THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_buckets_range"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_buckets_range',
                  DETAIL = pg_catalog.format('buckets %s is not in [1, 1024]', NEW.buckets);
    END IF;
    IF NEW.pool_target < 0 THEN
        RAISE EXCEPTION 'new row for relation "stock" violates check constraint "stock_pool_target_nonnegative"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'stock',
                  CONSTRAINT = 'stock_pool_target_nonnegative',
                  DETAIL = pg_catalog.format('pool_target %s is negative', NEW.pool_target);
    END IF;
    RETURN NULL;
END;
$function$;

COMMENT ON FUNCTION stockpool._stock_settings_valid() IS
'Internal: trigger function of stockpool.stock; refuses pool settings out of range (23514, naming the rule).';

CREATE FUNCTION stockpool._hold_valid()
RETURNS trigger
LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.quantity <= 0 THEN
        RAISE EXCEPTION 'new row for relation "holds" violates check constraint "holds_quantity_positive"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'holds',
                  CONSTRAINT = 'holds_quantity_positive',
                  DETAIL = pg_catalog.format('quantity %s is not positive', NEW.quantity);
    END IF;
    IF NEW.status NOT IN ('held', 'claimed', 'released', 'expired') THEN
        RAISE EXCEPTION 'new row for relation "holds" violates check constraint "holds_status_known"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'holds',
                  CONSTRAINT = 'holds_status_known',
                  DETAIL = pg_catalog.format('status %L is not held, claimed, released or expired', NEW.status);
    END IF;
    IF pg_catalog.cardinality(NEW.labels) <> NEW.quantity THEN
        RAISE EXCEPTION 'new row for relation "holds" violates check constraint "holds_labels_match_quantity"'
            USING ERRCODE = '23514', SCHEMA = 'stockpool', TABLE = 'holds',
                  CONSTRAINT = 'holds_labels_match_quantity',
                  DETAIL = pg_catalog.format('%s labels for quantity %s', pg_catalog.cardinality(NEW.labels),
                                             NEW.quantity);
    END IF;
    RETURN NULL;
END;
$function$;

COMMENT ON FUNCTION stockpool._hold_valid() IS
'Internal: trigger function of stockpool.holds; refuses a quantity that is not positive, an unknown status '
'and labels not as many as the quantity (23514, naming the rule).';

ALTER TABLE stockpool.stock
    DROP CONSTRAINT stock_pool_cap_positive,
    DROP CONSTRAINT stock_low_water_within_cap,
    DROP CONSTRAINT stock_buckets_range,
    DROP CONSTRAINT stock_pool_target_nonnegative;

CREATE TRIGGER stock_settings_valid
    AFTER INSERT OR UPDATE OF pool_cap, low_water, buckets, pool_target ON stockpool.stock
    FOR EACH ROW EXECUTE FUNCTION stockpool._stock_settings_valid();

ALTER TABLE stockpool.holds
    DROP CONSTRAINT holds_quantity_positive,
    DROP CONSTRAINT holds_status_known,
    DROP CONSTRAINT holds_labels_match_quantity;

CREATE TRIGGER holds_valid
    AFTER INSERT OR UPDATE OF quantity, status, labels ON stockpool.holds
    FOR EACH ROW EXECUTE FUNCTION stockpool._hold_valid();
