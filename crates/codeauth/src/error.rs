//! Every way code authentication can refuse something, as one error type with one-line
//! messages (the CLI prints them after `secmem: error:`).

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A block's recomputed tag differs from the one in memory or in the tag file: the block's
    /// bytes, its address, the program id, the tag or the key is not the one signed.
    #[error("block {addr:#x}: authentication tag does not match{}", tag_at(*.tag_addr))]
    Mismatch { addr: u64, tag_addr: Option<u64> },

    /// Not one block verifies: the key (or the program) is not the one the tags were made for.
    #[error("none of the {blocks} blocks verifies (first: block {first:#x}): wrong key, or tags of another program")]
    NothingVerifies { blocks: u64, first: u64 },

    /// An instruction fetch outside every signed code segment: there is no tag to check it with.
    #[error("block {addr:#x} is not in a signed code segment: refused")]
    NotSigned { addr: u64 },

    #[error("malformed ELF: {0}")]
    Elf(String),

    #[error("tag file: {0}")]
    TagFile(String),

    #[error("key file: {0}")]
    Keys(String),

    /// The keys are not the ones the tag file was made with (their fingerprints differ).
    #[error("wrong key: the tags were made with key {want}, this key is {have}")]
    WrongKey { want: String, have: String },

    #[error("{0}")]
    Param(String),

    #[error("{0}")]
    Io(String),
}

fn tag_at(a: Option<u64>) -> String {
    a.map(|a| format!(" (tag at {a:#x})")).unwrap_or_default()
}

impl Error {
    /// The block address a refusal names, if it names one.
    pub fn addr(&self) -> Option<u64> {
        match self {
            Error::Mismatch { addr, .. } | Error::NotSigned { addr } => Some(*addr),
            Error::NothingVerifies { first, .. } => Some(*first),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
