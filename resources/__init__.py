"""Dagster resources that build engine objects from one crawl config."""
