//! The core as a WASI 0.2 component (`wit/bridge-core.wit`) in wasmtime.
//!
//! Two process-wide wasmtime [`wasmtime::Engine`]s (cranelift, pooling allocator), one for the
//! embedded core and one for plug-ins, and one [`InstancePre`] per component. Only a plug-in's
//! calls run against a deadline (see [`shared_engine`]). The embedded core's instances are
//! shared by up to 16 open streams and reused by the next request's calls
//! ([`super::wasm_pool`]): an instantiation and its page faults per operation cost more than
//! the call, and an instance's pages per open stream more than the stream's own state. A
//! plug-in (`--core`) gets a fresh instance for every operation and stream, so a trap in one
//! request cannot affect another.
//!
//! Compiling the component takes tens of milliseconds (much more in a debug build), so the
//! compiled code is cached on disk (`$XDG_CACHE_HOME/claude-bridge`, else
//! `~/.cache/claude-bridge`; `CLAUDE_BRIDGE_CACHE_DIR` overrides), keyed by a hash of the
//! component bytes and of the wasmtime version and configuration.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use wasmtime::component::{Component, Linker, ResourceAny, ResourceTable};
use wasmtime::{
    AsContext, AsContextMut, Config, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
    ProfilingStrategy, Store, Strategy,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::epoch_clock::{self, EPOCH_TICK};
use super::guest_io::{self, GuestOutput, HasTable};
use super::wasm_pool::{Pool, PoolLimits, Pooled};

use super::{
    ConvertedRequest, Dialect, Engine, EngineError, ErrorKind, Finished, StreamEnd, StreamOptions,
    StreamSession, encode_options,
};

/// Host-side bindings of `wit/bridge-core.wit` (exports only; the world imports nothing but
/// the WASI interfaces a `std` component always pulls in).
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "bridge-core",
    });
}

use bindings::exports::fabstir::bridge_core::translate::{self as wit};
use bindings::{BridgeCore, BridgeCorePre};

/// The component built from `core/component` by `build.rs`.
static EMBEDDED_COMPONENT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/bridge_core_component.wasm"));

/// How many stores (requests and streams in flight) may exist at once in one engine (the
/// embedded core's, or the plug-ins'). Each takes slots of the pooling allocator; a memory
/// slot is a 4 GiB address-space reservation (so wasm needs no bounds checks), which costs
/// address space, not memory.
/// Past this, new operations fail with a clear `EngineError::Trap` until slots come back.
const MAX_INSTANCES: u32 = 1000;
/// Core instances one component may hold: the embedded core has 3 (the core module and the
/// two glue modules `wasm-component-ld` adds); room for plug-ins built by other toolchains.
const CORE_INSTANCES_PER_COMPONENT: u32 = 6;
/// Linear memories and tables per component, for sizing the pools: the embedded core has 1
/// and 2. A plug-in with more uses more slots and so lowers how many stores fit.
const MEMORIES_PER_COMPONENT: u32 = 1;
const TABLES_PER_COMPONENT: u32 = 2;
/// Largest linear memory of one store: the request body (up to Anthropic's 32 MB limit), its
/// parsed form and the converted body must fit.
const MAX_MEMORY_BYTES: usize = 512 << 20;
/// Longest one call into a plug-in may run (in ticks: 2 s). Converting a 32 MB request takes a
/// fraction of that; a guest still running after it (a looping plug-in) is interrupted, so it
/// cannot hold a server thread (or SIGTERM) for longer.
const CALL_DEADLINE_TICKS: u64 = 200;
/// How much of the guest's stderr (its end) a trap report carries.
const TRAP_REPORT_STDERR: usize = 2 << 10;
/// Table bytes per slot kept resident between instances (the core's table is far smaller).
const TABLE_KEEP_RESIDENT_BYTES: usize = 64 << 10;
/// How the embedded core's instances are shared and kept (see [`super::wasm_pool`]).
const EMBEDDED_POOL: PoolLimits = PoolLimits {
    streams_per_instance: 16,
    keep_idle: 2,
    retire_after_bytes: 64 << 20,
    private_above_bytes: 1 << 20,
};
/// An instance with no user for this long is dropped (its pages returned): a bridge left alone
/// goes back to the memory it started with. Long enough that a client's turns (a tool run
/// between two requests) keep finding it; the request after a longer pause pays a new
/// instance and its page faults. Measured (count_tokens of a 300 KB body, release build): the
/// first request after 40 s idle took 1.7-2.3 ms against 0.6-0.9 ms warm, and as much
/// (1.2-2.3 ms) with the native engine, which drops nothing: the pause itself costs that.
const IDLE_INSTANCE_TTL: Duration = Duration::from_secs(30);
/// How often the pool is checked for such instances.
const TRIM_EVERY: Duration = Duration::from_secs(5);
/// A plug-in's: nothing shared, nothing kept.
const PLUGIN_POOL: PoolLimits = PoolLimits {
    streams_per_instance: 1,
    keep_idle: 0,
    retire_after_bytes: 0,
    private_above_bytes: 0,
};

/// [`Engine`] over a `bridge-core` world component: the embedded core or a plug-in.
pub struct WasmEngine {
    pre: BridgeCorePre<StoreState>,
    pool: Arc<Pool<Instance>>,
    /// Plug-ins' output is logged (their authors want to see it); the embedded core's is only
    /// kept for trap reports.
    plugin: bool,
    label: String,
}

