//! Why timing an instruction stopped: a leaf module, so the parts of the core that fail
//! (`mmu`, `ooo`) share it without importing each other.

use secmem_core::IntegrityError;

#[derive(Debug)]
pub enum StepError {
    Integrity(IntegrityError),
    OutOfMemory(u64),
}

impl From<IntegrityError> for StepError {
    fn from(e: IntegrityError) -> Self {
        StepError::Integrity(e)
    }
}
