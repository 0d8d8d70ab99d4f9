//! The response body: a whole buffer, SSE bytes arriving on a channel, or a relay run by the
//! body itself.
//!
//! A relayed answer ([`ResponseBody::Relayed`]) is written by the task that writes the response:
//! each time hyper asks the body for more, the body runs the relay (`super::relay`) until it has
//! queued something or waits on its upstream, and hands over what it queued. So an upstream
//! chunk goes from the upstream's connection to the client's in one wake-up of that task, not
//! two (a relay task of its own, then the writer). When the client goes away hyper drops the
//! body and the relay with it, which drops the upstream request (its connection closed, a
//! Fabstir prompt cancelled); the relay's own drop guard writes the request's line.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Body of every response the bridge writes.
pub enum ResponseBody {
    /// A complete body (taken on first poll).
    Full(Option<Bytes>),
    /// Streamed chunks; the stream ends when the sender is dropped.
    Channel(mpsc::Receiver<Bytes>),
    /// Chunks a relay queues as the body runs it; the stream ends when the relay is over and
    /// its queue empty.
    Relayed {
        /// What the relay queued.
        rx: mpsc::Receiver<Bytes>,
        /// The relay (`None` once it is over).
        relay: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    },
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full(bytes) => f.debug_tuple("Full").field(bytes).finish(),
            Self::Channel(rx) => f.debug_tuple("Channel").field(rx).finish(),
            Self::Relayed { relay, .. } => f
                .debug_struct("Relayed")
                .field("relaying", &relay.is_some())
                .finish_non_exhaustive(),
        }
    }
}

/// A body that runs `relay`, which queues the body's chunks on the sender of `rx`.
#[must_use]
pub fn relayed(
    rx: mpsc::Receiver<Bytes>,
    relay: impl Future<Output = ()> + Send + 'static,
) -> ResponseBody {
    ResponseBody::Relayed {
        rx,
        relay: Some(Box::pin(relay)),
    }
}

/// A complete body.
#[must_use]
pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    ResponseBody::Full(Some(bytes.into()))
}

/// An empty body.
#[must_use]
pub fn empty() -> ResponseBody {
    ResponseBody::Full(None)
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Channel(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
            Self::Relayed { rx, relay } => poll_relayed(rx, relay, cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Channel(_) | Self::Relayed { .. } => SizeHint::default(),
        }
    }
}

/// The next chunk of a relayed body: one already queued, else the relay run until it queues
/// one or waits (on its upstream, a timer, or room in the queue, which taking a chunk makes).
fn poll_relayed(
    rx: &mut mpsc::Receiver<Bytes>,
    relay: &mut Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
    if let Ok(chunk) = rx.try_recv() {
        return Poll::Ready(Some(Ok(Frame::data(chunk))));
    }
    if let Some(running) = relay {
        if running.as_mut().poll(cx).is_ready() {
            *relay = None;
        } else {
            return match rx.try_recv() {
                Ok(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                Err(_) => Poll::Pending,
            };
        }
    }
    // The relay is over and has dropped its sender: what it queued last, then the end.
    rx.poll_recv(cx)
        .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
}
