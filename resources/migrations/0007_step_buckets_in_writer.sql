-- The step buckets are kept by the store's writer from here on
-- (controller/src/store_buckets.cpp): it reads each step record's numbers
-- once and upserts each bucket once a batch, where this trigger extracted
-- some 60 JSON paths and upserted 150 columns for every step record, most of
-- the writer's time. The buckets already stored, which the trigger computed,
-- stay as they are; the writer adds to them exactly as the trigger did.
DROP TRIGGER IF EXISTS step_buckets_on_insert;
