//! A thread's history made replayable (`agent/connect`): AG-UI allows nothing after a
//! `RUN_ERROR`, so a run that failed and was followed by later runs is replayed as a `CUSTOM`
//! `run_error` (with the message and code) and a `RUN_FINISHED`. The last run keeps its
//! `RUN_ERROR`.
//!
//! ```
//! use bridge_core::agui::events::AguiEvent;
//! use bridge_core::agui::replay::replayable;
//! use bridge_core::agui::verify::Verifier;
//! let started = |run: &str| AguiEvent::RunStarted {
//!     thread_id: "t".into(), run_id: run.into(), parent_run_id: None, input: None,
//! };
//! let history = vec![
//!     started("r1"),
//!     AguiEvent::RunError { message: "boom".into(), code: None, usage: None },
//!     started("r2"),
//!     AguiEvent::RunError { message: "again".into(), code: None, usage: None },
//! ];
//! assert!(Verifier::check(&history).is_err());
//! let replay = replayable(&history);
//! Verifier::check(&replay).unwrap();
//! assert_eq!(replay.last().map(AguiEvent::type_name), Some("RUN_ERROR"));
//! ```

use serde_json::json;

use super::events::AguiEvent;

/// `history` with every `RUN_ERROR` but a final one turned into `CUSTOM run_error` +
/// `RUN_FINISHED` of the same run.
#[must_use]
pub fn replayable(history: &[AguiEvent]) -> Vec<AguiEvent> {
    let mut out = Vec::with_capacity(history.len());
    let mut run: Option<(String, String)> = None;
    for (i, event) in history.iter().enumerate() {
        match event {
            AguiEvent::RunStarted {
                thread_id, run_id, ..
            } => {
                run = Some((thread_id.clone(), run_id.clone()));
                out.push(event.clone());
            }
            AguiEvent::RunError { message, code, .. } if i + 1 < history.len() => {
                let (thread_id, run_id) = run.take().unwrap_or_default();
                out.push(AguiEvent::Custom {
                    name: String::from("run_error"),
                    value: json!({"message": message, "code": code}),
                });
                out.push(AguiEvent::RunFinished {
                    thread_id,
                    run_id,
                    result: None,
                    outcome: None,
                    usage: None,
                });
            }
            _ => out.push(event.clone()),
        }
    }
    out
}
