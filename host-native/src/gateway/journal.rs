//! The ledger's journal file: records appended as lines into a shared memory mapping of the
//! file, so a line is in the file (the page cache's copy of it) the moment it is copied — a
//! process killed with SIGKILL leaves it behind — without a `write` call per request. A `write`
//! per record was an eighth of what the gateway cost the bridge at 64 concurrent streams.
//!
//! The file grows in steps of [`STEP`] bytes, zeros past its last line; closing a journal
//! (dropping it) cuts the file to its lines. A reader takes the lines before the first NUL
//! ([`lines`]): a process killed mid-copy leaves a cut line and zeros, and that line does not
//! parse.
//!
//! While a process has a journal open it holds an exclusive lock on it (`flock`), and a process
//! taking over the files others left ([`Journal::claim`]) takes only unlocked ones: two
//! replicas sharing a state directory never take each other's live journal.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use claude_bridge::gateway::journal::{Journal, lines};
//! let path = std::path::Path::new("/tmp/journal-example.jsonl");
//! let mut journal = Journal::create(path)?;
//! journal.append(b"{\"id\":\"req_1\"}")?;
//! drop(journal); // cut to its lines, unlocked
//! let text = std::fs::read_to_string(path)?;
//! assert_eq!(lines(&text).collect::<Vec<_>>(), ["{\"id\":\"req_1\"}"]);
//! # Ok(())
//! # }
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

/// How much a journal file grows at a time (a busy bridge's 50 ms batch is well under it).
pub const STEP: usize = 256 * 1024;

/// A journal file open for appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    /// Where it is now ([`Journal::rename`] moves it).
    path: PathBuf,
    /// `None` only while being dropped.
    map: Option<MmapMut>,
    /// Bytes of lines in it.
    len: usize,
}

