-- 0009_cheaper_row_rules: the same rules for stock and holds rows, checked
-- for less.
--
-- Why: a reservation served by its key's ledger row (issue 10's catalogue,
-- where a key nobody contends must cost what a counter with a hold costs)
-- writes one stock row and one holds row. PostgreSQL 15 rebuilds each CHECK
-- constraint of a table from its stored text at every statement that writes
-- the table, so stock's three constraints cost that reservation about as much
-- as its hold insert's index entries; and holds' AFTER trigger went through
-- the after-trigger queue, which fetches the row again. Together 13% of the
-- instructions of the whole call (scripts/instructions, docs/commands.md
-- run 16).
--
-- What changes:
-- - stock: on_hand >= 0, allocated >= 0 and allocated <= on_hand become one
--   CHECK constraint, stock_allocated_within_on_hand: 0 <= allocated <=
--   on_hand (on_hand >= 0 follows). Still a constraint of the table, where a
--   reader of its definition sees the no-oversell rule.
-- - holds: the trigger holds_valid runs BEFORE the row is written instead of
--   after, with the same rules, messages and constraint names (quantity > 0,
--   a known status, labels as many as the quantity); a row that breaks one
--   fails with SQLSTATE 23514 before it is stored.
-- Measured other ways and not taken (docs/commands.md run 16): the rules as
-- domains (10,000 instructions a call cheaper than this, but the columns would
-- change type for every reader: a domain is not its base type to a client or
-- to a polymorphic function), and WHEN conditions on the trigger (PostgreSQL
-- rebuilds those from text at every statement, as it does CHECK constraints:
-- dearer than the call they save).

ALTER TABLE stockpool.stock
    DROP CONSTRAINT stock_on_hand_nonnegative,
    DROP CONSTRAINT stock_allocated_nonnegative,
    DROP CONSTRAINT stock_allocated_within_on_hand,
    ADD CONSTRAINT stock_allocated_within_on_hand CHECK (allocated >= 0 AND allocated <= on_hand);

CREATE OR REPLACE FUNCTION stockpool._hold_valid()
RETURNS trigger
LANGUAGE plpgsql
AS $function$
BEGIN
    -- One test for a valid row, the detail only for a bad one: PL/pgSQL
    -- prepares each expression once per transaction.
    IF NEW.quantity > 0 AND NEW.status IN ('held', 'claimed', 'released', 'expired')
        AND (NEW.labels IS NULL OR pg_catalog.cardinality(NEW.labels) = NEW.quantity) THEN
        RETURN NEW;
    END IF;
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
    -- None broken: a NULL where the table has NOT NULL (before this runs,
    -- PostgreSQL has not checked it yet), which the table then refuses.
    RETURN NEW;
END;
$function$;

COMMENT ON FUNCTION stockpool._hold_valid() IS
'Internal: BEFORE trigger function of stockpool.holds; refuses a quantity that is not positive, an unknown status '
'and labels not as many as the quantity (23514, naming the rule).';

DROP TRIGGER holds_valid ON stockpool.holds;

CREATE TRIGGER holds_valid
    BEFORE INSERT OR UPDATE OF quantity, status, labels ON stockpool.holds
    FOR EACH ROW EXECUTE FUNCTION stockpool._hold_valid();
