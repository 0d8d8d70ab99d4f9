//! `claude-bridge top`: the dashboard's *Now* and *Live* views in a terminal, for a bridge on a
//! headless server. It reads the endpoints the page reads — `/ui/api/now` every two seconds,
//! `/ui/api/live` as requests end — with the key it is given (an admin key sees everything,
//! another key its own). `q`, Esc or Ctrl-C quits.
//!
//! The screen is drawn by [`draw`] from a [`View`] (what was last read), so what it shows does
//! not depend on a terminal: the unit tests draw into ratatui's test backend.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use serde_json::Value;

use super::Finished;
use super::client::BridgeClient;
use crate::cli::DashboardClientArgs;

/// How often the *Now* numbers are read again.
const NOW_EVERY: Duration = Duration::from_secs(2);
/// Requests kept for the *Live* table.
const KEPT: usize = 200;

/// What the screen shows: the last *Now* answer (or why there is none) and the recent requests.
#[derive(Debug, Default)]
pub struct View {
    /// The bridge's address.
    pub base: String,
    /// `/ui/api/now`'s last answer.
    pub now: Option<Value>,
    /// Why the last read failed.
    pub error: Option<String>,
    /// Requests as they ended, newest first.
    pub recent: VecDeque<Finished>,
}

impl View {
    /// A request ended.
    pub fn ended(&mut self, finished: Finished) {
        self.recent.push_front(finished);
        self.recent.truncate(KEPT);
    }
}

fn ms(value: &Value) -> String {
    value.as_f64().map_or_else(
        || String::from("–"),
        |v| {
            if v >= 1000.0 {
                format!("{:.2} s", v / 1000.0)
            } else {
                format!("{v:.0} ms")
            }
        },
    )
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => String::from("–"),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A bordered table titled `title` whose columns are `(header, width)`; a width of 0 takes
/// what is left (at least 10).
fn table<'a>(rows: Vec<Row<'a>>, columns: &[(&'a str, u16)], title: &'a str) -> Table<'a> {
    let widths = columns.iter().map(|&(_, w)| {
        if w == 0 {
            Constraint::Min(10)
        } else {
            Constraint::Length(w)
        }
    });
    Table::new(rows, widths)
        .header(
            Row::new(columns.iter().map(|&(h, _)| h))
                .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(Block::default().borders(Borders::ALL).title(title))
}

/// Draw the view.
pub fn draw(frame: &mut Frame<'_>, view: &View) {
    let [head, cards, targets, live] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(3),
        Constraint::Length(8),
        Constraint::Min(5),
    ])
    .areas(frame.area());
    let now = view.now.as_ref();
    let role = now
        .and_then(|n| {
            n["key"]
                .as_str()
                .map(|k| format!("{} {k}", text(&n["role"])))
        })
        .unwrap_or_default();
    let status = match &view.error {
        Some(e) => format!("  ! {e}"),
        None => String::new(),
    };
    frame.render_widget(
        Paragraph::new(Line::from(format!(
            "claude-bridge top · {} · {role}{status}   (q quits)",
            view.base
        )))
        .style(Style::default().add_modifier(Modifier::BOLD)),
        head,
    );
    let hour = now.map(|n| &n["hour"]).unwrap_or(&Value::Null);
    let cards_text = format!(
        "requests/s {:.2}   requests (1 h) {}   errors (1 h) {}   TTFT p50 {}   p99 {}",
        hour["per_second"].as_f64().unwrap_or(0.0),
        text(&hour["requests"]),
        text(&hour["errors"]),
        ms(&hour["ttft_p50_ms"]),
        ms(&hour["ttft_p99_ms"]),
    );
    frame.render_widget(
        Paragraph::new(cards_text).block(Block::default().borders(Borders::ALL).title(" Now ")),
        cards,
    );
    let target_rows: Vec<Row<'_>> = now
        .and_then(|n| n["targets"].as_object())
        .into_iter()
        .flatten()
        .map(|(name, t)| {
            let circuit = text(&t["circuit"]);
            let style = if circuit == "closed" {
                Style::default()
            } else {
                Style::default().fg(Color::Red)
            };
            Row::new(vec![
                name.clone(),
                circuit,
                text(&t["load"]["in_flight"]),
                text(&t["load"]["queued"]),
                ms(&t["load"]["latency_ewma_ms"]),
                text(&t["answered"]),
                text(&t["failed"]),
                text(&t["last_error"]),
            ])
            .style(style)
        })
        .collect();
    frame.render_widget(
        table(
            target_rows,
            &[
                ("target", 28),
                ("circuit", 10),
                ("in flight", 9),
                ("queued", 7),
                ("latency", 9),
                ("answers", 8),
                ("failures", 8),
                ("last error", 0),
            ],
            " Targets ",
        ),
        targets,
    );
    let live_rows: Vec<Row<'_>> = view
        .recent
        .iter()
        .map(|f| {
            let time = crate::gateway::period::rfc3339(f.at_ms);
            let status = match &f.error {
                Some(e) => format!("{} {e}", f.status),
                None => f.status.to_string(),
            };
            let row = Row::new(vec![
                time.get(11..19).unwrap_or("").to_owned(),
                f.key.clone().unwrap_or_else(|| String::from("–")),
                f.client.clone(),
                f.target.clone(),
                format!(
                    "{}/{}",
                    f.input_tokens.map_or_else(|| "–".into(), |n| n.to_string()),
                    f.output_tokens
                        .map_or_else(|| "–".into(), |n| n.to_string())
                ),
                f.cost_usd.map_or_else(|| "–".into(), |c| format!("{c:.6}")),
                f.ttft_ms.map_or_else(|| "–".into(), |t| format!("{t} ms")),
                status,
                f.message.clone().unwrap_or_default(),
            ]);
            if f.failed() {
                row.style(Style::default().fg(Color::Red))
            } else {
                row
            }
        })
        .collect();
    frame.render_widget(
        table(
            live_rows,
            &[
                ("time", 8),
                ("key", 12),
                ("client", 12),
                ("target", 24),
                ("in/out", 11),
                ("cost", 10),
                ("TTFT", 8),
                ("status", 24),
                ("error", 0),
            ],
            " Live ",
        ),
        live,
    );
}

