"""The record-level index (``record_index``): record key -> data file (and row), exact.

Its entries are, like every index's, a pure function of one data file
(:mod:`.rows`), so writers, the bulk build, catch-up and ``validate`` compute them the
same way; they are hash-partitioned into buckets so that a build, a fold and a lookup
each hold one bucket (or a few) in memory at a time (:mod:`.store`, :mod:`.spill`), and
a lookup folds them per slice into "which file group holds this key" (:mod:`.lookup`).
See docs/indexes.md ("Record-level index").
"""
