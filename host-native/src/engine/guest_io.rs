//! The guest's stdout/stderr, and `wasi:io/streams` without blocking the host.
//!
//! wasmtime-wasi's synchronous bindings run every *blocking* stream call (`blocking-write-and-flush`,
//! which is how a guest's `eprintln!` and panic message reach stderr, and even a stream's `drop`)
//! through `Handle::block_on`, which panics on a tokio worker thread ("Cannot start a runtime
//! from within a runtime"). A guest that wrote one line to stderr took the relay task down with
//! it, and the client got a stream with neither an `error` nor a `message_stop`.
//!
//! Here the guest's output goes to [`GuestOutput`], which is always ready (its writes never wait),
//! and the stream interface is linked again over [`NonBlockingIo`], which polls each stream
//! future once: for streams that are always ready that is the whole operation, and a stream
//! that would have to wait fails the guest's call instead of blocking a worker. The guest's
//! output is kept (its last [`GuestOutput::KEEP`] bytes) for the trap report, and a plug-in's is
//! also logged line by line.
//!
//! ```text
//!   guest eprintln! ─► blocking-write-and-flush ─► NonBlockingIo (poll once) ─► GuestOutput
//!                                                                 ├─ tail kept for the trap report
//!                                                                 └─ plug-in: one log line per line
//! ```

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tracing::info;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi_io::bindings::wasi::io::poll as async_poll;
use wasmtime_wasi_io::bindings::wasi::io::streams::{
    Host as AsyncHost, HostInputStream as AsyncHostInputStream,
    HostOutputStream as AsyncHostOutputStream,
};
use wasmtime_wasi_io::poll::DynPollable;
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream};

/// Where a guest's stdout and stderr go: never blocks, never fails, keeps the last
/// [`Self::KEEP`] bytes, and (for a plug-in) logs each complete line.
#[derive(Clone, Default)]
pub(super) struct GuestOutput {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    /// The last bytes written (at most `KEEP`).
    tail: Vec<u8>,
    /// Set for a plug-in: its label, and the unfinished line being logged.
    forward: Option<(String, Vec<u8>)>,
}

impl std::fmt::Debug for GuestOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestOutput").finish_non_exhaustive()
    }
}

impl GuestOutput {
    /// Bytes kept for the trap report (a panic message is at the end).
    pub(super) const KEEP: usize = 16 << 10;
    /// Longest line logged for a plug-in; the rest of a longer line is cut.
    const LINE: usize = 4 << 10;

    /// Output that is only kept (the embedded core).
    pub(super) fn captured() -> Self {
        Self::default()
    }

    /// Output that is kept and logged (a plug-in: its author wants to see it).
    pub(super) fn logged(label: &str) -> Self {
        let out = Self::default();
        out.lock().forward = Some((label.to_owned(), Vec::new()));
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Captured> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the guest wrote last, trimmed, lossily decoded.
    pub(super) fn tail(&self) -> String {
        String::from_utf8_lossy(&self.lock().tail).trim().to_owned()
    }

    /// Forget what was kept: an instance shared by several streams reports, after a trap, only
    /// what the failing call wrote.
    pub(super) fn clear(&self) {
        self.lock().tail.clear();
    }

    fn append(&self, bytes: &[u8]) {
        let mut captured = self.lock();
        let keep_from = bytes.len().saturating_sub(Self::KEEP);
        captured.tail.extend_from_slice(&bytes[keep_from..]);
        let excess = captured.tail.len().saturating_sub(Self::KEEP);
        captured.tail.drain(..excess);
        if let Some((label, line)) = &mut captured.forward {
            for &byte in bytes {
                if byte == b'\n' {
                    info!(component = %label, "{}", String::from_utf8_lossy(line).trim_end());
                    line.clear();
                } else if line.len() < Self::LINE {
                    line.push(byte);
                }
            }
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(usize::MAX)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A store whose resource table the stream functions use.
pub(super) trait HasTable {
    fn table(&mut self) -> &mut ResourceTable;
}

/// Link `wasi:io/streams` and `wasi:io/poll` again (shadowing wasmtime-wasi's synchronous
/// versions) over [`NonBlockingIo`].
pub(super) fn link_non_blocking<T: HasTable + Send + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked =
        streams::add_to_linker::<T, NonBlocking>(linker, |state| NonBlockingIo(state.table()))
            .and_then(|()| {
                poll::add_to_linker::<T, NonBlocking>(linker, |state| NonBlockingIo(state.table()))
            });
    linker.allow_shadowing(false);
    linked
}

/// [`HasData`] marker for [`NonBlockingIo`].
struct NonBlocking;

impl HasData for NonBlocking {
    type Data<'a> = NonBlockingIo<'a>;
}

/// A store's resource table, with every blocking stream operation polled once.
pub(super) struct NonBlockingIo<'a>(&'a mut ResourceTable);

/// Poll `future` once: ready is the result, pending means the guest asked to wait.
fn once<T>(future: impl Future<Output = T>) -> Option<T> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}

fn would_block(what: &str) -> StreamError {
    StreamError::trap(&format!(
        "the guest's {what} would block; the bridge gives guests no blocking I/O"
    ))
}

fn would_block_trap(what: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!(
        "the guest's {what} would block; the bridge gives guests no blocking I/O"
    ))
}