impl fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmEngine")
            .field("component", &self.label)
            .finish_non_exhaustive()
    }
}

impl WasmEngine {
    /// The component embedded at build time, loaded once per process.
    pub(super) fn embedded() -> Result<Arc<Self>, EngineError> {
        static EMBEDDED: OnceLock<Result<Arc<WasmEngine>, EngineError>> = OnceLock::new();
        EMBEDDED
            .get_or_init(|| {
                let engine = Self::load(EMBEDDED_COMPONENT, "embedded bridge-core", false)?;
                // The process's engine gives back instances left unused (an engine a test
                // makes for itself keeps them, so its counts stay deterministic).
                start_trimming(&engine.pool);
                Ok(Arc::new(engine))
            })
            .clone()
    }

    /// A plug-in component implementing `wit/bridge-core.wit`.
    pub(super) fn plugin(path: &Path) -> Result<Self, EngineError> {
        let bytes = std::fs::read(path).map_err(|e| {
            EngineError::Trap(format!("cannot read core plug-in {}: {e}", path.display()))
        })?;
        Self::load(&bytes, &path.display().to_string(), true)
    }

    fn load(wasm: &[u8], label: &str, plugin: bool) -> Result<Self, EngineError> {
        let engine = shared_engine(plugin)?;
        let component = load_component(engine, wasm, cache_dir().as_deref())
            .map_err(|e| EngineError::Trap(format!("cannot compile {label}: {e:#}")))?;
        let mut linker = Linker::<StoreState>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| guest_io::link_non_blocking(&mut linker))
            .and_then(|()| linker.instantiate_pre(&component))
            .and_then(BridgeCorePre::new)
            .map(|pre| Self {
                pre,
                pool: Arc::new(Pool::new(if plugin { PLUGIN_POOL } else { EMBEDDED_POOL })),
                plugin,
                label: label.to_owned(),
            })
            .map_err(|e| {
                EngineError::Trap(format!(
                    "{label} does not implement the bridge-core world: {e:#}"
                ))
            })
    }

    /// A fresh store and instance. Stdout and stderr go to a [`GuestOutput`] (never blocks),
    /// stdin is closed, no files, no network, no environment: the core is pure, and a plug-in
    /// gets nothing more.
    fn instantiate(&self) -> Result<Instance, EngineError> {
        let output = if self.plugin {
            GuestOutput::logged(&self.label)
        } else {
            GuestOutput::captured()
        };
        let mut wasi = WasiCtx::builder();
        wasi.stdout(output.clone()).stderr(output.clone());
        let state = StoreState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            output,
            deadline: self.plugin,
        };
        let mut store = Store::new(self.pre.engine(), state);
        if self.plugin {
            store.epoch_deadline_trap();
        }
        match self.pre.instantiate(arm(&mut store)) {
            Ok(bindings) => Ok(Instance { store, bindings }),
            Err(e) if format!("{e:#}").contains("maximum concurrent") => {
                Err(EngineError::Busy(format!(
                    "all {MAX_INSTANCES} translation engine instances are in use; retry shortly"
                )))
            }
            Err(e) => Err(EngineError::Trap(format!(
                "cannot instantiate {}: {e:#}",
                self.label
            ))),
        }
    }
}

/// The process-wide wasmtime engine for plug-ins (`plugin`) or for the embedded core, each
/// with its pool of instance slots.
///
/// Only the plug-ins' engine interrupts a call that runs past [`CALL_DEADLINE_TICKS`].
/// Wasmtime does that by epochs: it compiles a check of the epoch into every function entry
/// and loop of the guest, and those checks cost the embedded core 15-20% of its time
/// (docs/benchmarks.md, "No deadline for the embedded core"). The embedded core is this
/// build's own core, the code the native engine runs with no deadline at all; a plug-in is
/// anybody's code.
fn shared_engine(plugin: bool) -> Result<&'static wasmtime::Engine, EngineError> {
    static EMBEDDED: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    static PLUGINS: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    let engine = if plugin { &PLUGINS } else { &EMBEDDED };
    engine
        .get_or_init(|| {
            let mut config = base_config(plugin);
            let mut pool = PoolingAllocationConfig::new();
            pool.total_component_instances(MAX_INSTANCES)
                .total_core_instances(MAX_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
                .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
                .total_memories(MAX_INSTANCES * MEMORIES_PER_COMPONENT)
                .total_tables(MAX_INSTANCES * TABLES_PER_COMPONENT)
                .max_memory_size(MAX_MEMORY_BYTES)
                // Reset a freed slot's tables with a memset instead of madvise: measured here,
                // this halves instantiation (12 µs -> 6 µs). (Keeping linear memory resident
                // does not pay: the core's 1 MiB stack sits at the bottom of its memory.)
                .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES);
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
            let engine = wasmtime::Engine::new(&config).or_else(|pooled| {
                // The pool reserves address space up front; where that is not allowed
                // (a tight `ulimit -v`), allocate each instance on demand instead.
                wasmtime::Engine::new(&base_config(plugin)).map_err(|e| {
                    format!("cannot create the wasmtime engine: {e:#} (with the pooling allocator: {pooled:#})")
                })
            })?;
            if plugin {
                epoch_clock::start(&engine)?;
            }
            Ok(engine)
        })
        .as_ref()
        .map_err(|e| EngineError::Trap(e.clone()))
}

