"""The table's properties as one typed value, :class:`TableProperties`.

``defaults.toml`` stays the single source of truth for keys, defaults, choices and
minimums, and :func:`~lakeline.config.properties.resolve` stays the one place that
validates them. This module only gives the validated, merged result a shape the type
checker sees: one field per documented key (the key with ``.`` and ``-`` turned into
``_``, e.g. ``write.target-file-size-bytes`` -> ``write_target_file_size_bytes``), so
readers write ``props.commit_max_retries`` instead of ``int(props["commit.max-retries"])``
and a misspelt property is an attribute error at check time rather than a ``KeyError`` at
run time. A test keeps the fields and the TOML in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .properties import USER_PREFIX, aggregate_column, resolve, specs

Compression = Literal["snappy", "zstd", "gzip", "lz4", "none"]
ConcurrencyMode = Literal["optimistic", "single-writer"]
SchemaEvolution = Literal["none", "add-columns"]
CleanPolicy = Literal["keep_latest_commits", "keep_latest_file_versions", "keep_latest_hours"]
CompactionTrigger = Literal["delta-commits", "log-ratio", "time", "any"]
ClusteringStrategy = Literal["linear", "zorder"]
MergeEngineName = Literal["deduplicate", "partial-update", "aggregation", "first-row"]


def field_name(key: str) -> str:
    """The attribute of :class:`TableProperties` that holds property ``key``."""
    return key.replace(".", "_").replace("-", "_")


@dataclass(frozen=True)
class TableProperties:
    """Every documented table property, typed, merged over the defaults of ``defaults.toml``.

    Build it with :meth:`resolve` (user properties) or :meth:`from_resolved` (the output of
    :func:`~lakeline.config.properties.resolve`); the field docs are the TOML's ``doc``.
    """

    write_target_file_size_bytes: int
    write_small_file_limit_bytes: int
    write_parallel_file_min_bytes: int
    write_parquet_compression: Compression
    write_parquet_compression_min_saving: float
    write_row_group_rows: int
    write_insert_key_check: bool
    write_concurrency_mode: ConcurrencyMode
    write_schema_evolution: SchemaEvolution
    commit_max_retries: int
    heartbeat_interval_ms: int
    heartbeat_tolerable_misses: int
    lock_lease_ms: int
    lock_acquire_timeout_ms: int
    clean_policy: CleanPolicy
    clean_retain: int
    clean_orphan_age_ms: int
    compaction_trigger: CompactionTrigger
    compaction_delta_commits: int
    compaction_log_ratio: float
    compaction_interval_ms: int
    clustering_small_file_ratio: float
    clustering_max_bytes_per_group: int
    clustering_strategy: ClusteringStrategy
    clustering_sort_columns: str
    archive_max_active_instants: int
    archive_min_active_instants: int
    engine_parallelism: int
    service_nice: int
    index_record_index: bool
    index_record_index_auto_rows: int
    metadata_files_checkpoint_commits: int
    metadata_compact_max_deltas: int
    inline_services: str
    commit_callback_url: str
    merge_engine: MergeEngineName
    #: ``merge.<column>.aggregate`` by column (only the ones set), read-only.
    merge_aggregates: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    #: The free-form ``user.*`` properties, keys as given (with their prefix), read-only.
    user: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @classmethod
    def resolve(cls, user: Mapping[str, Any] | None, stored: bool = False) -> TableProperties:
        """Validate ``user`` properties and merge them over the defaults (``stored``: read
        from a table's log; a value above a maximum reads as the maximum).

        Raises:
            PropertyProblem: as :func:`~lakeline.config.properties.resolve`.
        """
        return cls.from_resolved(resolve(user, stored))

    @classmethod
    def from_resolved(cls, merged: Mapping[str, Any]) -> TableProperties:
        """The typed view of already validated and merged properties (every documented key)."""
        typed = {field_name(k): merged[k] for k in specs()}
        user = {k: v for k, v in merged.items() if k.startswith(USER_PREFIX)}
        aggregates = {c: merged[k] for k in merged if (c := aggregate_column(k)) is not None}
        return cls(**typed, merge_aggregates=MappingProxyType(aggregates), user=MappingProxyType(user))

    def to_dict(self) -> dict[str, Any]:
        """Every property by its dotted key (the documented ones, then ``user.*``), for listings."""
        out = {k: getattr(self, field_name(k)) for k in specs()}
        out.update({f"merge.{c}.aggregate": fn for c, fn in self.merge_aggregates.items()})
        out.update(self.user)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType does not pickle; ship the plain dict and rebuild.
        return (type(self).from_resolved, (self.to_dict(),))
