"""Dagster side of Atlas: partitions, assets, checks, jobs and the `atlas` command line."""
