// Shared by `host-native/build.rs` and `tests/build.rs` (`include!`d): build variants of the
// core's WASI component with a nested cargo.
//
// The nested cargo uses its own target dir (`<outer target dir>/component`): the outer cargo
// holds the lock on its target dir's build directories, and sharing them would deadlock. Both
// variants (the embedded core, `bridge-core-component`, and the fault-injecting test one,
// `bridge-core-component-faults`) build there with the same profile, in one nested cargo when a
// debug host is built (see host-native/build.rs), so the core and the dependencies are compiled
// once for both. Cargo decides itself whether anything is stale (a no-op build takes about a
// second); the calling script re-runs when the core, the component crates or the WIT change.
//
// The built `.wasm` files are not `rerun-if-changed` inputs: they are written while the script
// runs, after cargo noted its start, so cargo would take them as changed and run the script (and
// recompile the host and everything above it) once more on the next build.

type BoxError = Box<dyn std::error::Error>;

const TARGET: &str = "wasm32-wasip2";
/// Directory under the outer target dir.
const TARGET_DIR: &str = "component";

/// Variants of the component, built by one nested cargo.
struct ComponentBuild<'a> {
    /// Their packages (`bridge-core-component`, `bridge-core-component-faults`).
    packages: &'a [&'a str],
}

/// The component's profile for the outer build's: `component` (fat LTO) for a release host,
/// `component-test` (optimised, no LTO, parallel codegen) for a debug one, whose builds are the
/// tests' and `cargo run`'s.
fn component_profile() -> &'static str {
    match env::var("PROFILE").as_deref() {
        Ok("debug") => "component-test",
        _ => "component",
    }
}

impl ComponentBuild<'_> {
    /// Builds the components; returns the paths of their `.wasm` files, in `packages`' order.
    fn run(&self, workspace: &Path) -> Result<Vec<PathBuf>, BoxError> {
        for input in [
            "core/src",
            "core/Cargo.toml",
            "core/component/src",
            "core/component/Cargo.toml",
            "core/component-faults/Cargo.toml",
            "wit",
            "Cargo.toml",
            "Cargo.lock",
            // The component's rustflags (wasm SIMD).
            ".cargo/config.toml",
        ] {
            println!(
                "cargo::rerun-if-changed={}",
                workspace.join(input).display()
            );
        }
        // Linted with the outer build when that runs under clippy (see `scrub_env`).
        println!("cargo::rerun-if-env-changed=RUSTC_WORKSPACE_WRAPPER");
        println!("cargo::rerun-if-env-changed=CLIPPY_ARGS");
        let rustc = env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
        ensure_target(&rustc)?;

        let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let profile = component_profile();
        let target_dir = outer_target_dir(workspace).join(TARGET_DIR);
        let mut command = Command::new(&cargo);
        command
            .current_dir(workspace)
            .arg("build")
            .args(self.packages.iter().flat_map(|package| ["-p", package]))
            .args(["--target", TARGET, "--profile", profile])
            .arg("--target-dir")
            .arg(&target_dir);
        scrub_env(&mut command);
        let output = command
            .output()
            .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
        if !output.status.success() {
            return Err(format!(
                "building the WASI component failed ({}):\n{}{}\n\
                 (run `cargo build -p {} --target {TARGET} --profile {profile}` to see why)",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                self.packages.join(" -p "),
            )
            .into());
        }
        Ok(self
            .packages
            .iter()
            .map(|package| {
                let artifact = format!("{}.wasm", package.replace('-', "_"));
                target_dir.join(TARGET).join(profile).join(artifact)
            })
            .collect())
    }
}

/// The nested cargo must not inherit what the outer build set up for *its* target: flags
/// meant for the host (`RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS`, e.g. `-C target-cpu=native` or
/// coverage instrumentation), wrappers (but clippy-driver, kept so that linting the outer
/// build lints the component; `CLIPPY_ARGS` stays with it), the outer target dir and profile
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
    // Clippy on the outer build (`make lint`) lints the component too: the workspace's crates
    // go through clippy-driver with the same lint flags, in the build that runs anyway.
    let clippy = env::var_os("RUSTC_WORKSPACE_WRAPPER").filter(|wrapper| {
        Path::new(wrapper)
            .file_stem()
            .is_some_and(|stem| stem == "clippy-driver")
    });
    for (name, _) in env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let cargo_var =
            name.starts_with("CARGO_") && !KEEP_PREFIXES.iter().any(|p| name.starts_with(p));
        if cargo_var || REMOVE.contains(&name) {
            command.env_remove(name);
        }
    }
    if let Some(wrapper) = clippy {
        command.env("RUSTC_WORKSPACE_WRAPPER", wrapper);
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
