"""``stockpool bench``: reservation strategies side by side on one hot key,
whole checkouts and a whole catalogue, with ratios to the same run's ceiling.

model.py holds what a run is made of, workspace.py its databases, runner.py
the cells, machine.py what it ran on; bars.py, markdown.py, chart.py and
report.py turn a run into checks and reports; command.py is the command line.
pgbench/ holds one pgbench script per strategy (bench_<name>.sql) and the
harness's own schema (bench_setup.sql).
"""
