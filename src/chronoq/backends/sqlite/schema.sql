-- chronoq SQLite schema, version 1.
-- jobs.state: 0 delayed, 1 ready, 2 reserved, 3 dead.
-- jobs.at: when the row next changes by itself: due time (delayed, ready),
-- lease deadline (reserved), time of death (dead). One partial index per
-- state on (topic, at) serves promotion, lease expiry, listing and counting;
-- ready rows are indexed only in delivery order. Queries name the state as a
-- literal, or SQLite cannot use a partial index.
CREATE TABLE IF NOT EXISTS jobs (
    topic         TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    state         INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    due_at        INTEGER NOT NULL,
    priority      INTEGER NOT NULL,
    payload       BLOB    NOT NULL,
    ttr_ms        INTEGER NOT NULL,
    max_attempts  INTEGER NOT NULL,
    attempts      INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    unique_for_ms INTEGER NOT NULL,
    lease         TEXT,
    last_error    TEXT,
    -- the W3C trace context put with the job (docs/tracing.md); added to the
    -- jobs of stores made before it by Store._setup (ALTER TABLE)
    traceparent   TEXT,
    -- the job's group within its topic (NULL: the default group); added to
    -- the jobs of stores made before it by Store._setup (ALTER TABLE)
    job_group     TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_key ON jobs (topic, id);
CREATE INDEX IF NOT EXISTS jobs_delayed ON jobs (topic, at) WHERE state = 0;
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (topic, at) WHERE state = 2;
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (topic, at) WHERE state = 3;
-- Delivery order among due jobs: priority, then due time, then put order (rowid).
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (topic, priority DESC, due_at) WHERE state = 1;

CREATE TABLE IF NOT EXISTS topics (
    name   TEXT    PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Ids of acked or deleted jobs kept for unique_for: a put of one is not created.
CREATE TABLE IF NOT EXISTS remembered (
    topic    TEXT    NOT NULL,
    id       TEXT    NOT NULL,
    until_ms INTEGER NOT NULL,
    due_at   INTEGER NOT NULL,
    PRIMARY KEY (topic, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS remembered_until ON remembered (until_ms);

-- The event log (docs/contract.md §7). seq is never reused: trimming always keeps the newest row.
CREATE TABLE IF NOT EXISTS events (
    seq      INTEGER PRIMARY KEY,
    ts_ms    INTEGER NOT NULL,
    topic    TEXT    NOT NULL,
    id       TEXT    NOT NULL,
    event    TEXT    NOT NULL,
    attempt  INTEGER NOT NULL,
    due_at   INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    lag_ms   INTEGER,
    error    TEXT
);

CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- Recurring schedules (chronoq.recurring). spec is the facade's encoding;
-- last_at is the latest occurrence put (ms), NULL before the first; created_at
-- is kept when a schedule is redefined. Not jobs: no events. Added to stores
-- made before it by Store._setup (every statement here is IF NOT EXISTS).
CREATE TABLE IF NOT EXISTS schedules (
    topic      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    spec       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    last_at    INTEGER,
    PRIMARY KEY (topic, name)
) WITHOUT ROWID;