/// The thread that drops `pool`'s instances idle for [`IDLE_INSTANCE_TTL`]; it ends with the
/// pool. Without it (it could not start) instances are kept as before, so it only logs.
fn start_trimming(pool: &Arc<Pool<Instance>>) {
    let pool = Arc::downgrade(pool);
    let started = std::thread::Builder::new()
        .name("wasm-pool-trim".into())
        .spawn(move || {
            loop {
                std::thread::sleep(TRIM_EVERY);
                let Some(pool) = pool.upgrade() else { return };
                let dropped = pool.trim(Instant::now(), IDLE_INSTANCE_TTL);
                if dropped > 0 {
                    tracing::debug!(dropped, "dropped idle core instances");
                }
            }
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "cannot start the thread that drops idle core instances");
    }
}

/// `store` for the call about to be made: for a plug-in with a fresh deadline and the epoch
/// clock running until the call returns (the [`Armed`] is passed by value to it and dropped at
/// its end), and the guest's kept output cleared (a trap report then shows only this call's,
/// never another stream's).
fn arm(store: &mut Store<StoreState>) -> Armed<'_> {
    let call = store.data().deadline.then(|| {
        store.set_epoch_deadline(CALL_DEADLINE_TICKS);
        epoch_clock::Call::begin()
    });
    store.data().output.clear();
    Armed { store, _call: call }
}

/// A store with one guest call in flight on it (see [`arm`]).
struct Armed<'a> {
    store: &'a mut Store<StoreState>,
    _call: Option<epoch_clock::Call>,
}

impl AsContext for Armed<'_> {
    type Data = StoreState;

    fn as_context(&self) -> wasmtime::StoreContext<'_, StoreState> {
        self.store.as_context()
    }
}

impl AsContextMut for Armed<'_> {
    fn as_context_mut(&mut self) -> wasmtime::StoreContextMut<'_, StoreState> {
        self.store.as_context_mut()
    }
}

/// The engine's configuration; `deadline`: compile the epoch checks a deadline needs.
fn base_config(deadline: bool) -> Config {
    let mut config = Config::new();
    config
        .epoch_interruption(deadline)
        .strategy(Strategy::Cranelift)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    if crate::environment::non_empty("CLAUDE_BRIDGE_WASM_PERFMAP").is_some_and(|v| v != "0") {
        // For `perf`: guest functions by name in /tmp/perf-<pid>.map (names need a component
        // built with its name section, see the README's profiling notes).
        config.profiler(ProfilingStrategy::PerfMap);
    }
    config
}

/// Cache entries not used for this long are removed when a new one is written.
const CACHE_MAX_IDLE: Duration = Duration::from_secs(14 * 24 * 3600);

/// The compiled component: from the disk cache when it holds this exact component compiled by
/// this wasmtime with this configuration, else compiled now and written there.
fn load_component(
    engine: &wasmtime::Engine,
    wasm: &[u8],
    cache_dir: Option<&Path>,
) -> wasmtime::Result<Component> {
    let Some(dir) = cache_dir else {
        return Component::new(engine, wasm);
    };
    let path = dir.join(cache_file_name(engine, wasm));
    if path.is_file() {
        match deserialize_cached(engine, &path) {
            Ok(component) => {
                mark_used(&path);
                return Ok(component);
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "ignoring unusable compiled-core cache entry");
            }
        }
    }
    let component = Component::new(engine, wasm)?;
    match component.serialize() {
        Ok(compiled) => match write_cache(&path, &compiled) {
            Ok(()) => prune_cache(dir, &path),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "cannot cache the compiled core");
            }
        },
        Err(e) => tracing::debug!(error = %e, "cannot serialize the compiled core"),
    }
    Ok(component)
}

#[expect(
    unsafe_code,
    reason = "wasmtime requires unsafe to load precompiled code; see the SAFETY comment"
)]
fn deserialize_cached(engine: &wasmtime::Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: `deserialize_file` trusts the file to be code produced by this wasmtime and
    // maps it executable. The file is one we wrote ourselves (`write_cache`: a temporary file
    // renamed into place, so it is never seen half-written, and never modified in place
    // afterwards) under a name derived from a hash of the component bytes and of wasmtime's
    // own version-and-configuration hash. wasmtime also checks the version and configuration
    // recorded in the file and refuses a mismatch (or a damaged header), and then we recompile.
    unsafe { Component::deserialize_file(engine, path) }
}

fn cache_dir() -> Option<PathBuf> {
    let from_env = |name: &str| crate::environment::non_empty(name).map(PathBuf::from);
    if let Some(dir) = from_env("CLAUDE_BRIDGE_CACHE_DIR") {
        return Some(dir);
    }
    from_env("XDG_CACHE_HOME")
        .or_else(|| from_env("HOME").map(|home| home.join(".cache")))
        .map(|dir| dir.join("claude-bridge"))
}

fn cache_file_name(engine: &wasmtime::Engine, wasm: &[u8]) -> String {
    // Two independent 64-bit hashes of the bytes: the name must not collide by accident.
    let mut a = DefaultHasher::new();
    wasm.hash(&mut a);
    engine.precompile_compatibility_hash().hash(&mut a);
    let mut b = DefaultHasher::new();
    (wasm.len(), "claude-bridge compiled core").hash(&mut b);
    wasm.hash(&mut b);
    format!(
        "core-{}-{:016x}{:016x}.cwasm",
        env!("CARGO_PKG_VERSION"),
        a.finish(),
        b.finish()
    )
}

fn write_cache(path: &Path, compiled: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("cwasm.tmp{}", std::process::id()));
    std::fs::write(&tmp, compiled)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn idle_for(path: &Path) -> Option<Duration> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    SystemTime::now().duration_since(modified).ok()
}

