"""Storage: where a table's bytes live, and what lakeline may do there.

The family of storage: data and metadata files through a file system
(:mod:`.filesystem`), what a table owns and may delete (:mod:`.ownership`), reading data
files with typed corruption errors (:mod:`.data_reads`), Spark's staging folders
(:mod:`.staging_folders`), and the stores of the event log (:mod:`.event_log`).
"""
