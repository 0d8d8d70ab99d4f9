//! The lifecycle of the bridge's paid session with a Fabstir host, as a sans-IO state machine.
//!
//! The host (`host-native`) owns the sockets, the chain and the clock; it tells the machine what
//! happened (`handle_*`, with the time in milliseconds) and carries out the [`Effect`]s it polls.
//! The machine decides the rest: prompts run one at a time in arrival order (one FIFO per
//! session); a job is created only when a prompt needs one; a socket that closes (the host
//! settles the job on close) sends the next prompt to a new job; a session that fails before the
//! running prompt's first token (closed, an error frame, no answer in time) is recovered once:
//! the prompt is sent again, on the same job while its socket is open, else on a new job; and
//! money is never spent past the cap — a job that would cross it, or a third job in a row that
//! never answered a prompt, fails the waiting prompts with a clear error instead of opening
//! another paid session.
//!
//! ```text
//!              prompt queued                 job_created               socket_opened
//!   NoJob ─────────────────────► CreatingJob ───────────► Connecting ───────────────► Idle
//!     ▲  ▲ job_failed /             │ (cap reached or                                 │ ▲
//!     │  │ socket_failed            │  too many failures:                 prompt      │ │ stream_end
//!     │  └──────────────────────────┘  queued prompts fail)              queued       ▼ │
//!     │                                                                  Initializing ─► Streaming
//!     │                    socket_closed / timeout / host error               (ack)
//!     └─────────────────────────────────────────────────────────── (the running prompt fails)
//! ```
//!
//! ```
//! use bridge_core::fabstir::session::{Effect, Limits, Session};
//! let mut s = Session::new(Limits { deposit: 100, max_spend: 250, ..Limits::default() });
//! s.handle_prompt(1, 0);
//! assert_eq!(s.poll_effect(), Some(Effect::CreateJob { deposit: 100 }));
//! s.handle_job_created(7, 10);
//! assert_eq!(s.poll_effect(), Some(Effect::OpenSocket { job_id: 7 }));
//! s.handle_socket_opened(20);
//! assert_eq!(s.poll_effect(), Some(Effect::SendInit { job_id: 7, prompt: 1 }));
//! s.handle_init_acked(30);
//! assert_eq!(s.poll_effect(), Some(Effect::SendPrompt { prompt: 1 }));
//! s.handle_chunk(40);
//! s.handle_stream_end(50);
//! assert_eq!(s.poll_effect(), Some(Effect::PromptDone { prompt: 1 }));
//! ```

use std::collections::VecDeque;

use crate::anthropic::events::{ApiError, ErrorKind};

/// A prompt's id, chosen by the host (one per client request).
pub type PromptId = u64;

/// Money and time limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deposit of each new job (wei or token units).
    pub deposit: u128,
    /// Total deposits this bridge may make (`--max-spend`).
    pub max_spend: u128,
    /// Money already spent before this run (the ledger's total).
    pub already_spent: u128,
    /// Jobs in a row that may fail to answer a prompt before the machine stops opening more.
    pub max_failed_jobs: u32,
    /// Decimals of the money unit (18 for ETH, 6 for USDC), for messages.
    pub decimals: u32,
    /// The money unit's name (`ETH`, `USDC`), for messages.
    pub unit: &'static str,
    /// Waiting for `session_init_ack`.
    pub init_timeout_ms: u64,
    /// Waiting for the first chunk after the prompt was sent.
    pub first_chunk_timeout_ms: u64,
    /// Waiting between chunks.
    pub idle_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deposit: 0,
            max_spend: 0,
            already_spent: 0,
            max_failed_jobs: 3,
            decimals: 0,
            unit: "",
            init_timeout_ms: 30_000,
            first_chunk_timeout_ms: 180_000,
            idle_timeout_ms: 60_000,
        }
    }
}

