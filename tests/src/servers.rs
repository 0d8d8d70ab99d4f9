//! Real servers a test runs, each in a temporary directory as an unprivileged user (`nobody`
//! when the tests run as root, as CI does): PostgreSQL (`initdb` + `pg_ctl` from Debian's
//! `postgresql`) and HAProxy (Debian's `haproxy`). `scripts/setup-e2e.sh` installs both.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::err;
use crate::tempdir::TempDir;

/// The user servers run as when the tests run as root.
const UNPRIVILEGED: &str = "nobody";

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn id_of(flag: &str) -> crate::Result<u32> {
    let out = Command::new("id").args([flag, UNPRIVILEGED]).output()?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| err(format!("id {flag} {UNPRIVILEGED}: {e}")))
}

/// A command run as the unprivileged user when we are root, in `dir` (the server's own
/// directory: the user may not enter the test's working directory, and HAProxy and PostgreSQL
/// go back to it).
fn unprivileged(program: &Path, dir: &Path) -> Command {
    let mut cmd = if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", UNPRIVILEGED, "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    };
    cmd.current_dir(dir);
    cmd
}

/// Give `dir` (and what is in it) to the unprivileged user when we are root.
fn hand_over(dir: &Path) -> crate::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (uid, gid) = (id_of("-u")?, id_of("-g")?);
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
    for entry in std::fs::read_dir(dir)? {
        std::os::unix::fs::chown(entry?.path(), Some(uid), Some(gid))?;
    }
    Ok(())
}

fn run(cmd: &mut Command, what: &str) -> crate::Result<()> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// Where PostgreSQL's server programs are: on PATH, or Debian's versioned directory.
fn pg_bin(program: &str) -> crate::Result<PathBuf> {
    if let Ok(out) = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        && out.status.success()
    {
        return Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| {
            err("PostgreSQL is not installed: run scripts/setup-e2e.sh (Debian's postgresql)")
        })?
        .flatten()
        .map(|e| e.path().join("bin").join(program))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
        .pop()
        .ok_or_else(|| err(format!("no {program}: run scripts/setup-e2e.sh")))
}

/// A PostgreSQL server of its own: a fresh cluster on a free port, trust authentication for
/// the user `bridge`, stopped on drop.
#[derive(Debug)]
pub struct Postgres {
    dir: TempDir,
    port: u16,
    pg_ctl: PathBuf,
}

impl Postgres {
    /// `initdb` and start.
    pub fn start() -> crate::Result<Self> {
        let dir = TempDir::new("postgres")?;
        hand_over(dir.path())?;
        let data = dir.path().join("data");
        run(
            unprivileged(&pg_bin("initdb")?, dir.path())
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "bridge",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ]),
            "initdb",
        )?;
        let pg = Self {
            port: crate::bridge::free_port()?,
            pg_ctl: pg_bin("pg_ctl")?,
            dir,
        };
        pg.up()?;
        Ok(pg)
    }

    fn up(&self) -> crate::Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100",
            self.port,
            self.dir.path().display()
        );
        run(
            unprivileged(&self.pg_ctl, self.dir.path())
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .arg("-l")
                .arg(self.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
            "pg_ctl start",
        )
    }

    /// `postgres://bridge@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://bridge@127.0.0.1:{}/postgres", self.port)
    }

    /// Stop (fast: open connections are closed) and start again.
    pub fn restart(&self) -> crate::Result<()> {
        self.stop("fast")?;
        self.up()
    }

    /// `pg_ctl stop -m MODE`.
    pub fn stop(&self, mode: &str) -> crate::Result<()> {
        run(
            unprivileged(&self.pg_ctl, self.dir.path())
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-w", "-m", mode, "stop"]),
            "pg_ctl stop",
        )
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.stop("immediate");
    }
}

/// HAProxy in HTTP mode, round robin over `backends` with `/health` checks, stopped on drop.
#[derive(Debug)]
pub struct Haproxy {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Haproxy {
    /// Start with the config `deploy/haproxy/haproxy.cfg` would give for these backends (its
    /// error pages: Anthropic-shaped JSON).
    pub async fn start(backends: &[u16]) -> crate::Result<Self> {
        let dir = TempDir::new("haproxy")?;
        let port = crate::bridge::free_port()?;
        let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/haproxy");
        for page in ["502.http", "503.http", "504.http"] {
            std::fs::copy(deploy.join(page), dir.path().join(page))?;
        }
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!("    server r{i} 127.0.0.1:{p} check inter 300ms fall 2 rise 2\n")
            })
            .collect();
        let template = std::fs::read_to_string(deploy.join("haproxy.cfg"))?;
        let config = template
            .replace("bind :3456", &format!("bind 127.0.0.1:{port}"))
            .replace(
                "/usr/local/etc/haproxy/errors",
                &dir.path().display().to_string(),
            )
            .split("    server-template")
            .next()
            .unwrap_or_default()
            .to_owned()
            + &servers;
        let file = dir.path().join("haproxy.cfg");
        std::fs::write(&file, config)?;
        hand_over(dir.path())?;
        let haproxy = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or_else(|| err("HAProxy is not installed: run scripts/setup-e2e.sh"))?;
        let log = std::fs::File::create(dir.path().join("haproxy.log"))?;
        let child = unprivileged(&haproxy, dir.path())
            .arg("-db")
            .arg("-f")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(err(format!(
                    "haproxy did not listen on {port}: {}",
                    std::fs::read_to_string(dir.path().join("haproxy.log")).unwrap_or_default()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            child,
            port,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        // Run as root, the child is `runuser`, which cannot pass a SIGKILL on: HAProxy (its
        // child) goes first, or it outlives the test (one a run was left listening).
        let _ = Command::new("pkill")
            .args(["-KILL", "-P", &self.child.id().to_string()])
            .stdin(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
