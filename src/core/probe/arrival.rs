//! Kernel receive timestamps: when the bytes a read returned arrived at this host, as opposed to
//! when the probe's task got around to reading them.
//!
//! # How the arrival time is obtained (measured on Linux 6.18, this project's CI machine)
//!
//! - `ioctl(SIOCGSTAMPNS)` after a read, the cheapest route (no change to who reads the socket),
//!   does **not** work for TCP: it fails with `ENOENT` on every call, with `SO_TIMESTAMPNS` on or
//!   off: TCP hands its stamps out only as `recvmsg` ancillary data. Test:
//!   `tests::siocgstampns_reports_nothing_for_tcp`.
//! - `recvmsg` on a socket with `SO_TIMESTAMPNS` returns, as ancillary data, the
//!   `CLOCK_REALTIME` instant the kernel received the data it hands over — the *last* segment
//!   of the read: TCP coalesces queued segments and keeps the newest stamp, so a read that
//!   returns several segments reports the latest arrival among them (an upper bound for the
//!   earlier bytes, never earlier than any of them). A read done 50 ms late (100 ms, checked by
//!   hand) still reports the arrival within microseconds:
//!   `tests::a_late_read_reports_the_arrival_not_the_read`,
//!   `tests::queued_segments_report_the_latest_arrival`. This is the route: [`StampedStream`]
//!   reads its socket with `recvmsg` and keeps the latest stamp ([`Arrivals`]). Its cost,
//!   measured with a C loop on loopback (100-byte reads): 1.74–1.79 µs of CPU per `recvmsg`
//!   with the stamp against 1.57–1.58 µs per plain `recv`.
//! - It needs the reads of the socket, and reqwest does not give them out: the service that
//!   `ClientBuilder::connector_layer` wraps returns reqwest's sealed `Conn` (a boxed transport
//!   without a raw fd, not constructible outside reqwest), so the connector layer of
//!   `probe::connect` can time a connect but cannot wrap its socket. So the probe owns the
//!   connector where that is small and exact: `http://` and `https://` targets, direct or
//!   through an HTTP proxy from the environment, go over hyper-util's client with every socket
//!   a [`StampedStream`] (`src/core/probe/transport.rs`); targets behind an `https://` or SOCKS
//!   proxy stay on reqwest with read instants (`timestamp_source: read`). Through a proxy the
//!   stamps are the arrival of the proxy's segments at this host.
//! - TLS (tokio-rustls, through hyper-rustls) reads the [`StampedStream`] itself, so the newest
//!   stamp when the probe gets decrypted bytes is the newest among the TCP reads rustls consumed
//!   up to then: the arrival of the segment that completed the record those bytes came from. A
//!   record is decrypted only once complete, so that is when its plaintext could first be had;
//!   rustls may also have read (not yet decrypted) later segments, which is the read-ahead limit
//!   below. Test: `tests/fidelity/kernel_timestamps.rs`, `a_blocked_runtime_does_not_delay_ttft_over_tls`.
//!
//! Limits, both bounded by the read instant (a mark is never later than its read): segments
//! that wait unread are merged by the kernel and keep the newest stamp, so tokens the probe
//! reads only after the next one arrived share the later arrival; and hyper (and rustls under
//! it) reads the socket in its connection task, so when the probe is behind, that task may read
//! the next segment between the probe taking a body chunk and looking up the connection's newest
//! stamp. Both
//! need the probe to be late by more than one inter-token gap; `llm_probe_read_delay_seconds`
//! shows when it is.
//!
//! Kernel stamps are on `CLOCK_REALTIME`; the timeline is on the monotonic clock.
//! [`arrival_instant`] maps one onto the other by sampling both clocks at read time.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::coalesce::Urgent;

/// The monotonic instant bytes arrived, from the kernel's `CLOCK_REALTIME` stamp `kernel`, the
/// instant the read returned (`read_at`) and the wall clock sampled right after it
/// (`realtime_now`): `read_at − (realtime_now − kernel)`, clamped to no earlier than `floor`
/// (the previous mark of the timeline, so marks stay in order) and no later than `read_at`
/// (a wall-clock step, or a stamp from the future, never moves a mark past its read).
pub fn arrival_instant(
    read_at: Instant,
    realtime_now: SystemTime,
    kernel: SystemTime,
    floor: Instant,
) -> Instant {
    let lag = realtime_now
        .duration_since(kernel)
        .unwrap_or(Duration::ZERO);
    read_at
        .checked_sub(lag)
        .unwrap_or(floor)
        .max(floor)
        .min(read_at)
}

