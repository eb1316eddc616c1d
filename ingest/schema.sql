-- The retrylens database. Timestamps are UTC (TIMESTAMP without zone, by convention).
-- The registry: one row per load. A load covers bytes [offset_bytes, bytes) of a file's
-- decompressed content, which ends on a newline; sha256 is the hash of the whole prefix
-- [0, bytes), so that a file which grew, was renamed or was compressed since is
-- recognised by its content and only its new tail is loaded.
CREATE TABLE IF NOT EXISTS files (
    file_id      INTEGER PRIMARY KEY,
    path         VARCHAR NOT NULL,      -- as given on the command line; "-" for stdin
    sha256       VARCHAR NOT NULL,      -- of the decompressed content [0, bytes)
    offset_bytes BIGINT  NOT NULL,      -- where this load started
    bytes        BIGINT  NOT NULL,      -- where it ended
    first_line   BIGINT  NOT NULL,      -- line number of the first line of this load
    lines_end    BIGINT  NOT NULL,      -- line number of its last line
    format       VARCHAR NOT NULL,
    lines        BIGINT  NOT NULL,
    rows         BIGINT  NOT NULL,
    rejected     BIGINT  NOT NULL,
    first_ts     TIMESTAMP,
    last_ts      TIMESTAMP,
    loaded_at    TIMESTAMP NOT NULL,
    line_sum     BIGINT,                -- sum of its rows' line numbers (see ingest.Check)
    duplicates   BIGINT,                -- lines left out as repeats of earlier loads (ingest --dedupe)
    repeats      BIGINT                 -- rows loaded that repeat rows of earlier loads (no --dedupe)
);
-- Databases from before these columns: Check fills line_sum in for their loads.
ALTER TABLE files ADD COLUMN IF NOT EXISTS line_sum BIGINT;
ALTER TABLE files ADD COLUMN IF NOT EXISTS duplicates BIGINT;
ALTER TABLE files ADD COLUMN IF NOT EXISTS repeats BIGINT;

-- One row per access-log line: one physical attempt.
CREATE TABLE IF NOT EXISTS requests (
    file_id                INTEGER NOT NULL,
    line                   BIGINT  NOT NULL,
    ts                     TIMESTAMP,   -- when the gateway finished the request
    remote_addr            VARCHAR,
    method                 VARCHAR,
    uri                    VARCHAR,
    protocol               VARCHAR,
    status                 SMALLINT,
    bytes                  BIGINT,
    referer                VARCHAR,
    user_agent             VARCHAR,
    host                   VARCHAR,
    request_time           DOUBLE,      -- seconds
    upstream_addr          VARCHAR,
    upstream_status        VARCHAR,     -- nginx's list as written
    upstream_response_time VARCHAR,
    upstream_tries         SMALLINT,    -- proxy tries, never mixed with client attempts
    attempt                INTEGER,     -- client attempt number, 0 = first; NULL = untagged
    attempt_source         VARCHAR,
    max_attempts           SMALLINT,
    retry_reason           VARCHAR,
    -- The keys a request is linked by, as 64-bit hashes of their text (retrylens_key('…')
    -- computes one): every join and window runs on them. Their text is in key_text, but for
    -- first attempts (attempt 0): findings and loops print it, from a retry's line.
    request_id_hash        BIGINT,      -- X-Request-Id
    idempotency_key_hash   BIGINT,      -- Idempotency-Key
    invocation_id_hash     BIGINT,      -- amz-sdk-invocation-id
    retry_after            VARCHAR,
    route                  VARCHAR,     -- the URI path with ids replaced (ingest.Router)
    key_text               VARCHAR,     -- the strong key as logged (Idempotency-Key, else invocation id, else X-Request-Id); NULL when attempt = 0
    error_code             VARCHAR,     -- the upstream's error code where logged (x-amzn-ErrorType, grpc-status): tells throttles that are not 429
    operation              VARCHAR,     -- the operation a request names beside its method where logged (X-Amz-Target): tells reads that are POSTs
    span_hash              BIGINT       -- the client span it was sent in (traceparent), or a trace's attempt span: joins the layers
);
-- Databases from before them: added in place by any open for writing (ingest, verify --repair).
ALTER TABLE requests ADD COLUMN IF NOT EXISTS error_code VARCHAR;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS operation VARCHAR;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS span_hash BIGINT;

-- Malformed lines: every one counted by reason, the first few of each file kept.
CREATE TABLE IF NOT EXISTS reject_counts (
    file_id INTEGER NOT NULL,
    reason  VARCHAR NOT NULL,
    n       BIGINT  NOT NULL
);
CREATE TABLE IF NOT EXISTS rejects (
    file_id INTEGER NOT NULL,
    line    BIGINT  NOT NULL,
    reason  VARCHAR NOT NULL,
    message VARCHAR NOT NULL,
    excerpt VARCHAR NOT NULL
);