impl streams::Host for NonBlockingIo<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        Ok(match AsyncHost::convert_stream_error(self.0, err)? {
            wasmtime_wasi_io::bindings::wasi::io::streams::StreamError::LastOperationFailed(e) => {
                streams::StreamError::LastOperationFailed(e)
            }
            wasmtime_wasi_io::bindings::wasi::io::streams::StreamError::Closed => {
                streams::StreamError::Closed
            }
        })
    }
}

impl streams::HostOutputStream for NonBlockingIo<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        once(AsyncHostOutputStream::drop(self.0, stream)).unwrap_or(Ok(()))
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        AsyncHostOutputStream::check_write(self.0, stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        AsyncHostOutputStream::write(self.0, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        once(AsyncHostOutputStream::blocking_write_and_flush(
            self.0, stream, bytes,
        ))
        .unwrap_or_else(|| Err(would_block("write")))
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        once(AsyncHostOutputStream::blocking_write_zeroes_and_flush(
            self.0, stream, len,
        ))
        .unwrap_or_else(|| Err(would_block("write")))
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        AsyncHostOutputStream::subscribe(self.0, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        AsyncHostOutputStream::write_zeroes(self.0, stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        AsyncHostOutputStream::flush(self.0, stream)
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        once(AsyncHostOutputStream::blocking_flush(self.0, stream))
            .unwrap_or_else(|| Err(would_block("flush")))
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        AsyncHostOutputStream::splice(self.0, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        once(AsyncHostOutputStream::blocking_splice(
            self.0, dst, src, len,
        ))
        .unwrap_or_else(|| Err(would_block("splice")))
    }
}

impl streams::HostInputStream for NonBlockingIo<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        once(AsyncHostInputStream::drop(self.0, stream)).unwrap_or(Ok(()))
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        AsyncHostInputStream::read(self.0, stream, len)
    }

    fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        once(AsyncHostInputStream::blocking_read(self.0, stream, len))
            .unwrap_or_else(|| Err(would_block("read")))
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        AsyncHostInputStream::skip(self.0, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        once(AsyncHostInputStream::blocking_skip(self.0, stream, len))
            .unwrap_or_else(|| Err(would_block("read")))
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        AsyncHostInputStream::subscribe(self.0, stream)
    }
}

impl poll::Host for NonBlockingIo<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        once(async_poll::Host::poll(self.0, pollables))
            .unwrap_or_else(|| Err(would_block_trap("poll")))
    }
}

impl poll::HostPollable for NonBlockingIo<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        once(async_poll::HostPollable::ready(self.0, pollable)).unwrap_or(Ok(false))
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        once(async_poll::HostPollable::block(self.0, pollable))
            .unwrap_or_else(|| Err(would_block_trap("poll")))
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.0, pollable)
    }
}
