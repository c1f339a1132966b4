//! Tracing unmodified Linux programs with secmem's own Valgrind tool (scaffold).
