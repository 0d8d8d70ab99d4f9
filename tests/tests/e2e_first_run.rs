//! What a person meets first: the launchers `claude-bridge claude` and `claude-bridge codex`
//! run interactively in a real terminal (tmux) with a fresh `HOME`, against a scripted upstream;
//! what they leave behind; a launcher that serves like `serve` (SIGHUP, reload); and the
//! README's own commands, run as written.
//!
//! Needs `cargo build -p claude-bridge` and `scripts/setup-e2e.sh` (the real CLIs, tmux).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test on purpose"
)]

use std::path::Path;
use std::time::Duration;

use bridge_tests::bridge::{binary_path, compiled_core_cache_env};
use bridge_tests::chunks::text_stream;
use bridge_tests::tempdir::TempDir;
use bridge_tests::tmux::Tmux;
use bridge_tests::upstream::Upstream;
use serde_json::json;

#[path = "e2e_first_run/readme.rs"]
mod readme;

const SCREEN: Duration = Duration::from_secs(60);

/// What every terminal test adds to a fresh machine's environment: Claude Code must not update
/// itself from the registry while a test drives it.
const NO_SELF_UPDATE: (&str, &str) = ("DISABLE_AUTOUPDATER", "1");

fn path_env() -> String {
    std::env::var("PATH").unwrap_or_default()
}

/// The pids of processes whose environment holds `needle` (e.g. `CODEX_HOME=/that/dir`): what
/// a launched tool started, wherever it was re-parented to.
fn processes_with_env(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            let cmd = std::fs::read(entry.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            found.push((pid, cmd));
        }
    }
    found
}

/// The model behind every terminal test: asked to create hello.txt it calls the client's shell
/// tool (Codex's `exec_command`, Claude Code's `Bash`), then says "Done: hello.txt is written."
async fn task_model() -> Upstream {
    Upstream::start(readme::model).await.unwrap()
}

/// Interactive `claude-bridge codex` with a fresh HOME: no model-migration screen, the upstream
/// is offered Codex's tools and the tool runs (hello.txt); after `/quit` no process Codex started is left,
/// and the session is kept for `codex resume`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_codex_runs_a_tool_and_leaves_nothing_running() {
    let codex = bridge_tests::codex::codex_bin().unwrap();
    let upstream = task_model().await;
    // A HOME outside the temporary directory, as a person's is: Codex refuses to put its helper
    // binaries under `TMPDIR`, and says so, so a CODEX_HOME the launcher made there would show.
    let root = TempDir::new("first-run-codex").unwrap();
    let home = root.path().join("home");
    let tmp = root.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // The work directory is in no git repository (in one, Codex first asks whether to trust it).
    let work_dir = TempDir::new("first-run-codex-work").unwrap();
    let work = work_dir.path().to_path_buf();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let bridge = binary_path().unwrap();
    let command = format!(
        "{} codex --base-url {} --model qwen3-coder --codex-bin {}",
        bridge.display(),
        upstream.base_url(),
        codex.display()
    );
    let term = Tmux::start(
        root.path(),
        "codex",
        &work,
        &[
            ("PATH", path_env()),
            ("HOME", home.to_string_lossy().into_owned()),
            ("TMPDIR", tmp.to_string_lossy().into_owned()),
        ],
        &command,
    )
    .unwrap();
    let codex_home = home.join(".local/state/claude-bridge/codex-home");
    let shown = |term: &Tmux| format!("{}\n--- upstream:\n{}", term.screen(), upstream.dump());
    term.wait_for(&["Ask Codex to do anything"], SCREEN)
        .await
        .unwrap();
    // The upstream answered the start-up check: nothing to warn about.
    assert!(
        !term.screen().contains("claude-bridge: warning"),
        "{}",
        term.screen()
    );
    // The model-migration screen came a few seconds after the prompt when it was shown; and
    // the home says why it will not come.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let screen = term.screen();
    assert!(
        !screen.contains("Try new model") && !screen.contains("Use existing model"),
        "{screen}"
    );
    let config = std::fs::read_to_string(codex_home.join("config.toml")).unwrap_or_default();
    assert!(
        config.contains("[notice.model_migrations]") && config.contains("\"gpt-5.5\" = "),
        "{config}"
    );
    codex_interactive(&term, "interactive codex").await;
    assert_eq!(
        std::fs::read_to_string(work.join("hello.txt"))
            .ok()
            .as_deref(),
        Some("hello\n"),
        "{}",
        shown(&term)
    );
    let task = upstream
        .model_requests()
        .into_iter()
        .find(|r| r.has_tool_result())
        .unwrap_or_else(|| panic!("no turn carried the tool's result\n{}", shown(&term)));
    let tools: Vec<&str> = task
        .tools()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"exec_command") && tools.contains(&"apply_patch"),
        "{tools:?}"
    );
    let needle = format!("CODEX_HOME={}", codex_home.display());
    let left = processes_with_env(&needle);
    assert!(left.is_empty(), "left running: {left:?}");
    let screen = term.screen();
    assert!(
        !screen.contains("helper binaries under temporary dir"),
        "{screen}"
    );
    assert!(codex_home.join("sessions").is_dir(), "{screen}");
    assert!(screen.contains("codex resume"), "{screen}");
}