/// Turns the kernel's receive timestamping on ahead of the first stamped connection (it takes
/// effect in deferred work), and keeps it on ([`StampedStream`]). The first call blocks until
/// it is on (typically well under a millisecond, at most 1 s on a starved machine, once per
/// process); later calls return at once. Does nothing on a platform without receive timestamps.
pub fn prepare() {
    #[cfg(target_os = "linux")]
    sys::keep_stamping_on();
}

/// Marks the reads of one response: each read's mark is the arrival of the data it returned
/// (the newest kernel stamp of the connection, mapped by [`arrival_instant`] with the previous
/// mark as floor), or the instant the read returned when the connection has no stamps.
#[derive(Debug)]
pub struct Stamper {
    arrivals: Option<Arc<Arrivals>>,
    floor: Instant,
    /// The stamp of the previous mark, to tell a read that brought newly stamped data.
    last: Option<SystemTime>,
}

impl Stamper {
    /// A stamper for a response on a connection with `arrivals` (`None`: unstamped), whose
    /// request was sent at `sent` (no mark before it).
    pub fn new(arrivals: Option<Arc<Arrivals>>, sent: Instant) -> Self {
        Stamper {
            arrivals,
            floor: sent,
            last: None,
        }
    }

    /// The mark of a read that returned at `read_at`, and how long after the arrival the read
    /// returned (`None` for an unstamped read, marked `read_at`).
    pub fn mark(&mut self, read_at: Instant) -> (Instant, Option<Duration>) {
        let now = SystemTime::now();
        let Some(kernel) = self.arrivals.as_ref().and_then(|a| a.latest()) else {
            // Later marks stay in order after this one.
            self.floor = self.floor.max(read_at);
            return (read_at, None);
        };
        // Data of the same stamp (one socket read, handed over in pieces) gets the same mark,
        // not one re-mapped with a fresh clock sample.
        let at = if self.last == Some(kernel) {
            self.floor
        } else {
            arrival_instant(read_at, now, kernel, self.floor)
        };
        self.floor = at;
        self.last = Some(kernel);
        (at, Some(read_at.saturating_duration_since(at)))
    }

    /// The mark of the read that found the end of the body: its arrival if it brought a new
    /// stamp (a chunked body's last chunk); the previous mark if the end came with data already
    /// marked (the last chunk in the same segment as the last event, read before: wake-up
    /// coalescing makes that common); else `read_at` (the peer's close, which carries no stamp,
    /// or a connection without stamps).
    pub fn mark_end(&mut self, read_at: Instant) -> Instant {
        let Some(arrivals) = &self.arrivals else {
            return read_at;
        };
        let kernel = arrivals.latest();
        if kernel.is_some() && kernel != self.last {
            self.mark(read_at).0
        } else if self.last.is_some() && !arrivals.peer_closed() {
            self.floor
        } else {
            read_at
        }
    }
}

/// What arrived on one connection, shared between the stream that reads it ([`StampedStream`])
/// and whoever stamps what was read: the latest kernel receive stamp (nanoseconds since the
/// Unix epoch, `0`: none yet), and the bytes read since the last write (on a plain HTTP/1.1
/// connection: how much of the answer to the request written last has come); when the last
/// write was handed to the socket, and the kernel arrival of the first data received after it.
#[derive(Debug, Default)]
pub struct Arrivals {
    latest: AtomicU64,
    since_write: AtomicU64,
    /// The last write: when its call began and when it returned.
    written: std::sync::Mutex<Option<WriteSpan>>,
    /// The kernel stamp (ns) of the first stamped read whose data arrived after the last write
    /// began.
    first_after_write: AtomicU64,
    /// A read found the peer's close (end of stream, which carries no stamp).
    peer_closed: std::sync::atomic::AtomicBool,
    /// A probe's [`Urgent`] guard, handed over ([`Arrivals::release_when_written`]) to be
    /// dropped once a request has been written and flushed; with [`HANDOVER_ARMED`] or
    /// [`HANDOVER_WRITTEN`] in `handover`.
    until_written: std::sync::Mutex<Option<Urgent>>,
    handover: AtomicU8,
    /// The connection's reads carry kernel stamps (set once, when the stream is made).
    stamped: std::sync::atomic::AtomicBool,
}