impl Journal {
    /// Open `path` for appending (made if missing; after the lines it has, if not), locked.
    ///
    /// # Errors
    /// The file cannot be made, locked (another process has it) or mapped.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        file.try_lock().map_err(io::Error::from)?;
        let existing = std::fs::read(path)?;
        let len = existing
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(existing.len());
        let mut journal = Self {
            file,
            path: path.to_owned(),
            map: None,
            len,
        };
        journal.grow(len + 1)?;
        Ok(journal)
    }

    /// Append `line` and a newline (`line` has none of its own).
    ///
    /// # Errors
    /// The file could not grow (the disk is full): the line is not in it.
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let end = self.len + line.len() + 1;
        if self.map.as_ref().is_none_or(|map| end > map.len()) {
            self.grow(end)?;
        }
        let map = self
            .map
            .as_mut()
            .ok_or_else(|| io::Error::other("the journal is closed"))?;
        let (text, newline) = map
            .get_mut(self.len..end)
            .ok_or_else(|| io::Error::other("the journal's mapping is shorter than its file"))?
            .split_at_mut(line.len());
        text.copy_from_slice(line);
        newline.fill(b'\n');
        self.len = end;
        Ok(())
    }

    /// Forget its lines, to use the file again: they are zeroed where they are (a reader sees
    /// none from the first byte on, so a process killed meanwhile leaves an empty journal), and
    /// the next line is written at the start. The file keeps its size and its mapping, so its
    /// next lines cost neither a new file nor new pages. Only for a journal whose lines are all
    /// in the store.
    pub fn reset(&mut self) {
        if let Some(lines) = self.map.as_mut().and_then(|map| map.get_mut(..self.len)) {
            lines.fill(0);
        }
        self.len = 0;
    }

    /// Move the file to `to` (it stays open, mapped and locked).
    ///
    /// # Errors
    /// The rename failed; the file is where it was.
    pub fn rename(&mut self, to: &Path) -> io::Result<()> {
        std::fs::rename(&self.path, to)?;
        to.clone_into(&mut self.path);
        Ok(())
    }

    /// Bytes of the file (and its mapping): what it grew to.
    #[must_use]
    pub fn size(&self) -> usize {
        self.map.as_ref().map_or(0, |map| map.len())
    }

    /// Make the file (and its mapping) at least `need` bytes: a multiple of [`STEP`], at least
    /// twice what it was.
    fn grow(&mut self, need: usize) -> io::Result<()> {
        let had = self.map.as_ref().map_or(0, |map| map.len());
        let size = need.next_multiple_of(STEP).max(had * 2);
        self.map = None;
        self.file.set_len(size as u64)?;
        // SAFETY: the mapping is undefined behaviour only if the file changes length (or bytes)
        // under it from outside. The file is this process's own journal: named after its
        // replica id (random per process) and locked for as long as it is open, and other
        // bridge processes never open a locked journal (`Journal::claim`) — they only take
        // unlocked files. The one outside writer left is a person truncating it by hand.
        #[expect(unsafe_code, reason = "a shared file mapping has no safe constructor")]
        let map = unsafe {
            MmapOptions::new()
                .len(size)
                .populate()
                .map_mut(&self.file)?
        };
        self.map = Some(map);
        Ok(())
    }

    /// Take over `path`, a journal another process left: `None` while a live process holds it.
    /// It is renamed to `claimed` (a name no process appends to) and read; the returned file
    /// keeps it locked until dropped, so no one else takes it meanwhile.
    ///
    /// # Errors
    /// It could not be renamed or read.
    pub fn claim(path: &Path, claimed: &Path) -> io::Result<Option<(String, File)>> {
        let file = File::open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(error)) => return Err(error),
        }
        // Under the lock it may have been taken by another already (renamed, then unlocked).
        if !path.exists() {
            return Ok(None);
        }
        std::fs::rename(path, claimed)?;
        let text = io::read_to_string(&file)?;
        Ok(Some((text, file)))
    }

    /// Whether `name` is a file [`Journal::claim`] would take: a journal (`.jsonl`), or one a
    /// process claimed and died before it was written (`.taken-…`).
    #[must_use]
    pub fn is_journal(name: &str) -> bool {
        name.ends_with(".jsonl") || name.contains(".taken-")
    }

    /// The path a file is renamed to when `replica` claims it.
    #[must_use]
    pub fn claimed_path(path: &Path, replica: &str) -> PathBuf {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let base = name.split(".taken-").next().unwrap_or(name);
        path.with_file_name(format!(
            "{}.taken-{replica}",
            base.trim_end_matches(".jsonl")
        ))
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.map = None;
        // Cut to its lines: the zeros past them were room to grow. A failure leaves zeros,
        // which readers skip.
        let _ = self.file.set_len(self.len as u64);
    }
}

/// The lines of a journal file's text: those before its first NUL, without empty ones.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\0')
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.is_empty())
}

