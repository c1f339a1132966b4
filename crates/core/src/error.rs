//! The engine's errors: a leaf of the crate that every scheme and the engine use, so that no
//! scheme module has to import another to report a failure.

/// Why an access to untrusted memory failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A check failed: untrusted memory did not behave like valid memory.
    Tampered,
    /// A finite resource of the scheme ran out (a nonce counter): no tamper involved.
    Exhausted,
    /// The scheme cannot serve accesses now (a suspended MECU, a lost power).
    Unavailable,
    /// The request itself is not allowed (signing code without code authentication, ...).
    Refused,
}

/// An access to protected memory that did not succeed, for the access concerned only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} 0x{addr:x}: {what}", self.kind.lead())]
pub struct IntegrityError {
    /// Address of the chunk concerned.
    pub addr: u64,
    pub what: String,
    pub kind: Failure,
}

impl Failure {
    /// How a message of this kind starts: only a failed check says "integrity check failed".
    fn lead(self) -> &'static str {
        match self {
            Failure::Tampered => "integrity check failed at",
            Failure::Exhausted => "cannot write back",
            Failure::Unavailable => "memory unavailable at",
            Failure::Refused => "refused at",
        }
    }
}

impl IntegrityError {
    /// A failed check of the chunk at `addr`.
    pub fn tampered(addr: u64, what: impl Into<String>) -> IntegrityError {
        IntegrityError { addr, what: what.into(), kind: Failure::Tampered }
    }

    pub fn exhausted(addr: u64, what: impl Into<String>) -> IntegrityError {
        IntegrityError { addr, what: what.into(), kind: Failure::Exhausted }
    }

    pub fn unavailable(addr: u64, what: impl Into<String>) -> IntegrityError {
        IntegrityError { addr, what: what.into(), kind: Failure::Unavailable }
    }

    pub fn refused(addr: u64, what: impl Into<String>) -> IntegrityError {
        IntegrityError { addr, what: what.into(), kind: Failure::Refused }
    }

    /// Whether a check found tampering (and not a resource or state of the scheme).
    pub fn is_tamper(&self) -> bool {
        self.kind == Failure::Tampered
    }
}
