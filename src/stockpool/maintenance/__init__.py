"""Maintenance that runs itself: ``stockpool worker`` (a long-running process
that calls stockpool.maintain() every interval) and the pg_cron schedule that
``stockpool deploy --schedule`` registers."""
