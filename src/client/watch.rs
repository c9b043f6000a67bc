//! A watch stream: newline-delimited JSON events read incrementally from a chunked body.

use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;

use super::rest::io_error;
use super::transport::Canceller;
use super::Error;
use crate::api::WatchEvent;

/// Largest single watch event we accept (etcd caps objects at 1.5 MiB).
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// A blocking iterator of watch events; ends when the server closes the stream.
pub struct WatchStream<K> {
    lines: EventLines,
    _kind: PhantomData<fn() -> K>,
}

/// The stream's lines, apart from the kind they decode into (compiled once for all kinds).
struct EventLines {
    reader: BufReader<Box<dyn Read + Send>>,
    cancel: Canceller,
    line: Vec<u8>,
    max_event_bytes: usize,
    done: bool,
}

impl<K: serde::de::DeserializeOwned> WatchStream<K> {
    /// Wraps a body reader.
    pub(crate) fn new(reader: impl Read + Send + 'static, cancel: Canceller) -> Self {
        WatchStream {
            lines: EventLines {
                reader: BufReader::with_capacity(64 << 10, Box::new(reader)),
                cancel,
                line: Vec::new(),
                max_event_bytes: MAX_EVENT_BYTES,
                done: false,
            },
            _kind: PhantomData,
        }
    }

    /// This stream with a different limit on one event (default [`MAX_EVENT_BYTES`]).
    pub fn with_max_event_bytes(mut self, limit: usize) -> Self {
        self.lines.max_event_bytes = limit;
        self
    }

    /// A handle that ends this stream from another thread.
    pub fn canceller(&self) -> Canceller {
        self.lines.cancel.clone()
    }
}

impl EventLines {
    /// The next event's line (in `self.line`): `Some(Ok)` when there is one, `None` at the
    /// end of the stream; after an error, `None`.
    fn next(&mut self) -> Option<Result<(), Error>> {
        if self.done {
            return None;
        }
        if self.cancel.is_cancelled() {
            self.done = true;
            return Some(Err(Error::Cancelled));
        }
        match self.read_line() {
            Ok(true) => Some(Ok(())),
            Ok(false) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// Reads up to the next newline; Ok(false) at a clean end of stream.
    fn read_line(&mut self) -> Result<bool, Error> {
        self.line.clear();
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.read_error(&e)),
            };
            if buf.is_empty() {
                if self.line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(false);
                }
                return Err(Error::Io(format!(
                    "watch stream ended in the middle of an event ({} bytes)",
                    self.line.len()
                )));
            }
            // Up to and including the next newline, found a word at a time (`read_until` on
            // a slice uses core's memchr; a byte loop here was ~2 % of a converging run). The
            // line may pass the limit by one buffer (64 KiB) before it is refused.
            let mut rest = buf;
            let n = match rest.read_until(b'\n', &mut self.line) {
                Ok(n) => n,
                // Reading a slice cannot fail.
                Err(e) => return Err(io_error(&e)),
            };
            self.reader.consume(n);
            if self.line.len() > self.max_event_bytes {
                return Err(Error::TooLarge(format!(
                    "watch event over {} bytes",
                    self.max_event_bytes
                )));
            }
            let found = self.line.last() == Some(&b'\n');
            if found {
                if self.line.iter().all(u8::is_ascii_whitespace) {
                    self.line.clear();
                    continue;
                }
                return Ok(true);
            }
        }
    }

    fn read_error(&self, e: &std::io::Error) -> Error {
        if self.cancel.is_cancelled() {
            Error::Cancelled
        } else {
            io_error(e)
        }
    }
}

impl<K: serde::de::DeserializeOwned> Iterator for WatchStream<K> {
    type Item = Result<WatchEvent<K>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.lines.next()?.and_then(|()| {
            WatchEvent::from_json(&self.lines.line)
                .map_err(|e| Error::Decode(format!("watch event: {e}")))
        }))
    }
}
