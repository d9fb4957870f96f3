//! TEMPORARY STUB (LF only) — replaced by the decode branch.
use super::DecodeError;
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
}
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trailing {
    pub bytes: usize,
    pub pending: Option<SseEvent>,
}
#[derive(Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    cur: SseEvent,
    comments: u64,
}
impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with_max_event_bytes(_limit: usize) -> Self {
        Self::default()
    }
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        self.buf.extend_from_slice(bytes);
        while let Some(p) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=p).collect();
            let line = std::str::from_utf8(&line[..line.len() - 1])
                .map_err(|_| DecodeError::InvalidUtf8)?
                .trim_end_matches('\r')
                .to_string();
            if line.is_empty() {
                if !self.cur.data.is_empty() {
                    let mut e = std::mem::take(&mut self.cur);
                    e.data.pop();
                    out.push(e);
                }
                continue;
            }
            if line.starts_with(':') {
                self.comments += 1;
                continue;
            }
            let (f, v) = line.split_once(':').unwrap_or((&line, ""));
            let v = v.strip_prefix(' ').unwrap_or(v);
            match f {
                "data" => {
                    self.cur.data.push_str(v);
                    self.cur.data.push('\n');
                }
                "event" => self.cur.event = Some(v.to_string()),
                _ => {}
            }
        }
        Ok(())
    }
    pub fn finish(&mut self) -> Trailing {
        Trailing {
            bytes: self.buf.len(),
            pending: None,
        }
    }
    pub fn comments(&self) -> u64 {
        self.comments
    }
}
