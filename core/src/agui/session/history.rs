//! What a thread keeps for `agent/connect`: its runs' events, oldest runs dropped past a cap.
//!
//! A replay of a capped history says so: right after the first kept `RUN_STARTED` comes a
//! `CUSTOM` event `history_truncated` with the number of runs dropped.
//!
//! ```
//! use bridge_core::agui::events::AguiEvent;
//! use bridge_core::agui::session::history::History;
//! let started = |run: &str| AguiEvent::RunStarted {
//!     thread_id: "t".into(), run_id: run.into(), parent_run_id: None, input: None,
//! };
//! let finished = |run: &str| AguiEvent::RunFinished {
//!     thread_id: "t".into(), run_id: run.into(), result: None, outcome: None, usage: None,
//! };
//! let mut history = History::new(2, 1000);
//! for run in ["r1", "r2", "r3"] {
//!     history.push(started(run));
//!     history.push(finished(run));
//! }
//! let replay = history.replay();
//! assert_eq!(history.dropped_runs(), 1);
//! assert_eq!(replay[1].type_name(), "CUSTOM");
//! assert_eq!(replay.len(), 5);
//! ```

use std::collections::VecDeque;

use serde_json::json;

use crate::agui::events::AguiEvent;
use crate::agui::replay::replayable;

/// The runs of one thread, most recent last.
#[derive(Debug, Clone)]
pub struct History {
    runs: VecDeque<Vec<AguiEvent>>,
    events: usize,
    dropped_runs: usize,
    max_runs: usize,
    max_events: usize,
}

impl History {
    /// Keep at most `max_runs` runs and (runs other than the latest) `max_events` events.
    #[must_use]
    pub fn new(max_runs: usize, max_events: usize) -> Self {
        Self {
            runs: VecDeque::new(),
            events: 0,
            dropped_runs: 0,
            max_runs: max_runs.max(1),
            max_events: max_events.max(1),
        }
    }

    /// Record an event; a `RUN_STARTED` opens a new run (older ones may be dropped).
    pub fn push(&mut self, event: AguiEvent) {
        if matches!(event, AguiEvent::RunStarted { .. }) || self.runs.is_empty() {
            self.runs.push_back(Vec::new());
        }
        if let Some(run) = self.runs.back_mut() {
            run.push(event);
            self.events += 1;
        }
        // The latest run is never dropped, however long it is.
        while self.runs.len() > 1
            && (self.runs.len() > self.max_runs || self.events > self.max_events)
        {
            if let Some(old) = self.runs.pop_front() {
                self.events -= old.len();
                self.dropped_runs += 1;
            }
        }
    }

    /// Runs dropped so far.
    #[must_use]
    pub fn dropped_runs(&self) -> usize {
        self.dropped_runs
    }

    /// Runs kept.
    #[must_use]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Events kept.
    #[must_use]
    pub fn events(&self) -> usize {
        self.events
    }

    /// The kept events, valid to replay (see [`replayable`]), with the drop announced.
    #[must_use]
    pub fn replay(&self) -> Vec<AguiEvent> {
        let all: Vec<AguiEvent> = self.runs.iter().flatten().cloned().collect();
        let mut out = replayable(&all);
        if self.dropped_runs > 0 && !out.is_empty() {
            let at = usize::from(matches!(out.first(), Some(AguiEvent::RunStarted { .. })));
            out.insert(
                at,
                AguiEvent::Custom {
                    name: String::from("history_truncated"),
                    value: json!({
                        "droppedRuns": self.dropped_runs,
                        "message": format!(
                            "the bridge keeps the latest {} runs of a thread; {} older ones are not replayed",
                            self.max_runs, self.dropped_runs
                        ),
                    }),
                },
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agui::verify::Verifier;

    fn run(history: &mut History, id: &str, deltas: usize) {
        history.push(AguiEvent::RunStarted {
            thread_id: "t".into(),
            run_id: id.into(),
            parent_run_id: None,
            input: None,
        });
        for _ in 0..deltas {
            history.push(AguiEvent::Custom {
                name: "x".into(),
                value: json!(1),
            });
        }
        history.push(AguiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: id.into(),
            result: None,
            outcome: None,
            usage: None,
        });
    }

    #[test]
    fn nothing_is_dropped_under_the_caps() {
        let mut h = History::new(3, 100);
        run(&mut h, "a", 1);
        run(&mut h, "b", 1);
        assert_eq!((h.runs(), h.events(), h.dropped_runs()), (2, 6, 0));
        let replay = h.replay();
        assert_eq!(replay.len(), 6);
        Verifier::check(&replay).unwrap();
    }

    #[test]
    fn the_oldest_runs_go_first_and_the_replay_says_so() {
        let mut h = History::new(2, 100);
        for id in ["a", "b", "c", "d"] {
            run(&mut h, id, 0);
        }
        assert_eq!((h.runs(), h.dropped_runs()), (2, 2));
        let replay = h.replay();
        Verifier::check(&replay).unwrap();
        let AguiEvent::RunStarted { run_id, .. } = &replay[0] else {
            panic!("{replay:?}")
        };
        assert_eq!(run_id, "c");
        let AguiEvent::Custom { name, value } = &replay[1] else {
            panic!("{replay:?}")
        };
        assert_eq!(name, "history_truncated");
        assert_eq!(value["droppedRuns"], 2);
    }

    #[test]
    fn the_event_cap_drops_whole_runs_but_never_the_latest() {
        let mut h = History::new(100, 10);
        run(&mut h, "a", 4); // 6 events
        run(&mut h, "b", 4); // 12 in all: "a" goes
        assert_eq!((h.runs(), h.events(), h.dropped_runs()), (1, 6, 1));
        run(&mut h, "c", 50); // longer than the cap alone: kept, "b" goes
        assert_eq!((h.runs(), h.events(), h.dropped_runs()), (1, 52, 2));
    }
}