/// Run until `q`, Esc or Ctrl-C.
///
/// # Errors
/// The terminal cannot be used, or the HTTP client cannot be built.
pub async fn run(args: &DashboardClientArgs) -> Result<u8, String> {
    let client = BridgeClient::new(args, Some(Duration::from_secs(5)))?;
    let streaming = BridgeClient::new(args, None)?;
    let (quit_tx, mut quit_rx) = tokio::sync::mpsc::channel::<()>(1);
    // The live stream, reconnected when it ends.
    let (ended_tx, mut ended_rx) = tokio::sync::mpsc::channel::<Finished>(256);
    let (live_error_tx, mut live_error_rx) = tokio::sync::mpsc::channel::<String>(4);
    tokio::spawn(async move {
        loop {
            if let Err(e) = streaming.live(ended_tx.clone()).await {
                let _ = live_error_tx.send(e).await;
            }
            if ended_tx.is_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
    // Keys, read on a thread of their own (crossterm's reads block).
    std::thread::spawn(move || {
        use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
        loop {
            if quit_tx.is_closed() {
                return;
            }
            match event::poll(Duration::from_millis(200)) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => return,
            }
            if let Ok(Event::Key(key)) = event::read()
                && key.kind == KeyEventKind::Press
                && (matches!(key.code, KeyCode::Char('q') | KeyCode::Esc)
                    || (key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL)))
            {
                let _ = quit_tx.blocking_send(());
                return;
            }
        }
    });
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot use this terminal: {e}"))?;
    let mut view = View {
        base: client.base().to_owned(),
        ..View::default()
    };
    let mut ticks = tokio::time::interval(NOW_EVERY);
    let result = loop {
        tokio::select! {
            _ = ticks.tick() => match client.json("/ui/api/now").await {
                Ok(now) => {
                    view.now = now;
                    view.error = None;
                }
                Err(e) => view.error = Some(e),
            },
            Some(finished) = ended_rx.recv() => view.ended(finished),
            Some(e) = live_error_rx.recv() => view.error = Some(e),
            _ = quit_rx.recv() => break Ok(0),
        }
        if let Err(e) = terminal.draw(|frame| draw(frame, &view)) {
            break Err(format!("cannot draw: {e}"));
        }
    };
    ratatui::restore();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use serde_json::json;

    #[test]
    fn the_screen_shows_the_numbers_the_targets_and_the_requests() {
        let mut view = View {
            base: "http://127.0.0.1:3456".into(),
            now: Some(json!({
                "role": "admin", "key": "admin",
                "hour": {"per_second": 0.25, "requests": 15, "errors": 1,
                         "ttft_p50_ms": 45.2, "ttft_p99_ms": 1500.0},
                "targets": {"gpu1,qwen": {"circuit": "open", "answered": 9, "failed": 3,
                    "last_error": "connect refused",
                    "load": {"in_flight": 2, "queued": 0, "latency_ewma_ms": 31.0}}},
            })),
            ..View::default()
        };
        view.ended(Finished {
            key: Some("alice".into()),
            client: "claude-code".into(),
            target: "gpu1,qwen".into(),
            status: 200,
            input_tokens: Some(100),
            output_tokens: Some(10),
            ..Finished::default()
        });
        let mut terminal = Terminal::new(TestBackend::new(160, 30)).unwrap();
        terminal.draw(|f| draw(f, &view)).unwrap();
        let screen: String = terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        for seen in [
            "requests/s 0.25",
            "TTFT p50 45 ms",
            "p99 1.50 s",
            "gpu1,qwen",
            "open",
            "connect refused",
            "alice",
            "claude-code",
            "100/10",
        ] {
            assert!(screen.contains(seen), "{seen} not on the screen");
        }
    }
}
