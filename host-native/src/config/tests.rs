//! Config files as a user writes them: the design's example, and each mistake with the line,
//! the key and what is allowed in its message.

use std::path::{Path, PathBuf};

use bridge_core::route::{Features, route};
use secrecy::ExposeSecret;

use super::*;

/// DESIGN §5's example, comments included.
const DESIGN_EXAMPLE: &str = r#"listen = "127.0.0.1:3456"             # optional; --listen wins
client_key = "env:BRIDGE_CLIENT_KEY"  # optional; a literal or "env:NAME" (every secret field accepts both)

[providers.local]                     # one table per provider; the key is its name
kind = "openai"                       # openai | responses | anthropic | fabstir
base_url = "http://127.0.0.1:11434/v1"
api_key = "env:OLLAMA_API_KEY"        # optional (anthropic without it forwards the client's credentials)
models = ["qwen3-coder"]              # listed by GET /v1/models
# other per-provider keys are the serve flags' names with '_' for '-' (max_tokens_cap,
# strict_schemas, reasoning_effort, ca_cert, headers = { … }, and the fabstir flags)

[providers.openai]
kind = "responses"
base_url = "https://api.openai.com/v1"
api_key = "env:OPENAI_API_KEY"

[router]
default = "local,qwen3-coder"         # "provider,model" (the model may hold '/' or ':'); "provider" alone
                                      # forwards the client's model name
background = "local,qwen3-coder"      # the client's model name contains "haiku"
think = "openai,o4-mini"              # thinking.type "enabled", or output_config.effort "high"/"max"
long_context = "openai,gpt-4.1"       # estimated input tokens > long_context_threshold
long_context_threshold = 60000
fallback = ["openai,gpt-4.1-mini"]    # tried in order when a target fails before the client got a byte

[[router.rules]]                      # checked first, in order; the first match wins
model = "claude-opus-*"               # glob on the client's model name
to = "openai,gpt-5"
"#;

fn env() -> Env {
    Env::fixed("/home/u/project")
        .with_var("BRIDGE_CLIENT_KEY", "client-secret")
        .with_var("OLLAMA_API_KEY", "ollama-secret")
        .with_var("OPENAI_API_KEY", "sk-openai-secret")
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("claude-bridge.toml"), &env())
}

fn err(text: &str) -> ConfigError {
    match parse(text) {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(e) => e,
    }
}

/// Line, column and key of an error, and its text.
fn place(e: &ConfigError) -> (usize, usize, Option<&str>) {
    let p = e.position.unwrap_or(Position { line: 0, column: 0 });
    (p.line, p.column, e.key.as_deref())
}

const LOCAL: &str =
    "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n";

