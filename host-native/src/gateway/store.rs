//! The store: keys made at run time, the usage ledger, and the counters that hold limits across
//! replicas — in SQLite (one machine; a file, nothing to install) or PostgreSQL (many replicas),
//! through sqlx's `Any` driver so one set of queries serves both. Every statement is written in
//! the SQL both understand (`$1` parameters, `ON CONFLICT`, `RETURNING`); times are Unix
//! milliseconds in `BIGINT`s, amounts `DOUBLE PRECISION`.
//!
//! Migrations are built in and run at start ([`Store::migrate`]); several replicas starting at
//! once are safe: PostgreSQL runs them under an advisory lock, SQLite in a `BEGIN IMMEDIATE`
//! transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, AssertSqlSafe, Row};

use super::keys::{KeyEntry, KeySource, KeySpec};
use super::ledger::Entry;
use super::limits::Metric;

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL is not one the store takes.
    #[error("store url `{0}`: expected sqlite://PATH or postgres://USER@HOST/DB")]
    Url(String),
    /// The database said no, or could not be reached.
    #[error("the store ({url}): {source}")]
    Database {
        /// The store's URL, without its password.
        url: String,
        /// What sqlx said.
        #[source]
        source: sqlx::Error,
    },
    /// A key of that name exists.
    #[error("a key named `{0}` exists already (rotate it, or choose another name)")]
    KeyExists(String),
    /// No key of that name.
    #[error("no key named `{0}` (see `claude-bridge keys list`)")]
    NoSuchKey(String),
    /// A file of the SQLite store could not be made.
    #[error("cannot make the store's directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Which database is behind the URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// The migrations, in order. Each runs once, in a transaction; never edit one that shipped.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "keys, ledger, quotas and leases",
        "CREATE TABLE IF NOT EXISTS bridge_keys (
        name TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        spec TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        revoked_ms BIGINT
    );
    CREATE TABLE IF NOT EXISTS bridge_ledger (
        id TEXT PRIMARY KEY,
        at_ms BIGINT NOT NULL,
        day TEXT NOT NULL,
        key_name TEXT NOT NULL,
        client TEXT NOT NULL,
        session TEXT,
        front TEXT NOT NULL,
        route TEXT NOT NULL,
        target TEXT NOT NULL,
        model TEXT NOT NULL,
        upstream_model TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cache_read_tokens BIGINT NOT NULL,
        cache_write_tokens BIGINT NOT NULL,
        estimated BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        priced BIGINT NOT NULL,
        ttft_ms BIGINT,
        duration_ms BIGINT NOT NULL,
        status BIGINT NOT NULL,
        error_kind TEXT,
        attempts BIGINT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS bridge_ledger_key_at ON bridge_ledger (key_name, at_ms);
    CREATE INDEX IF NOT EXISTS bridge_ledger_at ON bridge_ledger (at_ms);
    CREATE TABLE IF NOT EXISTS bridge_quota (
        key_name TEXT NOT NULL,
        metric TEXT NOT NULL,
        win BIGINT NOT NULL,
        settled DOUBLE PRECISION NOT NULL,
        leased DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (key_name, metric, win)
    );
    CREATE TABLE IF NOT EXISTS bridge_leases (
        replica TEXT NOT NULL,
        key_name TEXT NOT NULL,
        metric TEXT NOT NULL,
        win BIGINT NOT NULL,
        amount DOUBLE PRECISION NOT NULL,
        expires_ms BIGINT NOT NULL,
        PRIMARY KEY (replica, key_name, metric, win)
    );",
    ),
    (
        2,
        "the Fabstir job ledger",
        "CREATE TABLE IF NOT EXISTS bridge_fabstir_ledger (
            wallet TEXT PRIMARY KEY,
            doc TEXT NOT NULL,
            updated_ms BIGINT NOT NULL
        );",
    ),
    (
        3,
        "what a Fabstir request paid on-chain",
        "ALTER TABLE bridge_ledger ADD COLUMN paid TEXT;
        ALTER TABLE bridge_ledger ADD COLUMN paid_unit TEXT;",
    ),
];

/// The columns of `bridge_ledger`, in the order of a ledger row's first elements
/// ([`Entry::row`]), and the SQL type each is read as from it (PostgreSQL casts to it).
const LEDGER_COLUMNS: [(&str, &str); 25] = [
    ("id", "text"),
    ("at_ms", "bigint"),
    ("day", "text"),
    ("key_name", "text"),
    ("client", "text"),
    ("session", "text"),
    ("front", "text"),
    ("route", "text"),
    ("target", "text"),
    ("model", "text"),
    ("upstream_model", "text"),
    ("input_tokens", "bigint"),
    ("output_tokens", "bigint"),
    ("cache_read_tokens", "bigint"),
    ("cache_write_tokens", "bigint"),
    ("estimated", "bigint"),
    ("cost_usd", "double precision"),
    ("priced", "bigint"),
    ("ttft_ms", "bigint"),
    ("duration_ms", "bigint"),
    ("status", "bigint"),
    ("error_kind", "text"),
    ("attempts", "bigint"),
    ("paid", "text"),
    ("paid_unit", "text"),
];

/// Records per `INSERT`: a batch is one statement up to this many (a store that was away
/// leaves larger ones), so a statement's JSON stays a few megabytes.
const ROWS_PER_INSERT: usize = 5_000;

/// `id, at_ms, …`: the ledger's column names.
fn ledger_column_names() -> String {
    LEDGER_COLUMNS.map(|(name, _)| name).join(", ")
}

