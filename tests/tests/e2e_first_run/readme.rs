//! The README's commands, run as written: every command of its ```sh blocks that starts the
//! bridge, Claude Code or Codex (or calls the bridge with curl) runs in a fresh `HOME`, with the
//! installed names on `PATH` (`claude-bridge`, `claude`, `codex`), against scripted model
//! servers on the addresses the README names (Ollama's `127.0.0.1:11434`, llama.cpp's
//! `127.0.0.1:8080`), in a work directory holding the README's `claude-bridge.toml`. Interactive
//! commands run in a real terminal and are driven as a person would. Build and install commands
//! (`make`, `cargo`, `rustup`) are what produced the binary under test and are not run again;
//! any other command fails the test until it is taught here, so the README cannot show one
//! nobody ran.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bridge_tests::chunks::{text_stream, tool_call_stream};
use bridge_tests::tempdir::TempDir;
use bridge_tests::tmux::Tmux;
use bridge_tests::upstream::{RecordedRequest, ScriptedResponse, Upstream};
use serde_json::{Value, json};

use super::{NO_SELF_UPDATE, claude_interactive, codex_interactive, path_env};

const README: &str = include_str!("../../../README.md");

/// The commands of the README's ```sh blocks: continuation lines joined, trailing comments
/// dropped, blank lines skipped.
pub fn sh_commands(markdown: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let line = strip_comment(line);
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            pending.push_str(head.trim());
            pending.push(' ');
            continue;
        }
        pending.push_str(line.trim());
        let command = std::mem::take(&mut pending).trim().to_owned();
        if !command.is_empty() {
            commands.push(command);
        }
    }
    commands
}

/// `line` without a `# comment` (a `#` after whitespace, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

/// The README's `claude-bridge.toml` (its ```toml block whose first line names the file).
fn readme_config(markdown: &str) -> Option<String> {
    let start = markdown.find("```toml\n# claude-bridge.toml\n")? + "```toml\n".len();
    let end = markdown[start..].find("```")?;
    Some(markdown[start..start + end].to_owned())
}

/// The model behind every README command: it lists `qwen3-coder`; asked (with tools) to create
/// hello.txt it calls the client's shell tool, then answers; anything else gets a greeting.
pub(super) fn model(req: &RecordedRequest) -> ScriptedResponse {
    if req.method == "GET" && req.path.ends_with("/models") {
        return ScriptedResponse::json(&json!({"object": "list", "data": [{"id": "qwen3-coder"}]}));
    }
    if !req.is_chat() {
        return ScriptedResponse::openai_error(404, "not found", "invalid_request_error", None);
    }
    let tool_names: Vec<&str> = req
        .tools()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    let asks_for_file = req.all_text().contains("Create hello.txt");
    if req.has_tool_result() {
        text_stream(&["Done: hello.txt ", "is written."])
    } else if asks_for_file && tool_names.contains(&"exec_command") {
        let args = json!({"cmd": "echo hello > hello.txt"}).to_string();
        tool_call_stream("call_1", "exec_command", &[&args])
    } else if asks_for_file && tool_names.contains(&"Bash") {
        let args = json!({"command": "echo hello > hello.txt", "description": "Create hello.txt"});
        tool_call_stream("call_1", "Bash", &[&args.to_string()])
    } else {
        text_stream(&["Hello from ", "qwen3-coder."])
    }
}

/// What a README command is, by how it starts.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// Builds or installs the binary (`make`, `cargo`, `rustup`): not run again.
    Build,
    /// `claude-bridge serve …`: started, and left serving for the commands after it.
    Serve,
    /// Runs to its end and must exit 0 (`doctor`, `claude -- -p`, `codex -- exec`, curl).
    OneShot,
    /// Claude Code in a terminal (`claude-bridge claude` without `-p`, or `… claude` by hand).
    ClaudeInteractive,
    /// Codex in a terminal (`claude-bridge codex` without `exec`).
    CodexInteractive,
}

