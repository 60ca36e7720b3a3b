"""Indexes of a lakeline table and the metadata table that holds them.

Column statistics (with NDV sketches) and bloom filters per data file, stored as
Parquet deltas tagged with the data instant that caused them, visible only once that
instant completed; index lifecycle derived from timeline events; pruning for scans.
"""