/// Records that an entry is in use (at most once a day), so pruning spares it.
fn mark_used(path: &Path) {
    if idle_for(path).is_some_and(|idle| idle > Duration::from_secs(24 * 3600)) {
        let touched = std::fs::File::options()
            .append(true)
            .open(path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        if let Err(e) = touched {
            tracing::debug!(path = %path.display(), error = %e, "cannot mark a cache entry as used");
        }
    }
}

/// Removes compiled cores (and leftover temporary files) nobody used for a while: each build
/// of the core or plug-in adds an entry.
fn prune_cache(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ours = name.starts_with("core-") && name.contains(".cwasm");
        if ours && path != keep && idle_for(&path).is_some_and(|idle| idle > CACHE_MAX_IDLE) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The guest's stdout and stderr.
    output: GuestOutput,
    /// Whether its calls run against [`CALL_DEADLINE_TICKS`] (a plug-in's, see
    /// [`shared_engine`]).
    deadline: bool,
}

impl HasTable for StoreState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// One store with its instance of the component.
struct Instance {
    store: Store<StoreState>,
    bindings: BridgeCore,
}

impl Instance {
    /// A trap (or host error) from a call, with the end of what the guest wrote to stderr (a
    /// panic message) attached. The wasm backtrace goes to the log, not into the message a
    /// client may see.
    fn trap(&self, what: &str, error: &wasmtime::Error) -> EngineError {
        tracing::debug!(error = format!("{error:?}"), "{what} trapped");
        let reason = match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::CannotEnterComponent) => String::from(
                "the engine instance was stopped by an earlier failure on it (another request's)",
            ),
            Some(wasmtime::Trap::Interrupt) => format!(
                "the core did not return within {} s and was stopped (a looping plug-in?)",
                CALL_DEADLINE_TICKS * EPOCH_TICK.as_millis() as u64 / 1000
            ),
            Some(trap) => format!("wasm trap: {trap}"),
            None => format!("{error:#}"),
        };
        let stderr = self.store.data().output.tail();
        let cut = stderr.len().saturating_sub(TRAP_REPORT_STDERR);
        let cut = (cut..=stderr.len())
            .find(|&i| stderr.is_char_boundary(i))
            .unwrap_or(0);
        let stderr = stderr[cut..].trim();
        if stderr.is_empty() {
            EngineError::Trap(format!("{what}: {reason}"))
        } else {
            EngineError::Trap(format!("{what}: {reason}: {stderr}"))
        }
    }
}

fn core_error(error: wit::CoreError) -> EngineError {
    EngineError::Request {
        kind: ErrorKind::from_type_str(&error.kind),
        message: error.message,
    }
}

fn converted(c: wit::Converted) -> ConvertedRequest {
    ConvertedRequest {
        body: c.body,
        upstream_model: c.upstream_model,
        client_model: c.client_model,
        client_stream: c.client_stream,
        input_tokens_estimate: c.input_tokens_estimate,
        warnings: c.warnings,
        // A plug-in that sends none (or no JSON) renames nothing.
        tool_names: serde_json::from_str(&c.tool_names).unwrap_or_default(),
    }
}

impl Engine for WasmEngine {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn prepare(
        &self,
        dialect: Dialect,
        request: &[u8],
        options_json: &str,
    ) -> Result<ConvertedRequest, EngineError> {
        self.call("prepare", request.len(), |i| {
            i.bindings.fabstir_bridge_core_translate().call_prepare(
                arm(&mut i.store),
                dialect.as_str(),
                request,
                options_json,
            )
        })
        .map(converted)
    }

    fn count_tokens(&self, request: &[u8]) -> Result<u32, EngineError> {
        self.call("count-tokens", request.len(), |i| {
            i.bindings
                .fabstir_bridge_core_translate()
                .call_count_tokens(arm(&mut i.store), request)
        })
    }

    fn fabstir_session_init(&self, init_json: &str) -> Result<String, EngineError> {
        self.call("fabstir-session-init", init_json.len(), |i| {
            i.bindings
                .fabstir_bridge_core_translate()
                .call_fabstir_session_init(arm(&mut i.store), init_json)
        })
    }

    fn translator(&self, options: &StreamOptions) -> Result<Box<dyn StreamSession>, EngineError> {
        let options = encode_options(options)?;
        // An instance that another call retired (it trapped) while this one waited for its
        // lock takes no new stream: try again, on another instance.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let lease = Lease::new(&self.pool, self.pool.for_stream(|| self.instantiate())?);
            let mut guard = lease.pooled.lock();
            if !lease.pooled.is_open() && attempts < 2 {
                continue;
            }
            let instance = &mut *guard;
            let result = instance
                .bindings
                .fabstir_bridge_core_translate()
                .translator()
                .call_create(arm(&mut instance.store), &options);
            let stream = match result {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return Err(core_error(e)),
                Err(e) => {
                    lease.pooled.retire();
                    return Err(instance.trap("translator.create", &e));
                }
            };
            drop(guard);
            return Ok(Box::new(WasmSession {
                pool: Arc::clone(&self.pool),
                pooled: lease.keep(),
                stream: Some(stream),
            }));
        }
    }
}

/// An instance taken from the pool, given back when dropped (unless kept by a session).
struct Lease<'a> {
    pool: &'a Pool<Instance>,
    pooled: Arc<Pooled<Instance>>,
    kept: bool,
}

