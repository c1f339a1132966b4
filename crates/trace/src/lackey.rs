//! Valgrind lackey traces: the text `valgrind --tool=lackey --trace-mem=yes` writes,
//! raw or xz/gzip/zstd-compressed.
//!
//! ```text
//! ==1234== Lackey, an example Valgrind tool      (lines starting "==" are skipped)
//! I  0023C790,2                                  instruction at 0x23c790, 2 bytes
//!  L 0023C790,8                                  load of 8 bytes
//!  S BE80199C,4                                  store
//!  M 0025747C,4                                  modify: a load then a store of the same bytes
//! ```
//!
//! Raw (uncompressed) files have no checksum: a flipped bit that leaves a line parseable (a
//! hexadecimal digit of an address) is read silently (inherent to the format; compressed
//! files are checked by their compression's CRC).
//!
//! Data lines belong to the `I` line before them. Lackey records **no data values, no
//! registers and no branch outcomes**: accesses carry zero values (the load-value check stays
//! consistent; value-dependent results are meaningless), register lists are empty and
//! `branch` is `None`.

use std::path::Path;

use crate::compress::{remember, repeat_err, Buffered, Decoded};
use crate::native::{MAX_ACCESSES, MAX_ACCESS_SIZE, MAX_RECORD_DATA};
use crate::record::{Access, Instr, OpClass, MAX_DST, MAX_SRC};
use crate::{TraceError, TraceSource};

/// Longest line accepted (real lines are under 30 bytes; this bounds what garbage costs).
pub const MAX_LINE: usize = 4096;

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// Blank or a `==PID==` message.
    Skip,
    Instr {
        pc: u64,
        len: u8,
    },
    /// `kind` is `b'L'`, `b'S'` or `b'M'`.
    Data {
        kind: u8,
        addr: u64,
        size: u32,
    },
}

/// Parse one line (without its `\n`). `Err` says what is wrong.
pub fn parse_line(l: &[u8]) -> Result<Line, String> {
    let l = l.strip_suffix(b"\r").unwrap_or(l);
    if l.starts_with(b"==") || l.iter().all(|c| c.is_ascii_whitespace()) {
        return Ok(Line::Skip);
    }
    let t = trim_start(l);
    let kind = t[0];
    if !matches!(kind, b'I' | b'L' | b'S' | b'M') {
        return Err("expected an 'I', ' L', ' S' or ' M' line".into());
    }
    let rest = &t[1..];
    if rest.first().is_none_or(|c| !c.is_ascii_whitespace()) {
        return Err("expected a space after the line's kind".into());
    }
    let rest = trim_start(rest);
    let comma = rest
        .iter()
        .position(|&c| c == b',')
        .ok_or("expected ADDRESS,SIZE")?;
    let (a, s) = (&rest[..comma], trim_end(&rest[comma + 1..]));
    if a.is_empty() || a.len() > 16 || !a.iter().all(u8::is_ascii_hexdigit) {
        return Err("bad hexadecimal address".into());
    }
    let addr = u64::from_str_radix(std::str::from_utf8(a).unwrap(), 16).unwrap();
    if s.is_empty() || s.len() > 9 || !s.iter().all(u8::is_ascii_digit) {
        return Err("bad decimal size".into());
    }
    let size: u64 = std::str::from_utf8(s).unwrap().parse().unwrap();
    if kind == b'I' {
        if size > 255 {
            return Err(format!("instruction of {size} bytes"));
        }
        Ok(Line::Instr {
            pc: addr,
            len: size as u8,
        })
    } else {
        if size == 0 || size > MAX_ACCESS_SIZE as u64 {
            return Err(format!("access of {size} bytes"));
        }
        Ok(Line::Data {
            kind,
            addr,
            size: size as u32,
        })
    }
}

fn trim_start(l: &[u8]) -> &[u8] {
    let k = l
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(l.len());
    &l[k..]
}

fn trim_end(l: &[u8]) -> &[u8] {
    let k = l
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |k| k + 1);
    &l[..k]
}

/// A line for an error message: printable ASCII, at most 40 characters.
fn show(l: &[u8]) -> String {
    let mut s: String = l
        .iter()
        .take(40)
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '?'
            }
        })
        .collect();
    if l.len() > 40 {
        s.push('…');
    }
    s
}

/// Reads a lackey trace record by record (one per `I` line).
pub struct LackeyReader {
    name: String,
    s: Buffered,
    /// Lines read so far (the last one's number).
    line: u64,
    /// Stream offset of the last line returned by `next_line`.
    last_start: u64,
    /// The `I` line that starts the next record, already read.
    next: Option<(u64, u8)>,
    count: u64,
    done: bool,
    failed: Option<TraceError>,
}

