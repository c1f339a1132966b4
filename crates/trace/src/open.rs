//! Opening a trace file of any supported format, named or detected.
//! Formats and detection rules: `docs/trace-formats.md`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::champsim::{ChampSimReader, ChampSimRecord, RECORD_LEN};
use crate::compress::{io_err, peek, read_full};
use crate::lackey::{parse_line, LackeyReader, Line};
use crate::native::{NativeReader, MAGIC};
use crate::{ReadAhead, ReadInline, TraceError, TraceSource};

/// The trace formats [`open_trace_as`] reads.
pub const FORMATS: &[&str] = &["native", "champsim", "lackey"];

/// Bytes of (decompressed) content that detection looks at.
const SNIFF: usize = 4096;

/// How native trace files are read ([`set_reading`]): the names, the default first.
pub const READINGS: &[&str] = &["ahead", "inline"];

/// Whether this process reads native trace files inline ([`set_reading`]).
static INLINE: AtomicBool = AtomicBool::new(false);

/// How this process reads native trace files from now on (one of [`READINGS`]): `ahead`,
/// decoded on a thread of their own ([`ReadAhead`]: the fastest single run where a core
/// would otherwise idle), or `inline`, in batches on the simulating thread ([`ReadInline`]:
/// 13-28% less CPU, where every core has a simulation of its own, as a sweep's workers do).
/// The records are the same either way, so are the statistics (docs/speed.md, sixth pass).
pub fn set_reading(how: &str) -> Result<(), TraceError> {
    let k = READINGS.iter().position(|&r| r == how);
    let k = k.ok_or_else(|| TraceError::Other(format!("unknown way of reading traces '{how}': valid ones are {}", READINGS.join(", "))))?;
    INLINE.store(k == 1, Ordering::Relaxed);
    Ok(())
}

/// How this process reads native trace files ([`set_reading`]).
pub fn reading() -> &'static str {
    READINGS[INLINE.load(Ordering::Relaxed) as usize]
}

/// Open `path` as a trace of `format` (one of [`FORMATS`]; `None` or `"auto"`: detect it
/// with [`detect_format`]). A ChampSim or lackey file (xz or gzip to decompress) is decoded
/// on a thread of its own ([`ReadAhead`]); so is a native trace file, unless this process
/// reads them inline ([`set_reading`]: in batches on the caller's thread, [`ReadInline`]),
/// but never one read from a pipe, which may wait for its writer. Either way the records,
/// the end and any error are the reader's, at the same place.
pub fn open_trace_as(path: &str, format: Option<&str>) -> Result<Box<dyn TraceSource>, TraceError> {
    let format = match format {
        None | Some("auto") => detect_format(path)?,
        Some(f) => check_format(f)?,
    };
    // Opening (header checks, a missing file) fails here, on the caller's thread.
    let inline = INLINE.load(Ordering::Relaxed) && std::fs::metadata(path).is_ok_and(|m| m.is_file());
    Ok(match format {
        "native" if inline => Box::new(ReadInline::new(NativeReader::open(path)?)),
        "native" => Box::new(ReadAhead::new(NativeReader::open(path)?)),
        "champsim" => Box::new(ReadAhead::new(ChampSimReader::open(path)?)),
        "lackey" => Box::new(ReadAhead::new(LackeyReader::open(path)?)),
        _ => unreachable!("checked above"),
    })
}

/// Open a trace file of any supported format, detected ([`open_trace_as`] with `None`).
pub fn open_trace(path: &str) -> Result<Box<dyn TraceSource>, TraceError> {
    open_trace_as(path, None)
}

/// `f` if it names a format, else the one-line error listing the valid names.
pub fn check_format(f: &str) -> Result<&'static str, TraceError> {
    FORMATS.iter().copied().find(|&k| k == f).ok_or_else(|| {
        TraceError::Other(format!(
            "unknown trace format '{f}': valid formats are {} (or auto, to detect it)",
            FORMATS.join(", ")
        ))
    })
}

/// The format of the trace at `path`:
/// 1. `native` if the file starts with the native magic;
/// 2. by name: `.champsim`/`.champsimtrace` → champsim, `.lackey` → lackey, `.smt` → native
///    (each optionally followed by `.xz`, `.gz`, `.zst`);
/// 3. by content, after decompression (xz, gzip, zstd are recognised by their magic):
///    lackey if the first lines are lackey lines or `==PID==` messages, champsim if the first
///    64-byte records are plausible ChampSim records.
pub fn detect_format(path: &str) -> Result<&'static str, TraceError> {
    // Looked at before opening: a FIFO's open would wait for a writer.
    if std::fs::metadata(path).map(|m| !m.is_file() && !m.is_dir()).unwrap_or(false) {
        // A pipe or device can be read only once: detection would eat the first bytes.
        return Err(TraceError::Other(format!(
            "{path}: not a regular file, so its format cannot be detected; name it with --trace-format {{{}}}",
            FORMATS.join(",")
        )));
    }
    let mut f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut head = [0u8; 8];
    let n = read_full(&mut f, &mut head).map_err(|e| io_err(path, e))?;
    if head[..n] == MAGIC {
        return Ok("native");
    }
    if n == 0 {
        return Err(undetectable(path, "the file is empty"));
    }
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let stem = [".xz", ".gz", ".zst", ".zstd"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(&name);
    if stem.ends_with(".champsim") || stem.ends_with(".champsimtrace") {
        return Ok("champsim");
    }
    if stem.ends_with(".lackey") {
        return Ok("lackey");
    }
    if stem.ends_with(".smt") {
        return Ok("native");
    }
    let (comp, head) = peek(path, SNIFF)?;
    if looks_lackey(&head) {
        return Ok("lackey");
    }
    if looks_champsim(&head) {
        return Ok("champsim");
    }
    let what = if head.is_empty() {
        format!("its {} stream could not be decoded", comp.name())
    } else if comp == crate::compress::Compression::None {
        "neither its magic, its name nor its content is recognised".to_string()
    } else {
        format!(
            "{}-compressed, but neither its name nor its content is recognised",
            comp.name()
        )
    };
    Err(undetectable(path, &what))
}

fn undetectable(path: &str, why: &str) -> TraceError {
    TraceError::Other(format!(
        "{path}: cannot tell the trace format ({why}); name it with --trace-format {{{}}}",
        FORMATS.join(",")
    ))
}

/// Every complete line of `head` is a lackey line or a `==` message, and one at least is
/// not blank.
fn looks_lackey(head: &[u8]) -> bool {
    let mut lines: Vec<&[u8]> = head.split(|&c| c == b'\n').collect();
    if head.len() == SNIFF && !head.ends_with(b"\n") {
        lines.pop(); // possibly cut short by the sniffing: not judged
    }
    let mut any = false;
    for l in lines {
        match parse_line(l) {
            Ok(Line::Skip) => any |= l.starts_with(b"=="),
            Ok(_) => any = true,
            Err(_) => return false,
        }
    }
    any
}

/// The complete 64-byte records of `head` (one at least) are plausible ChampSim records.
fn looks_champsim(head: &[u8]) -> bool {
    head.len() >= RECORD_LEN
        && head
            .chunks_exact(RECORD_LEN)
            .all(|b| ChampSimRecord::decode(b).plausible())
}
