"""taskcost benchmarks: `make bench` (python -m bench) prints medians and same-run ratios."""
