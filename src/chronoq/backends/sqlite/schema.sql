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
-- Delivery order among due jobs: priority, then due time, then put order
-- (rowid), within a group (NULL: the default group, every job of a topic
-- that never names one). It replaces jobs_ready (topic, priority, due_at).
DROP INDEX IF EXISTS jobs_ready;
CREATE INDEX IF NOT EXISTS jobs_ready_in_group
    ON jobs (topic, job_group, priority DESC, due_at) WHERE state = 1;

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
    error    TEXT,
    -- the job's group (NULL: none); added to the events of stores made
    -- before it by Store._setup (ALTER TABLE)
    job_group TEXT
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

-- Flow control (docs/contract.md §10): a topic has a row here from its first
-- job with a group, its first limit or its first paused group, and keeps it.
-- Only then are its jobs counted by group (flow_triggers.sql), and does a
-- reserve take turns among its groups. turns: jobs handed out, the groups' clock;
-- leased: the topic's live leases; tokens: its rate limit's bucket (NULL:
-- full), as of refilled_at (ms); rule, default_rule: its limits and every
-- group's default (chronoq.limits.Rule.pack), NULL when unset.
CREATE TABLE IF NOT EXISTS flow_topics (
    topic        TEXT    PRIMARY KEY,
    turns        INTEGER NOT NULL DEFAULT 0,
    leased       INTEGER NOT NULL DEFAULT 0,
    tokens       REAL,
    refilled_at  INTEGER NOT NULL DEFAULT 0,
    rule         TEXT,
    default_rule TEXT
) WITHOUT ROWID;

-- A flow topic's groups ('' the default group): ready and leased jobs, the
-- turn it was last served at (0: never), paused, held (0: may be served; > 0: no token before that ms; -1:
-- no free lease slot until one of its leases ends), its bucket, its own rule.
CREATE TABLE IF NOT EXISTS flow_groups (
    topic       TEXT    NOT NULL,
    grp         TEXT    NOT NULL,
    ready       INTEGER NOT NULL DEFAULT 0,
    leased      INTEGER NOT NULL DEFAULT 0,
    turn        INTEGER NOT NULL DEFAULT 0,
    paused      INTEGER NOT NULL DEFAULT 0,
    held        INTEGER NOT NULL DEFAULT 0,
    tokens      REAL,
    refilled_at INTEGER NOT NULL DEFAULT 0,
    rule        TEXT,
    UNIQUE (topic, grp)
);
-- the next group to serve: the least recently served of those that may be
-- (equal turns: the one first seen); O(log G) whatever the number of groups
CREATE INDEX IF NOT EXISTS flow_turns ON flow_groups (topic, turn)
    WHERE ready > 0 AND paused = 0 AND held = 0;
CREATE INDEX IF NOT EXISTS flow_held ON flow_groups (topic, held) WHERE held > 0;
CREATE INDEX IF NOT EXISTS flow_own ON flow_groups (topic) WHERE rule IS NOT NULL;
-- groups that are only a bucket: forgotten once it is full again (flow.py)
CREATE INDEX IF NOT EXISTS flow_idle ON flow_groups (topic, refilled_at)
    WHERE ready = 0 AND leased = 0 AND paused = 0 AND rule IS NULL;

-- The counts are kept by triggers that each connection creates (TEMP) once
-- the store has a flow topic: flow_triggers.sql, Store.write.
