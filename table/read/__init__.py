"""The read path: snapshots, pruning, merge-on-read, incremental changes, and the
snapshot as an Arrow dataset or a Polars frame."""