/// `INSERT INTO bridge_ledger (…) SELECT … ON CONFLICT (id) DO NOTHING` of the rows of one
/// bound JSON array of ledger rows ([`Entry::row`]).
fn insert_sql(dialect: Dialect, returning: bool) -> String {
    let columns: Vec<String> = LEDGER_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| match dialect {
            Dialect::Sqlite => format!("value ->> {i}"),
            Dialect::Postgres => format!("(r ->> {i})::{ty}"),
        })
        .collect();
    let rows = match dialect {
        // `jsonb_each`: each row's `value` in SQLite's binary JSON, which `->>` reads without
        // parsing it again (`json_each` gives text, parsed once a column: half the speed of
        // binding the values). `WHERE true`: SQLite would read `ON CONFLICT` as a join's
        // constraint.
        Dialect::Sqlite => "jsonb_each(?) WHERE true",
        Dialect::Postgres => "jsonb_array_elements($1::jsonb) AS e(r)",
    };
    format!(
        "INSERT INTO bridge_ledger ({}) SELECT {} FROM {rows} ON CONFLICT (id) DO NOTHING{}",
        ledger_column_names(),
        columns.join(", "),
        if returning { " RETURNING id" } else { "" }
    )
}

/// What `store status` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The store's URL without its password.
    pub url: String,
    /// Which database.
    pub dialect: Dialect,
    /// Applied migrations.
    pub applied: Vec<i64>,
    /// Migrations this binary has that the store has not.
    pub pending: Vec<i64>,
    /// Ledger records.
    pub records: i64,
    /// Keys made at run time.
    pub keys: i64,
}

/// A consumption to move from a replica's lease into a quota's settled count.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// The replica whose lease it came from.
    pub replica: String,
    /// The key.
    pub key: String,
    /// `rpm`, `tpm`, `usd`, `tokens`.
    pub metric: Metric,
    /// The window's start.
    pub win: i64,
    /// How much was used.
    pub used: f64,
}

/// A connection pool to the store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
    url: String,
    /// The ledger's statements in its dialect, made once.
    statements: std::sync::Arc<Statements>,
}

/// The ledger writer's statements in one dialect.
#[derive(Debug)]
struct Statements {
    /// [`insert_sql`], without and with `RETURNING id`.
    insert: [String; 2],
    /// Draws on a replica's lease (`$1` key, `$2` metric, `$3` window, `$4` the most to take
    /// out, `$5` replica, `$6` what to settle): what comes out is what the lease holds, at most
    /// `$4`; the quota's leased total shrinks by it and its settled count grows by `$6`. A
    /// settlement draws what was used and settles as much; a release settles nothing. Reads the
    /// lease before [`Statements::draw_lease`] takes it out.
    draw_quota: String,
    /// Takes what [`Statements::draw_quota`] counted out of the replica's lease (`$1`–`$5`).
    draw_lease: String,
}

impl Statements {
    fn new(dialect: Dialect) -> Self {
        let (least, greatest) = match dialect {
            Dialect::Sqlite => ("min", "max"),
            Dialect::Postgres => ("LEAST", "GREATEST"),
        };
        let from_lease = |amount: &str| format!("{least}({greatest}({amount}, 0.0), $4)");
        let held = "COALESCE((SELECT amount FROM bridge_leases WHERE replica = $5 AND key_name = $1 AND metric = $2 AND win = $3), 0.0)";
        Self {
            insert: [insert_sql(dialect, false), insert_sql(dialect, true)],
            draw_quota: format!(
                "INSERT INTO bridge_quota (key_name, metric, win, settled, leased) VALUES ($1, $2, $3, $6, 0.0 - {}) \
                 ON CONFLICT (key_name, metric, win) DO UPDATE SET settled = bridge_quota.settled + excluded.settled, leased = bridge_quota.leased + excluded.leased",
                from_lease(held)
            ),
            draw_lease: format!(
                "UPDATE bridge_leases SET amount = amount - {} WHERE replica = $5 AND key_name = $1 AND metric = $2 AND win = $3",
                from_lease("amount")
            ),
        }
    }
}

/// The default SQLite store: `$XDG_STATE_HOME/claude-bridge/gateway.db` (or
/// `~/.local/state/…`).
#[must_use]
pub fn default_url() -> Option<String> {
    crate::environment::state_dir()
        .map(|dir| format!("sqlite://{}", dir.join("gateway.db").display()))
}