fn kind(command: &str) -> Option<Kind> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let after_dashes = command.split_once(" -- ").map(|(_, rest)| rest);
    // `VAR=value … claude`: the by-hand way.
    let program = words.iter().find(|w| !w.contains('=')).copied()?;
    match (program, words.get(1).copied()) {
        ("make" | "cargo" | "rustup", _) => Some(Kind::Build),
        ("curl", _) => Some(Kind::OneShot),
        ("claude", _) => Some(Kind::ClaudeInteractive),
        ("claude-bridge", Some("serve")) => Some(Kind::Serve),
        ("claude-bridge", Some("doctor")) => Some(Kind::OneShot),
        ("claude-bridge", Some("claude")) => Some(match after_dashes {
            Some(rest) if rest.split_whitespace().any(|w| w == "-p") => Kind::OneShot,
            _ => Kind::ClaudeInteractive,
        }),
        ("claude-bridge", Some("codex")) => Some(match after_dashes {
            Some(rest) if rest.trim_start().starts_with("exec") => Kind::OneShot,
            _ => Kind::CodexInteractive,
        }),
        _ => None,
    }
}

/// A `bin/` directory with the installed names a README reader has on `PATH`.
fn installed_names(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let links = [
        (
            "claude-bridge",
            bridge_tests::bridge::binary_path().unwrap(),
        ),
        ("claude", bridge_tests::clients::claude_code_bin().unwrap()),
        ("codex", bridge_tests::codex::codex_bin().unwrap()),
    ];
    for (name, target) in links {
        std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
    }
    bin
}

async fn upstream_at(port: u16) -> Upstream {
    Upstream::start_at(SocketAddr::from(([127, 0, 0, 1], port)), model)
        .await
        .unwrap_or_else(|e| {
            panic!("the README names 127.0.0.1:{port}, which must be free for this test: {e}")
        })
}

/// Run every README command as written, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_commands_run_as_written() {
    let commands = sh_commands(README);
    let unknown: Vec<&String> = commands.iter().filter(|c| kind(c).is_none()).collect();
    assert!(
        unknown.is_empty(),
        "README commands this test cannot run (teach it, or show them as text): {unknown:?}"
    );
    // The bridge's default address must be free too: a bridge already there would answer in
    // the README's place.
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", 3456)).is_ok(),
        "the README names 127.0.0.1:3456 for `claude-bridge serve`, which must be free for this test"
    );
    let ollama = upstream_at(11434).await;
    let llamacpp = upstream_at(8080).await;
    let root = TempDir::new("readme").unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bin = installed_names(root.path());
    let work_dir = TempDir::new("readme-work").unwrap();
    let work = work_dir.path();
    let config = readme_config(README).expect("the README shows a claude-bridge.toml");
    std::fs::write(work.join("claude-bridge.toml"), config).unwrap();
    let env: Vec<(&str, String)> = vec![
        ("PATH", format!("{}:{}", bin.display(), path_env())),
        ("HOME", home.to_string_lossy().into_owned()),
        (NO_SELF_UPDATE.0, NO_SELF_UPDATE.1.to_owned()),
    ];
    let mut serving: Vec<tokio::process::Child> = Vec::new();
    let mut ran = Vec::new();
    for (n, command) in commands.iter().enumerate() {
        let what = format!("README command {n}: {command}");
        // What a command makes, it must make itself.
        let _ = std::fs::remove_file(work.join("hello.txt"));
        match kind(command) {
            Some(Kind::Build) | None => continue,
            Some(Kind::Serve) => {
                let child = tokio::process::Command::new("sh")
                    .args(["-c", &format!("exec {command}")])
                    .current_dir(work)
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::fs::File::create(root.path().join("serve.log")).unwrap())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap();
                serving.push(child);
                wait_for_port(3456, &what).await;
                let exited = serving.last_mut().and_then(|c| c.try_wait().ok().flatten());
                assert!(
                    exited.is_none(),
                    "{what}: exited ({exited:?}):\n{}",
                    std::fs::read_to_string(root.path().join("serve.log")).unwrap_or_default()
                );
            }
            Some(Kind::OneShot) => {
                let out = tokio::time::timeout(
                    Duration::from_secs(120),
                    tokio::process::Command::new("sh")
                        .args(["-c", command])
                        .current_dir(work)
                        .env_clear()
                        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                        .stdin(std::process::Stdio::null())
                        .kill_on_drop(true)
                        .output(),
                )
                .await
                .unwrap_or_else(|_| panic!("{what}: still running after 120 s"))
                .unwrap();
                let shown = format!(
                    "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{}\n--- upstream:\n{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                    ollama.dump()
                );
                assert_eq!(out.status.code(), Some(0), "{shown}");
                check_one_shot(command, &out.stdout, work, &shown);
            }
            Some(Kind::ClaudeInteractive) => {
                let term =
                    Tmux::start(root.path(), &format!("readme-{n}"), work, &env, command).unwrap();
                // The launcher sets up its status line; plain `claude` has none.
                let launched = command.contains("claude-bridge claude");
                claude_interactive(&term, &what, launched).await;
            }
            Some(Kind::CodexInteractive) => {
                let term =
                    Tmux::start(root.path(), &format!("readme-{n}"), work, &env, command).unwrap();
                codex_interactive(&term, &what).await;
            }
        }
        eprintln!("ran {what}");
        ran.push(command.clone());
    }
    // The README's path: doctor, both launchers both ways, the bridge by hand, curl, the config.
    for needed in [
        "claude-bridge doctor",
        "claude-bridge claude",
        "claude-bridge codex",
        "claude-bridge serve",
        "curl",
        "--config claude-bridge.toml",
    ] {
        assert!(
            ran.iter().any(|c| c.contains(needed)),
            "no README command with {needed:?} ran: {ran:?}"
        );
    }
    drop(llamacpp);
}

