-- stockpool.movements is append-only: UPDATE, DELETE and TRUNCATE are
-- refused with SP009, for a superuser and for the owner alike, and the
-- history stays as it was.
BEGIN;
SELECT plan(15);

SELECT is(stockpool.set_stock(1, 1300, 1, 10), 10, 'key 1300 at 10');
SELECT is(stockpool.adjust_stock(1, 1300, 1, -2), 8, 'adjusted to 8');
SELECT ok(stockpool.reserve_units(1, 1300, 1, 3, '00000000-0000-0000-0000-000000000801'), '801 holds 3');
SELECT is(stockpool.claim(1, '00000000-0000-0000-0000-000000000801'), 3, 'and claims them');
CREATE TEMPORARY TABLE history AS SELECT * FROM stockpool.movements;
SELECT is((SELECT count(*)::integer FROM history WHERE item_id = 1300), 3, 'three movements recorded');

SELECT throws_ok('UPDATE stockpool.movements SET delta = delta + 1', 'SP009', NULL,
    'UPDATE of the history: SP009');
SELECT throws_ok('UPDATE stockpool.movements SET reason = reason WHERE item_id = 1300', 'SP009', NULL,
    'even a no-op UPDATE: SP009');
SELECT throws_ok('DELETE FROM stockpool.movements WHERE item_id = 1300', 'SP009', NULL,
    'DELETE from the history: SP009');
SELECT throws_ok('TRUNCATE stockpool.movements', 'SP009', NULL,
    'TRUNCATE of the history: SP009');
SET LOCAL client_min_messages = warning;
SELECT throws_ok('TRUNCATE stockpool.stock CASCADE', 'SP009', NULL,
    'TRUNCATE of the ledger cascading to the history: SP009');
RESET client_min_messages;

SET LOCAL ROLE stockpool_owner;
SELECT throws_ok('UPDATE stockpool.movements SET delta = 1 WHERE item_id = 1300', 'SP009', NULL,
    'the owner''s UPDATE: SP009');
SELECT throws_ok('DELETE FROM stockpool.movements', 'SP009', NULL,
    'the owner''s DELETE: SP009');
SELECT throws_ok('TRUNCATE stockpool.movements', 'SP009', NULL,
    'the owner''s TRUNCATE: SP009');
RESET ROLE;

SELECT bag_eq('SELECT * FROM stockpool.movements', 'SELECT * FROM history',
    'the history is unchanged after every refused write');
SELECT is_empty('SELECT * FROM stockpool.check_invariants()', 'and the ledger still matches it');

SELECT * FROM finish();
ROLLBACK;
