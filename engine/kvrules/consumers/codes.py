"""Diagnostic codes of the consumers (spec section 6), one constant each.

Evidence codes live in :mod:`kvrules.diagnostics`; these are the problems that only a
consumer can find: a sample selection that cannot pick one row, a published table that does
not verify, a publication that would overwrite a published row.
"""
from __future__ import annotations

# --- aggregation (6.2): the cell is reported and left out of the rows ---
COORDINATE_COLLISION = "coordinate_collision"
"""Several unclamped samples of one coordinate and the zero-KV prefill exception does not apply."""
ROW_EVIDENCE_MISSING = "row_evidence_missing"
"""A column of the formal row has no source: no plan, no provenance, a missing plan field, or
a verdict point the rank artifacts no longer hold."""
DUPLICATE_CELL = "duplicate_cell"
"""The same cell id came from two inputs of one aggregation; the first one is kept."""

# --- publication (6.3) ---
CONFLICTING_ROW = "conflicting_fpm_row"
"""The same row key is already published with a different row (kv_seed_regime included)."""
MARKER_POLICY_MISMATCH = "marker_policy_mismatch"
"""Dense rows of another policy version would join a table whose marker names one policy."""

# --- verification of a published table (6.3) ---
TABLE_UNCOMMITTED = "table_uncommitted"
"""A parquet table without its commit record (an interrupted or foreign write)."""
TABLE_RECORD_INVALID = "table_record_invalid"
"""The commit record is not a readable JSON object of schema aic_fpm_forward_perf."""
TABLE_SCHEMA_HISTORICAL = "table_schema_historical"
"""schema_version 6: a historical table that cannot be finalized."""
TABLE_SCHEMA_UNSUPPORTED = "table_schema_unsupported"
"""A schema_version other than 7 (and 6)."""
TABLE_PARQUET_MISSING = "table_parquet_missing"
"""A commit record without its parquet table."""
TABLE_PARQUET_UNREADABLE = "table_parquet_unreadable"
"""The parquet file cannot be read, or its columns are not the formal row columns."""
TABLE_DIGEST_MISMATCH = "table_digest_mismatch"
"""The parquet file's SHA-256 is not the commit record's parquet_sha256."""
TABLE_ROW_COUNT_MISMATCH = "table_row_count_mismatch"
"""The parquet row count is not the commit record's row_count."""
TABLE_RECORD_MISMATCH = "table_record_mismatch"
"""system, backend, backend_version, plan digests or attempt ids disagree with the rows or path."""
TABLE_DUPLICATE_KEY = "table_duplicate_key"
"""Two rows of the table share one row key."""
MARKER_MISSING = "marker_missing"
"""Dense rows exist but the commit record has no kv_seed_classification."""
MARKER_UNEXPECTED = "marker_unexpected"
"""kv_seed_classification is present although the table has no dense rows."""
MARKER_INVALID = "marker_invalid"
"""kv_seed_classification is not {"policy": str, "cells": [str, ...]}."""
MARKER_UNKNOWN_POLICY = "marker_unknown_policy"
"""The marker names a policy version that is neither shipped nor loaded by the caller."""
MARKER_EMPTY = "marker_empty"
"""The marker lists no cell while dense rows exist."""
MARKER_DUPLICATE = "marker_duplicate"
"""The marker lists a cell more than once."""
MARKER_EXTRA_CELL = "marker_extra_cell"
"""The marker names a cell without dense rows."""
MARKER_MISSING_CELL = "marker_missing_cell"
"""A cell with dense rows is not named by the marker."""
MARKER_UNSORTED = "marker_unsorted"
"""The marker's cells are not sorted."""