/// `url` without a password (`postgres://user:secret@host` → `postgres://user:***@host`).
#[must_use]
pub fn display_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user_info = &url[scheme + 3..at];
            match user_info.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl Store {
    /// A pool for `url` (`sqlite://PATH`, made if missing, or `postgres://…`). Nothing is
    /// connected yet: the first query connects (waiting up to `connect_timeout`), so a
    /// PostgreSQL that is down at start is a failing query, not a failed start.
    ///
    /// # Errors
    /// A URL of another kind, or one sqlx cannot read; a directory that cannot be made.
    pub fn open(url: &str, connect_timeout: Duration) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let shown = display_url(url);
        let (dialect, connect) = if let Some(path) = url.strip_prefix("sqlite://") {
            let path = Path::new(path.split('?').next().unwrap_or(path));
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            let connect = if url.contains('?') {
                url.to_owned()
            } else {
                format!("{url}?mode=rwc")
            };
            (Dialect::Sqlite, connect)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Dialect::Postgres, url.to_owned())
        } else {
            return Err(StoreError::Url(shown));
        };
        let options = AnyPoolOptions::new()
            .max_connections(match dialect {
                Dialect::Sqlite => 4,
                Dialect::Postgres => 8,
            })
            .min_connections(0)
            .acquire_timeout(connect_timeout);
        let options = match dialect {
            Dialect::Sqlite => options.after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::raw_sql(
                        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000;",
                    )
                    .execute(conn)
                    .await
                    .map(|_| ())
                })
            }),
            Dialect::Postgres => options,
        };
        let pool = options
            .connect_lazy(&connect)
            .map_err(|source| StoreError::Database {
                url: shown.clone(),
                source,
            })?;
        Ok(Self {
            pool,
            dialect,
            url: shown,
            statements: std::sync::Arc::new(Statements::new(dialect)),
        })
    }

    /// Which database.
    #[must_use]
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The URL, without its password.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    fn fail(&self, source: sqlx::Error) -> StoreError {
        StoreError::Database {
            url: self.url.clone(),
            source,
        }
    }

    /// Apply the migrations the store lacks; returns their versions. Safe with several
    /// processes at once.
    ///
    /// # Errors
    /// The store failed.
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.fail(e))?;
        let lock = match self.dialect {
            Dialect::Postgres => "SELECT pg_advisory_lock(727274001)",
            Dialect::Sqlite => "BEGIN IMMEDIATE",
        };
        sqlx::raw_sql(lock)
            .execute(&mut *conn)
            .await
            .map_err(|e| self.fail(e))?;
        let applied = self.apply_missing(&mut conn).await;
        let unlock = match (self.dialect, applied.is_ok()) {
            (Dialect::Postgres, _) => "SELECT pg_advisory_unlock(727274001)",
            (Dialect::Sqlite, true) => "COMMIT",
            (Dialect::Sqlite, false) => "ROLLBACK",
        };
        let unlocked = sqlx::raw_sql(unlock).execute(&mut *conn).await;
        let applied = applied?;
        unlocked.map_err(|e| self.fail(e))?;
        Ok(applied)
    }

    async fn apply_missing(
        &self,
        conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    ) -> Result<Vec<i64>, StoreError> {
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS bridge_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)",
        )
        .execute(&mut **conn)
        .await
        .map_err(|e| self.fail(e))?;
        let have: Vec<i64> = sqlx::query_scalar("SELECT version FROM bridge_migrations")
            .fetch_all(&mut **conn)
            .await
            .map_err(|e| self.fail(e))?;
        let mut applied = Vec::new();
        for (version, name, sql) in MIGRATIONS {
            if have.contains(version) {
                continue;
            }
            sqlx::raw_sql(AssertSqlSafe(*sql))
                .execute(&mut **conn)
                .await
                .map_err(|e| self.fail(e))?;
            sqlx::query(
                "INSERT INTO bridge_migrations (version, name, applied_ms) VALUES ($1, $2, $3)",
            )
            .bind(*version)
            .bind(*name)
            .bind(now_ms())
            .execute(&mut **conn)
            .await
            .map_err(|e| self.fail(e))?;
            applied.push(*version);
        }
        Ok(applied)
    }

    /// Applied and pending migrations, and what the store holds.
    ///
    /// # Errors
    /// The store failed.
    pub async fn status(&self) -> Result<Status, StoreError> {
        let exists: i64 = match self.dialect {
            Dialect::Sqlite => sqlx::query_scalar(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'bridge_migrations'",
            ),
            Dialect::Postgres => sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'bridge_migrations'",
            ),
        }
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.fail(e))?;
        let applied: Vec<i64> = if exists > 0 {
            sqlx::query_scalar("SELECT version FROM bridge_migrations ORDER BY version")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.fail(e))?
        } else {
            Vec::new()
        };
        let pending = MIGRATIONS
            .iter()
            .map(|(v, _, _)| *v)
            .filter(|v| !applied.contains(v))
            .collect();
        let count = |table: &'static str| async move {
            if exists == 0 {
                return Ok(0);
            }
            sqlx::query_scalar::<_, i64>(AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(&self.pool)
                .await
                .map_err(|e| self.fail(e))
        };
        Ok(Status {
            url: self.url.clone(),
            dialect: self.dialect,
            records: count("bridge_ledger").await?,
            keys: count("bridge_keys").await?,
            applied,
            pending,
        })
    }

    // ---- keys ----

    /// Store a new key.
    ///
    /// # Errors
    /// A key of that name exists; the store failed.
    pub async fn create_key(&self, spec: &KeySpec, hash: &str, now: i64) -> Result<(), StoreError> {
        let text = serde_json::to_string(spec).unwrap_or_default();
        let done = sqlx::query(
            "INSERT INTO bridge_keys (name, hash, spec, created_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
        )
        .bind(spec.name.clone())
        .bind(hash.to_owned())
        .bind(text)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| self.fail(e))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::KeyExists(spec.name.clone()));
        }
        Ok(())
    }

    /// Revoke the key `name` (it stays listed, refused with "revoked").
    ///
    /// # Errors
    /// No such live key; the store failed.
    pub async fn revoke_key(&self, name: &str, now: i64) -> Result<(), StoreError> {
        self.change_live_key(
            "UPDATE bridge_keys SET revoked_ms = $1 WHERE name = $2 AND revoked_ms IS NULL",
            now,
            name,
        )
        .await
    }

    /// Give the live key `name` a new secret (its hash); the old one stops working.
    ///
    /// # Errors
    /// No such live key; the store failed.
    pub async fn rotate_key(&self, name: &str, hash: &str) -> Result<(), StoreError> {
        self.change_live_key(
            "UPDATE bridge_keys SET hash = $1 WHERE name = $2 AND revoked_ms IS NULL",
            hash.to_owned(),
            name,
        )
        .await
    }

    /// Run `sql` (`$1` the new value, `$2` the name) on a live key; no such key is an error.
    async fn change_live_key<T>(
        &self,
        sql: &'static str,
        value: T,
        name: &str,
    ) -> Result<(), StoreError>
    where
        T: for<'q> sqlx::Encode<'q, sqlx::Any> + sqlx::Type<sqlx::Any> + Send + 'static,
    {
        let done = sqlx::query(sql)
            .bind(value)
            .bind(name.to_owned())
            .execute(&self.pool)
            .await
            .map_err(|e| self.fail(e))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NoSuchKey(name.to_owned()));
        }
        Ok(())
    }

    /// Every key made at run time, with its hash.
    ///
    /// # Errors
    /// The store failed.
    pub async fn keys(&self) -> Result<Vec<(String, KeyEntry)>, StoreError> {
        let rows = sqlx::query("SELECT hash, spec, created_ms, revoked_ms FROM bridge_keys")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(rows.iter().filter_map(key_row).collect())
    }

    /// The key whose secret hashes to `hash`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn key_by_hash(&self, hash: &str) -> Result<Option<KeyEntry>, StoreError> {
        let row = sqlx::query(
            "SELECT hash, spec, created_ms, revoked_ms FROM bridge_keys WHERE hash = $1",
        )
        .bind(hash.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.fail(e))?;
        Ok(row.as_ref().and_then(key_row).map(|(_, entry)| entry))
    }

    // ---- ledger ----

    /// Write `records` (a record already there is skipped: ids are unique) and settle what
    /// each written one used in its key's quotas (moved from the lease of the replica that
    /// admitted it), in one transaction. A record written again (a journal replayed after a
    /// crash) settles nothing again. Returns the settlements made.
    ///
    /// A batch is first written as if every id were new (almost always so: a request's id is
    /// made for it),
    /// without asking which rows went in — sqlx hands each row a statement returns over a
    /// channel of its own, one message and wake-up a row. When a statement reports fewer rows
    /// than it had (an id was there already), that transaction is rolled back and the batch
    /// is written again, asking for the ids that went in.
    ///
    /// # Errors
    /// The store failed (nothing was written).
    pub async fn write(&self, entries: &[Entry]) -> Result<Vec<Settlement>, StoreError> {
        if let Some(settled) = self.write_batch(entries, false).await? {
            return Ok(settled);
        }
        Ok(self.write_batch(entries, true).await?.unwrap_or_default())
    }

    /// [`Store::write`] once: `returning` asks which ids went in; without it, `None` when
    /// any id was there already (nothing written).
    async fn write_batch(
        &self,
        entries: &[Entry],
        returning: bool,
    ) -> Result<Option<Vec<Settlement>>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.fail(e))?;
        // The ids that went in, when asked (`returning`); without, every one did.
        let mut inserted = std::collections::BTreeSet::new();
        for chunk in entries.chunks(ROWS_PER_INSERT) {
            // The rows are JSON already (each record's journal line): joined, not made again.
            let mut json =
                String::with_capacity(chunk.iter().map(|e| e.row().len() + 1).sum::<usize>() + 1);
            for entry in chunk {
                json.push(if json.is_empty() { '[' } else { ',' });
                json.push_str(entry.row());
            }
            json.push(']');
            let sql = &self.statements.insert[usize::from(returning)];
            let query = sqlx::query(AssertSqlSafe(sql.as_str())).bind(json);
            if returning {
                let written = query.fetch_all(&mut *tx).await.map_err(|e| self.fail(e))?;
                for row in written {
                    let id: String = row.try_get(0).map_err(|e| self.fail(e))?;
                    inserted.insert(id);
                }
            } else {
                let done = query.execute(&mut *tx).await.map_err(|e| self.fail(e))?;
                if done.rows_affected() != chunk.len() as u64 {
                    tx.rollback().await.map_err(|e| self.fail(e))?;
                    return Ok(None);
                }
            }
        }
        // What the written records used, summed per quota and lease.
        let mut sums: std::collections::BTreeMap<(&str, &str, Metric, i64), f64> =
            std::collections::BTreeMap::new();
        for r in entries
            .iter()
            .map(|e| &e.record)
            .filter(|r| !returning || inserted.contains(&r.id))
        {
            for s in &r.settles {
                *sums
                    .entry((r.replica.as_str(), r.key.as_str(), s.metric, s.win))
                    .or_default() += s.used;
            }
        }
        let settled: Vec<Settlement> = sums
            .into_iter()
            .map(|((replica, key, metric, win), used)| Settlement {
                replica: replica.to_owned(),
                key: key.to_owned(),
                metric,
                win,
                used,
            })
            .collect();
        self.settle_in(&mut tx, &settled).await?;
        tx.commit().await.map_err(|e| self.fail(e))?;
        Ok(Some(settled))
    }

    /// Move `settlements` from their replicas' leases into the quotas' settled counts.
    ///
    /// # Errors
    /// The store failed.
    pub async fn settle(&self, settlements: &[Settlement]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.fail(e))?;
        self.settle_in(&mut tx, settlements).await?;
        tx.commit().await.map_err(|e| self.fail(e))
    }

    async fn settle_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        settlements: &[Settlement],
    ) -> Result<(), StoreError> {
        for s in settlements {
            self.draw(
                tx,
                &s.replica,
                &s.key,
                s.metric.name(),
                s.win,
                s.used,
                s.used,
            )
            .await?;
        }
        Ok(())
    }

    /// Take up to `most` out of `replica`'s lease on a quota — what it holds; a lease already
    /// swept back gives nothing —, shrink the quota's leased total by as much and add `settle`
    /// to its settled count ([`Statements::draw_quota`], then [`Statements::draw_lease`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "the lease's coordinates and amounts"
    )]
    async fn draw(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        replica: &str,
        key: &str,
        metric: &str,
        win: i64,
        most: f64,
        settle: f64,
    ) -> Result<(), StoreError> {
        let statements = [
            (&self.statements.draw_quota, Some(settle)),
            (&self.statements.draw_lease, None),
        ];
        for (sql, settle) in statements {
            let query = sqlx::query(AssertSqlSafe(sql.as_str()))
                .bind(key.to_owned())
                .bind(metric.to_owned())
                .bind(win)
                .bind(most)
                .bind(replica.to_owned());
            let query = match settle {
                Some(settle) => query.bind(settle),
                None => query,
            };
            query.execute(&mut **tx).await.map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    /// Ledger rows grouped as `query` says.
    ///
    /// # Errors
    /// The store failed.
    pub async fn usage(
        &self,
        query: &super::usage::UsageQuery,
    ) -> Result<Vec<super::usage::UsageRow>, StoreError> {
        let groups: Vec<&str> = query.group_by.iter().map(|g| g.column()).collect();
        let mut sql = String::from("SELECT ");
        for column in &groups {
            sql.push_str(&format!("COALESCE({column}, ''), "));
        }
        sql.push_str(
            "CAST(COUNT(*) AS BIGINT), \
             CAST(COALESCE(SUM(CASE WHEN error_kind IS NULL THEN 0 ELSE 1 END), 0) AS BIGINT), \
             CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT), \
             CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT), \
             CAST(COALESCE(SUM(cache_read_tokens), 0) AS BIGINT), \
             CAST(COALESCE(SUM(cache_write_tokens), 0) AS BIGINT), \
             CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION), \
             CAST(COALESCE(SUM(1 - priced), 0) AS BIGINT) \
             FROM bridge_ledger WHERE at_ms >= $1 AND at_ms < $2",
        );
        if query.key.is_some() {
            sql.push_str(" AND key_name = $3");
        }
        if !groups.is_empty() {
            let list = groups.join(", ");
            sql.push_str(&format!(" GROUP BY {list} ORDER BY {list}"));
        }
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(query.from_ms)
            .bind(query.to_ms);
        if let Some(key) = &query.key {
            q = q.bind(key.clone());
        }
        let rows = q.fetch_all(&self.pool).await.map_err(|e| self.fail(e))?;
        rows.iter()
            .map(|row| usage_row(row, query))
            .collect::<Result<_, _>>()
            .map_err(|e| self.fail(e))
    }

    // ---- quotas ----

    /// Lease up to `want` (at least `min`) of a key's quota for `metric` in window `win`, if the
    /// settled and leased amounts leave room under `limit`. Returns what was granted (0: none)
    /// and the quota's settled + leased total after it.
    ///
    /// # Errors
    /// The store failed.
    #[expect(
        clippy::too_many_arguments,
        reason = "one row's coordinates and the lease terms"
    )]
    pub async fn grant(
        &self,
        replica: &str,
        key: &str,
        metric: &'static str,
        win: i64,
        want: f64,
        min: f64,
        limit: f64,
        expires_ms: i64,
    ) -> Result<(f64, f64), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.fail(e))?;
        ensure_quota(&mut tx, key, metric, win)
            .await
            .map_err(|e| self.fail(e))?;
        let mut granted = 0.0;
        for attempt in [want, min] {
            let done = sqlx::query(
                "UPDATE bridge_quota SET leased = leased + $1 WHERE key_name = $2 AND metric = $3 AND win = $4 AND settled + leased + $1 <= $5",
            )
            .bind(attempt)
            .bind(key.to_owned())
            .bind(metric)
            .bind(win)
            .bind(limit)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
            if done.rows_affected() > 0 {
                granted = attempt;
                break;
            }
            if min >= want {
                break;
            }
        }
        if granted > 0.0 {
            sqlx::query(
                "INSERT INTO bridge_leases (replica, key_name, metric, win, amount, expires_ms) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (replica, key_name, metric, win) DO UPDATE SET amount = bridge_leases.amount + excluded.amount, expires_ms = excluded.expires_ms",
            )
            .bind(replica.to_owned())
            .bind(key.to_owned())
            .bind(metric)
            .bind(win)
            .bind(granted)
            .bind(expires_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
        }
        let used: f64 = sqlx::query_scalar(
            "SELECT settled + leased FROM bridge_quota WHERE key_name = $1 AND metric = $2 AND win = $3",
        )
        .bind(key.to_owned())
        .bind(metric)
        .bind(win)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.fail(e))?;
        tx.commit().await.map_err(|e| self.fail(e))?;
        Ok((granted, used))
    }

    /// Give back `amount` of this replica's lease (unused room, a freed parallel slot).
    ///
    /// # Errors
    /// The store failed.
    pub async fn release(
        &self,
        replica: &str,
        key: &str,
        metric: &'static str,
        win: i64,
        amount: f64,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.fail(e))?;
        self.draw(&mut tx, replica, key, metric, win, amount, 0.0)
            .await?;
        tx.commit().await.map_err(|e| self.fail(e))
    }

    /// Keep this replica's leases alive until `expires_ms`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn renew(&self, replica: &str, expires_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE bridge_leases SET expires_ms = $1 WHERE replica = $2")
            .bind(expires_ms)
            .bind(replica.to_owned())
            .execute(&self.pool)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(())
    }

    /// Return the leases of replicas that stopped renewing them (they died) to their quotas,
    /// and forget minute windows older than `minute_before_ms`. Returns how many leases.
    ///
    /// # Errors
    /// The store failed.
    pub async fn sweep(&self, now: i64, minute_before_ms: i64) -> Result<usize, StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.fail(e))?;
        let expired = sqlx::query(
            "DELETE FROM bridge_leases WHERE expires_ms < $1 RETURNING key_name, metric, win, amount",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| self.fail(e))?;
        for row in &expired {
            let (key, metric, win, amount): (String, String, i64, f64) = (
                row.try_get(0).map_err(|e| self.fail(e))?,
                row.try_get(1).map_err(|e| self.fail(e))?,
                row.try_get(2).map_err(|e| self.fail(e))?,
                row.try_get(3).map_err(|e| self.fail(e))?,
            );
            sqlx::query(
                "UPDATE bridge_quota SET leased = leased - $1 WHERE key_name = $2 AND metric = $3 AND win = $4",
            )
            .bind(amount)
            .bind(key)
            .bind(metric)
            .bind(win)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
        }
        sqlx::query("DELETE FROM bridge_quota WHERE metric IN ('rpm', 'tpm') AND win < $1")
            .bind(minute_before_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
        sqlx::query("DELETE FROM bridge_leases WHERE metric IN ('rpm', 'tpm') AND win < $1")
            .bind(minute_before_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
        tx.commit().await.map_err(|e| self.fail(e))?;
        Ok(expired.len())
    }

    /// A quota's settled and leased amounts (tests and `usage`).
    ///
    /// # Errors
    /// The store failed.
    pub async fn quota(&self, key: &str, metric: &str, win: i64) -> Result<(f64, f64), StoreError> {
        let row = sqlx::query(
            "SELECT settled, leased FROM bridge_quota WHERE key_name = $1 AND metric = $2 AND win = $3",
        )
        .bind(key.to_owned())
        .bind(metric.to_owned())
        .bind(win)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.fail(e))?;
        match row {
            Some(row) => Ok((
                row.try_get(0).map_err(|e| self.fail(e))?,
                row.try_get(1).map_err(|e| self.fail(e))?,
            )),
            None => Ok((0.0, 0.0)),
        }
    }

    // ---- the Fabstir job ledger ----

    /// Put `doc` in place as `wallet`'s job ledger unless it has one; true when it was put.
    ///
    /// # Errors
    /// The store failed.
    pub async fn fabstir_import(&self, wallet: &str, doc: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO bridge_fabstir_ledger (wallet, doc, updated_ms) VALUES ($1, $2, $3) ON CONFLICT (wallet) DO NOTHING",
        )
        .bind(wallet.to_owned())
        .bind(doc.to_owned())
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.fail(e))?;
        Ok(done.rows_affected() > 0)
    }

    /// Change `wallet`'s job ledger (put in place by [`Store::fabstir_import`]) in one
    /// transaction that holds its row: `change` gets the document and gives the new one (or an
    /// error, which changes nothing). Every replica's changes are serialized.
    ///
    /// # Errors
    /// The store failed (outer), or `change` refused (inner).
    pub async fn fabstir_update<R>(
        &self,
        wallet: &str,
        change: impl FnOnce(&str) -> Result<(String, R), String>,
    ) -> Result<Result<R, String>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.fail(e))?;
        // A write first: the row is locked (PostgreSQL) or the database (SQLite) until commit.
        sqlx::query("UPDATE bridge_fabstir_ledger SET updated_ms = $1 WHERE wallet = $2")
            .bind(now_ms())
            .bind(wallet.to_owned())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
        let doc: String =
            sqlx::query_scalar("SELECT doc FROM bridge_fabstir_ledger WHERE wallet = $1")
                .bind(wallet.to_owned())
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| self.fail(e))?;
        let (new_doc, out) = match change(&doc) {
            Ok(changed) => changed,
            Err(refused) => return Ok(Err(refused)),
        };
        sqlx::query("UPDATE bridge_fabstir_ledger SET doc = $1 WHERE wallet = $2")
            .bind(new_doc)
            .bind(wallet.to_owned())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.fail(e))?;
        tx.commit().await.map_err(|e| self.fail(e))?;
        Ok(Ok(out))
    }

    /// Whether the store answers (`SELECT 1`).
    ///
    /// # Errors
    /// It does not.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::raw_sql("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| self.fail(e))
    }

    /// Close the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

