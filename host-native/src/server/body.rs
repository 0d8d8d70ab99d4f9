//! The response body: a whole buffer, or SSE bytes arriving on a channel as the upstream streams.
//!
//! When the client goes away hyper drops the body, the channel's receiver with it, and the relay
//! task sees its next send fail: that is how a client disconnect cancels the upstream request.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Body of every response the bridge writes.
#[derive(Debug)]
pub enum ResponseBody {
    /// A complete body (taken on first poll).
    Full(Option<Bytes>),
    /// Streamed chunks; the stream ends when the sender is dropped.
    Channel(mpsc::Receiver<Bytes>),
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
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Channel(_) => SizeHint::default(),
        }
    }
}