#[cfg(test)]
mod tests {

    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "journal-test-{name}-{}-{}",
            std::process::id(),
            crate::ids::random_base62(8)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn lines_are_in_the_file_while_it_is_open_and_it_is_cut_to_them_when_closed() {
        let dir = dir("open");
        let path = dir.join("journal-a-00000000.jsonl");
        let mut journal = Journal::create(&path).unwrap();
        journal.append(b"one").unwrap();
        journal.append(b"two").unwrap();
        // What a process killed now would leave: the lines, then zeros.
        let open = std::fs::read_to_string(&path).unwrap();
        assert_eq!(open.len(), STEP, "grown a step at a time");
        assert_eq!(lines(&open).collect::<Vec<_>>(), ["one", "two"]);
        // Past a step: grows, and keeps what it had.
        journal.append(&vec![b'x'; STEP]).unwrap();
        journal.append(b"three").unwrap();
        drop(journal);
        let closed = std::fs::read_to_string(&path).unwrap();
        assert_eq!(closed.len(), 8 + STEP + 1 + 6, "cut to its lines");
        assert_eq!(lines(&closed).count(), 4);
        // Opened again, it appends after them.
        let mut journal = Journal::create(&path).unwrap();
        journal.append(b"four").unwrap();
        drop(journal);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(lines(&text).last(), Some("four"));
        assert_eq!(lines(&text).count(), 5);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_reset_journal_has_no_lines_and_takes_new_ones_from_its_start_under_its_new_name() {
        let dir = dir("reset");
        let path = dir.join("journal-a-00000000.jsonl");
        let mut journal = Journal::create(&path).unwrap();
        journal.append(b"one").unwrap();
        journal.append(b"two").unwrap();
        journal.reset();
        // What a process killed now would leave: no lines (zeros from the first byte).
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), STEP, "the file keeps its size");
        assert!(text.bytes().all(|b| b == 0), "the old lines are zeroed");
        assert_eq!(lines(&text).count(), 0);
        let next = dir.join("journal-a-00000002.jsonl");
        journal.rename(&next).unwrap();
        assert!(!path.exists());
        journal.append(b"three").unwrap();
        assert_eq!(
            lines(&std::fs::read_to_string(&next).unwrap()).collect::<Vec<_>>(),
            ["three"]
        );
        // Still its own: locked where it is now.
        let claimed = Journal::claimed_path(&next, "b");
        assert!(Journal::claim(&next, &claimed).unwrap().is_none());
        drop(journal);
        assert_eq!(
            std::fs::read_to_string(&next).unwrap(),
            "three\n",
            "cut to its line"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The child of [`lines_outlive_their_process_killed_with_sigkill`]: appends, says so, waits.
    const CHILD: &str = "JOURNAL_TEST_CHILD_PATH";

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test's own child process reads its marker, not the bridge's settings"
    )]
    fn lines_outlive_their_process_killed_with_sigkill() {
        use std::io::BufRead as _;
        if let Ok(path) = std::env::var(CHILD) {
            let mut journal = Journal::create(Path::new(&path)).unwrap();
            journal.append(b"one").unwrap();
            journal.append(b"two").unwrap();
            println!("appended");
            std::thread::sleep(std::time::Duration::from_secs(60));
            return;
        }
        let dir = dir("kill");
        let path = dir.join("journal-k-00000000.jsonl");
        // This test again, in a process of its own that is killed once it has appended.
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "gateway::journal::tests::lines_outlive_their_process_killed_with_sigkill",
                "--nocapture",
            ])
            .env(CHILD, &path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let said = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line == "appended");
        child.kill().unwrap(); // SIGKILL: no destructor runs
        child.wait().unwrap();
        assert!(said, "the child appended");
        let left = std::fs::read_to_string(&path).unwrap();
        assert_eq!(left.len(), STEP, "never cut: its process was killed");
        assert_eq!(lines(&left).collect::<Vec<_>>(), ["one", "two"]);
        // Unlocked by its death: the next process takes it.
        let claimed = Journal::claimed_path(&path, "next");
        assert!(Journal::claim(&path, &claimed).unwrap().is_some());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_journal_held_open_is_not_claimed_and_a_left_one_is_once() {
        let dir = dir("claim");
        let path = dir.join("journal-a-00000000.jsonl");
        let mut journal = Journal::create(&path).unwrap();
        journal.append(b"{\"id\":1}").unwrap();
        let claimed = Journal::claimed_path(&path, "b");
        assert!(
            Journal::claim(&path, &claimed).unwrap().is_none(),
            "a live process's journal stays its own"
        );
        assert!(path.exists());
        drop(journal);
        let (text, lock) = Journal::claim(&path, &claimed).unwrap().unwrap();
        assert_eq!(lines(&text).collect::<Vec<_>>(), ["{\"id\":1}"]);
        assert!(!path.exists() && claimed.exists());
        assert!(Journal::is_journal(
            claimed.file_name().unwrap().to_str().unwrap()
        ));
        // Held by its claimer: another process leaves it alone.
        let again = Journal::claimed_path(&claimed, "c");
        assert!(Journal::claim(&claimed, &again).unwrap().is_none());
        drop(lock);
        // The claimer died before writing it: the next one takes it.
        let (text, _lock) = Journal::claim(&claimed, &again).unwrap().unwrap();
        assert_eq!(lines(&text).count(), 1);
        assert_eq!(
            again.file_name().unwrap().to_str().unwrap(),
            "journal-a-00000000.taken-c"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
