"""What runs PostgreSQL and its tools for the toolkit: throwaway clusters, the
database a command runs on, the pgbench driver, periodic samplers, server
statistics and logs, and the CPU meter."""
