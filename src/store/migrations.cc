// The versioned schema of the store, per dialect. Append new migrations; never edit an applied one.
// Every statement is idempotent (IF NOT EXISTS) so a migration interrupted half-way (MariaDB's DDL is not
// transactional) can simply run again.
#include "store/sql_store.h"

namespace falcon::store::internal {

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration>* const kMigrations = new std::vector<Migration>{
      {1,
       "initial schema: exps, artifacts, analysis_records, fencing",
       {
           R"(CREATE TABLE IF NOT EXISTS exps (
  exp_id TEXT NOT NULL PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  completed_at INTEGER NULL))",
           "CREATE INDEX IF NOT EXISTS exps_created ON exps(created_at, exp_id)",
           "CREATE INDEX IF NOT EXISTS exps_status_created ON exps(status, created_at, exp_id)",
           R"(CREATE TABLE IF NOT EXISTS artifacts (
  artifact_id TEXT NOT NULL PRIMARY KEY,
  exp_id TEXT NOT NULL REFERENCES exps(exp_id),
  artifact_type TEXT NOT NULL DEFAULT '',
  uri TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  exp_completed INTEGER NOT NULL DEFAULT 0,
  offline_done INTEGER NOT NULL DEFAULT 0))",
           "CREATE INDEX IF NOT EXISTS artifacts_exp ON artifacts(exp_id, created_at, artifact_id)",
           "CREATE INDEX IF NOT EXISTS artifacts_awaiting ON artifacts(exp_completed, offline_done, "
           "created_at, artifact_id)",
           R"(CREATE TABLE IF NOT EXISTS analysis_records (
  analysis_id TEXT NOT NULL PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  exp_id TEXT NOT NULL REFERENCES exps(exp_id),
  artifact_id TEXT NULL,
  offline_artifact_id TEXT NULL,
  analysis_type TEXT NOT NULL,
  plugin_name TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  result_gcs_path TEXT NOT NULL DEFAULT '',
  error_message TEXT NOT NULL DEFAULT '',
  command TEXT NOT NULL DEFAULT '',
  script_content BLOB NULL,
  script_name TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL))",
           "CREATE UNIQUE INDEX IF NOT EXISTS analysis_records_offline ON "
           "analysis_records(exp_id, offline_artifact_id)",
           "CREATE INDEX IF NOT EXISTS analysis_records_created ON "
           "analysis_records(created_at, analysis_id)",
           "CREATE INDEX IF NOT EXISTS analysis_records_exp_created ON "
           "analysis_records(exp_id, created_at, analysis_id)",
           "CREATE INDEX IF NOT EXISTS analysis_records_status_created ON "
           "analysis_records(status, created_at, analysis_id)",
           R"(CREATE TABLE IF NOT EXISTS fencing (
  lease TEXT NOT NULL PRIMARY KEY,
  epoch INTEGER NOT NULL))",
       },
       {
           R"(CREATE TABLE IF NOT EXISTS exps (
  exp_id VARCHAR(128) NOT NULL PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  status VARCHAR(16) NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  completed_at BIGINT NULL,
  INDEX exps_created (created_at, exp_id),
  INDEX exps_status_created (status, created_at, exp_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
           R"(CREATE TABLE IF NOT EXISTS artifacts (
  artifact_id VARCHAR(128) NOT NULL PRIMARY KEY,
  exp_id VARCHAR(128) NOT NULL,
  artifact_type VARCHAR(64) NOT NULL DEFAULT '',
  uri TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  exp_completed TINYINT NOT NULL DEFAULT 0,
  offline_done TINYINT NOT NULL DEFAULT 0,
  INDEX artifacts_exp (exp_id, created_at, artifact_id),
  INDEX artifacts_awaiting (exp_completed, offline_done, created_at, artifact_id),
  CONSTRAINT artifacts_exp_fk FOREIGN KEY (exp_id) REFERENCES exps(exp_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
           R"(CREATE TABLE IF NOT EXISTS analysis_records (
  analysis_id VARCHAR(128) NOT NULL PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  exp_id VARCHAR(128) NOT NULL,
  artifact_id VARCHAR(128) NULL,
  offline_artifact_id VARCHAR(128) NULL,
  analysis_type VARCHAR(16) NOT NULL,
  plugin_name VARCHAR(255) NOT NULL DEFAULT '',
  status VARCHAR(16) NOT NULL,
  result_gcs_path TEXT NOT NULL DEFAULT '',
  error_message TEXT NOT NULL DEFAULT '',
  command TEXT NOT NULL DEFAULT '',
  script_content MEDIUMBLOB NULL,
  script_name VARCHAR(255) NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  UNIQUE INDEX analysis_records_offline (exp_id, offline_artifact_id),
  INDEX analysis_records_created (created_at, analysis_id),
  INDEX analysis_records_exp_created (exp_id, created_at, analysis_id),
  INDEX analysis_records_status_created (status, created_at, analysis_id),
  CONSTRAINT analysis_records_exp_fk FOREIGN KEY (exp_id) REFERENCES exps(exp_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
           R"(CREATE TABLE IF NOT EXISTS fencing (
  lease VARCHAR(128) NOT NULL PRIMARY KEY,
  epoch BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
       }},
      {2,
       "leader epochs issued by the database (AcquireLeaderEpoch); the old fencing table, whose highest "
       "epoch any caller could raise, is dropped",
       {
           R"(CREATE TABLE IF NOT EXISTS leader_epochs (
  lease TEXT NOT NULL PRIMARY KEY,
  epoch INTEGER NOT NULL,
  holder TEXT NOT NULL,
  issued_at INTEGER NOT NULL))",
           "DROP TABLE IF EXISTS fencing",
       },
       {
           R"(CREATE TABLE IF NOT EXISTS leader_epochs (
  lease VARCHAR(128) NOT NULL PRIMARY KEY,
  epoch BIGINT NOT NULL,
  holder VARCHAR(255) NOT NULL,
  issued_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
           "DROP TABLE IF EXISTS fencing",
       }},
      {3,
       "access control: hashed API tokens, the audit log, created_by of Exps and analysis records",
       {
           // SQLite has no ADD COLUMN IF NOT EXISTS, but its DDL is transactional: the migration runs whole
           // or not at all.
           "ALTER TABLE exps ADD COLUMN created_by TEXT NOT NULL DEFAULT ''",
           "ALTER TABLE analysis_records ADD COLUMN created_by TEXT NOT NULL DEFAULT ''",
           "CREATE INDEX IF NOT EXISTS analysis_records_creator_created ON "
           "analysis_records(created_by, created_at, analysis_id)",
           R"(CREATE TABLE IF NOT EXISTS api_tokens (
  name TEXT NOT NULL PRIMARY KEY,
  role TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NULL,
  revoked_at INTEGER NULL,
  last_used_at INTEGER NULL))",
           R"(CREATE TABLE IF NOT EXISTS audit_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  username TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  result TEXT NOT NULL,
  code INTEGER NOT NULL,
  source TEXT NOT NULL))",
           "CREATE INDEX IF NOT EXISTS audit_events_time ON audit_events(time, id)",
       },
       {
           "ALTER TABLE exps ADD COLUMN IF NOT EXISTS created_by VARCHAR(255) NOT NULL DEFAULT ''",
           "ALTER TABLE analysis_records ADD COLUMN IF NOT EXISTS created_by VARCHAR(255) NOT NULL DEFAULT ''",
           "CREATE INDEX IF NOT EXISTS analysis_records_creator_created ON "
           "analysis_records(created_by, created_at, analysis_id)",
           R"(CREATE TABLE IF NOT EXISTS api_tokens (
  name VARCHAR(128) NOT NULL PRIMARY KEY,
  role VARCHAR(32) NOT NULL,
  token_hash CHAR(64) NOT NULL,
  created_by VARCHAR(255) NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NULL,
  revoked_at BIGINT NULL,
  last_used_at BIGINT NULL,
  UNIQUE INDEX api_tokens_hash (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
           R"(CREATE TABLE IF NOT EXISTS audit_events (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  time BIGINT NOT NULL,
  username VARCHAR(255) NOT NULL,
  action VARCHAR(64) NOT NULL,
  target TEXT NOT NULL,
  result VARCHAR(16) NOT NULL,
  code INT NOT NULL,
  source VARCHAR(128) NOT NULL,
  INDEX audit_events_time (time, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin)",
       }},
      {4,
       "artifacts no plugin handles are marked (offline_done = 2) and found again by type when a plugin "
       "for it appears",
       {"CREATE INDEX IF NOT EXISTS artifacts_by_type ON artifacts(exp_completed, offline_done, artifact_type)"},
       {"CREATE INDEX IF NOT EXISTS artifacts_by_type ON artifacts(exp_completed, offline_done, artifact_type)"}},
      {5,
       "run options kept in the record (resource override, image, time limit) and the analysis a record "
       "re-runs",
       {
           "ALTER TABLE analysis_records ADD COLUMN resource_override TEXT NOT NULL DEFAULT ''",
           "ALTER TABLE analysis_records ADD COLUMN image TEXT NOT NULL DEFAULT ''",
           "ALTER TABLE analysis_records ADD COLUMN timeout_seconds INTEGER NOT NULL DEFAULT 0",
           "ALTER TABLE analysis_records ADD COLUMN rerun_of TEXT NOT NULL DEFAULT ''",
       },
       {
           "ALTER TABLE analysis_records ADD COLUMN IF NOT EXISTS resource_override VARCHAR(1024) NOT NULL "
           "DEFAULT ''",
           "ALTER TABLE analysis_records ADD COLUMN IF NOT EXISTS image VARCHAR(1024) NOT NULL DEFAULT ''",
           "ALTER TABLE analysis_records ADD COLUMN IF NOT EXISTS timeout_seconds BIGINT NOT NULL DEFAULT 0",
           "ALTER TABLE analysis_records ADD COLUMN IF NOT EXISTS rerun_of VARCHAR(64) NOT NULL DEFAULT ''",
       }},
      {6,
       "how many times the controller ran an analysis again after an infrastructure failure",
       {"ALTER TABLE analysis_records ADD COLUMN infra_retries INTEGER NOT NULL DEFAULT 0"},
       {"ALTER TABLE analysis_records ADD COLUMN IF NOT EXISTS infra_retries INT NOT NULL DEFAULT 0"}},
      {7,
       "terminal records found by when they finished, for retention (ListPurgeableAnalyses)",
       {"CREATE INDEX IF NOT EXISTS analysis_records_status_updated ON "
        "analysis_records(status, updated_at, analysis_id)"},
       {"CREATE INDEX IF NOT EXISTS analysis_records_status_updated ON "
        "analysis_records(status, updated_at, analysis_id)"}},
  };
  return *kMigrations;
}

}  // namespace falcon::store::internal
