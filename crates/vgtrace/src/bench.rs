//! The tracer's stages run on their own, for `secmem bench-tracer`: Valgrind with the tool
//! writing to /dev/null, and the tool with the raw stream decoded into records and dropped.
//! With [`crate::trace_to_file`]'s [`crate::Summary`] (which times its own threads) they say
//! where tracing spends its time.

use secmem_trace::cputime::thread_cpu_seconds;
use secmem_trace::{Instr, TraceError};

use crate::raw::RawDecoder;
use crate::{start_with, TraceCommand};

/// One run of a stage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageRun {
    /// Instructions recorded (0 for the tool alone: nothing reads its stream).
    pub instructions: u64,
    pub wall_seconds: f64,
    /// CPU time of Valgrind and the program (user + system).
    pub tool_cpu_seconds: f64,
    /// CPU time of the thread that decoded the stream (0 for the tool alone).
    pub decode_cpu_seconds: f64,
}

/// Valgrind running `cmd` with the tool, its stream thrown away.
pub fn tool_alone(cmd: &TraceCommand) -> Result<StageRun, TraceError> {
    let t = std::time::Instant::now();
    // As in a traced run: new loads marked.
    let (mut proc, _pipe) = start_with(cmd, true, true).map_err(TraceError::Other)?;
    let log = proc.reap();
    // The program's own exit code is its business; Valgrind dying or refusing is not.
    if proc.status.and_then(|s| s.code()).is_none() || log.contains("valgrind:") {
        let said = log.lines().find(|l| l.contains("valgrind:")).unwrap_or("").trim();
        return Err(TraceError::Other(format!("{}: the tool failed ({:?}) {said}", proc.name, proc.status)));
    }
    Ok(StageRun { instructions: 0, wall_seconds: t.elapsed().as_secs_f64(), tool_cpu_seconds: proc.cpu_seconds, decode_cpu_seconds: 0.0 })
}

/// The tool, and its stream decoded into records (no consistency, no file).
pub fn decode_only(cmd: &TraceCommand) -> Result<StageRun, TraceError> {
    let t = std::time::Instant::now();
    // As the live path reads it: no marks (Consistent would keep the shadow).
    let (mut proc, pipe) = start_with(cmd, false, false).map_err(TraceError::Other)?;
    let cpu = thread_cpu_seconds();
    let mut d = RawDecoder::new(proc.name.clone(), pipe);
    let (mut i, mut n) = (Instr::default(), 0u64);
    loop {
        match d.next_record(&mut i) {
            Ok(true) => n += !i.external as u64,
            Ok(false) => break,
            Err(e) => return Err(TraceError::Other(proc.explain(&e))),
        }
    }
    let decode = thread_cpu_seconds() - cpu;
    proc.reap();
    Ok(StageRun { instructions: n, wall_seconds: t.elapsed().as_secs_f64(), tool_cpu_seconds: proc.cpu_seconds, decode_cpu_seconds: decode })
}
