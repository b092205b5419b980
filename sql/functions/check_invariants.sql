-- check_invariants: every violated invariant, one row each; no rows when
-- healthy. Reads one snapshot (run it in REPEATABLE READ to compare with
-- other reads). Invariants, per key, with on_hand as stock_levels shows it
-- (net of pending claims):
--   oversell        pooled + held > on_hand
--   allocation      allocated counter <> pooled + held + pending claims
--   ledger_drift    the ledger row's on_hand <> sum of its movements (a
--                   claim's movement is written when it is folded, so both
--                   leave out pending claims)
--   negative        on_hand, allocated, a hold's or a pending claim's
--                   quantity below zero or zero
--   orphan          pool units, holds or pending claims of a key missing
--                   from the ledger
--   settlement      a pending claim whose checkout's hold on the key is not
--                   claimed, or claimed for another quantity
--   unit            a named key's unit held or sold by two holds, both free
--                   and held or sold, neither (lost), free or held without
--                   being a unit of the key, free at another position than
--                   its own; or a named key whose on hand is not its units
--                   (free <> 0 in stock_levels)
--   mixed           counted and named on one key: a named key with pool
--                   units or a hold without labels, a counted key with
--                   units or a hold with labels
-- Touches stock, pool_units, holds, pending_claims, movements, named_units,
-- named_free (read only).
CREATE OR REPLACE FUNCTION stockpool.check_invariants()
RETURNS TABLE (
    shop_id bigint,
    item_id bigint,
    location_id bigint,
    invariant text,
    detail text
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
    WITH levels AS (
        SELECT l.shop_id, l.item_id, l.location_id, l.on_hand, l.pooled, l.held,
               l.unsettled, s.allocated
        FROM stockpool.stock_levels AS l
        JOIN stockpool.stock AS s
            ON s.shop_id = l.shop_id
            AND s.item_id = l.item_id
            AND s.location_id = l.location_id
    ),
    history AS (
        SELECT m.shop_id, m.item_id, m.location_id, pg_catalog.sum(m.delta) AS on_hand
        FROM stockpool.movements AS m
        GROUP BY m.shop_id, m.item_id, m.location_id
    ),
    taken AS (
        SELECT hd.shop_id, hd.item_id, hd.location_id, l.label, hd.checkout_id
        FROM stockpool.holds AS hd
        CROSS JOIN LATERAL pg_catalog.unnest(hd.labels) AS l (label)
        WHERE hd.status IN ('held', 'claimed')
    )
    SELECT l.shop_id, l.item_id, l.location_id, 'oversell',
           pg_catalog.format('pooled %s + held %s > on_hand %s', l.pooled, l.held, l.on_hand)
    FROM levels AS l
    WHERE l.pooled + l.held > l.on_hand
    UNION ALL
    SELECT l.shop_id, l.item_id, l.location_id, 'allocation',
           pg_catalog.format('allocated %s <> pooled %s + held %s + pending claims %s',
                             l.allocated, l.pooled, l.held, l.unsettled)
    FROM levels AS l
    WHERE l.allocated <> l.pooled + l.held + l.unsettled
    UNION ALL
    SELECT s.shop_id, s.item_id, s.location_id, 'ledger_drift',
           pg_catalog.format('on_hand %s <> sum of movements %s', s.on_hand, coalesce(h.on_hand, 0))
    FROM stockpool.stock AS s
    LEFT JOIN history AS h
        ON h.shop_id = s.shop_id
        AND h.item_id = s.item_id
        AND h.location_id = s.location_id
    WHERE s.on_hand <> coalesce(h.on_hand, 0)
    UNION ALL
    SELECT l.shop_id, l.item_id, l.location_id, 'negative',
           pg_catalog.format('on_hand %s, allocated %s, free %s', l.on_hand, l.allocated,
                             l.on_hand - l.pooled - l.held)
    FROM levels AS l
    WHERE l.on_hand < 0 OR l.allocated < 0
    UNION ALL
    SELECT hd.shop_id, hd.item_id, hd.location_id, 'negative',
           pg_catalog.format('hold of checkout %s has quantity %s', hd.checkout_id, hd.quantity)
    FROM stockpool.holds AS hd
    WHERE hd.quantity <= 0
    UNION ALL
    SELECT c.shop_id, c.item_id, c.location_id, 'negative',
           pg_catalog.format('pending claim of checkout %s has quantity %s', c.checkout_id, c.quantity)
    FROM stockpool.pending_claims AS c
    WHERE c.quantity <= 0
    UNION ALL
    SELECT c.shop_id, c.item_id, c.location_id, 'settlement',
           pg_catalog.format('pending claim of %s units by checkout %s, whose hold is %s',
                             c.quantity, c.checkout_id,
                             coalesce(hd.status || ' (' || hd.quantity || ' units)', 'missing'))
    FROM stockpool.pending_claims AS c
    LEFT JOIN stockpool.holds AS hd
        ON hd.shop_id = c.shop_id
        AND hd.checkout_id = c.checkout_id
        AND hd.item_id = c.item_id
        AND hd.location_id = c.location_id
    WHERE hd.status IS DISTINCT FROM 'claimed'
        OR hd.quantity <> c.quantity
    UNION ALL
    SELECT t.shop_id, t.item_id, t.location_id, 'unit',
           pg_catalog.format('unit %s is held or sold by %s checkouts: %s', t.label, pg_catalog.count(*),
                             pg_catalog.string_agg(t.checkout_id::text, ', ' ORDER BY t.checkout_id))
    FROM taken AS t
    GROUP BY t.shop_id, t.item_id, t.location_id, t.label
    HAVING pg_catalog.count(*) > 1
    UNION ALL
    SELECT t.shop_id, t.item_id, t.location_id, 'unit',
           pg_catalog.format('unit %s is free and held or sold by checkout %s', t.label, t.checkout_id)
    FROM taken AS t
    JOIN stockpool.named_free AS f
        ON f.shop_id = t.shop_id
        AND f.item_id = t.item_id
        AND f.location_id = t.location_id
        AND f.label = t.label
    UNION ALL
    SELECT u.shop_id, u.item_id, u.location_id, 'unit',
           pg_catalog.format('unit %s (position %s) is neither free, held nor sold', u.label, u.position)
    FROM stockpool.named_units AS u
    WHERE NOT EXISTS (
            SELECT FROM stockpool.named_free AS f
            WHERE f.shop_id = u.shop_id
                AND f.item_id = u.item_id
                AND f.location_id = u.location_id
                AND f.label = u.label
        )
        AND NOT EXISTS (
            SELECT FROM taken AS t
            WHERE t.shop_id = u.shop_id
                AND t.item_id = u.item_id
                AND t.location_id = u.location_id
                AND t.label = u.label
        )
    UNION ALL
    SELECT x.shop_id, x.item_id, x.location_id, 'unit',
           pg_catalog.format('%s unit %s is not a unit of the key', x.source, x.label)
    FROM (
        SELECT f.shop_id, f.item_id, f.location_id, f.label, 'free' AS source
        FROM stockpool.named_free AS f
        UNION ALL
        SELECT t.shop_id, t.item_id, t.location_id, t.label, 'held or sold'
        FROM taken AS t
    ) AS x
    WHERE NOT EXISTS (
        SELECT FROM stockpool.named_units AS u
        WHERE u.shop_id = x.shop_id
            AND u.item_id = x.item_id
            AND u.location_id = x.location_id
            AND u.label = x.label
    )
    UNION ALL
    SELECT f.shop_id, f.item_id, f.location_id, 'unit',
           pg_catalog.format('unit %s is free at position %s, its position is %s', f.label, f.position, u.position)
    FROM stockpool.named_free AS f
    JOIN stockpool.named_units AS u
        ON u.shop_id = f.shop_id
        AND u.item_id = f.item_id
        AND u.location_id = f.location_id
        AND u.label = f.label
    WHERE u.position <> f.position
    UNION ALL
    SELECT l.shop_id, l.item_id, l.location_id, 'unit',
           pg_catalog.format('named key with on_hand %s but %s free and %s held units', l.on_hand, l.pooled, l.held)
    FROM levels AS l
    JOIN stockpool.stock AS s
        ON s.shop_id = l.shop_id
        AND s.item_id = l.item_id
        AND s.location_id = l.location_id
    WHERE s.named
        AND l.on_hand <> l.pooled + l.held
    UNION ALL
    SELECT m.shop_id, m.item_id, m.location_id, 'mixed', m.detail
    FROM (
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, true AS if_named, 'named key with pool units' AS detail
        FROM stockpool.pool_units AS u
        UNION ALL
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, false, 'counted key with named units'
        FROM stockpool.named_units AS u
        UNION ALL
        SELECT DISTINCT f.shop_id, f.item_id, f.location_id, false, 'counted key with free named units'
        FROM stockpool.named_free AS f
        UNION ALL
        SELECT hd.shop_id, hd.item_id, hd.location_id, true,
               pg_catalog.format('hold of checkout %s without labels on a named key', hd.checkout_id)
        FROM stockpool.holds AS hd
        WHERE hd.labels IS NULL
        UNION ALL
        SELECT hd.shop_id, hd.item_id, hd.location_id, false,
               pg_catalog.format('hold of checkout %s with labels on a counted key', hd.checkout_id)
        FROM stockpool.holds AS hd
        WHERE hd.labels IS NOT NULL
    ) AS m
    JOIN stockpool.stock AS s
        ON s.shop_id = m.shop_id
        AND s.item_id = m.item_id
        AND s.location_id = m.location_id
    WHERE s.named = m.if_named
    UNION ALL
    SELECT o.shop_id, o.item_id, o.location_id, 'orphan',
           pg_catalog.format('%s rows of a key missing from the ledger', o.source)
    FROM (
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, 'pool' AS source
        FROM stockpool.pool_units AS u
        UNION
        SELECT DISTINCT hd.shop_id, hd.item_id, hd.location_id, 'hold'
        FROM stockpool.holds AS hd
        UNION
        SELECT DISTINCT c.shop_id, c.item_id, c.location_id, 'pending claim'
        FROM stockpool.pending_claims AS c
        UNION
        SELECT DISTINCT u.shop_id, u.item_id, u.location_id, 'named unit'
        FROM stockpool.named_units AS u
        UNION
        SELECT DISTINCT f.shop_id, f.item_id, f.location_id, 'free named unit'
        FROM stockpool.named_free AS f
    ) AS o
    WHERE NOT EXISTS (
        SELECT FROM stockpool.stock AS s
        WHERE s.shop_id = o.shop_id
            AND s.item_id = o.item_id
            AND s.location_id = o.location_id
    );
$function$;

COMMENT ON FUNCTION stockpool.check_invariants() IS
'One row per violated invariant (oversell, allocation, ledger_drift, negative, orphan, settlement, unit, mixed); '
'none when healthy.';