async fn ensure_quota(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    key: &str,
    metric: &str,
    win: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO bridge_quota (key_name, metric, win, settled, leased) VALUES ($1, $2, $3, 0.0, 0.0) ON CONFLICT (key_name, metric, win) DO NOTHING",
    )
    .bind(key.to_owned())
    .bind(metric)
    .bind(win)
    .execute(&mut **tx)
    .await
    .map(|_| ())
}

fn key_row(row: &AnyRow) -> Option<(String, KeyEntry)> {
    let hash: String = row.try_get(0).ok()?;
    let spec: String = row.try_get(1).ok()?;
    let spec: KeySpec = serde_json::from_str(&spec).ok()?;
    let created_ms: i64 = row.try_get(2).ok()?;
    let revoked_ms: Option<i64> = row.try_get(3).ok()?;
    let expires_ms = spec.expires_ms().ok().flatten();
    Some((
        hash,
        KeyEntry {
            spec,
            expires_ms,
            revoked_ms,
            created_ms: Some(created_ms),
            source: KeySource::Store,
        },
    ))
}

fn usage_row(
    row: &AnyRow,
    query: &super::usage::UsageQuery,
) -> Result<super::usage::UsageRow, sqlx::Error> {
    let mut out = super::usage::UsageRow::default();
    let mut i = 0;
    for group in &query.group_by {
        let value: String = row.try_get(i)?;
        out.set(*group, value);
        i += 1;
    }
    out.requests = row.try_get(i)?;
    out.errors = row.try_get(i + 1)?;
    out.input_tokens = row.try_get(i + 2)?;
    out.output_tokens = row.try_get(i + 3)?;
    out.cache_read_tokens = row.try_get(i + 4)?;
    out.cache_write_tokens = row.try_get(i + 5)?;
    out.cost_usd = row.try_get(i + 6)?;
    out.unpriced = row.try_get(i + 7)?;
    Ok(out)
}

