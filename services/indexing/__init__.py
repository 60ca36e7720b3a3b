"""Indexes as table services: the async indexer that builds and drops them as ``indexing``
instants (:mod:`.indexer`), the index API a table hands out as ``t.indexes``
(:mod:`.table_indexes`), and the record index a keyed table builds by itself once its keys
show random (:mod:`.automatic`).

Kept apart from the other services because the three share one protocol (schedule under
the lock, build without it, catch up and validate before finishing) and change together.
Nothing is imported here, so importing one of them does not import the others."""