/// What the host must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Create and pay a session job with this deposit (then `handle_job_created` or
    /// `handle_job_failed`).
    CreateJob {
        /// The deposit.
        deposit: u128,
    },
    /// Open the encrypted WebSocket for this job (then `handle_socket_opened` or
    /// `handle_socket_failed`).
    OpenSocket {
        /// The job.
        job_id: u64,
    },
    /// Send `encrypted_session_init` with a fresh session key (before every prompt).
    SendInit {
        /// The job.
        job_id: u64,
        /// The prompt it is for.
        prompt: PromptId,
    },
    /// Send the prompt as `encrypted_message`; stream its chunks to its client.
    SendPrompt {
        /// The prompt.
        prompt: PromptId,
    },
    /// Send `stream_cancel` for the running prompt (its client went away).
    CancelPrompt {
        /// The prompt.
        prompt: PromptId,
    },
    /// The prompt's reply is complete.
    PromptDone {
        /// The prompt.
        prompt: PromptId,
    },
    /// The prompt cannot be answered: end its response with this error.
    PromptFailed {
        /// The prompt.
        prompt: PromptId,
        /// What to tell its client.
        error: ApiError,
    },
    /// Close the socket (the host settles the job).
    CloseSocket,
    /// The prompt's session failed before its first token; the prompt is sent again — on the
    /// same job when its socket is still open, else on a new one (`new_job`) — once per
    /// prompt. Nothing of it reached its client, so nothing is paid for twice.
    PromptRecovering {
        /// The prompt.
        prompt: PromptId,
        /// Why the first attempt failed.
        error: ApiError,
        /// Whether the job was lost (the next attempt opens a new one).
        new_job: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No job, or the last one was settled.
    NoJob,
    CreatingJob,
    Connecting {
        job_id: u64,
    },
    /// Socket open, no prompt running.
    Idle {
        job_id: u64,
    },
    /// Init sent for the queue's head; waiting for the ack.
    Initializing {
        job_id: u64,
        since: u64,
    },
    /// The head prompt was sent; `last` is the time of the prompt or the latest chunk.
    Streaming {
        job_id: u64,
        last: u64,
        chunks: u64,
    },
    /// The cap is reached or jobs keep failing: every prompt fails from now on.
    Stopped,
}

/// The session machine.
#[derive(Debug)]
pub struct Session {
    limits: Limits,
    state: State,
    queue: VecDeque<PromptId>,
    effects: VecDeque<Effect>,
    spent: u128,
    failed_jobs: u32,
    stop_reason: Option<ApiError>,
    /// The head prompt was already sent again once (see [`Effect::PromptRecovering`]).
    recovered: Option<PromptId>,
}

