"""The store's schema and its migrations.

Each migration moves the schema up by one version; ``meta.schema_version``
says where a store stands. A store written by a newer Oloproof is refused,
never rewritten.
"""

from __future__ import annotations

SCHEMA_VERSION = 3

MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  created_at TEXT NOT NULL,
  finished_at TEXT,
  status TEXT NOT NULL,            -- RUNNING | DECIDED | RUN_ERROR
  completeness TEXT NOT NULL,      -- PARTIAL | COMPLETE
  exit_code INTEGER,
  gate TEXT,
  suite_digest TEXT NOT NULL,
  dataset TEXT NOT NULL,
  cases_total INTEGER NOT NULL,
  system_identity TEXT NOT NULL,
  system_json TEXT NOT NULL,
  metrics_json TEXT NOT NULL,      -- [{criterion, kind, range, evaluator}]
  policy_json TEXT,
  policy_path TEXT,
  stop_reason TEXT,
  pid INTEGER,
  cache_json TEXT
);
CREATE INDEX runs_created ON runs(created_at);
CREATE TABLE run_cases (
  run_id TEXT NOT NULL,
  case_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  input_json TEXT NOT NULL,
  expected_json TEXT,
  metadata_json TEXT,
  status TEXT NOT NULL,            -- OK | ERROR | TIMEOUT
  output_json TEXT,
  error TEXT,
  attempts INTEGER NOT NULL,
  latency_ms REAL,
  usage_json TEXT,
  from_cache INTEGER NOT NULL,
  exec_key TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  PRIMARY KEY (run_id, case_id)
) WITHOUT ROWID;
CREATE TABLE run_judgments (
  run_id TEXT NOT NULL,
  case_id TEXT NOT NULL,
  criterion TEXT NOT NULL,
  status TEXT NOT NULL,            -- OK | EXCLUDED | ERROR | MISSING
  passed INTEGER,
  score REAL,
  reason TEXT,
  from_cache INTEGER NOT NULL,
  judge_key TEXT NOT NULL,
  latency_ms REAL,
  attempts INTEGER NOT NULL,
  usage_json TEXT,
  PRIMARY KEY (run_id, case_id, criterion)
) WITHOUT ROWID;
CREATE TABLE decisions (
  run_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  rule_id TEXT NOT NULL,
  decision_json TEXT NOT NULL,
  PRIMARY KEY (run_id, rule_id)
);
CREATE TABLE exec_cache (
  key TEXT PRIMARY KEY,
  output_json TEXT NOT NULL,
  latency_ms REAL,
  usage_json TEXT,
  attempts INTEGER NOT NULL,
  created_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE judge_cache (
  key TEXT PRIMARY KEY,
  status TEXT NOT NULL,
  passed INTEGER,
  score REAL,
  reason TEXT,
  latency_ms REAL,
  attempts INTEGER NOT NULL,
  usage_json TEXT,
  created_at TEXT NOT NULL
) WITHOUT ROWID;
""",
    # 2: comparisons of two runs (oloproof compare). A store at version 1 gains
    # these tables in place; nothing already stored is touched.
    2: """
CREATE TABLE comparisons (
  id TEXT PRIMARY KEY,              -- cmp_ + a ULID
  project TEXT NOT NULL,
  created_at TEXT NOT NULL,
  candidate_run TEXT NOT NULL,
  baseline_run TEXT NOT NULL,
  confidence_level REAL NOT NULL,
  policy_json TEXT NOT NULL,
  policy_path TEXT,
  gate TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  document_json TEXT NOT NULL       -- the whole comparison, as compare --json prints it
);
CREATE INDEX comparisons_created ON comparisons(created_at);
CREATE INDEX comparisons_runs ON comparisons(candidate_run, baseline_run);
CREATE TABLE comparison_metrics (
  cmp_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  metric TEXT NOT NULL,
  kind TEXT NOT NULL,               -- BINARY | MEAN
  pairs INTEGER NOT NULL,
  both_pass INTEGER,                -- BINARY: the paired 2x2 table
  cand_only INTEGER,
  base_only INTEGER,
  both_fail INTEGER,
  dropped_missing INTEGER NOT NULL,
  dropped_excluded INTEGER NOT NULL,
  estimate REAL,                    -- candidate - baseline
  lower REAL,
  upper REAL,
  sd REAL,                          -- MEAN: sd of the per-case differences
  method TEXT NOT NULL,
  PRIMARY KEY (cmp_id, metric)
) WITHOUT ROWID;
CREATE TABLE comparison_decisions (
  cmp_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  rule_id TEXT NOT NULL,
  decision_json TEXT NOT NULL,
  PRIMARY KEY (cmp_id, rule_id)
) WITHOUT ROWID;
""",
    # 3: repeated trials (trials: k in oloproof.yaml; docs/repeated-trials.md). Trial 0 of
    # every case stays in run_cases and run_judgments, as every run stores it; trials 1 to
    # k - 1 go to the tables below, and run_trials says how many trials a run made (no row:
    # one). A version step and not an optional table: an older Oloproof would decide a run
    # of k trials on its first trial alone, and must refuse the store instead.
    # Self-contained (IF NOT EXISTS), so that it can be renumbered beside another migration.
    3: """
CREATE TABLE IF NOT EXISTS run_trials (
  run_id TEXT PRIMARY KEY,
  trials INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trial_cases (
  run_id TEXT NOT NULL,
  case_id TEXT NOT NULL,
  trial INTEGER NOT NULL,           -- 1 .. trials - 1 (trial 0 is in run_cases)
  idx INTEGER NOT NULL,
  status TEXT NOT NULL,             -- OK | ERROR | TIMEOUT
  output_json TEXT,
  error TEXT,
  attempts INTEGER NOT NULL,
  latency_ms REAL,
  usage_json TEXT,
  from_cache INTEGER NOT NULL,
  exec_key TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  PRIMARY KEY (run_id, case_id, trial)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trial_judgments (
  run_id TEXT NOT NULL,
  case_id TEXT NOT NULL,
  trial INTEGER NOT NULL,
  criterion TEXT NOT NULL,
  status TEXT NOT NULL,             -- OK | EXCLUDED | ERROR | MISSING
  passed INTEGER,
  score REAL,
  reason TEXT,
  from_cache INTEGER NOT NULL,
  judge_key TEXT NOT NULL,
  latency_ms REAL,
  attempts INTEGER NOT NULL,
  usage_json TEXT,
  PRIMARY KEY (run_id, case_id, trial, criterion)
) WITHOUT ROWID;
""",
}

# Tables that are added to any store opened for writing, without a version step.
# Each is optional for a reader (a store without it reads as before) and unknown
# to older versions, which ignore it: a version step would make every older
# Oloproof refuse a store for a table it has no use for.
#
# run_owners: who runs a RUNNING run, the running process's identity
# (store/liveness.py: boot id, PID, start time), so that a killed run whose PID
# was given to another process reads as ended, not RUNNING. Its own table, not a
# column of ``runs``: rows of ``runs`` keep the shape tools (and tests) insert.
#
# run_subsets: how a run chose part of its suite (--limit, --sample, --case,
# --where), for runs stored with completeness SUBSET; a full run has no row.
OPTIONAL_TABLES: dict[str, str] = {
    # run_concurrency: every move of a run's adaptive limits (concurrency.adaptive), as
    # its concurrency_changed events said. A run without adaptive has no row. Optional
    # (no version bump): a store that has it still opens with an Oloproof that does not
    # know it, which then simply shows no history.
    "run_concurrency": """
CREATE TABLE IF NOT EXISTS run_concurrency (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,             -- 0, 1, 2... in the order of the changes
  at TEXT NOT NULL,                 -- the event's timestamp
  limit_name TEXT NOT NULL,         -- system | judge
  previous INTEGER,                 -- NULL for the starting limit
  limit_value INTEGER NOT NULL,
  ceiling INTEGER NOT NULL,
  reason TEXT NOT NULL,             -- start | rate_limited | clean_window
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID
""",
    "run_subsets": """
CREATE TABLE IF NOT EXISTS run_subsets (
  run_id TEXT PRIMARY KEY,
  subset_json TEXT NOT NULL
) WITHOUT ROWID
""",
    # run_sequential: how a sequential run (oloproof run --sequential) ordered and tested
    # its cases: the seed, the design margin, the suite's size and its case ids in the
    # order fed to the tests (docs/sequential-decisions.md). Absent for any other run. An
    # older Oloproof cannot read the run's completeness (SEQUENTIAL) and refuses the run,
    # rather than re-deciding a prefix chosen by a sequential test with a fixed-n interval.
    "run_sequential": """
CREATE TABLE IF NOT EXISTS run_sequential (
  run_id TEXT PRIMARY KEY,
  sequential_json TEXT NOT NULL
) WITHOUT ROWID
""",
    "run_owners": """
CREATE TABLE IF NOT EXISTS run_owners (
  run_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL
) WITHOUT ROWID
""",
    # run_merges: a run made by `oloproof merge` from the shard runs of its suite
    # (runner/merge.py): their ids, sorted, as a JSON list. Absent for any other run.
    "run_merges": """
CREATE TABLE IF NOT EXISTS run_merges (
  run_id TEXT PRIMARY KEY,
  shards_json TEXT NOT NULL
) WITHOUT ROWID
""",
    # matrices: a matrix of variants (`run --matrix`, api/_matrix.py): its variants' run
    # ids and the whole matrix document (table, comparisons under Holm). Each variant is a
    # run of its own; the document is what the matrix concluded from them.
    "matrices": """
CREATE TABLE IF NOT EXISTS matrices (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  created_at TEXT NOT NULL,
  baseline_run TEXT,
  document_json TEXT NOT NULL
) WITHOUT ROWID
""",
    # run_sources: where a run's rules, labels and code came from, for the notes `gate`
    # adds when the project has moved on since (analysis/stored.py): ``{"policy": {"path",
    # "given", "file", "project"}, "labels": {"file"}, "code": {"files": {path: digest},
    # "outside": [path]}}`` (runner/sources.py). Absent for a run stored by an older
    # version, which is read as before (no such note).
    "run_sources": """
CREATE TABLE IF NOT EXISTS run_sources (
  run_id TEXT PRIMARY KEY,
  sources_json TEXT NOT NULL
) WITHOUT ROWID
""",
    # run_labels: the human labels a run was measured against (human_labels in
    # oloproof.yaml), with their digest: part of what the run stored, so gate and
    # inspect re-decide it the same way. Absent for a run without labels.
    "run_labels": """
CREATE TABLE IF NOT EXISTS run_labels (
  run_id TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  digest TEXT NOT NULL,
  labels_json TEXT NOT NULL
) WITHOUT ROWID
""",
}