/// One write to the socket: the instants its call began and returned, each on the monotonic
/// clock and as wall-clock (`CLOCK_REALTIME`) nanoseconds. Its bytes were handed to the kernel
/// somewhere in between; on a busy host the thread can be preempted after the call returned
/// and before `returned` is read, and on loopback the call itself runs the peer's receive path,
/// so an answer can arrive before `returned` (measured: 1 probe in 6 with `probe-once` against
/// the simulator on a loaded 2-core VM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSpan {
    /// When the write call began.
    pub begun: Instant,
    begun_wall: u64,
    /// When the write call had returned.
    pub returned: Instant,
}

impl WriteSpan {
    /// A span that began at `begun` (monotonic) / `begun_wall` (wall clock) and returned now.
    pub(super) fn ending_now((begun, begun_wall): (Instant, SystemTime)) -> Self {
        WriteSpan {
            begun,
            begun_wall: nanos(begun_wall),
            returned: Instant::now(),
        }
    }
}

/// The monotonic and wall-clock instants now, taken before a write call ([`WriteSpan`]).
pub(super) fn write_begins() -> (Instant, SystemTime) {
    (Instant::now(), SystemTime::now())
}

/// `Arrivals::handover`: no guard held.
const HANDOVER_NONE: u8 = 0;
/// A guard is held, nothing written since it was handed over.
const HANDOVER_ARMED: u8 = 1;
/// A guard is held and bytes were written since: the next completed flush drops it.
const HANDOVER_WRITTEN: u8 = 2;

impl Arrivals {
    /// The `CLOCK_REALTIME` arrival of the newest data read so far, `None` before any stamped
    /// read (or on a platform without receive timestamps).
    pub fn latest(&self) -> Option<SystemTime> {
        match self.latest.load(Ordering::Acquire) {
            0 => None,
            ns => Some(UNIX_EPOCH + Duration::from_nanos(ns)),
        }
    }

    /// Bytes read from the socket since the last write to it (stamped or not).
    pub fn bytes_since_write(&self) -> u64 {
        self.since_write.load(Ordering::Acquire)
    }

