//! A byte stream whose writes may not stall longer than a limit: a client that asks for a page
//! and then never reads it (a "slow read") would otherwise hold its connection, and one of the
//! server's connection slots, for ever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, with writes that fail with [`io::ErrorKind::TimedOut`] after `limit` without any
/// progress.
pub(super) struct StallLimit<T> {
    inner: T,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> StallLimit<T> {
    pub(super) fn new(inner: T, limit: Duration) -> Self {
        StallLimit {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Passes `r` through, timing how long the writer has waited.
    fn watch<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing for {}",
                    humantime::format_duration(limit)
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallLimit<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallLimit<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_limit_and_progress_resets_it() {
        let limit = Duration::from_millis(300);
        let (server, _client) = tokio::io::duplex(64);
        let mut w = StallLimit::new(server, limit);
        // Fills the pipe: the rest waits for a reader that never comes.
        w.write_all(&[b'x'; 64]).await.unwrap();
        let started = std::time::Instant::now();
        let e = w.write_all(&[b'y'; 64]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= limit, "{:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(e.to_string().contains("read nothing for 300ms"), "{e}");

        // A reader that takes a little every 100 ms keeps a longer write going.
        let (server, mut client) = tokio::io::duplex(64);
        let mut w = StallLimit::new(server, limit);
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let mut total = 0;
            while total < 512 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                total += client.read(&mut buf).await.unwrap();
            }
            total
        });
        w.write_all(&[b'z'; 512]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 512);
    }
}