impl Session {
    /// A machine with no job yet.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::NoJob,
            queue: VecDeque::new(),
            effects: VecDeque::new(),
            spent: limits.already_spent,
            failed_jobs: 0,
            stop_reason: None,
            recovered: None,
        }
    }

    /// Money spent on deposits so far (including `Limits::already_spent`).
    #[must_use]
    pub fn spent(&self) -> u128 {
        self.spent
    }

    /// The next thing to do.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When `handle_timeout` must be called next, if a wait is running.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Initializing { since, .. } => Some(since + self.limits.init_timeout_ms),
            State::Streaming { last, chunks, .. } => Some(
                last + if chunks == 0 {
                    self.limits.first_chunk_timeout_ms
                } else {
                    self.limits.idle_timeout_ms
                },
            ),
            _ => None,
        }
    }

    /// A client wants `prompt` answered.
    pub fn handle_prompt(&mut self, prompt: PromptId, now: u64) {
        self.queue.push_back(prompt);
        self.advance(now);
    }

    /// The prompt's client went away: drop it from the queue, or cancel it if it is running.
    pub fn handle_client_gone(&mut self, prompt: PromptId, now: u64) {
        if self.queue.front() == Some(&prompt) {
            match self.state {
                State::Streaming { job_id, .. } | State::Initializing { job_id, .. } => {
                    self.queue.pop_front();
                    if matches!(self.state, State::Streaming { .. }) {
                        self.effects.push_back(Effect::CancelPrompt { prompt });
                    }
                    // The host answers a cancel with stream_end; the socket stays usable.
                    self.state = State::Idle { job_id };
                    self.advance(now);
                    return;
                }
                _ => {}
            }
        }
        self.queue.retain(|p| *p != prompt);
    }

    /// The job was created and paid.
    pub fn handle_job_created(&mut self, job_id: u64, _now: u64) {
        if self.state == State::CreatingJob {
            self.state = State::Connecting { job_id };
            self.effects.push_back(Effect::OpenSocket { job_id });
        }
    }

    /// Creating the job failed before anything was paid (no host, no funds, a refused
    /// transaction): the deposit goes back under the cap, and it does not count as a job that
    /// failed to answer (nothing was opened).
    pub fn handle_job_failed(&mut self, error: ApiError, now: u64) {
        if self.state == State::CreatingJob {
            self.spent = self.spent.saturating_sub(self.limits.deposit);
            self.fail_head(error);
            self.state = State::NoJob;
            self.advance(now);
        }
    }

    /// The job's transaction was sent but its confirmation never came: the deposit may be paid,
    /// so it stays counted, and the job counts as one that failed.
    pub fn handle_job_unconfirmed(&mut self, error: ApiError, now: u64) {
        if self.state == State::CreatingJob {
            self.fail_head(error);
            self.job_lost(now);
        }
    }

    /// The WebSocket is open (`connected` received).
    pub fn handle_socket_opened(&mut self, now: u64) {
        if let State::Connecting { job_id } = self.state {
            self.state = State::Idle { job_id };
            self.advance(now);
        }
    }

    /// The WebSocket could not be opened: the job is lost (its deposit is refunded on timeout).
    pub fn handle_socket_failed(&mut self, error: ApiError, now: u64) {
        if matches!(self.state, State::Connecting { .. }) {
            self.fail_head(error);
            self.job_lost(now);
        }
    }

    /// `session_init_ack` with `status: success`.
    pub fn handle_init_acked(&mut self, now: u64) {
        if let State::Initializing { job_id, .. } = self.state
            && let Some(&prompt) = self.queue.front()
        {
            self.state = State::Streaming {
                job_id,
                last: now,
                chunks: 0,
            };
            self.effects.push_back(Effect::SendPrompt { prompt });
        }
    }

    /// A chunk of the running prompt's reply arrived.
    pub fn handle_chunk(&mut self, now: u64) {
        if let State::Streaming { job_id, chunks, .. } = self.state {
            self.state = State::Streaming {
                job_id,
                last: now,
                chunks: chunks + 1,
            };
            // The host answers: the job is good.
            self.failed_jobs = 0;
        }
    }

    /// `stream_end`: the running prompt's reply is complete (or was cancelled).
    pub fn handle_stream_end(&mut self, now: u64) {
        if let State::Streaming { job_id, .. } = self.state {
            self.recovered = None;
            if let Some(prompt) = self.queue.pop_front() {
                self.effects.push_back(Effect::PromptDone { prompt });
            }
            self.failed_jobs = 0;
            self.state = State::Idle { job_id };
            self.advance(now);
        }
    }

    /// The host sent an `error` frame: the running prompt fails; the socket stays open unless
    /// the host closes it.
    pub fn handle_host_error(&mut self, error: ApiError, now: u64) {
        match self.state {
            State::Initializing { job_id, .. } | State::Streaming { job_id, .. } => {
                self.recover_or_fail(error, false);
                self.state = State::Idle { job_id };
                self.advance(now);
            }
            _ => {}
        }
    }

    /// The socket closed: the host settles the job, so the next prompt needs a new one.
    pub fn handle_socket_closed(&mut self, now: u64) {
        match self.state {
            State::Initializing { .. } | State::Streaming { .. } => {
                let error = ApiError::new(
                    ErrorKind::Overloaded,
                    "the Fabstir host closed the session before the reply was complete; \
                     the next request opens a new session",
                );
                self.recover_or_fail(error, true);
                self.job_lost(now);
            }
            State::Connecting { .. } | State::Idle { .. } => {
                self.state = State::NoJob;
                self.advance(now);
            }
            _ => {}
        }
    }

    /// Time passed: a wait that ran out fails the running prompt and abandons the socket.
    pub fn handle_timeout(&mut self, now: u64) {
        let Some(deadline) = self.poll_timeout() else {
            return;
        };
        if now < deadline {
            return;
        }
        let what = match self.state {
            State::Initializing { .. } => "did not accept the encrypted session",
            State::Streaming { chunks: 0, .. } => "did not start answering",
            _ => "stopped answering",
        };
        let error = ApiError::new(
            ErrorKind::Timeout,
            format!("the Fabstir host {what} in time"),
        );
        self.recover_or_fail(error, true);
        self.effects.push_back(Effect::CloseSocket);
        self.job_lost(now);
    }

    /// The running head prompt failed with `error`: when nothing of its reply arrived yet, the
    /// failure is transient and it was not sent again before, it stays at the head to be sent
    /// again ([`Effect::PromptRecovering`]); otherwise it fails with `error`.
    fn recover_or_fail(&mut self, error: ApiError, new_job: bool) {
        let untouched = matches!(
            self.state,
            State::Initializing { .. } | State::Streaming { chunks: 0, .. }
        );
        // A refusal of the request itself (too long, bad input, no funds) would only repeat.
        let transient = matches!(
            error.kind,
            ErrorKind::Api | ErrorKind::Overloaded | ErrorKind::Timeout
        );
        let prompt = match self.queue.front() {
            Some(&prompt) if untouched && transient && self.recovered != Some(prompt) => prompt,
            _ => return self.fail_head(error),
        };
        self.recovered = Some(prompt);
        self.effects.push_back(Effect::PromptRecovering {
            prompt,
            error,
            new_job,
        });
    }

    /// An amount in the limits' unit: `0.0002 ETH` (base units when no unit is set).
    fn amount(&self, value: u128) -> String {
        let number = super::units::format_units(&value.to_string(), self.limits.decimals);
        if self.limits.unit.is_empty() {
            number
        } else {
            format!("{number} {}", self.limits.unit)
        }
    }

    /// The job is gone before it answered: count it, and go on with a new one if allowed.
    fn job_lost(&mut self, now: u64) {
        self.failed_jobs += 1;
        self.state = State::NoJob;
        self.advance(now);
    }

    fn fail_head(&mut self, error: ApiError) {
        self.recovered = None;
        if let Some(prompt) = self.queue.pop_front() {
            self.effects
                .push_back(Effect::PromptFailed { prompt, error });
        }
    }

    /// Start whatever the queue's head needs.
    fn advance(&mut self, now: u64) {
        let Some(&prompt) = self.queue.front() else {
            return;
        };
        match self.state {
            State::NoJob => {
                if self.failed_jobs >= self.limits.max_failed_jobs {
                    self.stop(ApiError::new(
                        ErrorKind::Overloaded,
                        format!(
                            "{} Fabstir sessions in a row failed before answering; not opening \
                             another paid session (try another host or model, then restart the bridge)",
                            self.failed_jobs
                        ),
                    ));
                } else if self.spent.saturating_add(self.limits.deposit) > self.limits.max_spend {
                    self.stop(ApiError::new(
                        ErrorKind::Billing,
                        format!(
                            "a new Fabstir session needs a deposit of {} but only {} of the \
                             spending cap ({}) is left; raise --max-spend to continue",
                            self.amount(self.limits.deposit),
                            self.amount(self.limits.max_spend.saturating_sub(self.spent)),
                            self.amount(self.limits.max_spend)
                        ),
                    ));
                } else {
                    self.spent = self.spent.saturating_add(self.limits.deposit);
                    self.state = State::CreatingJob;
                    self.effects.push_back(Effect::CreateJob {
                        deposit: self.limits.deposit,
                    });
                }
            }
            State::Idle { job_id } => {
                self.state = State::Initializing { job_id, since: now };
                self.effects.push_back(Effect::SendInit { job_id, prompt });
            }
            State::Stopped => {
                let error = self.stop_reason.clone().unwrap_or_else(|| {
                    ApiError::new(ErrorKind::Api, "the Fabstir session is stopped")
                });
                while let Some(prompt) = self.queue.pop_front() {
                    self.effects.push_back(Effect::PromptFailed {
                        prompt,
                        error: error.clone(),
                    });
                }
            }
            State::CreatingJob
            | State::Connecting { .. }
            | State::Initializing { .. }
            | State::Streaming { .. } => {}
        }
    }

    fn stop(&mut self, error: ApiError) {
        self.stop_reason = Some(error);
        self.state = State::Stopped;
        self.advance(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(deposit: u128, max_spend: u128) -> Limits {
        Limits {
            deposit,
            max_spend,
            ..Limits::default()
        }
    }

    fn drain(s: &mut Session) -> Vec<Effect> {
        std::iter::from_fn(|| s.poll_effect()).collect()
    }

    /// Runs a prompt on an open socket to completion.
    fn answer(s: &mut Session, job_id: u64, prompt: PromptId, now: u64) {
        assert_eq!(drain(s), vec![Effect::SendInit { job_id, prompt }]);
        s.handle_init_acked(now);
        assert_eq!(drain(s), vec![Effect::SendPrompt { prompt }]);
        s.handle_chunk(now + 1);
        s.handle_stream_end(now + 2);
    }

    #[test]
    fn prompts_run_one_at_a_time_in_order_on_one_job() {
        let mut s = Session::new(limits(100, 1000));
        s.handle_prompt(1, 0);
        s.handle_prompt(2, 0);
        s.handle_prompt(3, 0);
        assert_eq!(drain(&mut s), vec![Effect::CreateJob { deposit: 100 }]);
        s.handle_job_created(9, 1);
        assert_eq!(drain(&mut s), vec![Effect::OpenSocket { job_id: 9 }]);
        s.handle_socket_opened(2);
        answer(&mut s, 9, 1, 3);
        let done = s.poll_effect();
        assert_eq!(done, Some(Effect::PromptDone { prompt: 1 }));
        answer(&mut s, 9, 2, 10);
        assert_eq!(s.poll_effect(), Some(Effect::PromptDone { prompt: 2 }));
        answer(&mut s, 9, 3, 20);
        assert_eq!(drain(&mut s), vec![Effect::PromptDone { prompt: 3 }]);
        assert_eq!(s.spent(), 100);
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn a_closed_socket_fails_the_running_prompt_and_the_next_gets_a_new_job() {
        let mut s = Session::new(limits(100, 1000));
        s.handle_prompt(1, 0);
        s.handle_job_created(1, 0);
        s.handle_socket_opened(0);
        s.handle_init_acked(0);
        s.handle_chunk(1);
        s.handle_prompt(2, 1);
        drain(&mut s);
        s.handle_socket_closed(5);
        let effects = drain(&mut s);
        assert!(
            matches!(&effects[0], Effect::PromptFailed { prompt: 1, error } if error.kind == ErrorKind::Overloaded)
        );
        assert_eq!(effects[1], Effect::CreateJob { deposit: 100 });
        s.handle_job_created(2, 6);
        assert_eq!(drain(&mut s), vec![Effect::OpenSocket { job_id: 2 }]);
        s.handle_socket_opened(7);
        answer(&mut s, 2, 2, 8);
        assert_eq!(drain(&mut s), vec![Effect::PromptDone { prompt: 2 }]);
        assert_eq!(s.spent(), 200);
    }

    #[test]
    fn the_spending_cap_is_never_crossed() {
        let mut s = Session::new(Limits {
            already_spent: 150,
            ..limits(100, 300)
        });
        s.handle_prompt(1, 0);
        assert_eq!(drain(&mut s), vec![Effect::CreateJob { deposit: 100 }]);
        s.handle_job_created(1, 0);
        drain(&mut s);
        s.handle_socket_opened(0);
        answer(&mut s, 1, 1, 1);
        assert_eq!(drain(&mut s), vec![Effect::PromptDone { prompt: 1 }]);
        // The host settles the job; a second one would cross the cap.
        s.handle_socket_closed(5);
        s.handle_prompt(2, 6);
        let effects = drain(&mut s);
        assert!(
            matches!(&effects[..], [Effect::PromptFailed { prompt: 2, error }] if error.kind == ErrorKind::Billing && error.message.contains("--max-spend")),
            "{effects:?}"
        );
        assert_eq!(s.spent(), 250);
        // Every later prompt fails at once, with the same reason.
        s.handle_prompt(3, 7);
        assert!(
            matches!(&drain(&mut s)[..], [Effect::PromptFailed { prompt: 3, error }] if error.kind == ErrorKind::Billing)
        );
    }

    #[test]
    fn the_cap_message_speaks_in_the_money_unit() {
        let mut s = Session::new(Limits {
            decimals: 18,
            unit: "ETH",
            already_spent: 450_000_000_000_000,
            ..limits(200_000_000_000_000, 500_000_000_000_000)
        });
        s.handle_prompt(1, 0);
        let effects = drain(&mut s);
        let [Effect::PromptFailed { error, .. }] = &effects[..] else {
            panic!("{effects:?}");
        };
        assert_eq!(
            error.message,
            "a new Fabstir session needs a deposit of 0.0002 ETH but only 0.00005 ETH of the \
             spending cap (0.0005 ETH) is left; raise --max-spend to continue"
        );
        let mut usdc = Session::new(Limits {
            decimals: 6,
            unit: "USDC",
            ..limits(2_000_000, 1_000_000)
        });
        usdc.handle_prompt(1, 0);
        let effects = drain(&mut usdc);
        assert!(
            matches!(&effects[..], [Effect::PromptFailed { error, .. }] if error.message.contains("deposit of 2 USDC but only 1 USDC")),
            "{effects:?}"
        );
    }

    #[test]
    fn jobs_that_keep_failing_stop_the_spending() {
        let mut s = Session::new(limits(10, 1_000_000));
        let mut created = 0;
        for prompt in 1..=5 {
            s.handle_prompt(prompt, prompt);
            for effect in drain(&mut s) {
                if let Effect::CreateJob { .. } = effect {
                    created += 1;
                    s.handle_job_created(prompt, prompt);
                    drain(&mut s);
                    s.handle_socket_failed(ApiError::new(ErrorKind::Api, "refused"), prompt);
                    drain(&mut s);
                }
            }
        }
        assert_eq!(created, 3, "only max_failed_jobs jobs are opened");
        s.handle_prompt(9, 9);
        assert!(
            matches!(&drain(&mut s)[..], [Effect::PromptFailed { prompt: 9, error }] if error.message.contains("not opening"))
        );
    }

    #[test]
    fn a_failed_job_creation_is_not_counted_as_spent() {
        let mut s = Session::new(limits(100, 100));
        s.handle_prompt(1, 0);
        drain(&mut s);
        s.handle_job_failed(ApiError::new(ErrorKind::Api, "insufficient funds"), 1);
        let effects = drain(&mut s);
        assert!(matches!(
            &effects[0],
            Effect::PromptFailed { prompt: 1, .. }
        ));
        assert_eq!(s.spent(), 0);
        s.handle_prompt(2, 2);
        assert_eq!(drain(&mut s), vec![Effect::CreateJob { deposit: 100 }]);
        // Failures before payment never stop the bridge: each prompt tries again.
        for prompt in 3..8 {
            s.handle_job_failed(ApiError::new(ErrorKind::Api, "rpc down"), prompt);
            drain(&mut s);
            s.handle_prompt(prompt, prompt);
            assert_eq!(drain(&mut s), vec![Effect::CreateJob { deposit: 100 }]);
        }
    }

    #[test]
    fn an_unconfirmed_job_stays_counted_and_counts_as_failed() {
        let mut s = Session::new(limits(100, 250));
        s.handle_prompt(1, 0);
        drain(&mut s);
        s.handle_job_unconfirmed(ApiError::new(ErrorKind::Api, "no receipt"), 1);
        assert!(matches!(
            &drain(&mut s)[..],
            [Effect::PromptFailed { prompt: 1, .. }]
        ));
        assert_eq!(s.spent(), 100);
        s.handle_prompt(2, 2);
        assert_eq!(drain(&mut s), vec![Effect::CreateJob { deposit: 100 }]);
        s.handle_job_unconfirmed(ApiError::new(ErrorKind::Api, "no receipt"), 3);
        drain(&mut s);
        // 200 spent of 250: a third deposit would cross the cap.
        s.handle_prompt(3, 4);
        assert!(
            matches!(&drain(&mut s)[..], [Effect::PromptFailed { error, .. }] if error.kind == ErrorKind::Billing)
        );
    }

    #[test]
    fn timeouts_fail_the_prompt_and_abandon_the_socket() {
        let mut s = Session::new(limits(1, 100));
        s.handle_prompt(1, 0);
        s.handle_job_created(1, 0);
        s.handle_socket_opened(0);
        drain(&mut s);
        assert_eq!(s.poll_timeout(), Some(30_000));
        s.handle_init_acked(1_000);
        drain(&mut s);
        assert_eq!(s.poll_timeout(), Some(181_000));
        s.handle_chunk(2_000);
        assert_eq!(s.poll_timeout(), Some(62_000));
        s.handle_timeout(61_999);
        assert!(drain(&mut s).is_empty());
        s.handle_timeout(62_000);
        let effects = drain(&mut s);
        assert!(
            matches!(&effects[0], Effect::PromptFailed { prompt: 1, error } if error.kind == ErrorKind::Timeout && error.message.contains("stopped answering"))
        );
        assert_eq!(effects[1], Effect::CloseSocket);
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn a_client_that_leaves_is_cancelled_or_dequeued() {
        let mut s = Session::new(limits(1, 100));
        s.handle_prompt(1, 0);
        s.handle_prompt(2, 0);
        s.handle_prompt(3, 0);
        s.handle_job_created(1, 0);
        s.handle_socket_opened(0);
        s.handle_init_acked(0);
        drain(&mut s);
        s.handle_client_gone(3, 1); // waiting: just dropped
        s.handle_client_gone(1, 2); // running: cancelled, the next one starts
        assert_eq!(
            drain(&mut s),
            vec![
                Effect::CancelPrompt { prompt: 1 },
                Effect::SendInit {
                    job_id: 1,
                    prompt: 2
                }
            ]
        );
        // The cancelled reply's stream_end arrives while 2 is initializing: ignored.
        s.handle_stream_end(3);
        assert!(drain(&mut s).is_empty());
        s.handle_init_acked(4);
        assert_eq!(drain(&mut s), vec![Effect::SendPrompt { prompt: 2 }]);
        s.handle_stream_end(5);
        assert_eq!(drain(&mut s), vec![Effect::PromptDone { prompt: 2 }]);
    }

    #[test]
    fn a_session_lost_before_the_first_token_is_recovered_once_on_a_new_job() {
        let mut s = Session::new(limits(1, 100));
        s.handle_prompt(1, 0);
        s.handle_job_created(7, 0);
        s.handle_socket_opened(0);
        s.handle_init_acked(0);
        drain(&mut s);
        s.handle_socket_closed(5);
        let effects = drain(&mut s);
        assert!(
            matches!(
                &effects[0],
                Effect::PromptRecovering {
                    prompt: 1,
                    new_job: true,
                    ..
                }
            ),
            "{effects:?}"
        );
        assert_eq!(effects[1], Effect::CreateJob { deposit: 1 });
        assert_eq!(s.spent(), 2, "both deposits are counted");
        s.handle_job_created(8, 6);
        assert_eq!(drain(&mut s), vec![Effect::OpenSocket { job_id: 8 }]);
        s.handle_socket_opened(7);
        answer(&mut s, 8, 1, 8);
        assert_eq!(drain(&mut s), vec![Effect::PromptDone { prompt: 1 }]);

        // The next prompt gets its own one recovery; a second loss fails it.
        s.handle_prompt(2, 20);
        drain(&mut s);
        s.handle_init_acked(21);
        drain(&mut s);
        s.handle_timeout(21 + 180_000);
        let effects = drain(&mut s);
        assert!(
            matches!(&effects[0], Effect::PromptRecovering { prompt: 2, .. }),
            "{effects:?}"
        );
        assert_eq!(effects[1], Effect::CloseSocket);
        s.handle_job_created(9, 200_000);
        s.handle_socket_opened(200_001);
        drain(&mut s);
        s.handle_socket_closed(200_002);
        let effects = drain(&mut s);
        assert!(
            matches!(&effects[0], Effect::PromptFailed { prompt: 2, error } if error.kind == ErrorKind::Overloaded),
            "{effects:?}"
        );
    }

    #[test]
    fn a_host_error_before_the_first_token_is_tried_again_on_the_same_job() {
        let mut s = Session::new(limits(1, 100));
        s.handle_prompt(1, 0);
        s.handle_job_created(1, 0);
        s.handle_socket_opened(0);
        drain(&mut s);
        s.handle_host_error(ApiError::new(ErrorKind::Overloaded, "model busy"), 1);
        let effects = drain(&mut s);
        assert!(
            matches!(
                &effects[0],
                Effect::PromptRecovering {
                    prompt: 1,
                    new_job: false,
                    ..
                }
            ),
            "{effects:?}"
        );
        assert_eq!(
            effects[1],
            Effect::SendInit {
                job_id: 1,
                prompt: 1
            }
        );
        assert_eq!(s.spent(), 1, "no new deposit");
        // Once the reply started, a failure is final: its client already has part of it.
        s.handle_init_acked(2);
        drain(&mut s);
        s.handle_chunk(3);
        s.handle_socket_closed(4);
        assert!(matches!(
            &drain(&mut s)[0],
            Effect::PromptFailed { prompt: 1, .. }
        ));
    }

    #[test]
    fn a_host_error_fails_only_the_running_prompt() {
        let mut s = Session::new(limits(1, 100));
        s.handle_prompt(1, 0);
        s.handle_prompt(2, 0);
        s.handle_job_created(1, 0);
        s.handle_socket_opened(0);
        s.handle_init_acked(0);
        drain(&mut s);
        s.handle_host_error(
            ApiError::new(ErrorKind::InvalidRequest, "prompt is too long"),
            1,
        );
        let effects = drain(&mut s);
        assert!(
            matches!(&effects[0], Effect::PromptFailed { prompt: 1, error } if error.kind == ErrorKind::InvalidRequest)
        );
        assert_eq!(
            effects[1],
            Effect::SendInit {
                job_id: 1,
                prompt: 2
            }
        );
    }
}
