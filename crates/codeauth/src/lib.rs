//! Code authentication, seed 001 (Durahim, Savaş, Sunar, Pedersen, Kocabaş, *Transparent Code
//! Authentication at the Processor Level*): every instruction block fetched from memory is
//! checked against a tag T = PR_{K_U}(L ‖ I ‖ A) ⊕ SC(K_T, A, I) before it may execute.
//!
//! - [`keys`]: K_U (the PR hash key) and K_T (the pad cipher key), key files.
//! - [`pad`]: R_T from Trivium (`pr-trivium`) or AES-CTR (`pr-aes`), §8.2 Table 4.
//! - [`tag`]: the tag of one block, its width (64/80/128) and the block size (16–256 B).
//! - [`layout`]: tags beside the data segment in program order from TP (§6, Fig. 4).
//! - [`program`]: the executable segments of an ELF file, cut into blocks.
//! - [`tagfile`]: signing a program and the tag file format; verifying against it.
//! - [`image`]: a loaded program fetched through the authentication check (the attack model).
//!
//! The GF(2^w) field, the PR hash and Trivium themselves are in `secmem-crypto`.

// `is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
#![allow(clippy::manual_is_multiple_of)]

pub mod error;
pub mod image;
pub mod keys;
pub mod layout;
pub mod pad;
pub mod program;
pub mod tag;
pub mod tagfile;

pub use error::{Error, Result};
pub use image::{authenticate, Memory, Processor};
pub use keys::Keys;
pub use layout::{Segment, TagLayout};
pub use pad::PadKind;
pub use program::Program;
pub use tag::{Params, Tag, Tagger, Width};
pub use tagfile::{program_for, sign, verify, write_atomic, TagFile, Verified};