impl<'a> Lease<'a> {
    fn new(pool: &'a Pool<Instance>, pooled: Arc<Pooled<Instance>>) -> Self {
        Self {
            pool,
            pooled,
            kept: false,
        }
    }

    /// The session keeps the instance (it gives it back when it ends).
    fn keep(mut self) -> Arc<Pooled<Instance>> {
        self.kept = true;
        Arc::clone(&self.pooled)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.pool.release(&self.pooled, Instant::now());
        }
    }
}

impl WasmEngine {
    /// One stateless call (`input_len` bytes of input) on an idle instance.
    fn call<T>(
        &self,
        what: &str,
        input_len: usize,
        call: impl FnOnce(&mut Instance) -> wasmtime::Result<Result<T, wit::CoreError>>,
    ) -> Result<T, EngineError> {
        super::off_the_runtime(input_len, || self.call_here(what, input_len, call))
    }

    fn call_here<T>(
        &self,
        what: &str,
        input_len: usize,
        call: impl FnOnce(&mut Instance) -> wasmtime::Result<Result<T, wit::CoreError>>,
    ) -> Result<T, EngineError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let lease = Lease::new(
                &self.pool,
                self.pool.for_call(input_len, || self.instantiate())?,
            );
            lease.pooled.took(input_len, self.pool.limits());
            let mut instance = lease.pooled.lock();
            if !lease.pooled.is_open()
                && attempts < 2
                && input_len <= self.pool.limits().private_above_bytes
            {
                continue;
            }
            return match call(&mut instance) {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(e)) => Err(core_error(e)),
                Err(e) => {
                    lease.pooled.retire();
                    Err(instance.trap(what, &e))
                }
            };
        }
    }
}

/// A translator: a resource of a (shared) instance. Dropping it drops the resource in the
/// guest and gives the instance back to the pool.
struct WasmSession {
    pool: Arc<Pool<Instance>>,
    pooled: Arc<Pooled<Instance>>,
    /// `None` once dropped in the guest.
    stream: Option<ResourceAny>,
}

impl WasmSession {
    fn with<T>(
        &mut self,
        what: &str,
        input_len: usize,
        call: impl FnOnce(&mut Instance, ResourceAny) -> wasmtime::Result<T>,
    ) -> Result<T, EngineError> {
        let Some(stream) = self.stream else {
            return Err(EngineError::Trap(format!("{what}: the translator is gone")));
        };
        self.pooled.took(input_len, self.pool.limits());
        let mut instance = self.pooled.lock();
        call(&mut instance, stream).map_err(|e| {
            self.pooled.retire();
            instance.trap(what, &e)
        })
    }
}