/// What a one-shot command must have done beyond exiting 0.
fn check_one_shot(command: &str, stdout: &[u8], work: &Path, shown: &str) {
    let stdout = String::from_utf8_lossy(stdout);
    if command.contains("claude-bridge doctor") {
        assert!(stdout.contains("qwen3-coder ✓"), "{shown}");
    } else if command.contains(" exec ") && command.contains("hello.txt") {
        assert_eq!(
            std::fs::read_to_string(work.join("hello.txt"))
                .ok()
                .as_deref(),
            Some("hello\n"),
            "{shown}"
        );
        let _ = std::fs::remove_file(work.join("hello.txt"));
    } else if command.starts_with("curl") {
        let body: Value = serde_json::from_str(&stdout).unwrap_or_default();
        assert_eq!(
            body["choices"][0]["message"]["content"], "Hello from qwen3-coder.",
            "{shown}"
        );
    } else if command.contains(" -p ") {
        assert!(stdout.contains("Hello from qwen3-coder."), "{shown}");
    }
}

async fn wait_for_port(port: u16, what: &str) {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: nothing listens on 127.0.0.1:{port} after 10 s");
}

#[test]
fn commands_are_read_as_a_shell_reads_them() {
    let md = "text\n```sh\nclaude-bridge codex --model m -- \\\n  exec --x \"a # b\"   # run it\n\n# only a comment\nmake run    # build\n```\n```text\nnot a command\n```\n";
    assert_eq!(
        sh_commands(md),
        [
            "claude-bridge codex --model m -- exec --x \"a # b\"",
            "make run"
        ]
    );
    assert_eq!(
        kind("ANTHROPIC_BASE_URL=http://127.0.0.1:3456 ANTHROPIC_API_KEY=x claude"),
        Some(Kind::ClaudeInteractive)
    );
    assert_eq!(
        kind("claude-bridge claude -- -p \"hi\""),
        Some(Kind::OneShot)
    );
    assert_eq!(
        kind("claude-bridge codex --model m"),
        Some(Kind::CodexInteractive)
    );
    assert_eq!(kind("rm -rf /"), None);
}
