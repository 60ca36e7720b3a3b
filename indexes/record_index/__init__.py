"""The record-level index (``record_index``): record key -> file group (and row), exact.

Its entries are a data file's rows, or for a copy-on-write rewrite the changes it
merged, chained onto the base it rewrote (:mod:`.rows`); they are hash-partitioned into
buckets so that a build, a fold and a lookup each hold one bucket (or a few) in memory
at a time (:mod:`.store`, :mod:`.spill`), and a lookup folds them per slice into "which
file group holds this key" (:mod:`.lookup`). See docs/indexes.md ("Record-level index").
"""