#[test]
fn the_design_example_loads_as_written() {
    let config = parse(DESIGN_EXAMPLE).unwrap();
    assert_eq!(config.listen, Some("127.0.0.1:3456".parse().unwrap()));
    assert_eq!(
        config.client_key.as_ref().unwrap().expose_secret(),
        "client-secret"
    );
    assert_eq!(
        config.providers.keys().collect::<Vec<_>>(),
        ["local", "openai"]
    );
    let local = &config.providers["local"];
    assert_eq!(local.models, ["qwen3-coder"]);
    let ProviderKind::Openai { upstream, options } = &local.kind else {
        panic!("{:?}", local.kind);
    };
    assert_eq!(upstream.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(
        upstream.api_key.as_ref().unwrap().expose_secret(),
        "ollama-secret"
    );
    assert_eq!(*options, ChatSettings::default());
    let ProviderKind::Responses { upstream, .. } = &config.providers["openai"].kind else {
        panic!("not responses");
    };
    assert_eq!(
        upstream.api_key.as_ref().unwrap().expose_secret(),
        "sk-openai-secret"
    );

    let r = &config.router;
    assert_eq!(r.default.to_string(), "local,qwen3-coder");
    assert_eq!(
        r.think.as_ref().map(ToString::to_string).as_deref(),
        Some("openai,o4-mini")
    );
    assert_eq!(r.long_context_threshold, 60000);
    assert_eq!(r.rules.len(), 1);
    let opus = route(
        r,
        &Features {
            model: "claude-opus-4-1".into(),
            input_tokens: 10,
            ..Features::default()
        },
    );
    assert_eq!(opus.primary.to_string(), "openai,gpt-5");
    assert_eq!(opus.fallbacks[0].to_string(), "openai,gpt-4.1-mini");
}

#[test]
fn secrets_are_never_printed() {
    let shown = format!("{:?}", parse(DESIGN_EXAMPLE).unwrap());
    for secret in ["client-secret", "ollama-secret", "sk-openai-secret"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("REDACTED"));
}

#[test]
fn a_syntax_error_names_the_line() {
    let e = err("listen = \"127.0.0.1:3456\"\n[providers.local\nkind = \"openai\"\n");
    assert_eq!(
        (e.position.map(|p| p.line), e.key.as_deref()),
        (Some(2), None)
    );
    assert!(e.to_string().starts_with("claude-bridge.toml:2:"), "{e}");
    assert!(e.message.starts_with("not valid TOML"), "{e}");
}

#[test]
fn an_unknown_kind_names_the_kinds_there_are() {
    let e = err("\n\n[providers.local]\nkind = \"olama\"\n");
    assert_eq!(
        e.to_string(),
        "claude-bridge.toml:4:8: providers.local.kind: unknown kind `olama`; allowed: openai, responses, anthropic, fabstir"
    );
    let e = err("[providers.local]\nbase_url = \"http://x\"\n");
    assert_eq!(place(&e), (1, 1, Some("providers.local")));
    assert!(
        e.message.starts_with("missing `kind`; allowed: openai"),
        "{e}"
    );
    let e = err("[providers.local]\nkind = 3\n");
    assert_eq!(place(&e), (2, 8, Some("providers.local.kind")));
}

#[test]
fn an_unknown_key_is_refused_with_the_kinds_keys() {
    let e = err(&format!("{LOCAL}max_token_cap = 10\n"));
    assert_eq!(place(&e), (4, 1, Some("providers.local.max_token_cap")));
    assert!(
        e.message
            .starts_with("unknown key `max_token_cap`; kind openai allows: kind, models,"),
        "{e}"
    );
    assert!(e.message.contains("max_tokens_cap"), "{e}");

    let e = err(&format!("{LOCAL}host_url = \"http://h\"\n"));
    assert_eq!(place(&e), (4, 1, Some("providers.local.host_url")));
    assert!(
        e.message
            .starts_with("`host_url` is a key of kind fabstir; kind openai allows:"),
        "{e}"
    );

    let e = err(&format!("lisen = \"127.0.0.1:1\"\n{LOCAL}"));
    assert_eq!(place(&e), (1, 1, Some("lisen")));
    assert!(
        e.message.contains("unknown field `lisen`") && e.message.contains("`listen`"),
        "{e}"
    );

    let e = err(&format!(
        "{LOCAL}[router]\ndefault = \"local\"\nthinking = \"local\"\n"
    ));
    assert_eq!(place(&e), (6, 1, Some("router.thinking")));
    assert!(e.message.contains("`think`"), "{e}");
}

#[test]
fn a_value_of_the_wrong_type_names_its_key() {
    let e = err(&format!("{LOCAL}max_tokens_cap = \"big\"\n"));
    assert_eq!(place(&e), (4, 18, Some("providers.local.max_tokens_cap")));
    assert!(e.message.contains("expected u64"), "{e}");
    let e = err("[providers.f]\nkind = \"fabstir\"\npayment = \"btc\"\n");
    assert_eq!(place(&e), (3, 11, Some("providers.f.payment")));
    assert!(
        e.message.contains("`eth`") && e.message.contains("`usdc`"),
        "{e}"
    );
}

#[test]
fn a_router_target_must_name_a_provider() {
    let e = err(&format!(
        "{LOCAL}[router]\ndefault = \"local\"\nfallback = [\"local,a\", \"cloud,gpt-5\"]\n"
    ));
    assert_eq!(
        e.to_string(),
        "claude-bridge.toml:6:24: router.fallback[1]: unknown provider `cloud`; allowed: local"
    );
    let e = err(&format!(
        "{LOCAL}[router]\ndefault = \"local\"\n\n[[router.rules]]\nmodel = \"x\"\nto = \"locl,m\"\n"
    ));
    assert_eq!(place(&e), (9, 6, Some("router.rules[0].to")));
    assert!(e.message.contains("unknown provider `locl`"), "{e}");
}

#[test]
fn an_empty_default_says_what_a_target_is() {
    let e = err(&format!("{LOCAL}[router]\ndefault = \"\"\n"));
    assert_eq!(place(&e), (5, 11, Some("router.default")));
    assert!(
        e.message.contains("\"provider\" or \"provider,model\""),
        "{e}"
    );
    let e = err(&format!("{LOCAL}[router]\ndefault = \"local,\"\n"));
    assert_eq!(place(&e), (5, 11, Some("router.default")));
    let e = err(&format!("{LOCAL}[router]\nthink = \"local\"\n"));
    assert_eq!(place(&e), (4, 1, Some("router")));
    assert!(e.message.contains("missing field `default`"), "{e}");
}

#[test]
fn a_missing_environment_variable_names_it() {
    let e = err(&format!("{LOCAL}api_key = \"env:NOT_SET_ANYWHERE\"\n"));
    assert_eq!(place(&e), (4, 11, Some("providers.local.api_key")));
    assert!(e.message.contains("NOT_SET_ANYWHERE is not set"), "{e}");
    let e = err(&format!("client_key = \"env:NOPE\"\n{LOCAL}"));
    assert_eq!(place(&e), (1, 14, Some("client_key")));
    let e = err(&format!("{LOCAL}headers = {{ x-token = \"env:NOPE\" }}\n"));
    assert_eq!(place(&e), (4, 23, Some("providers.local.headers.x-token")));
}

#[test]
fn without_a_router_one_provider_takes_everything_and_two_need_one() {
    let config = parse(LOCAL).unwrap();
    assert_eq!(config.router.default.to_string(), "local");
    let e = err(&format!(
        "{LOCAL}[providers.other]\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\n"
    ));
    assert_eq!((e.position, e.key.as_deref()), (None, Some("router")));
    assert!(e.message.contains("providers: local, other"), "{e}");
    let e = err("listen = \"127.0.0.1:1\"\n");
    assert_eq!(e.key.as_deref(), Some("providers"));
    assert!(e.message.contains("no provider is configured"), "{e}");
}

#[test]
fn defaults_become_the_request_fields_they_fill() {
    let config = parse(&format!(
        "{LOCAL}[providers.local.defaults]\ntemperature = 0.5\ntop_k = 40\neffort = \"low\"\nthinking_budget = 2048\n"
    ))
    .unwrap();
    assert_eq!(
        serde_json::Value::Object(config.providers["local"].defaults.clone()),
        serde_json::json!({"temperature": 0.5, "top_k": 40, "output_config": {"effort": "low"},
                           "thinking": {"type": "enabled", "budget_tokens": 2048}})
    );
    let e = err(&format!(
        "{LOCAL}[providers.local.defaults]\ntemprature = 0.5\n"
    ));
    assert!(e.message.contains("temprature"), "{e}");
    let e = err(&format!(
        "{LOCAL}[providers.local.defaults]\ntop_p = -1.0\n"
    ));
    assert_eq!(
        e.key.as_deref(),
        Some("providers.local.defaults.top_p"),
        "{e}"
    );
}

#[test]
fn values_are_checked_where_they_stand() {
    let e = err("listen = \"nowhere\"\n");
    assert_eq!(place(&e), (1, 10, Some("listen")));
    let e = err("[providers.local]\nkind = \"openai\"\n");
    assert_eq!(place(&e), (1, 1, Some("providers.local")));
    assert!(e.message.starts_with("missing `base_url`"), "{e}");
    // Anthropic's and OpenAI's own APIs need no base_url.
    let config =
        parse("[router]\ndefault = \"a\"\n[providers.a]\nkind = \"anthropic\"\n[providers.r]\nkind = \"responses\"\n")
            .unwrap();
    let urls: Vec<&str> = config
        .providers
        .values()
        .map(|p| match &p.kind {
            ProviderKind::Anthropic { upstream } | ProviderKind::Responses { upstream, .. } => {
                upstream.base_url.as_str()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        urls,
        ["https://api.anthropic.com", "https://api.openai.com/v1"]
    );
    let e = err("[providers.local]\nkind = \"openai\"\nbase_url = \"localhost:11434\"\n");
    assert_eq!(place(&e), (3, 12, Some("providers.local.base_url")));
    let e = err(&format!("{LOCAL}headers = {{ \"bad header\" = \"v\" }}\n"));
    assert_eq!(
        e.key.as_deref(),
        Some("providers.local.headers.\"bad header\"")
    );
    let e = err(&format!("{LOCAL}reasoning_effort = \"high\"\n"));
    assert!(e.message.contains("kind openai takes true or false"), "{e}");
    let e = err(
        "[providers.o]\nkind = \"responses\"\nbase_url = \"https://x\"\nreasoning_effort = \"hi\"\n",
    );
    assert_eq!(place(&e), (4, 20, Some("providers.o.reasoning_effort")));
    assert!(
        e.message
            .contains("allowed: off, none, minimal, low, medium, high, xhigh"),
        "{e}"
    );
    let e = err(&format!("{LOCAL}models = [\"a\", \" \"]\n"));
    assert_eq!(place(&e), (4, 16, Some("providers.local.models[1]")));
    let e = err("[providers.\"a,b\"]\nkind = \"openai\"\n");
    assert_eq!(place(&e), (1, 12, Some("providers.\"a,b\"")));
}

#[test]
fn every_kind_reads_its_settings() {
    let text = r#"
[providers.chat]
kind = "openai"
base_url = "https://openrouter.example/api/v1"
headers = { HTTP-Referer = "https://me.example", x-key = "env:OPENAI_API_KEY" }
max_tokens_cap = 8192
max_completion_tokens = true
strict_schemas = true
reasoning_effort = true
no_reasoning_passback = true
keep_mid_conversation_system = true
continuous_usage_stats = true
documents = "omit"
web_search = "bridge"
tokenizer = "tok/tokenizer.json"
connect_timeout = 3
first_byte_timeout = 60
idle_timeout = 90
ca_cert = "certs/ca.pem"

[providers.resp]
kind = "responses"
base_url = "https://api.openai.com/v1"
reasoning_effort = "off"

[providers.claude]
kind = "anthropic"
base_url = "https://api.anthropic.com"

[providers.fab]
kind = "fabstir"
models = ["org/repo:model.gguf"]
host_url = "http://127.0.0.1:8080"
host_pubkey = "02ab"
job_id = 42
chain_id = 84532
price_per_token = 2000
private_key_file = "wallet.key"
payment = "usdc"
deposit = "1.5"
max_spend = "10"
selection = "cheapest"
ledger = "/var/lib/ledger.json"
confirmations = 2
tool_format = "glm"

[router]
default = "chat,qwen/qwen3-coder:free"
"#;
    let config = Config::parse(text, Path::new("conf/bridge.toml"), &env()).unwrap();
    let chat = &config.providers["chat"];
    assert_eq!(
        chat.ca_cert,
        Some(PathBuf::from("/home/u/project/conf/certs/ca.pem"))
    );
    assert_eq!(
        chat.timeouts,
        Timeouts {
            connect: Some(3),
            first_byte: Some(60),
            idle: Some(90)
        }
    );
    let ProviderKind::Openai { upstream, options } = &chat.kind else {
        panic!()
    };
    assert_eq!(
        *options,
        ChatSettings {
            max_tokens_cap: Some(8192),
            max_completion_tokens: Some(true),
            strict_schemas: Some(true),
            reasoning_effort: Some(true),
            no_reasoning_passback: Some(true),
            keep_mid_conversation_system: Some(true),
            continuous_usage_stats: Some(true),
            documents: Some(crate::cli::DocumentsChoice::Omit),
            web_search: Some(crate::cli::WebSearchChoice::Bridge),
            tokenizer: Some(String::from("/home/u/project/conf/tok/tokenizer.json")),
        }
    );
    assert_eq!(
        upstream.headers["HTTP-Referer"].expose_secret(),
        "https://me.example"
    );
    assert_eq!(
        upstream.headers["x-key"].expose_secret(),
        "sk-openai-secret"
    );
    let ProviderKind::Responses { options, .. } = &config.providers["resp"].kind else {
        panic!()
    };
    assert_eq!(options.reasoning_effort.as_deref(), Some("off"));
    let ProviderKind::Anthropic { upstream } = &config.providers["claude"].kind else {
        panic!()
    };
    assert!(upstream.api_key.is_none());
    let ProviderKind::Fabstir(fab) = &config.providers["fab"].kind else {
        panic!()
    };
    assert_eq!(fab.job_id, Some(42));
    assert_eq!(fab.payment, Some(crate::cli::PaymentChoice::Usdc));
    assert_eq!(fab.selection, Some(crate::cli::SelectionChoice::Cheapest));
    assert_eq!(fab.tool_format, Some(crate::cli::ToolFormatChoice::Glm));
    assert_eq!(
        fab.private_key_file,
        Some(PathBuf::from("/home/u/project/conf/wallet.key"))
    );
    assert_eq!(fab.ledger, Some(PathBuf::from("/var/lib/ledger.json")));
    assert_eq!(
        config.router.default.first().model.as_deref(),
        Some("qwen/qwen3-coder:free")
    );
}

/// The keys a derived `Deserialize` struct reads: serde hands them to `deserialize_struct`.
fn fields_of<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
    use serde::de::{Error, Visitor, value::Error as E};
    struct Probe<'a>(&'a mut Vec<&'static str>);
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = E;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
            Err(E::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, E> {
            self.0.extend(fields);
            Err(E::custom("probed"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields = Vec::new();
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

#[test]
fn every_key_a_kind_allows_is_read_and_every_field_is_allowed() {
    use crate::cli::Provider as Kind;
    let common = fields_of::<file::ProviderRaw>();
    let fabstir = fields_of::<FabstirSettings>();
    assert!(
        common.contains(&"kind") && fabstir.contains(&"host_url"),
        "{common:?} {fabstir:?}"
    );
    let mut allowed = Vec::new();
    for kind in [
        Kind::Openai,
        Kind::Responses,
        Kind::Anthropic,
        Kind::Fabstir,
    ] {
        for key in validate::keys_of(kind) {
            let read = common.contains(&key) || (kind == Kind::Fabstir && fabstir.contains(&key));
            assert!(read, "kind {kind:?} allows `{key}` but nothing reads it");
            allowed.push(key);
        }
    }
    for field in common.iter().chain(&fabstir) {
        assert!(
            allowed.contains(field),
            "`{field}` is read but no kind allows it"
        );
    }
}

#[test]
fn load_reads_the_file_and_names_it_when_it_cannot() {
    let dir = std::env::temp_dir().join(format!("claude-bridge-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("claude-bridge.toml");
    std::fs::write(&path, LOCAL).unwrap();
    let config = Config::load(&path, &env()).unwrap();
    assert_eq!(config.file, path);
    assert_eq!(config.providers.len(), 1);
    let located = find(None, &Env::fixed(&dir)).unwrap();
    assert_eq!(
        (located.path, located.origin),
        (path.clone(), Origin::WorkingDir)
    );
    std::fs::remove_file(&path).unwrap();
    let e = Config::load(&path, &env()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read the config file", path.display())),
        "{e}"
    );
    std::fs::remove_dir(&dir).unwrap();
}

/// The first ```toml example after `heading` in the repository file `file`.
fn toml_example(file: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file))
        .unwrap();
    let section = text
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("{file} has the section {heading:?}"));
    section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("{file}: {heading:?} has a toml example"))
        .to_owned()
}

/// The configuration reference's annotated example, and the README's config with a fallback,
/// are configs this bridge loads (so the documentation stays true).
#[test]
fn the_documented_examples_load() {
    let env = Env::fixed("/tmp")
        .with_var("BRIDGE_CLIENT_KEY", "k")
        .with_var("OPENAI_API_KEY", "sk-o")
        .with_var("ANTHROPIC_API_KEY", "sk-a");
    let reference = toml_example("docs/configuration.md", "## The config file");
    let config = Config::parse(&reference, Path::new("docs/configuration.md"), &env)
        .unwrap_or_else(|e| panic!("the reference example does not load: {e}"));
    assert_eq!(config.providers.len(), 3);
    assert_eq!(config.router.rules.len(), 1);
    assert_eq!(config.providers["openai"].timeouts.first_byte, Some(120));

    let readme = toml_example("README.md", "## A config file with a fallback");
    let config = Config::parse(&readme, Path::new("README.md"), &env)
        .unwrap_or_else(|e| panic!("the README example does not load: {e}"));
    assert_eq!(config.providers.len(), 2);
    assert_eq!(config.router.fallback.len(), 1);
}

#[test]
fn the_search_table_is_checked_and_its_key_resolved() {
    let config = parse(&format!(
        "{LOCAL}[search]\nkind = \"searxng\"\nbase_url = \"http://127.0.0.1:8888\"\n"
    ))
    .unwrap();
    let search = config.search.unwrap();
    assert_eq!(search.kind, crate::cli::SearchKind::Searxng);
    assert_eq!(search.base_url.as_deref(), Some("http://127.0.0.1:8888"));
    let brave = parse(&format!(
        "{LOCAL}[search]\nkind = \"brave\"\napi_key = \"env:OPENAI_API_KEY\"\n"
    ))
    .unwrap();
    assert_eq!(
        brave.search.unwrap().api_key.unwrap().expose_secret(),
        "sk-openai-secret"
    );
    let e = err(&format!("{LOCAL}[search]\nkind = \"searxng\"\n"));
    assert_eq!(e.key.as_deref(), Some("search"));
    assert!(e.message.contains("needs base_url"), "{e}");
    let e = err(&format!("{LOCAL}[search]\nkind = \"tavily\"\n"));
    assert!(e.message.contains("needs api_key"), "{e}");
    let e = err(&format!(
        "{LOCAL}[search]\nkind = \"searxng\"\nbase_url = \"127.0.0.1:8888\"\n"
    ));
    assert_eq!(place(&e), (6, 12, Some("search.base_url")));
    let e = err(&format!("{LOCAL}[search]\nkind = \"google\"\n"));
    assert!(e.message.contains("searxng"), "{e}");
    let e = err(&format!(
        "{LOCAL}[search]\nkind = \"searxng\"\nurl = \"http://x\"\n"
    ));
    assert!(e.message.contains("unknown field `url`"), "{e}");
}

#[test]
fn a_route_value_may_be_a_pool_and_providers_carry_their_own_limits() {
    let text = format!(
        "{LOCAL}weight = 3\nmax_parallel = 4\nrpm = 600\ntpm = 100000\nqueue_timeout = 5\nhealth_check = 15\n\n\
         [providers.gpu2]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8001/v1\"\n\n\
         [router]\ndefault = [\"local,qwen3-coder\", \"gpu2,qwen3-coder\"]\n"
    );
    let config = parse(&text).unwrap();
    let members: Vec<String> = config
        .router
        .default
        .members()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(members, ["local,qwen3-coder", "gpu2,qwen3-coder"]);
    let local = &config.providers["local"];
    assert_eq!(
        local.limits,
        crate::config::UpstreamLimits {
            weight: 3,
            max_parallel: Some(4),
            rpm: Some(600),
            tpm: Some(100_000),
            queue_timeout: std::time::Duration::from_secs(5),
        }
    );
    assert_eq!(local.health_check, Some(std::time::Duration::from_secs(15)));
    assert_eq!(
        config.providers["gpu2"].limits,
        crate::config::UpstreamLimits::default()
    );
    let e = err(&format!("{LOCAL}max_parallel = 0\n"));
    assert_eq!(
        e.key.as_deref(),
        Some("providers.local.max_parallel"),
        "{e}"
    );
    assert!(e.message.contains("at least 1"), "{e}");
    let e = err(&format!("{LOCAL}[router]\ndefault = []\n"));
    assert!(e.message.contains("an empty list"), "{e}");
    let e = err(&format!(
        "{LOCAL}[router]\ndefault = [\"local,a\", \"nope,a\"]\n"
    ));
    assert!(e.message.contains("unknown provider `nope`"), "{e}");
}
