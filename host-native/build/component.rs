// Shared by `host-native/build.rs` and `tests/build.rs` (`include!`d): build the core's WASI
// component with a nested cargo.
//
// The nested cargo uses its own target dir (`<outer target dir>/<dir>`): the outer cargo holds
// the lock on its target dir's build directories, and sharing them would deadlock. It decides itself whether anything is stale (a
// no-op build takes about a second); the calling script re-runs when the core, the component
// crate or the WIT change.

type BoxError = Box<dyn std::error::Error>;

const TARGET: &str = "wasm32-wasip2";
const ARTIFACT: &str = "bridge_core_component.wasm";

/// How to build one variant of the component.
struct ComponentBuild<'a> {
    /// Cargo profile (`component` for the embedded core, `dev` for test variants).
    profile: &'a str,
    /// Features of `bridge-core-component`.
    features: &'a [&'a str],
    /// Directory under `target/`.
    target_dir: &'a str,
}

impl ComponentBuild<'_> {
    /// Builds the component; returns the path of the `.wasm`.
    fn run(&self, workspace: &Path) -> Result<PathBuf, BoxError> {
        for input in [
            "core/src",
            "core/Cargo.toml",
            "core/component/src",
            "core/component/Cargo.toml",
            "wit",
            "Cargo.toml",
            "Cargo.lock",
        ] {
            println!(
                "cargo::rerun-if-changed={}",
                workspace.join(input).display()
            );
        }
        let rustc = env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
        ensure_target(&rustc)?;

        let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let target_dir = outer_target_dir(workspace).join(self.target_dir);
        let mut command = Command::new(&cargo);
        command
            .current_dir(workspace)
            .args([
                "build",
                "-p",
                "bridge-core-component",
                "--target",
                TARGET,
                "--profile",
                self.profile,
            ])
            .arg("--target-dir")
            .arg(&target_dir);
        if !self.features.is_empty() {
            command.arg("--features").arg(self.features.join(","));
        }
        scrub_env(&mut command);
        let output = command
            .output()
            .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
        if !output.status.success() {
            return Err(format!(
                "building the WASI component failed ({}):\n{}{}\n\
                 (run `cargo build -p bridge-core-component --target {TARGET} --profile {}` to see why)",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                self.profile,
            )
            .into());
        }
        let profile_dir = if self.profile == "dev" {
            "debug"
        } else {
            self.profile
        };
        let built = target_dir.join(TARGET).join(profile_dir).join(ARTIFACT);
        // Also re-run when the component is rebuilt or removed by hand.
        println!("cargo::rerun-if-changed={}", built.display());
        Ok(built)
    }
}

/// The nested cargo must not inherit what the outer build set up for *its* target: flags
/// meant for the host (`RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS`, e.g. `-C target-cpu=native` or
/// coverage instrumentation), wrappers (`clippy-driver`), the outer target dir and profile
/// overrides, and the variables cargo sets for this build script. User configuration that is
/// about the machine (registry, network, `CARGO_HOME`, the jobserver) is kept.
fn scrub_env(command: &mut Command) {
    const KEEP_PREFIXES: [&str; 7] = [
        "CARGO_HOME",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
        "CARGO_TERM_",
        "CARGO_MAKEFLAGS",
    ];
    const REMOVE: [&str; 16] = [
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "RUSTC_BOOTSTRAP",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTDOC",
        "__CARGO_FIX_PLZ",
        "__CARGO_DEFAULT_LIB_METADATA",
    ];
    for (name, _) in env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let cargo_var =
            name.starts_with("CARGO_") && !KEEP_PREFIXES.iter().any(|p| name.starts_with(p));
        if cargo_var || REMOVE.contains(&name) {
            command.env_remove(name);
        }
    }
}

/// Installs the `wasm32-wasip2` standard library through rustup when the toolchain lacks it.
fn ensure_target(rustc: &OsString) -> Result<(), BoxError> {
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.to_string_lossy()))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if sysroot.join("lib").join("rustlib").join(TARGET).is_dir() {
        return Ok(());
    }
    // A build script does not change the toolchain behind its user's back: it says what to run.
    Err(format!(
        "the Rust target {TARGET} is not installed for this toolchain ({}); the core's WASI \
         component needs it. Run `rustup target add {TARGET}` once (`make setup` does), or set \
         CLAUDE_BRIDGE_COMPONENT_WASM to a prebuilt bridge_core_component.wasm",
        sysroot.display()
    )
    .into())
}

/// The outer build's target directory (where `CACHEDIR.TAG` is, above `OUT_DIR`), so the nested
/// build stays inside it — `CARGO_TARGET_DIR` and `cargo install`'s own directory included —
/// and is shared by every profile of the outer build. `<workspace>/target` when there is none.
fn outer_target_dir(workspace: &Path) -> PathBuf {
    env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .and_then(|out| {
            out.ancestors()
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| workspace.join("target"))
}