/// Drive an interactive Claude Code to its prompt through the first-run screens a person meets
/// (theme, security notes, trusting the folder), failing on any that asks about a key or says
/// it is not logged in; then ask it to create hello.txt and wait for the answer; then quit.
/// Started by the launcher (`launched`), its status line is read and returned.
async fn claude_interactive(term: &Tmux, what: &str, launched: bool) -> Option<String> {
    const REFUSED: [&str; 4] = [
        "Detected a custom API key",
        "Not logged in",
        "Unable to connect to Anthropic services",
        "Please run /login",
    ];
    let ready = "? for shortcuts";
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(
            steps < 10,
            "{what}: first-run screens do not end:\n{}",
            term.screen()
        );
        let screen = term
            .wait_for_visible(
                &[
                    "Choose the text style",
                    "Press Enter to continue",
                    "Yes, I trust this folder",
                    ready,
                    "auto mode on",
                    REFUSED[0],
                    REFUSED[1],
                    REFUSED[2],
                ],
                SCREEN,
            )
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Some(refused) = REFUSED.iter().find(|r| screen.contains(*r)) {
            panic!("{what}: Claude Code showed {refused:?}:\n{screen}");
        }
        if screen.contains(ready) || screen.contains("auto mode on") {
            break;
        }
        assert!(
            !screen.contains("[exited"),
            "{what}: Claude Code ended on a first-run screen:\n{screen}"
        );
        // A screen takes keys once it has drawn and settled (under load it may draw first).
        let screen = term.settled(Duration::from_secs(5)).await;
        if screen.contains("Yes, I trust this folder") {
            // The cursor starts on "No, exit": move it, and see it moved, before confirming.
            for _ in 0..20 {
                if term.visible().contains("❯ Yes, I trust this folder") {
                    break;
                }
                term.press(&["Down"]).unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            assert!(
                term.visible().contains("❯ Yes, I trust this folder"),
                "{what}: the trust choice did not move:\n{}",
                term.visible()
            );
        }
        // Each key once per screen: the next decision is made on the screen that follows.
        let before = term.visible();
        term.press(&["Enter"]).unwrap();
        term.wait_for_change(&before, Duration::from_secs(10)).await;
    }
    submit_to_claude(term, "Create hello.txt with the word hello", what).await;
    let screen = term
        .wait_for(
            &["Done: hello.txt is written.", REFUSED[1], "API Error"],
            SCREEN,
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        screen.contains("Done: hello.txt is written."),
        "{what}:\n{screen}"
    );
    assert!(
        screen.contains("Bash(echo hello > hello.txt)"),
        "{what}:\n{screen}"
    );
    // The launcher's status line (`claude-bridge statusline`, run by Claude Code with its JSON
    // on stdin) names the target that answered and the session's tokens.
    let status = if launched {
        Some(status_line(term, what).await)
    } else {
        None
    };
    quit_claude(term, what).await;
    status
}