/// Now, in Unix milliseconds.
#[must_use]
pub fn now_ms() -> i64 {
    i64::try_from(crate::ids::unix_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::ledger::Record;
    use super::*;

    /// The records with their rows, as the ledger queues them.
    fn entries(records: &[Record]) -> Vec<Entry> {
        records
            .iter()
            .map(|r| Entry::new(r.clone()).unwrap())
            .collect()
    }

    fn temp_url(name: &str) -> (String, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "claude-bridge-store-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        (format!("sqlite://{}", dir.join("g.db").display()), dir)
    }

    #[tokio::test]
    async fn grants_never_exceed_the_limit_and_a_dead_replicas_lease_comes_back_by_expiry() {
        let (url, dir) = temp_url("grants");
        let store = Store::open(&url, Duration::from_secs(5)).unwrap();
        assert_eq!(store.migrate().await.unwrap(), [1, 2, 3]);
        assert!(
            store.migrate().await.unwrap().is_empty(),
            "migrations run once"
        );
        // Two replicas lease 4 each of 10; the third lease gets what is left (min 1), then none.
        let grant = |replica: &'static str, want: f64, expires: i64| {
            let store = store.clone();
            async move {
                store
                    .grant(replica, "k", "rpm", 60_000, want, 1.0, 10.0, expires)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(grant("a", 4.0, 1_000).await, (4.0, 4.0));
        assert_eq!(grant("b", 4.0, 9_000).await, (4.0, 8.0));
        assert_eq!(grant("b", 4.0, 9_000).await, (1.0, 9.0));
        assert_eq!(grant("a", 1.0, 1_000).await, (1.0, 10.0));
        assert_eq!(grant("b", 1.0, 9_000).await, (0.0, 10.0));
        // b used 3 of its 5 and settles them with its records; its lease shrinks by as much.
        let used = Settlement {
            replica: "b".into(),
            key: "k".into(),
            metric: Metric::Rpm,
            win: 60_000,
            used: 3.0,
        };
        let used_settlement = used.clone();
        store.settle(&[used]).await.unwrap();
        assert_eq!(store.quota("k", "rpm", 60_000).await.unwrap(), (3.0, 7.0));
        // a stops renewing (it died): its 5 come back at expiry; b's stay.
        assert_eq!(store.sweep(5_000, 0).await.unwrap(), 1);
        assert_eq!(store.quota("k", "rpm", 60_000).await.unwrap(), (3.0, 2.0));
        assert_eq!(grant("b", 4.0, 9_000).await, (4.0, 9.0));
        // b gives back what it does not use.
        store.release("b", "k", "rpm", 60_000, 6.0).await.unwrap();
        assert_eq!(store.quota("k", "rpm", 60_000).await.unwrap(), (3.0, 0.0));
        // Used without a lease (counted alone while the store was away): settled, nothing drawn.
        let settle = |replica: &str, used: f64| Settlement {
            replica: replica.into(),
            used,
            ..used_settlement.clone()
        };
        store.settle(&[settle("c", 2.0)]).await.unwrap();
        assert_eq!(store.quota("k", "rpm", 60_000).await.unwrap(), (5.0, 0.0));
        // More than the lease held: the lease is emptied, not taken below nothing.
        assert_eq!(grant("b", 2.0, 9_000).await, (2.0, 7.0));
        store.settle(&[settle("b", 3.0)]).await.unwrap();
        assert_eq!(store.quota("k", "rpm", 60_000).await.unwrap(), (8.0, 0.0));
        assert_eq!(grant("b", 2.0, 9_000).await, (2.0, 10.0));
        assert_eq!(store.quota("k", "rpm", 60_000).await.unwrap(), (8.0, 2.0));
        store.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_record_written_twice_counts_once_and_keys_are_made_revoked_and_rotated() {
        let (url, dir) = temp_url("records");
        let store = Store::open(&url, Duration::from_secs(5)).unwrap();
        store.migrate().await.unwrap();
        let record = Record {
            session: Some("s1".into()),
            cache_read_tokens: 5,
            cost_usd: 0.5,
            priced: true,
            paid: Some(String::from("0.000042")),
            paid_unit: Some(String::from("ETH")),
            settles: vec![super::super::ledger::Settle {
                metric: Metric::Tokens,
                win: 0,
                used: 115.0,
            }],
            ..Record::example("req_1")
        };
        store
            .write(&entries(std::slice::from_ref(&record)))
            .await
            .unwrap();
        store
            .write(&entries(std::slice::from_ref(&record)))
            .await
            .unwrap();
        let query =
            super::super::usage::UsageQuery::parse("group_by=key,day,session", record.at_ms)
                .unwrap();
        // Written twice, settled once.
        assert_eq!(
            store.quota("alice", "tokens", 0).await.unwrap(),
            (115.0, 0.0)
        );
        // A batch of one record the store has and one it has not (a journal replayed beside
        // new records): the new one is written and settled, the old one neither.
        let mut newer = record.clone();
        newer.id = "req_2".into();
        newer.settles[0].used = 10.0;
        let settled = store
            .write(&entries(&[record.clone(), newer]))
            .await
            .unwrap();
        assert_eq!(settled.len(), 1);
        assert_eq!(
            store.quota("alice", "tokens", 0).await.unwrap(),
            (125.0, 0.0)
        );
        let rows = store.usage(&query).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (
                rows[0].requests,
                rows[0].input_tokens,
                rows[0].cache_read_tokens
            ),
            (2, 200, 10)
        );
        assert_eq!(rows[0].day.as_deref(), Some("2026-11-28"));

        let spec = KeySpec {
            name: "ci".into(),
            rpm: Some(5),
            ..KeySpec::default()
        };
        store.create_key(&spec, "h1", 1).await.unwrap();
        assert!(matches!(
            store.create_key(&spec, "h2", 2).await,
            Err(StoreError::KeyExists(_))
        ));
        store.rotate_key("ci", "h3").await.unwrap();
        assert!(store.key_by_hash("h1").await.unwrap().is_none());
        let found = store.key_by_hash("h3").await.unwrap().unwrap();
        assert_eq!(found.spec, spec);
        store.revoke_key("ci", 7).await.unwrap();
        assert_eq!(
            store.key_by_hash("h3").await.unwrap().unwrap().revoked_ms,
            Some(7)
        );
        assert!(matches!(
            store.revoke_key("ci", 8).await,
            Err(StoreError::NoSuchKey(_))
        ));
        let status = store.status().await.unwrap();
        assert_eq!(
            (status.records, status.keys, status.pending.len()),
            (2, 1, 0)
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn every_field_of_a_batch_is_stored_as_it_was_and_a_batch_past_one_statement_is_whole() {
        let (url, dir) = temp_url("rows");
        let store = Store::open(&url, Duration::from_secs(5)).unwrap();
        store.migrate().await.unwrap();
        // Text JSON must escape, numbers at their edges, every optional field set and not.
        let full = Record {
            key: String::from("bob \"the\" builder\\\n"),
            client: String::from("codex"),
            session: Some(String::from("s-ü-😀")),
            front: String::from("responses"),
            route: String::from("long-context"),
            target: String::from("prov,gpt-5.5"),
            model: String::from("claude-opus-4-7"),
            upstream_model: String::from("gpt-5.5\u{7f}"),
            input_tokens: i64::MAX,
            output_tokens: 1,
            cache_read_tokens: 5,
            cache_write_tokens: 6,
            estimated: true,
            cost_usd: 0.1 + 0.2,
            priced: true,
            ttft_ms: None,
            duration_ms: 1_234,
            status: 529,
            error_kind: Some(String::from("overloaded_error")),
            attempts: 3,
            paid: Some(String::from("0.000042")),
            paid_unit: Some(String::from("ETH")),
            ..Record::example("req_full")
        };
        let plain = Record::example("req_plain");
        store
            .write(&entries(&[full.clone(), plain.clone()]))
            .await
            .unwrap();
        let mut conn = store.pool.acquire().await.unwrap();
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM bridge_ledger ORDER BY id",
            ledger_column_names()
        )))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        drop(conn);
        let read = |row: &AnyRow| Record {
            id: row.get(0),
            at_ms: row.get(1),
            key: row.get(3),
            client: row.get(4),
            session: row.get(5),
            front: row.get(6),
            route: row.get(7),
            target: row.get(8),
            model: row.get(9),
            upstream_model: row.get(10),
            input_tokens: row.get(11),
            output_tokens: row.get(12),
            cache_read_tokens: row.get(13),
            cache_write_tokens: row.get(14),
            estimated: row.get::<i64, _>(15) == 1,
            cost_usd: row.get(16),
            priced: row.get::<i64, _>(17) == 1,
            ttft_ms: row.get(18),
            duration_ms: row.get(19),
            status: row.get(20),
            error_kind: row.get(21),
            attempts: row.get(22),
            paid: row.get(23),
            paid_unit: row.get(24),
            replica: String::from("r"),
            settles: Vec::new(),
        };
        assert_eq!(rows.len(), 2);
        assert_eq!(read(&rows[0]), full);
        assert_eq!(read(&rows[1]), plain);
        for row in &rows {
            assert_eq!(
                row.get::<String, _>(2),
                super::super::period::day_of(row.get(1))
            );
        }
        // Past one statement's rows, with one id there already: the rest go in, once each.
        let many: Vec<Record> = (0..ROWS_PER_INSERT + 3)
            .map(|i| Record::example(&format!("req_{i}")))
            .chain([plain])
            .collect();
        store.write(&entries(&many)).await.unwrap();
        assert_eq!(
            store.status().await.unwrap().records,
            2 + ROWS_PER_INSERT as i64 + 3
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_insert_takes_its_rows_from_one_json_parameter_in_either_dialect() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            let sql = insert_sql(dialect, false);
            assert!(sql.ends_with("ON CONFLICT (id) DO NOTHING"), "{sql}");
            assert!(
                insert_sql(dialect, true).ends_with("ON CONFLICT (id) DO NOTHING RETURNING id")
            );
            assert_eq!(sql.matches("->>").count(), LEDGER_COLUMNS.len(), "{sql}");
            let parameters = match dialect {
                Dialect::Sqlite => sql.matches('?').count(),
                Dialect::Postgres => sql.matches("$1").count(),
            };
            assert_eq!(parameters, 1, "{sql}");
        }
    }

    #[test]
    fn a_password_never_shows_in_the_url() {
        assert_eq!(
            display_url("postgres://bridge:s3cret@db:5432/bridge"),
            "postgres://bridge:***@db:5432/bridge"
        );
        assert_eq!(display_url("sqlite:///var/x.db"), "sqlite:///var/x.db");
    }
}