    /// The last write to the socket (its bytes handed to the kernel between the span's ends):
    /// for an HTTP/1.x request read at its response head, the write of its last bytes. `None`
    /// before any write.
    pub fn last_write(&self) -> Option<WriteSpan> {
        *self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `CLOCK_REALTIME` kernel arrival of the first data read since the last write that
    /// arrived after that write began (data that arrived before, such as a TLS session ticket
    /// read late, does not count): for an HTTP/1.x request, the first byte of its response.
    /// `None` before such a stamped read.
    pub fn first_since_write(&self) -> Option<SystemTime> {
        match self.first_after_write.load(Ordering::Acquire) {
            0 => None,
            ns => Some(UNIX_EPOCH + Duration::from_nanos(ns)),
        }
    }

    /// Whether a read has found the peer's close (a read of 0 bytes).
    pub fn peer_closed(&self) -> bool {
        self.peer_closed.load(Ordering::Acquire)
    }

    pub(super) fn record(&self, stamp: SystemTime) {
        let ns = nanos(stamp);
        self.latest.fetch_max(ns, Ordering::AcqRel);
        let written = *self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.is_some_and(|w| ns >= w.begun_wall) {
            let _ =
                self.first_after_write
                    .compare_exchange(0, ns, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    fn read(&self, bytes: usize) {
        self.since_write.fetch_add(bytes as u64, Ordering::AcqRel);
    }

    /// Holds `guard` until a request has been written on this connection: dropped at the first
    /// completed flush after bytes were written from now on, at [`Arrivals::release`], or with
    /// the connection. For a connection whose setup (TCP, TLS handshake) is done, so that the
    /// next bytes written are a request (HTTP/1.x: hyper writes a request and then flushes
    /// it); its response is read with kernel stamps, so a late read of it moves no mark
    /// (`super::coalesce`). A guard handed over before replaces any not yet dropped.
    pub fn release_when_written(&self, guard: Urgent) {
        *self.until_written.lock().unwrap_or_else(|e| e.into_inner()) = Some(guard);
        self.handover.store(HANDOVER_ARMED, Ordering::Release);
    }

    /// Drops a guard handed over by [`Arrivals::release_when_written`], if it is still held.
    pub fn release(&self) {
        if self.handover.swap(HANDOVER_NONE, Ordering::AcqRel) != HANDOVER_NONE {
            drop(
                self.until_written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
        }
    }

    /// Whether the connection's reads carry kernel receive stamps: only then does a late read
    /// leave its marks where they were ([`Arrivals::release_when_written`] is for such a one).
    pub fn is_stamped(&self) -> bool {
        self.stamped.load(Ordering::Acquire)
    }

    /// Whether a guard handed over by [`Arrivals::release_when_written`] is still held.
    pub fn holds_urgent(&self) -> bool {
        self.handover.load(Ordering::Acquire) != HANDOVER_NONE
    }

    /// A flush completed: drops the handed-over guard if bytes were written since it came.
    fn flushed(&self) {
        if self.handover.load(Ordering::Acquire) == HANDOVER_WRITTEN {
            self.release();
        }
    }

    pub(super) fn wrote(&self, span: WriteSpan) {
        let _ = self.handover.compare_exchange(
            HANDOVER_ARMED,
            HANDOVER_WRITTEN,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        *self.written.lock().unwrap_or_else(|e| e.into_inner()) = Some(span);
        self.first_after_write.store(0, Ordering::Release);
        self.since_write.store(0, Ordering::Release);
    }
}

/// `t` in nanoseconds since the Unix epoch (0 before it).
fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(target_os = "linux")]
mod sys {
    use std::io;
    use std::os::fd::RawFd;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    /// Asks the kernel to stamp every segment received on `fd` (`SO_TIMESTAMPNS`, software).
    pub fn enable(fd: RawFd) -> io::Result<()> {
        let on: libc::c_int = 1;
        // SAFETY: a plain setsockopt with a pointer to a live c_int and its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Keeps receive timestamping on for the whole process. The kernel stamps packets only while
    /// some socket asks for stamps, and turns that on and off in deferred work: with
    /// `connection: fresh` every probe's socket would be the only one, and the first segments on
    /// it (the response head, often the first token) would arrive unstamped. One idle UDP
    /// socket with `SO_TIMESTAMPNS`, opened once and never closed, keeps it on. The first call
    /// also waits (up to about 50 ms, once per process) until a datagram sent to that socket
    /// comes back stamped, so stamping is on before the first probe connects.
    pub fn keep_stamping_on() {
        static KEEPER: std::sync::OnceLock<Option<std::net::UdpSocket>> =
            std::sync::OnceLock::new();
        KEEPER.get_or_init(|| {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
            enable(fd).ok()?;
            socket.connect(socket.local_addr().ok()?).ok()?;
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1];
            // The deferred work runs on a kernel worker: usually within a millisecond, but a
            // unit test on a 2-core machine at load average 8 once read data with no stamp after
            // the former 50 ms bound. A second is generous and costs nothing when it is quick.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
            while std::time::Instant::now() < deadline {
                let _ = socket.send(&[0]);
                std::thread::sleep(std::time::Duration::from_micros(200));
                if matches!(recv_stamped(fd, &mut buf), Ok((_, Some(_)))) {
                    break;
                }
            }
            // Drain what is left, so the idle socket holds no memory.
            while recv_stamped(fd, &mut buf).is_ok() {}
            Some(socket)
        });
    }

    #[cfg(test)]
    thread_local! {
        /// `recvmsg` calls made by [`recv_stamped`] on this thread (tests only).
        pub static RECVMSG_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// `recv` into `buf` with the receive timestamp of the data returned, if the kernel gave one.
    /// `buf` may be uninitialised: the kernel only writes into it, and the first `n` bytes
    /// (the count returned) are initialised when it returns.
    pub fn recv_stamped(
        fd: RawFd,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<SystemTime>)> {
        // Room for one `struct timespec` control message, 8-byte aligned.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: zeroed msghdr is a valid "no name, no control" header; fields set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        #[cfg(test)]
        RECVMSG_CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: msg points at live buffers of the stated sizes for the duration of the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: the CMSG_* walk stays within msg_controllen of the buffer the kernel filled.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let c = &*cmsg;
                if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == libc::SO_TIMESTAMPNS {
                    let ts =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                    if ts.tv_sec > 0 {
                        stamp =
                            Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        Ok((n as usize, stamp))
    }
}

/// A TCP stream whose reads record the kernel's receive timestamp of the data they return in
/// its [`Arrivals`]. Writes go straight to the socket. On a platform (or socket) without receive
/// timestamps it reads as usual and records nothing.
#[derive(Debug)]
pub struct StampedStream {
    inner: tokio::net::TcpStream,
    arrivals: Arc<Arrivals>,
}

impl StampedStream {
    /// Wraps `inner`, turning receive timestamps on (`SO_TIMESTAMPNS`). If the platform refuses,
    /// the stream still works, unstamped ([`StampedStream::is_stamped`] is false). Call
    /// [`prepare`] once before (the probe's client does), or the first segments may come
    /// unstamped while the kernel turns stamping on.
    pub fn new(inner: tokio::net::TcpStream) -> Self {
        #[cfg(target_os = "linux")]
        let stamped = sys::enable(std::os::fd::AsRawFd::as_raw_fd(&inner)).is_ok();
        #[cfg(not(target_os = "linux"))]
        let stamped = false;
        let arrivals = Arc::new(Arrivals::default());
        arrivals.stamped.store(stamped, Ordering::Release);
        StampedStream { inner, arrivals }
    }

    /// Whether reads carry kernel receive timestamps ([`Arrivals::is_stamped`]).
    pub fn is_stamped(&self) -> bool {
        self.arrivals.is_stamped()
    }

    /// The connection's latest arrival, shared: readable while the stream is being read
    /// elsewhere (for instance by hyper's connection task).
    pub fn arrivals(&self) -> Arc<Arrivals> {
        Arc::clone(&self.arrivals)
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &tokio::net::TcpStream {
        &self.inner
    }

    /// A plain read, counted in [`Arrivals::bytes_since_write`].
    fn read_unstamped(
        &mut self,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut self.inner), cx, buf);
        self.arrivals.read(buf.filled().len() - before);
        polled
    }
}

impl tokio::io::AsyncRead for StampedStream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.arrivals.is_stamped() {
            return this.read_unstamped(cx, buf);
        }
        #[cfg(target_os = "linux")]
        loop {
            std::task::ready!(this.inner.poll_read_ready(cx))?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&this.inner);
            // Read into the unfilled part as it is, without zeroing it first: hyper hands over
            // its whole spare read buffer (8 KiB or more) on every read, and zeroing it was
            // 3.5 % of the probing thread's CPU at 1,000 targets.
            // SAFETY: `recv_stamped` only writes into the slice (the kernel copies at most its
            // length), and `assume_init` below covers just the `n` bytes it reports written.
            let unfilled = unsafe { buf.unfilled_mut() };
            let room = unfilled.len();
            // A read that returned less than it had room for drained the socket: its readiness
            // is cleared now (by reporting `WouldBlock` to `try_io` and keeping the result), as
            // tokio's own `TcpStream` does, so the next poll waits for the next epoll event
            // instead of spending a `recvmsg` on learning that nothing is there (one syscall
            // per token event saved). Readiness is edge-triggered, so data that
            // arrives after this read raises a new event; a close stays visible (tokio keeps
            // the closed state when it clears readiness).
            let mut drained = None;
            let read =
                this.inner.try_io(tokio::io::Interest::READABLE, || {
                    match sys::recv_stamped(fd, unfilled)? {
                        (n, stamp) if n > 0 && n < room => {
                            drained = Some((n, stamp));
                            Err(std::io::ErrorKind::WouldBlock.into())
                        }
                        read => Ok(read),
                    }
                });
            match drained.map_or(read, Ok) {
                Ok((n, stamp)) => {
                    if let Some(s) = stamp {
                        this.arrivals.record(s);
                    }
                    if n == 0 && room > 0 {
                        this.arrivals.peer_closed.store(true, Ordering::Release);
                    }
                    this.arrivals.read(n);
                    // SAFETY: `recvmsg` wrote the first `n` bytes of the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return std::task::Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return std::task::Poll::Ready(Err(e)),
            }
        }
        #[cfg(not(target_os = "linux"))]
        this.read_unstamped(cx, buf)
    }
}

impl tokio::io::AsyncWrite for StampedStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let begun = write_begins();
        let polled = std::pin::Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            this.arrivals.wrote(WriteSpan::ending_now(begun));
        }
        polled
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.inner).poll_flush(cx);
        if matches!(polled, std::task::Poll::Ready(Ok(()))) {
            this.arrivals.flushed();
        }
        polled
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let begun = write_begins();
        let polled = std::pin::Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            this.arrivals.wrote(WriteSpan::ending_now(begun));
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::mpsc;

    use tokio::io::AsyncReadExt;

    use super::*;

    /// A loopback pair: the server side (blocking, no delay) and the client side stamped.
    async fn pair() -> (std::net::TcpStream, StampedStream) {
        prepare();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nodelay(true).unwrap();
        let client = StampedStream::new(client);
        assert!(client.is_stamped());
        (server, client)
    }

    /// Reads once and maps the connection's latest stamp onto the monotonic clock.
    async fn read_and_map(
        client: &mut StampedStream,
        floor: Instant,
    ) -> (Vec<u8>, Instant, Instant) {
        let mut buf = [0u8; 64];
        let n = client.read(&mut buf).await.unwrap();
        let read_at = Instant::now();
        let now = SystemTime::now();
        let kernel = client.arrivals().latest().expect("a kernel stamp");
        (
            buf[..n].to_vec(),
            read_at,
            arrival_instant(read_at, now, kernel, floor),
        )
    }

    fn close(a: Instant, b: Instant) -> Duration {
        if a > b {
            a - b
        } else {
            b - a
        }
    }

    /// At the socket: the reading runtime (single-threaded) is blocked
    /// for 50 ms by another task after the token arrived; the arrival is still within 1 ms of
    /// the true send instant, and the read came ≈ 50 ms after it.
    #[test]
    fn a_late_read_reports_the_arrival_not_the_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut server, mut client) = pair().await;
            let (tx, rx) = mpsc::channel();
            let sender = std::thread::spawn(move || {
                let sent = Instant::now();
                server.write_all(b"data: tok\n\n").unwrap();
                tx.send(sent).unwrap();
                server
            });
            let sent = rx.recv().unwrap();
            // Another task hogs the runtime's only thread for 50 ms before the read runs.
            let hog = tokio::spawn(async { std::thread::sleep(Duration::from_millis(50)) });
            hog.await.unwrap();
            let (bytes, read_at, arrived) = read_and_map(&mut client, sent).await;
            assert_eq!(bytes, b"data: tok\n\n");
            let error = close(arrived, sent);
            assert!(error < Duration::from_millis(1), "arrival off by {error:?}");
            let delay = read_at - arrived;
            assert!(
                delay >= Duration::from_millis(49) && delay < Duration::from_millis(500),
                "read delay {delay:?}"
            );
            drop(sender.join().unwrap());
        });
    }

    /// Two segments 30 ms apart, read together 30 ms after the second: the stamp is the second
    /// one's arrival (the newest of the read), not the first's, and not the read's.
    #[tokio::test(flavor = "current_thread")]
    async fn queued_segments_report_the_latest_arrival() {
        let (mut server, mut client) = pair().await;
        let first = Instant::now();
        server.write_all(b"a").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let second = Instant::now();
        server.write_all(b"b").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let (bytes, _, arrived) = read_and_map(&mut client, first).await;
        assert_eq!(bytes, b"ab");
        assert!(
            close(arrived, second) < Duration::from_millis(1),
            "{:?}",
            arrived - first
        );
    }

    /// A read that returns less than it had room for drained the socket: the next poll waits
    /// for the next readiness event without a `recvmsg` that would only say `EAGAIN` (issue
    /// 31: one syscall less per token event), and data sent later, then the peer's close, are
    /// still seen.
    #[tokio::test(flavor = "current_thread")]
    async fn a_short_read_waits_for_the_next_event_without_a_syscall() {
        use std::future::Future;
        use std::task::Poll;
        let calls = || sys::RECVMSG_CALLS.with(std::cell::Cell::get);
        let (mut server, mut client) = pair().await;
        server.write_all(b"data: one\n\n").unwrap();
        let mut buf = [0u8; 4096];
        let before = calls();
        assert_eq!(client.read(&mut buf).await.unwrap(), 11);
        assert_eq!(calls() - before, 1, "one recvmsg for the data");
        // Nothing more has come: the next poll is pending at once, with no recvmsg.
        let mut read = Box::pin(client.read(&mut buf));
        let polled = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
        assert_eq!(
            calls() - before,
            1,
            "no recvmsg to learn that nothing is there"
        );
        server.write_all(b"data: two\n\n").unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("woken by the next segment")
            .unwrap();
        assert_eq!(&buf[..n], b"data: two\n\n");
        drop(server);
        let eof = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
            .await
            .expect("the close is seen");
        assert_eq!(eof.unwrap(), 0);
    }

    /// Why the stamps come from `recvmsg`: `SIOCGSTAMPNS` has nothing for a TCP socket, even with
    /// `SO_TIMESTAMPNS` on and data read.
    #[tokio::test(flavor = "current_thread")]
    async fn siocgstampns_reports_nothing_for_tcp() {
        let (mut server, mut client) = pair().await;
        server.write_all(b"x").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(client.read(&mut buf).await.unwrap(), 1);
        let fd = std::os::fd::AsRawFd::as_raw_fd(client.get_ref());
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        /// `SIOCGSTAMPNS` (`linux/sockios.h`; libc does not name it).
        const SIOCGSTAMPNS: libc::c_ulong = 0x8907;
        // SAFETY: SIOCGSTAMPNS writes one timespec through the pointer.
        let rc = unsafe { libc::ioctl(fd, SIOCGSTAMPNS as _, &mut ts) };
        let err = std::io::Error::last_os_error();
        assert_eq!(rc, -1, "SIOCGSTAMPNS gave {}.{:09}", ts.tv_sec, ts.tv_nsec);
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    }

    #[test]
    fn the_mapping_subtracts_the_lag_and_clamps() {
        let read_at = Instant::now() + Duration::from_secs(10);
        let now = SystemTime::now();
        let floor = read_at - Duration::from_secs(5);
        let ms = Duration::from_millis;
        assert_eq!(
            arrival_instant(read_at, now, now - ms(50), floor),
            read_at - ms(50)
        );
        // Not before the previous mark, not after the read.
        assert_eq!(arrival_instant(read_at, now, now - ms(9000), floor), floor);
        assert_eq!(arrival_instant(read_at, now, now + ms(20), floor), read_at);
        // A floor after the read (cannot happen; the read wins).
        assert_eq!(arrival_instant(read_at, now, now, read_at + ms(1)), read_at);
    }

    /// Reads of one socket read share one mark; a read without a stamp is marked when it
    /// returned, and later marks stay after it; the end of the body is marked at the data it
    /// came with, and a close when it was read unless it brought a new stamp.
    #[test]
    fn the_stamper_marks_each_read_in_order() {
        let ms = Duration::from_millis;
        let sent = Instant::now();
        let arrivals = Arc::new(Arrivals::default());
        let mut st = Stamper::new(Some(Arc::clone(&arrivals)), sent);
        // Nothing stamped yet: the read's own instant, no delay.
        assert_eq!(st.mark(sent + ms(1)), (sent + ms(1), None));
        // Data that arrived 5 ms before the read (read 20 ms after sent).
        arrivals.record(SystemTime::now() - ms(5));
        let (at, delay) = st.mark(sent + ms(20));
        let delay = delay.unwrap();
        assert!(delay >= ms(5) && delay < ms(6), "{delay:?}");
        assert_eq!(at + delay, sent + ms(20));
        // The rest of the same socket read, handed over later: the same mark.
        let (again, later) = st.mark(sent + ms(22));
        assert_eq!(again, at);
        assert_eq!(later, Some(sent + ms(22) - at));
        // The end found in data already marked (a chunked body's last chunk in the same
        // segment as the last event): that data's mark, not the late read's.
        assert_eq!(st.mark_end(sent + ms(30)), at);
        // A close (a read of 0 bytes) without new data is marked when it was read.
        arrivals.peer_closed.store(true, Ordering::Release);
        assert_eq!(st.mark_end(sent + ms(31)), sent + ms(31));
        // Without arrivals (reqwest's connections) every mark is the read's.
        let mut plain = Stamper::new(None, sent);
        assert_eq!(plain.mark(sent + ms(3)), (sent + ms(3), None));
        assert_eq!(plain.mark_end(sent + ms(4)), sent + ms(4));
    }

    /// A guard handed to a connection is dropped by the first flush after a write (the
    /// request's), not by a flush before it, nor by the write alone; [`Arrivals::release`]
    /// drops one that is still held.
    #[tokio::test]
    async fn a_handed_over_guard_is_dropped_once_a_request_is_written_and_flushed() {
        use tokio::io::AsyncWriteExt;
        let (mut server, mut client) = pair().await;
        let arrivals = client.arrivals();
        client.write_all(b"ClientHello").await.unwrap();
        client.flush().await.unwrap();
        assert!(!arrivals.holds_urgent(), "nothing handed over yet");

        arrivals.release_when_written(super::super::coalesce::urgent());
        assert!(arrivals.holds_urgent());
        client.flush().await.unwrap();
        assert!(
            arrivals.holds_urgent(),
            "a flush with nothing written since"
        );
        client.write_all(b"POST / HTTP/1.1\r\n").await.unwrap();
        assert!(arrivals.holds_urgent(), "written, not yet flushed");
        client.write_all(b"\r\n").await.unwrap();
        client.flush().await.unwrap();
        assert!(!arrivals.holds_urgent(), "written and flushed: dropped");
        let mut got = [0u8; 30];
        std::io::Read::read_exact(&mut server, &mut got[..11 + 17 + 2]).unwrap();

        arrivals.release_when_written(super::super::coalesce::urgent());
        arrivals.release();
        assert!(!arrivals.holds_urgent(), "released by the exchange");
        client.write_all(b"x").await.unwrap();
        client.flush().await.unwrap();
        assert!(!arrivals.holds_urgent());
    }

    #[test]
    fn arrivals_keep_the_newest_stamp() {
        let a = Arrivals::default();
        assert_eq!(a.latest(), None);
        let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        a.record(t);
        a.record(t - Duration::from_millis(1));
        assert_eq!(a.latest(), Some(t));
    }

    /// The first arrival after a write is kept until the next write; data stamped before the
    /// write (a TLS session ticket read late) does not count.
    #[test]
    fn the_first_arrival_after_the_last_write() {
        let a = Arrivals::default();
        a.record(SystemTime::now());
        assert_eq!((a.last_write(), a.first_since_write()), (None, None));
        let before = SystemTime::now() - Duration::from_millis(50);
        a.wrote(WriteSpan::ending_now(write_begins()));
        let written = a.last_write().expect("a write");
        assert!(written.begun <= written.returned);
        a.record(before);
        assert_eq!(a.first_since_write(), None, "arrived before the write");
        let first = SystemTime::now() + Duration::from_millis(1);
        a.record(first);
        a.record(first + Duration::from_millis(2));
        assert_eq!(a.first_since_write(), Some(first));
        a.wrote(WriteSpan::ending_now(write_begins()));
        assert!(a.last_write().unwrap().begun >= written.returned);
        assert_eq!(a.first_since_write(), None, "reset by the next write");
    }

    /// An answer that arrived while the write call was still returning (its thread preempted,
    /// or loopback's receive path run inside it) is the first arrival after that write.
    #[test]
    fn an_arrival_before_the_write_returned_counts_from_its_start() {
        let a = Arrivals::default();
        let begun = write_begins();
        let answer = SystemTime::now() + Duration::from_micros(1);
        std::thread::sleep(Duration::from_millis(2));
        a.wrote(WriteSpan::ending_now(begun));
        a.record(answer);
        assert_eq!(a.first_since_write(), Some(answer));
    }
}