/// Claude Code's status line once it shows the session's first answer.
async fn status_line(term: &Tmux, what: &str) -> String {
    let deadline = tokio::time::Instant::now() + SCREEN;
    loop {
        let visible = term.visible();
        let line = visible
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("⇄ ") && l.contains(" in ") && l.contains(" out"));
        if let Some(line) = line {
            return line.to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: no status line with the session's tokens:\n{visible}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Type `prompt` into Claude Code's input box and press Enter until it is taken. Under load an
/// Enter that lands while Claude Code is still drawing (or inside what it reads as a paste) is
/// lost and the prompt stays in the box; a person would press Enter again, and so does this.
async fn submit_to_claude(term: &Tmux, prompt: &str, what: &str) {
    term.type_text(prompt).unwrap();
    term.wait_for_visible(&[prompt], Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{what}: the typed prompt did not show: {e}"));
    for _ in 0..5 {
        term.settled(Duration::from_secs(3)).await;
        term.press(&["Enter"]).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            if !in_claude_input_box(&term.visible(), prompt) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    panic!(
        "{what}: Claude Code did not take the prompt after five Enters:\n{}",
        term.visible()
    );
}

/// Whether `prompt` is still in Claude Code's input box: the `❯` line between two rules.
fn in_claude_input_box(screen: &str, prompt: &str) -> bool {
    let lines: Vec<&str> = screen.lines().map(str::trim).collect();
    let typed = format!("❯ {prompt}");
    (1..lines.len().saturating_sub(1)).any(|i| {
        lines[i].starts_with(&typed)
            && lines[i - 1].starts_with('─')
            && lines[i + 1].starts_with('─')
    })
}

/// Ctrl-C twice, as a person leaves Claude Code; the command then ends with 0. Claude Code asks
/// for the second press only for a moment ("Press Ctrl-C again to exit"), and a first press
/// that lands while a turn is still settling interrupts it instead; so both presses go
/// together, and again until the command has ended.
async fn quit_claude(term: &Tmux, what: &str) {
    for _ in 0..5 {
        term.press(&["C-c"]).unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        term.press(&["C-c"]).unwrap();
        if term
            .wait_for(&["[exited"], Duration::from_secs(5))
            .await
            .is_ok()
        {
            break;
        }
    }
    term.wait_for(&["[exited 0]"], SCREEN)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

#[test]
fn a_prompt_in_claude_codes_input_box_is_told_from_one_in_the_transcript() {
    let rule = "─".repeat(20);
    let waiting = format!("{rule}\n❯ Create hello.txt\n{rule}\n  ⏵⏵ auto mode on");
    assert!(in_claude_input_box(&waiting, "Create hello.txt"));
    let taken = format!("❯ Create hello.txt\n\n● Bash(echo hello)\n{rule}\n❯ \n{rule}");
    assert!(!in_claude_input_box(&taken, "Create hello.txt"));
}

/// Drive an interactive Codex: its prompt, a task that creates hello.txt, the answer, `/quit`.
async fn codex_interactive(term: &Tmux, what: &str) {
    term.wait_for(&["Ask Codex to do anything"], SCREEN)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    term.type_text("Create hello.txt with the word hello")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    term.press(&["Enter"]).unwrap();
    term.wait_for(&["Done: hello.txt is written."], SCREEN)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    term.type_text("/quit").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    term.press(&["Enter"]).unwrap();
    term.wait_for(&["[exited 0]"], SCREEN)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Interactive `claude-bridge claude` with a fresh HOME: no API-key dialog (the bridge's
/// credential is an auth token), a prompt answered and a tool run; then a second launch by a
/// user who once refused a custom API key (stored in `~/.claude.json`) still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_claude_code_needs_no_key_dialog_even_after_a_refusal() {
    let upstream = task_model().await;
    let root = TempDir::new("first-run-claude").unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let work_dir = TempDir::new("first-run-claude-work").unwrap();
    let work = work_dir.path().to_path_buf();
    let claude = bridge_tests::clients::claude_code_bin().unwrap();
    let command = format!(
        "{} claude --base-url {} --model qwen3-coder --claude-bin {}",
        binary_path().unwrap().display(),
        upstream.base_url(),
        claude.display()
    );
    let env = [
        ("PATH", path_env()),
        ("HOME", home.to_string_lossy().into_owned()),
        (NO_SELF_UPDATE.0, NO_SELF_UPDATE.1.to_owned()),
    ];
    let term = Tmux::start(root.path(), "claude-1", &work, &env, &command).unwrap();
    let status = claude_interactive(&term, "first launch", true)
        .await
        .unwrap_or_default();
    assert!(status.starts_with("⇄ default,qwen3-coder · "), "{status}");
    assert_eq!(
        std::fs::read_to_string(work.join("hello.txt"))
            .ok()
            .as_deref(),
        Some("hello\n")
    );
    let sent = upstream
        .model_requests()
        .into_iter()
        .find(|r| r.has_tool_result())
        .expect("a turn carried the tool's result");
    assert!(
        sent.tools().iter().any(|t| t["function"]["name"] == "Bash"),
        "{}",
        upstream.dump()
    );
    drop(term);

    // The user once answered No to "Detected a custom API key" for every key the launcher has
    // ever used: the refusal is kept in ~/.claude.json.
    let state = home.join(".claude.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    config["customApiKeyResponses"] = json!({"approved": [], "rejected": ["claude-bridge"]});
    std::fs::write(&state, config.to_string()).unwrap();
    std::fs::remove_file(work.join("hello.txt")).unwrap();
    let term = Tmux::start(root.path(), "claude-2", &work, &env, &command).unwrap();
    claude_interactive(&term, "launch after a refusal", true).await;
    assert!(work.join("hello.txt").is_file());
}

/// Nothing listens at `--base-url`: `claude-bridge claude -- -p` says so before Claude Code
/// starts, and Claude Code stops within seconds (not minutes of retries) with the bridge's
/// message naming the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_ends_claude_code_quickly_with_its_address() {
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        format!("http://127.0.0.1:{port}/v1")
    };
    let root = TempDir::new("first-run-dead").unwrap();
    let started = std::time::Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(binary_path().unwrap())
            .args(["claude", "--base-url", &dead, "--model", "qwen3-coder"])
            .arg("--claude-bin")
            .arg(bridge_tests::clients::claude_code_bin().unwrap())
            .args(["--", "-p", "hi"])
            .current_dir(root.path())
            .env_clear()
            .env("PATH", path_env())
            .env("HOME", root.path())
            .envs([compiled_core_cache_env()])
            .env(NO_SELF_UPDATE.0, NO_SELF_UPDATE.1)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("Claude Code was still retrying after 60 s")
    .unwrap();
    let took = started.elapsed();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    let shown = format!(
        "after {took:?}, exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status.code()
    );
    assert!(took < Duration::from_secs(30), "{shown}");
    assert_ne!(output.status.code(), Some(0), "{shown}");
    // Before Claude Code started: a plain warning naming the upstream.
    assert!(
        stderr.contains("claude-bridge: warning") && stderr.contains(&dead),
        "{shown}"
    );
    // Claude Code's last word: the bridge's message, the upstream named, nothing about a
    // temporary server-side issue or logging in.
    assert!(
        stdout.contains("API Error: 424") && stdout.contains(&format!("{dead}/chat/completions")),
        "{shown}"
    );
    for misleading in ["usually temporary", "/login", "Failed to authenticate"] {
        assert!(!stdout.contains(misleading), "{misleading}: {shown}");
    }
}

/// A tool that leaves a helper running in a session of its own (as Codex's daemons do) and
/// exits: the launcher ends the helper, though it is in no process group the launcher knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launcher_ends_what_its_tool_left_running() {
    let root = TempDir::new("first-run-orphans").unwrap();
    let (tool, pid_file) = tool_leaving_a_helper(
        root.path(),
        "while [ ! -s \"$HELPER_PID\" ]; do sleep 0.05; done\nexit 3",
    );
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(binary_path().unwrap())
            .args(["claude", "--no-upstream-check", "--log-file", "-"])
            .arg("--claude-bin")
            .arg(&tool)
            .env("HOME", root.path())
            .envs([compiled_core_cache_env()])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    // The tool's exit code is the launcher's.
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = Path::new(&format!("/proc/{pid}")).exists();
    assert!(!alive, "the helper {pid} is still running");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("ended the processes"), "{log}");
}

/// `SIGTERM` to a launcher (`kill`, `timeout`, a service manager) reaches its tool, and what the
/// tool left running is ended as after any exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_a_launcher_ends_its_tool_and_what_it_left() {
    let root = TempDir::new("first-run-sigterm").unwrap();
    let (tool, pid_file) = tool_leaving_a_helper(root.path(), "exec sleep 300");
    let mut launcher = tokio::process::Command::new(binary_path().unwrap())
        .args(["claude", "--no-upstream-check", "--log-file", "-"])
        .arg("--claude-bin")
        .arg(&tool)
        .env("HOME", root.path())
        .envs([compiled_core_cache_env()])
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let helper: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &launcher.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exited = tokio::time::timeout(Duration::from_secs(10), launcher.wait())
        .await
        .expect("the launcher did not end within 10 s of SIGTERM")
        .unwrap();
    // The tool died of the signal: the launcher says so with a failing status.
    assert_eq!(exited.code(), Some(1), "{exited:?}");
    assert!(
        !Path::new(&format!("/proc/{helper}")).exists(),
        "the helper {helper} is still running"
    );
}

/// `SIGHUP` does not end a launcher (nor its tool) and re-reads its config file; a change to
/// the file is picked up while the tool runs; the launcher's log says both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launcher_reloads_its_config_on_change_and_sighup() {
    let upstream = Upstream::always(text_stream(&["hi"])).await.unwrap();
    let root = TempDir::new("first-run-reload").unwrap();
    let config = root.path().join("claude-bridge.toml");
    let write_config = |model: &str| {
        std::fs::write(
            &config,
            format!(
                "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"{model}\"]\n\
                 [router]\ndefault = \"local,{model}\"\n",
                upstream.base_url()
            ),
        )
        .unwrap();
    };
    write_config("first-model");
    // The tool: hang up on the launcher, ask for the models, change the file, ask again.
    let tool = root.path().join("tool.sh");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\nset -e\nkill -HUP $PPID\nsleep 0.5\n\
             curl -sf \"$ANTHROPIC_BASE_URL/v1/models\" > {dir}/before.json\n\
             sed -i 's/first-model/second-model/g' {config}\n\
             for i in $(seq 1 100); do\n\
               curl -sf \"$ANTHROPIC_BASE_URL/v1/models\" > {dir}/after.json\n\
               grep -q second-model {dir}/after.json && break\n\
               sleep 0.2\n\
             done\n",
            dir = root.path().display(),
            config = config.display()
        ),
    )
    .unwrap();
    make_executable(&tool);
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(binary_path().unwrap())
            .args([
                "claude",
                "--no-upstream-check",
                "--log-file",
                "-",
                "--config",
            ])
            .arg(&config)
            .arg("--claude-bin")
            .arg(&tool)
            .env("HOME", root.path())
            .envs([compiled_core_cache_env()])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{log}");
    let read = |name: &str| std::fs::read_to_string(root.path().join(name)).unwrap_or_default();
    assert!(read("before.json").contains("first-model"), "{log}");
    assert!(read("after.json").contains("second-model"), "{log}");
    assert!(
        log.contains("why=SIGHUP") && log.contains("config reloaded"),
        "{log}"
    );
    assert!(log.contains("the file changed"), "{log}");
}

/// A tool script in `dir` that starts a helper in a session of its own (as Codex's daemons
/// are), which writes its pid to the returned file (`$HELPER_PID` in the script), then runs
/// `then`.
fn tool_leaving_a_helper(dir: &Path, then: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let pid_file = dir.join("helper.pid");
    let tool = dir.join("tool.sh");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\nHELPER_PID={}\n\
             setsid sh -c \"echo \\$\\$ > $HELPER_PID; exec sleep 300\" </dev/null >/dev/null 2>&1 &\n\
             {then}\n",
            pid_file.display()
        ),
    )
    .unwrap();
    make_executable(&tool);
    (tool, pid_file)
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