impl StreamSession for WasmSession {
    fn feed(&mut self, chunk: &[u8]) -> Result<String, EngineError> {
        self.with("translator.feed", chunk.len(), |i, stream| {
            i.bindings
                .fabstir_bridge_core_translate()
                .translator()
                .call_feed(arm(&mut i.store), stream, chunk)
        })
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> Result<String, EngineError> {
        self.with("translator.fail", message.len(), |i, stream| {
            i.bindings
                .fabstir_bridge_core_translate()
                .translator()
                .call_fail(arm(&mut i.store), stream, kind.as_str(), message)
        })
    }

    fn finish(&mut self, end: &StreamEnd) -> Result<Finished, EngineError> {
        let end = encode_options(end)?;
        let finished = self.with("translator.finish", end.len(), |i, stream| {
            i.bindings
                .fabstir_bridge_core_translate()
                .translator()
                .call_finish(arm(&mut i.store), stream, &end)
        })?;
        finished
            .map(|f| Finished {
                status: f.status,
                body: f.body,
            })
            .map_err(core_error)
    }
}

impl Drop for WasmSession {
    fn drop(&mut self) {
        if let Some(stream) = self.stream.take() {
            let mut instance = self.pooled.lock();
            // The guest frees the translator's state; an instance that cannot is retired.
            if let Err(e) = stream.resource_drop(arm(&mut instance.store)) {
                tracing::debug!(error = %e, "cannot drop a translator in the guest");
                self.pooled.retire();
            }
        }
        self.pool.release(&self.pooled, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::super::ConvertOptions;
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(what: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dir = std::env::temp_dir().join(format!(
                "claude-bridge-{what}-{}-{nanos}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    const REQUEST: &[u8] =
        br#"{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;

    /// Polls `what` every 10 ms until it holds, for at most `limit`.
    fn eventually(limit: Duration, what: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        what()
    }

    /// The embedded core as a plug-in would be loaded: its calls run against the deadline.
    fn core_as_plugin() -> WasmEngine {
        WasmEngine::load(EMBEDDED_COMPONENT, "the core as a plug-in", true).unwrap()
    }

    #[test]
    fn only_a_plugins_calls_are_interrupted_at_their_deadline() {
        // A deadline of no ticks: the first epoch check a call meets interrupts it.
        let count_with_no_time = |wasm: &WasmEngine| {
            let mut instance = wasm.instantiate().unwrap();
            let armed = arm(&mut instance.store);
            armed.store.set_epoch_deadline(0);
            instance
                .bindings
                .fabstir_bridge_core_translate()
                .call_count_tokens(armed, REQUEST)
        };
        let plugin = count_with_no_time(&core_as_plugin()).unwrap_err();
        assert_eq!(
            plugin.downcast_ref::<wasmtime::Trap>(),
            Some(&wasmtime::Trap::Interrupt),
            "{plugin:?}"
        );
        // The embedded core's engine compiles no epoch checks, so nothing interrupts it.
        let embedded = count_with_no_time(&WasmEngine::embedded().unwrap()).unwrap();
        assert!(embedded.is_ok(), "{embedded:?}");
    }

    #[test]
    fn the_epoch_clock_parks_when_no_call_is_in_flight_and_a_call_wakes_it() {
        let wasm = core_as_plugin();
        let mut instance = wasm.instantiate().unwrap();
        // Other tests of this process make calls too; each resets the idle count, so wait for
        // a quiet second rather than exactly one.
        assert!(
            eventually(Duration::from_secs(60), epoch_clock::parked),
            "the epoch clock still ticks with no call in flight"
        );
        // A call made now runs (its deadline counts from the frozen epoch).
        let counted = instance
            .bindings
            .fabstir_bridge_core_translate()
            .call_count_tokens(arm(&mut instance.store), REQUEST)
            .unwrap();
        assert!(counted.is_ok());
        // A call still in flight wakes the clock. (One as short as the count above may be over
        // before the clock's thread runs; it then finds no call and waits again, rightly.)
        let in_flight = epoch_clock::Call::begin();
        assert!(
            eventually(Duration::from_secs(10), || !epoch_clock::parked()),
            "a call in flight did not wake the parked epoch clock"
        );
        drop(in_flight);
    }

    #[test]
    fn the_compiled_core_is_cached_and_a_bad_cache_entry_is_replaced() {
        let engine = shared_engine(false).unwrap();
        let dir = TempDir::new("cache-test");

        load_component(engine, EMBEDDED_COMPONENT, Some(&dir.0)).unwrap();
        let names = files(&dir.0);
        assert_eq!(
            names.len(),
            1,
            "one cache entry, no temporary files: {names:?}"
        );
        assert!(names[0].ends_with(".cwasm"), "{names:?}");
        let entry = dir.0.join(&names[0]);
        let compiled = std::fs::read(&entry).unwrap();

        // Loaded from the cache: the file is used as is.
        load_component(engine, EMBEDDED_COMPONENT, Some(&dir.0)).unwrap();
        assert!(deserialize_cached(engine, &entry).is_ok());
        assert_eq!(std::fs::read(&entry).unwrap(), compiled);

        // A damaged entry is not trusted blindly: wasmtime rejects it, we recompile and
        // write a good one. Writing prunes entries unused for weeks, and only those.
        let aged = |name: &str, days: u64| {
            let path = dir.0.join(name);
            std::fs::write(&path, b"old").unwrap();
            let then = SystemTime::now() - Duration::from_secs(days * 24 * 3600);
            std::fs::File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(then)
                .unwrap();
        };
        aged("core-0.0.9-stale.cwasm", 30);
        aged("core-0.0.9-stale.cwasm.tmp123", 30);
        aged("core-0.1.0-recent.cwasm", 2);
        aged("unrelated-file", 30);
        std::fs::write(&entry, b"not a compiled component").unwrap();
        load_component(engine, EMBEDDED_COMPONENT, Some(&dir.0)).unwrap();
        assert_eq!(std::fs::read(&entry).unwrap(), compiled);
        let mut expected = vec![
            names[0].clone(),
            "core-0.1.0-recent.cwasm".into(),
            "unrelated-file".into(),
        ];
        expected.sort();
        assert_eq!(files(&dir.0), expected);

        // No cache directory at all: compiled in memory.
        load_component(engine, EMBEDDED_COMPONENT, None).unwrap();
    }

    #[test]
    fn a_plugin_implementing_the_world_runs_like_the_embedded_core() {
        let dir = TempDir::new("plugin-test");
        let path = dir.0.join("copy-of-the-core.wasm");
        std::fs::write(&path, EMBEDDED_COMPONENT).unwrap();
        let plugin = WasmEngine::plugin(&path).unwrap();
        let embedded = WasmEngine::embedded().unwrap();
        let options = ConvertOptions::default();
        assert_eq!(
            plugin.convert_request(REQUEST, &options).unwrap().body,
            embedded.convert_request(REQUEST, &options).unwrap().body
        );

        std::fs::write(&path, b"\0asm garbage").unwrap();
        match WasmEngine::plugin(&path) {
            Err(EngineError::Trap(message)) => {
                assert!(message.contains("cannot compile"), "{message}");
            }
            other => panic!("garbage loaded as a plug-in: {other:?}"),
        }
    }

    #[test]
    fn a_session_survives_many_calls_and_errors_cross_typed() {
        let engine = WasmEngine::embedded().unwrap();
        let mut session = engine
            .translator(&StreamOptions {
                stream: true,
                model: "claude-x".into(),
                input_tokens_estimate: 3,
                id_seed: 1,
                ..StreamOptions::default()
            })
            .unwrap();
        let chunk = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n";
        let mut out = String::new();
        for _ in 0..1000 {
            out.push_str(&session.feed(chunk).unwrap());
        }
        out.push_str(&session.fail(ErrorKind::Overloaded, "gone").unwrap());
        out.push_str(&session.finish(&StreamEnd::default()).unwrap().body);
        assert!(out.starts_with("event: message_start\n"), "{out}");
        assert!(out.contains("overloaded_error"), "{out}");

        match engine.convert_request(b"{", &ConvertOptions::default()) {
            Err(EngineError::Request { kind, .. }) => assert_eq!(kind, ErrorKind::InvalidRequest),
            other => panic!("expected a request error, got {other:?}"),
        }
    }

    /// Streaming options whose model name and ids derive from `seed`.
    fn seeded_stream_options(seed: u64) -> StreamOptions {
        StreamOptions {
            stream: true,
            model: format!("claude-{seed}"),
            input_tokens_estimate: 3,
            id_seed: seed,
            ..StreamOptions::default()
        }
    }

    #[test]
    fn streams_sharing_instances_keep_their_own_state() {
        // An engine of its own: the process-wide one is used by the other tests meanwhile.
        let wasm = WasmEngine::load(EMBEDDED_COMPONENT, "shared-instances test", false).unwrap();
        let native = super::super::native();
        let options = seeded_stream_options;
        // 40 streams at once: three instances of 16; fed in turns, each stream's bytes are
        // the native core's for the same stream.
        let mut streams: Vec<_> = (0..40u64)
            .map(|seed| {
                let o = options(seed);
                (
                    wasm.translator(&o).unwrap(),
                    native.translator(&o).unwrap(),
                    seed,
                )
            })
            .collect();
        assert_eq!((wasm.pool.len(), wasm.pool.made()), (3, 3));
        for round in 0..5 {
            for (w, n, seed) in &mut streams {
                let chunk = format!(
                    "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"s{seed}r{round} \"}}}}]}}\n\n"
                );
                assert_eq!(
                    w.feed(chunk.as_bytes()).unwrap(),
                    n.feed(chunk.as_bytes()).unwrap()
                );
            }
        }
        for (w, n, _) in &mut streams {
            let end = StreamEnd::default();
            assert_eq!(w.finish(&end).unwrap().body, n.finish(&end).unwrap().body);
        }
        drop(streams);
        assert_eq!(wasm.pool.len(), 2, "two idle instances are kept");
        // The next request's calls and stream reuse them: no instantiation.
        wasm.count_tokens(REQUEST).unwrap();
        wasm.convert_request(REQUEST, &ConvertOptions::default())
            .unwrap();
        drop(wasm.translator(&options(99)).unwrap());
        assert_eq!(wasm.pool.made(), 3);
        // A large input gets an instance of its own, not kept.
        let big = format!(
            r#"{{"model":"claude-x","max_tokens":64,"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(EMBEDDED_POOL.private_above_bytes + 1)
        );
        wasm.count_tokens(big.as_bytes()).unwrap();
        assert_eq!((wasm.pool.made(), wasm.pool.len()), (4, 2));
        // Left alone, the kept instances go; the next request gets a new one, same answers.
        let later = Instant::now() + IDLE_INSTANCE_TTL;
        assert_eq!(wasm.pool.trim(later, IDLE_INSTANCE_TTL), 2);
        assert_eq!(wasm.pool.len(), 0);
        let options = ConvertOptions::default();
        assert_eq!(
            wasm.convert_request(REQUEST, &options).unwrap(),
            native.convert_request(REQUEST, &options).unwrap()
        );
        assert_eq!((wasm.pool.made(), wasm.pool.len()), (5, 1));
    }

    /// A Claude Code–like conversation of `turns` turns: text with escapes, tool calls and
    /// results, and tools with schemas.
    fn conversation(turns: usize) -> Vec<u8> {
        let mut messages = Vec::new();
        for turn in 0..turns {
            messages.push(serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": format!("turn {turn}: \"fix\" it\n\tplease \u{1} é 🦀")},
            ]}));
            messages.push(serde_json::json!({"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": format!("toolu_{turn}"), "name": "Read",
                 "input": {"file_path": format!("/src/{turn}.rs"), "limit": turn}},
            ]}));
            messages.push(serde_json::json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{turn}"),
                 "content": "fn main() {\n    println!(\"hi\");\n}\n".repeat(40)},
            ]}));
        }
        messages.push(serde_json::json!({"role": "user", "content": "go on"}));
        let tools: Vec<_> = (0..20)
            .map(|i| serde_json::json!({"name": format!("Tool{i}"), "description": "does a thing",
                "input_schema": {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#",
                    "properties": {"path": {"type": "string", "format": "uri"}}, "required": ["path"]}}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "model": "claude-x", "max_tokens": 64, "stream": true,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": messages, "tools": tools,
        }))
        .unwrap()
    }

    #[test]
    fn calls_between_a_streams_feeds_convert_as_native_and_leave_the_stream_alone() {
        // The guest's `prepare` and `count-tokens` allocate in a region each call reuses
        // (core/component/src/arena.rs). Streams made and fed between those calls, in the same
        // instance (driven directly here: the pool sends calls to idle instances), keep their
        // state, and every answer is the native core's.
        let wasm = WasmEngine::load(EMBEDDED_COMPONENT, "call-arena test", false).unwrap();
        let native = super::super::native();
        let mut instance = wasm.instantiate().unwrap();
        let api = instance.bindings.fabstir_bridge_core_translate();
        let store = &mut instance.store;
        let options = seeded_stream_options;
        let create = |store: &mut Store<StoreState>, seed: u64| {
            let json = encode_options(&options(seed)).unwrap();
            let guest = api
                .translator()
                .call_create(arm(store), &json)
                .unwrap()
                .unwrap();
            (guest, native.translator(&options(seed)).unwrap())
        };
        let mut streams = vec![create(store, 1)];
        // 900 turns (about 2 MB) allocate more than the region holds: the call goes on in the
        // system allocator, and the next calls reuse the region again.
        for (turn, turns) in [1, 60, 2, 900, 120, 0, 30].into_iter().enumerate() {
            let request = conversation(turns);
            let guest = api
                .call_prepare(arm(store), "openai_chat", &request, "{}")
                .unwrap()
                .unwrap();
            let host = native.prepare(Dialect::OpenaiChat, &request, "{}").unwrap();
            assert_eq!(converted(guest), host, "{turns} turns");
            assert_eq!(
                api.call_count_tokens(arm(store), &request)
                    .unwrap()
                    .unwrap(),
                native.count_tokens(&request).unwrap()
            );
            let refused = api
                .call_prepare(
                    arm(store),
                    "openai_chat",
                    br#"{"model":"x","messages":7}"#,
                    "{}",
                )
                .unwrap();
            assert!(refused.is_err(), "{refused:?}");
            if turn == 2 {
                streams.push(create(store, 2));
            }
            for (guest, host) in &mut streams {
                let chunk = format!(
                    "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"after {turns} turns \"}}}}]}}\n\n"
                );
                let fed = api
                    .translator()
                    .call_feed(arm(store), *guest, chunk.as_bytes());
                assert_eq!(fed.unwrap(), host.feed(chunk.as_bytes()).unwrap());
            }
        }
        for (guest, host) in &mut streams {
            let finished = api.translator().call_finish(arm(store), *guest, "{}");
            let end = host.finish(&StreamEnd::default()).unwrap();
            assert_eq!(finished.unwrap().unwrap().body, end.body);
        }
    }

    fn per_op(start: Instant, n: u32) -> Duration {
        start.elapsed() / n
    }

    /// Timings of the wasm engine next to the native core (`cargo test --release -p
    /// claude-bridge --lib -- --ignored --nocapture measure`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn measure() {
        let start = Instant::now();
        let engine = shared_engine(false).unwrap();
        eprintln!("engine (pooling allocator): {:?}", start.elapsed());

        let start = Instant::now();
        let compiled = engine.precompile_component(EMBEDDED_COMPONENT).unwrap();
        eprintln!(
            "compile the core ({} KB wasm -> {} KB code): {:?}",
            EMBEDDED_COMPONENT.len() / 1024,
            compiled.len() / 1024,
            start.elapsed()
        );
        let dir = TempDir::new("measure");
        load_component(engine, EMBEDDED_COMPONENT, Some(&dir.0)).unwrap();
        let entry = dir.0.join(&files(&dir.0)[0]);
        let start = Instant::now();
        for _ in 0..20 {
            deserialize_cached(engine, &entry).unwrap();
        }
        eprintln!(
            "load from the cache (deserialize_file): {:?}",
            per_op(start, 20)
        );

        let wasm = WasmEngine::embedded().unwrap();
        let n = 2000;
        let start = Instant::now();
        for _ in 0..n {
            drop(wasm.instantiate().unwrap());
        }
        eprintln!("store + instantiate + drop: {:?}", per_op(start, n));

        let mut instance = wasm.instantiate().unwrap();
        let start = Instant::now();
        for _ in 0..n {
            let r = instance
                .bindings
                .fabstir_bridge_core_translate()
                .call_count_tokens(arm(&mut instance.store), REQUEST)
                .unwrap();
            assert!(r.is_ok());
        }
        eprintln!(
            "count-tokens call on a live instance: {:?}",
            per_op(start, n)
        );

        let big = {
            let text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(180);
            serde_json::to_vec(&serde_json::json!({
                "model": "claude-x", "max_tokens": 1024,
                "system": "You are terse.",
                "messages": [{"role": "user", "content": text}],
            }))
            .unwrap()
        };
        let options = ConvertOptions::default();
        let options_json = serde_json::to_string(&options).unwrap();
        let start = Instant::now();
        for _ in 0..n {
            let r = instance
                .bindings
                .fabstir_bridge_core_translate()
                .call_prepare(
                    arm(&mut instance.store),
                    Dialect::OpenaiChat.as_str(),
                    &big,
                    &options_json,
                )
                .unwrap();
            assert!(r.is_ok());
        }
        eprintln!(
            "prepare (openai_chat) {} KB on a live instance: {:?}",
            big.len() / 1024,
            per_op(start, n)
        );
        let native = super::super::native();
        for (label, engine) in [
            ("native", native.as_ref()),
            ("wasm", wasm.as_ref() as &dyn Engine),
        ] {
            let start = Instant::now();
            for _ in 0..n {
                engine.convert_request(&big, &options).unwrap();
            }
            eprintln!(
                "convert_request {} KB ({label}, incl. a fresh store for wasm): {:?}",
                big.len() / 1024,
                per_op(start, n)
            );
        }

        let chunk =
            b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello world\"}}]}\n\n";
        for (label, engine) in [
            ("native", native.as_ref()),
            ("wasm", wasm.as_ref() as &dyn Engine),
        ] {
            let options = StreamOptions {
                stream: true,
                model: "claude-x".into(),
                input_tokens_estimate: 3,
                id_seed: 1,
                ..StreamOptions::default()
            };
            let start = Instant::now();
            let mut session = engine.translator(&options).unwrap();
            let opened = start.elapsed();
            let start = Instant::now();
            for _ in 0..n {
                session.feed(chunk).unwrap();
            }
            eprintln!(
                "chat stream ({label}): open {opened:?}, feed one chunk {:?}",
                per_op(start, n)
            );
        }
    }
}