impl LackeyReader {
    /// Open a lackey trace (raw, xz, gzip or zstd: recognised by its first bytes).
    pub fn open(path: impl AsRef<Path>) -> Result<LackeyReader, TraceError> {
        let p = path.as_ref();
        let path = p.display().to_string();
        let d = Decoded::open(&path)?;
        let name = p
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        Ok(LackeyReader {
            name,
            s: Buffered::new(d, 1 << 18),
            line: 0,
            last_start: 0,
            next: None,
            count: 0,
            done: false,
            failed: None,
        })
    }

    /// Records read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    fn corrupt(&self, offset: u64, what: String) -> TraceError {
        TraceError::Corrupt {
            path: self.s.d.path.clone(),
            offset,
            what,
        }
    }

    /// The next meaningful line; `None` at the end of the stream.
    fn next_line(&mut self) -> Result<Option<Line>, TraceError> {
        loop {
            let nl = match self.s.rest().iter().position(|&c| c == b'\n') {
                Some(k) => Some(k),
                None => {
                    self.s.fill(MAX_LINE + 1);
                    self.s.rest().iter().position(|&c| c == b'\n')
                }
            };
            let at = self.s.offset();
            let len = match nl {
                Some(k) if k <= MAX_LINE => k,
                None if self.s.avail() <= MAX_LINE => {
                    // The stream's last bytes: a final line without '\n', or nothing.
                    if let Some(e) = self.s.pending.take() {
                        return Err(e);
                    }
                    if self.s.avail() == 0 {
                        return Ok(None);
                    }
                    self.s.avail()
                }
                _ => {
                    return Err(self.corrupt(
                        at,
                        format!("line {} is longer than {MAX_LINE} bytes", self.line + 1),
                    ))
                }
            };
            self.line += 1;
            let parsed = parse_line(&self.s.rest()[..len]);
            let text = show(&self.s.rest()[..len]);
            self.s.pos += (len + 1).min(self.s.avail());
            match parsed {
                Ok(Line::Skip) => {}
                Ok(l) => {
                    self.last_start = at;
                    return Ok(Some(l));
                }
                Err(why) => {
                    return Err(self.corrupt(
                        at,
                        format!("bad lackey line {}: {why}: '{text}'", self.line),
                    ))
                }
            }
        }
    }

    fn next_record(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        let (pc, len) = match self.next.take() {
            Some(i) => i,
            None => match self.next_line()? {
                None => {
                    self.done = true;
                    return Ok(false);
                }
                Some(Line::Instr { pc, len }) => (pc, len),
                Some(_) => {
                    return Err(self.corrupt(
                        self.last_start,
                        format!(
                            "bad lackey line {}: a data access before any instruction",
                            self.line
                        ),
                    ));
                }
            },
        };
        out.clear();
        out.src = [0; MAX_SRC];
        out.dst = [0; MAX_DST];
        out.pc = pc;
        out.len = len;
        loop {
            match self.next_line()? {
                None => {
                    self.done = true;
                    break;
                }
                Some(Line::Instr { pc, len }) => {
                    self.next = Some((pc, len));
                    break;
                }
                Some(Line::Data { kind, addr, size }) => {
                    let n = if kind == b'M' { 2 } else { 1 };
                    if out.accesses.len() + n > MAX_ACCESSES
                        || out.data.len() + n * size as usize > MAX_RECORD_DATA
                    {
                        return Err(self.corrupt(
                            self.last_start,
                            format!(
                                "bad lackey line {}: more than {MAX_ACCESSES} accesses or {MAX_RECORD_DATA} bytes for one instruction",
                                self.line
                            ),
                        ));
                    }
                    if size > 0 && addr.checked_add(size as u64 - 1).is_none() {
                        return Err(self.corrupt(
                            self.last_start,
                            format!("bad lackey line {}: {size} bytes at {addr:#x} run past the end of the address space", self.line),
                        ));
                    }
                    // L: a load; S: a store; M: a load, then a store of the same bytes.
                    let stores: &[bool] = match kind {
                        b'L' => &[false],
                        b'S' => &[true],
                        _ => &[false, true],
                    };
                    for &store in stores {
                        let off = out.data.len() as u32;
                        out.data.resize(out.data.len() + size as usize, 0);
                        out.accesses.push(Access {
                            store,
                            addr,
                            size,
                            off,
                        });
                    }
                }
                Some(Line::Skip) => {} // next_line never returns these
            }
        }
        out.op = if out.accesses.is_empty() {
            OpClass::Alu
        } else {
            OpClass::Mem
        };
        self.count += 1;
        Ok(true)
    }
}

impl TraceSource for LackeyReader {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        if let Some(e) = &self.failed {
            return Err(repeat_err(e));
        }
        let r = self.next_record(out);
        remember(&mut self.failed, r)
    }

    fn name(&self) -> &str {
        &self.name
    }
}
