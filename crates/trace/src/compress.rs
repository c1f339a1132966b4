//! The decompression layer shared by the foreign-format readers (ChampSim, lackey):
//! a file is read raw, or through xz, gzip or zstd, chosen by its first bytes (never by its
//! name). Every error names the file and an offset in the *decompressed* stream.

use std::io::{BufReader, Cursor, ErrorKind, Read};
use std::path::Path;

use crate::TraceError;

/// How a file's bytes are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Xz,
    Gzip,
    Zstd,
}

impl Compression {
    /// Recognise a compressed stream by its magic bytes.
    pub fn sniff(head: &[u8]) -> Compression {
        match head {
            [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Compression::Xz,
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            _ => Compression::None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "raw",
            Compression::Xz => "xz",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// Read up to `buf.len()` bytes, fewer only at the end of the stream.
pub(crate) fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

pub(crate) fn io_err(path: &str, source: std::io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_string(),
        source,
    }
}

/// A file's decompressed bytes.
pub(crate) struct Decoded {
    pub path: String,
    pub compression: Compression,
    pub r: Box<dyn Read + Send>,
}

impl Decoded {
    /// Open `path`, recognise its compression from its first bytes and start decoding.
    pub fn open(path: &str) -> Result<Decoded, TraceError> {
        let f = secmem_files::open_for_reading(Path::new(path)).map_err(|e| io_err(path, e))?;
        let mut f = BufReader::with_capacity(1 << 16, f);
        let mut head = [0u8; 6];
        let n = read_full(&mut f, &mut head).map_err(|e| io_err(path, e))?;
        let compression = Compression::sniff(&head[..n]);
        let raw = Cursor::new(head[..n].to_vec()).chain(f);
        let r: Box<dyn Read + Send> = match compression {
            Compression::None => Box::new(raw),
            Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(raw)),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
            Compression::Zstd => {
                Box::new(zstd::stream::read::Decoder::new(raw).map_err(|e| io_err(path, e))?)
            }
        };
        Ok(Decoded {
            path: path.to_string(),
            compression,
            r,
        })
    }

    /// The error for a failed read at decompressed offset `offset`.
    pub fn error(&self, e: std::io::Error, offset: u64) -> TraceError {
        if self.compression == Compression::None {
            return io_err(&self.path, e);
        }
        let c = self.compression.name();
        let what = if e.kind() == ErrorKind::UnexpectedEof {
            format!("truncated: the {c} stream ends early")
        } else {
            // Decoder messages are one line already; keep it that way whatever they say.
            let msg = e.to_string().replace('\n', " ");
            format!("cannot decompress ({c}): {msg}")
        };
        TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            what,
        }
    }
}

/// The first `max` decompressed bytes of `path` (fewer if it is shorter or undecodable:
/// format detection only looks, the chosen reader reports damage properly).
pub(crate) fn peek(path: &str, max: usize) -> Result<(Compression, Vec<u8>), TraceError> {
    let mut d = Decoded::open(path)?;
    let mut buf = vec![0u8; max];
    let mut n = 0;
    while n < max {
        match d.r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if d.compression == Compression::None => return Err(io_err(path, e)),
            Err(_) => break,
        }
    }
    buf.truncate(n);
    Ok((d.compression, buf))
}

/// A reader's errors are sticky: hand out `r`, remembering its error in `failed` so that
/// every later call repeats it (readers check `failed` first).
pub(crate) fn remember(failed: &mut Option<TraceError>, r: Result<bool, TraceError>) -> Result<bool, TraceError> {
    r.map_err(|e| {
        let again = repeat_err(&e);
        *failed = Some(e);
        again
    })
}

/// Rebuild an error to report it again (readers repeat their first error on every later call).
pub(crate) fn repeat_err(e: &TraceError) -> TraceError {
    match e {
        TraceError::Corrupt { path, offset, what } => TraceError::Corrupt {
            path: path.clone(),
            offset: *offset,
            what: what.clone(),
        },
        TraceError::Io { path, source } => TraceError::Io {
            path: path.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        TraceError::Other(m) => TraceError::Other(m.clone()),
    }
}

/// A decompressed stream read through a buffer, with the stream offset of every byte.
pub(crate) struct Buffered {
    pub d: Decoded,
    pub buf: Box<[u8]>,
    pub pos: usize,
    pub end: usize,
    /// Decompressed-stream offset of `buf[0]`.
    pub base: u64,
    /// No more bytes will come (the end of the stream, or a read error kept in `pending`).
    pub eof: bool,
    /// A read or decompression error met while filling, reported once the bytes read
    /// before it have been used.
    pub pending: Option<TraceError>,
}

impl Buffered {
    pub fn new(d: Decoded, cap: usize) -> Buffered {
        Buffered {
            d,
            buf: vec![0; cap].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            pending: None,
        }
    }

    #[inline(always)]
    pub fn avail(&self) -> usize {
        self.end - self.pos
    }

    /// Stream offset of the next unread byte.
    #[inline(always)]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    #[inline(always)]
    pub fn rest(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Make at least `want` (≤ the buffer's size) bytes available unless the stream ends
    /// first: keeps the unread bytes, moves them to the front and reads more.
    pub fn fill(&mut self, want: usize) {
        debug_assert!(want <= self.buf.len());
        if self.avail() >= want || self.eof {
            return;
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end < want {
            match self.d.r.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.pending = Some(self.d.error(e, self.base + self.end as u64));
                    self.eof = true;
                    return;
                }
            }
        }
    }
}
