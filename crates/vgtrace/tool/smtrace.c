/* smtrace: secmem's Valgrind tool. Records every executed guest instruction and every
   load/store with its full value, plus memory written by system calls, as a raw binary
   stream on a file descriptor handed over by the parent (--smt-fd=N).

   Speed matters (the point is tracing real programs): records go into a buffer written
   out in 256 KiB chunks (BUF_SIZE), handed to the pipe without a copy (vmsplice) from a
   ring of buffers; load/store values come straight from the IR temporaries
   (no second read of guest memory) except for the rare guarded, atomic and dirty-helper
   accesses, which read guest memory right after (stores) or right before (dirty loads)
   the access.

   Raw stream (little-endian; decoded by crates/vgtrace/src/raw.rs, which documents it):
     header  "SMTRAW\0" u8 version=3
     0x01 INSTR   u32 id                      one executed instruction (static id)
     0x02 LOAD    u16 size, u64 addr, value   belongs to the last INSTR
     0x03 STORE   u16 size, u64 addr, value
     0x04 DEF     u32 id, u64 pc, u8 len, min(len,32) bytes   static instruction; before use
     0x05 THREAD  u32 tid                     later INSTRs run on this thread (0-based)
     0x06 EXT     u64 addr, u32 size, value   memory written by the kernel/core (syscalls)
     0x07 END     u64 executed, u64 recorded, u8 reason (0 exit, 1 count), i32 exit code
     0x08 EXEC    the program is about to exec: the stream may end after it without END
     0x09 LOAD_NEW u16 size, u64 addr, value  a LOAD some of whose bytes the trace had not
                                              seen there (never, or with another value; see
                                              "what the trace has seen")
     0x0A PAGES   u32 n, n x u64 page number  pages (4 KiB) the program touched while --skip
                                              fast-forwarded, in order of first touch, n <= 1024;
                                              sent when recording starts, before its first INSTR */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_machine.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_vki.h"

/* Not in the public headers but exported by libcoregrind: moves an fd into valgrind's
   reserved range (above the client's limit) with close-on-exec, so the client cannot
   clobber or inherit our output. */
extern Int VG_(safe_fd)(Int oldfd);
/* The client's auxiliary vector (exported by libcoregrind, set when the image is built). */
extern UWord* VG_(client_auxv);
/* A raw system call (exported by libcoregrind; some ports take eight arguments, amd64 reads
   six, so passing eight suits both). */
extern SysRes VG_(do_syscall)(UWord sysno, UWord, UWord, UWord, UWord, UWord, UWord, UWord, UWord);
#define NR_fcntl_ 72
#define NR_vmsplice_ 278
#define F_GETPIPE_SZ_ 1032

#define AT_NULL_ 0
#define AT_RANDOM_ 25

#define T_INSTR 0x01
#define T_LOAD 0x02
#define T_STORE 0x03
#define T_DEF 0x04
#define T_THREAD 0x05
#define T_EXT 0x06
#define T_END 0x07
#define T_EXEC 0x08
#define T_LOAD_NEW 0x09
#define T_PAGES 0x0A

#define MAX_CODE 32
/* Records are written out in chunks of at most this much: well under the pipe's 1 MiB (see
   lib.rs), so a write rarely blocks. With 8 MiB chunks the program stood still while the
   reader drained each one (a write blocks until all but the pipe's last MiB is read) and the
   reader then idled while the next was filled: Valgrind and the transcoder took turns
   instead of running side by side. */
#define BUF_SIZE (256u << 10)
/* Buffers filled in turn when the output is a pipe: a chunk is handed to the pipe by
   reference (vmsplice), so its buffer may be refilled only once the reader has read it.
   The pipe holds at most its size in pages (one page per slot), so once pages filling the
   pipe have entered it after a chunk's, that chunk has left it: flush counts the pages it
   hands in (rounded down) and moves on to the next buffer only if that holds for the
   buffer's last chunk; else it copies the chunk (write) and keeps its buffer. Copying
   gzip's 1.2 GB stream into the pipe cost the tool 0.36-0.51 s of system time (of 1.7 s).
   The ring has enough buffers that chunks of the smallest size a full buffer is flushed at
   (MIN_CHUNK) fill the pipe before it comes round, so only small chunks are copied (8
   buffers for the 1 MiB pipe lib.rs asks for). Assumes 4 KiB pages, one per pipe slot. */
#define MAX_NBUF 64
/* Largest single record we ever append (an EXT chunk plus its header). */
#define EXT_CHUNK (64u << 10)
/* A full buffer is flushed when the next record does not fit: with at least this much. */
#define MIN_CHUNK (BUF_SIZE - EXT_CHUNK - 16)

static Long clo_fd = -1;
static Long clo_skip = 0;
static Long clo_count = -1;
/* Deterministic AT_RANDOM bytes, rdtsc values and getrandom() output. */
static Bool clo_fixed_random = True;
/* Hand chunks to a pipe by vmsplice (else copy them: the same stream, for tests). */
static Bool clo_splice = True;
/* Keep what the trace has seen and mark new loads (LOAD_NEW); without it every load is a
   LOAD and the reader must keep its own shadow (the live decoder does: Consistent). */
static Bool clo_shadow = True;

static UChar* buf;
static UChar* cur;
static UChar* lim;
static Int out_fd = -1;
/* The ring of page-aligned buffers, and whether chunks go to the pipe by vmsplice. */
static UChar* bufs[MAX_NBUF];
static UInt nbuf = 1;
static UInt buf_no = 0;
static Bool by_splice = False;
/* Pages handed to the pipe so far (a lower bound), the pipe's size in pages, and by buffer
   the count at which its last chunk has surely left the pipe. */
static ULong pages_in = 0;
static ULong pipe_pages = 0;
static ULong free_at[MAX_NBUF];

static ULong executed = 0;  /* instructions executed so far */
static ULong stop_at = ~0ULL; /* executed count at which the program is ended */
static ULong skip = 0;
static Bool recording = False;
static ThreadId cur_tid = 0;

static void write_all(const UChar* p, SizeT n)
{
   while (n > 0) {
      Int w = VG_(write)(out_fd, p, n > (1u << 30) ? (1u << 30) : (Int)n);
      if (w <= 0) {
         /* The reader went away (simulation finished early, or it died): nothing left
            to do for this run. */
         VG_(exit)(3);
      }
      p += w;
      n -= w;
   }
}

/* Hand n bytes at p to the pipe without copying them; returns the bytes handed over. The
   reader gone (EPIPE) ends the tool, as in write_all; any other error (a sandbox may refuse
   vmsplice: ENOSYS, EPERM) stops splicing for good, the caller copying the rest. */
static SizeT splice_some(const UChar* p, SizeT n)
{
   SizeT done = 0;
   while (done < n) {
      struct vki_iovec iov = { (void*)(p + done), n - done };
      SysRes r = VG_(do_syscall)(NR_vmsplice_, (UWord)out_fd, (UWord)&iov, 1, 0, 0, 0, 0, 0);
      if (sr_isError(r) && sr_Err(r) == VKI_EINTR)
         continue;
      if ((sr_isError(r) && sr_Err(r) == VKI_EPIPE) || (!sr_isError(r) && sr_Res(r) == 0))
         VG_(exit)(3);
      if (sr_isError(r)) {
         by_splice = False;
         break;
      }
      done += sr_Res(r);
   }
   return done;
}

static void flush(void)
{
   if (out_fd >= 0 && cur > buf) {
      UInt next = (buf_no + 1) % nbuf;
      SizeT n = cur - buf;
      SizeT spliced = by_splice && pages_in >= free_at[next] ? splice_some(buf, n) : 0;
      /* A copy leaves the buffer free at once: small chunks in a row (each failed exec
         flushes one), or no vmsplice. */
      if (spliced < n)
         write_all(buf + spliced, n - spliced);
      pages_in += n / 4096;
      if (spliced > 0) {
         free_at[buf_no] = pages_in + pipe_pages;
         buf_no = next;
         buf = bufs[buf_no];
         lim = buf + BUF_SIZE;
      }
   }
   cur = buf;
}

static inline void need(SizeT n)
{
   if (UNLIKELY(cur + n > lim))
      flush();
}

static inline void put8(UChar v) { *cur++ = v; }
/* __builtin_memcpy with a constant size compiles to one unaligned move (tools are built
   with -fno-builtin, which would otherwise make every VG_(memcpy) a call). */
static inline void put16(UShort v) { __builtin_memcpy(cur, &v, 2); cur += 2; }
static inline void put32(UInt v) { __builtin_memcpy(cur, &v, 4); cur += 4; }
static inline void put64(ULong v) { __builtin_memcpy(cur, &v, 8); cur += 8; }

/* ---------------------------------------------------------------- static instructions */

typedef struct Code {
   struct Code* next;
   Addr pc;
   UInt id;
   UInt len;
   UChar bytes[MAX_CODE];
} Code;

#define CODE_BUCKETS (1u << 16)
static Code** code_table;
static UInt next_id = 0;
/* Static instructions by id (--skip notes the pages of the code it runs). */
static Code** code_by_id;
static UInt code_by_id_cap = 0;

/* The id of the instruction at pc with these bytes: one per distinct (pc, encoding), so
   code that is retranslated keeps its id and code that is rewritten (JITs) gets a new one.
   A DEF record is emitted the first time. */
static UInt code_id(Addr pc, UInt len)
{
   UChar bytes[MAX_CODE];
   UInt n = len < MAX_CODE ? len : MAX_CODE;
   VG_(memcpy)(bytes, (void*)pc, n);
   UInt h = (UInt)((pc ^ (pc >> 16) ^ (pc >> 32)) * 2654435761u) >> 16;
   for (Code* c = code_table[h]; c; c = c->next)
      if (c->pc == pc && c->len == len && VG_(memcmp)(c->bytes, bytes, n) == 0)
         return c->id;
   Code* c = VG_(malloc)("smtrace.code", sizeof(Code));
   c->pc = pc;
   c->len = len;
   c->id = next_id++;
   VG_(memcpy)(c->bytes, bytes, n);
   c->next = code_table[h];
   code_table[h] = c;
   if (c->id >= code_by_id_cap) {
      code_by_id_cap = code_by_id_cap ? 2 * code_by_id_cap : 4096;
      code_by_id = VG_(realloc)("smtrace.codeids", code_by_id, code_by_id_cap * sizeof(Code*));
   }
   code_by_id[c->id] = c;
   if (out_fd < 0)
      return c->id;
   need(1 + 4 + 8 + 1 + MAX_CODE);
   put8(T_DEF);
   put32(c->id);
   put64(pc);
   put8((UChar)len);
   VG_(memcpy)(cur, bytes, n);
   cur += n;
   return c->id;
}

/* ---------------------------------------------------------------- what the trace has seen */

/* A traced program loads memory the trace never saw written: the loader's image, mmap'd
   files, the vDSO's clock, anything written while --skip fast-forwarded. The reader supplies
   such a load's bytes to the trace (an external store before the instruction) so that the
   trace agrees with itself. Which loads need it is decided here, on Valgrind's thread, which
   has time to spare (the transcoder has none): every byte the trace has stored, loaded or had
   written by the kernel (EXT) is kept with a bit for "seen", and a load that reads a byte
   never seen, or one that now differs, is sent as LOAD_NEW (with --smt-shadow=no nothing is
   kept and every load is a LOAD: the live decoder keeps its own). The rule is secmem_trace's
   Shadow::reconcile (crates/trace/src/consistent.rs): the tracer's tests check that the file
   written from these marks is the one that the Rust shadow gives. */
typedef struct ShPage {
   struct ShPage* next;
   Addr pn;
   ULong known[64];           /* a bit per byte: seen */
   UChar data[4096 + 8];      /* + 8: a word read at the page's last bytes stays inside */
} ShPage;

/* Recently used pages, direct-mapped by page number: accesses keep returning to a few pages
   (the stack, the arrays being worked on); the hash table is the slow path. It doubles when
   it holds twice as many pages as buckets, so chains stay short for any working set. */
#define SH_RECENT 16
static ShPage** sh_table;
static UInt sh_bits = 16;
static ULong sh_pages = 0;
static struct { Addr pn; ShPage* p; } sh_recent[SH_RECENT];

static inline UInt sh_hash(Addr pn)
{
   return (UInt)((pn * 0x9e3779b97f4a7c15ULL) >> (64 - sh_bits));
}

static void sh_grow(void)
{
   ShPage** old = sh_table;
   UInt n = 1u << sh_bits;
   sh_bits++;
   sh_table = VG_(calloc)("smtrace.shadowtable", 2 * n, sizeof(ShPage*));
   for (UInt k = 0; k < n; k++) {
      for (ShPage* p = old[k]; p;) {
         ShPage* next = p->next;
         UInt h = sh_hash(p->pn);
         p->next = sh_table[h];
         sh_table[h] = p;
         p = next;
      }
   }
   VG_(free)(old);
}

static ShPage* sh_lookup(Addr pn)
{
   ShPage* p = sh_table[sh_hash(pn)];
   while (p && p->pn != pn)
      p = p->next;
   if (!p) {
      if (++sh_pages > 2 * (1ULL << sh_bits) && sh_bits < 30)
         sh_grow();
      UInt h = sh_hash(pn);
      p = VG_(calloc)("smtrace.shadow", 1, sizeof(ShPage));
      p->pn = pn;
      p->next = sh_table[h];
      sh_table[h] = p;
   }
   sh_recent[pn % SH_RECENT].pn = pn;
   sh_recent[pn % SH_RECENT].p = p;
   return p;
}

static inline ShPage* sh_page(Addr pn)
{
   if (LIKELY(sh_recent[pn % SH_RECENT].pn == pn))
      return sh_recent[pn % SH_RECENT].p;
   return sh_lookup(pn);
}

/* The seen-bit masks of bytes [po, po + n) of a page, one 64-byte group at a time. */
#define SH_GROUPS(po, n, g, m, BODY)                                                     \
   for (UInt b_ = (po), e_ = (po) + (n); b_ < e_;) {                                        \
      UInt s_ = 64 - (b_ & 63);                                                            \
      if (s_ > e_ - b_)                                                                    \
         s_ = e_ - b_;                                                                     \
      UInt g = b_ >> 6;                                                                    \
      ULong m = s_ == 64 ? ~0ULL : ((1ULL << s_) - 1) << (b_ & 63);                        \
      BODY;                                                                                \
      b_ += s_;                                                                            \
   }

/* An access of n bytes v at a (any size, any alignment): for a load, whether its bytes are
   new to the trace. Afterwards the shadow holds v there (a load that matched leaves it). */
static Bool sh_bytes(Addr a, SizeT n, const UChar* v, Bool store)
{
   if (!clo_shadow)
      return False;
   if (!store) {
      Bool same = True;
      for (SizeT i = 0; i < n && same;) {
         UInt po = (UInt)((a + i) & 4095);
         UInt k = n - i < 4096 - po ? (UInt)(n - i) : 4096 - po;
         ShPage* p = sh_page((a + i) >> 12);
         SH_GROUPS(po, k, g, m, same &= (p->known[g] & m) == m);
         same = same && VG_(memcmp)(p->data + po, v + i, k) == 0;
         i += k;
      }
      if (same)
         return False;
   }
   for (SizeT i = 0; i < n;) {
      UInt po = (UInt)((a + i) & 4095);
      UInt k = n - i < 4096 - po ? (UInt)(n - i) : 4096 - po;
      ShPage* p = sh_page((a + i) >> 12);
      SH_GROUPS(po, k, g, m, p->known[g] |= m);
      VG_(memcpy)(p->data + po, v + i, k);
      i += k;
   }
   return !store;
}

/* sh_bytes for the commonest accesses: 1, 2, 4 or 8 bytes (v zero-extended) within one
   page and one 64-byte group, as masked words. */
static inline Bool sh_word(Addr a, UInt size, ULong v, Bool store)
{
   if (!clo_shadow)
      return False;
   UInt po = (UInt)(a & 4095);
   /* Within one 64-byte group is within the page too. */
   if (UNLIKELY((po & 63) + size > 64)) {
      UChar b[8];
      __builtin_memcpy(b, &v, 8);
      return sh_bytes(a, size, b, store);
   }
   ShPage* p = sh_page(a >> 12);
   ULong m = ((1ULL << size) - 1) << (po & 63);
   ULong bm = size == 8 ? ~0ULL : (1ULL << (8 * size)) - 1;
   ULong w;
   __builtin_memcpy(&w, p->data + po, 8);
   if (!store && (p->known[po >> 6] & m) == m && ((w ^ v) & bm) == 0)
      return False;
   p->known[po >> 6] |= m;
   w = (w & ~bm) | (v & bm);
   __builtin_memcpy(p->data + po, &w, 8);
   return !store;
}

/* sh_bytes for a 16- or 32-byte access (SIMD: glibc's string and memory functions) within
   one 64-byte group, as n / 8 words. */
static inline Bool sh_vec(Addr a, UInt n, const ULong* v, Bool store)
{
   if (!clo_shadow)
      return False;
   UInt po = (UInt)(a & 4095);
   if (UNLIKELY((po & 63) + n > 64))
      return sh_bytes(a, n, (const UChar*)v, store);
   ShPage* p = sh_page(a >> 12);
   ULong m = ((1ULL << n) - 1) << (po & 63);
   if (!store && (p->known[po >> 6] & m) == m) {
      ULong d = 0;
      for (UInt k = 0; k < n / 8; k++) {
         ULong w;
         __builtin_memcpy(&w, p->data + po + 8 * k, 8);
         d |= w ^ v[k];
      }
      if (d == 0)
         return False;
   }
   p->known[po >> 6] |= m;
   for (UInt k = 0; k < n / 8; k++)
      __builtin_memcpy(p->data + po + 8 * k, &v[k], 8);
   return !store;
}

/* The kind byte of an access record. */
static inline UChar acc_kind(Bool store, Bool fresh)
{
   return store ? T_STORE : fresh ? T_LOAD_NEW : T_LOAD;
}

/* ---------------------------------------------------------------- pages touched while skipping */

/* The pages the program ran code from, loaded from, stored to or had written by the kernel
   while --skip fast-forwarded, in order of first touch. When recording starts they are sent as PAGES
   records, so that a scheme which sets memory up on its first touch (lhash adds a page to
   its log hash) does so for them before the window, as for the rest of the program's image,
   instead of charging the window for pages the program had long been using. A set (open
   addressing on page number + 1) and the list in order; the page of the last access is
   remembered, so most accesses cost one compare. */
#define PG_RECORD 1024 /* pages per PAGES record: the native format's accesses per record */
static Bool pg_on = False;
static Addr pg_last = ~(Addr)0;
static Addr* pg_set;
static UInt pg_bits = 12;
static Addr* pg_list;
static ULong pg_n = 0, pg_cap = 0;

static void pg_insert(Addr pn)
{
   UInt mask = (1u << pg_bits) - 1;
   UInt h = (UInt)((pn * 0x9e3779b97f4a7c15ULL) >> (64 - pg_bits));
   while (pg_set[h] && pg_set[h] != pn + 1)
      h = (h + 1) & mask;
   pg_set[h] = pn + 1;
}

static void pg_add(Addr pn)
{
   UInt mask = (1u << pg_bits) - 1;
   UInt h = (UInt)((pn * 0x9e3779b97f4a7c15ULL) >> (64 - pg_bits));
   while (pg_set[h]) {
      if (pg_set[h] == pn + 1)
         return;
      h = (h + 1) & mask;
   }
   if (pg_n == pg_cap) {
      pg_cap = pg_cap ? 2 * pg_cap : 4096;
      pg_list = VG_(realloc)("smtrace.pages", pg_list, pg_cap * sizeof(Addr));
   }
   pg_list[pg_n++] = pn;
   if (2 * pg_n >= (1ULL << pg_bits)) {
      /* At most half full: rebuild twice as large from the list. */
      VG_(free)(pg_set);
      pg_bits++;
      pg_set = VG_(calloc)("smtrace.pageset", 1u << pg_bits, sizeof(Addr));
      for (ULong i = 0; i < pg_n; i++)
         pg_insert(pg_list[i]);
   } else {
      pg_set[h] = pn + 1;
   }
}

static inline void pg_touch(Addr a, SizeT n)
{
   if (!pg_on || n == 0)
      return;
   for (Addr pn = a >> 12; pn <= (a + n - 1) >> 12; pn++) {
      if (pn != pg_last)
         pg_add(pn);
      pg_last = pn;
   }
}

/* Recording starts: send the pages and forget them. */
static void pg_send(void)
{
   pg_on = False;
   for (ULong i = 0; i < pg_n; i += PG_RECORD) {
      UInt k = pg_n - i < PG_RECORD ? (UInt)(pg_n - i) : PG_RECORD;
      need(1 + 4 + 8 * (SizeT)k);
      put8(T_PAGES);
      put32(k);
      for (UInt j = 0; j < k; j++)
         put64(pg_list[i + j]);
   }
   if (pg_set)
      VG_(free)(pg_set);
   if (pg_list)
      VG_(free)(pg_list);
   pg_set = NULL;
   pg_list = NULL;
   pg_n = pg_cap = 0;
}

/* ---------------------------------------------------------------- run-time helpers */

static void finish(UChar reason, Int exitcode)
{
   need(1 + 8 + 8 + 1 + 4);
   put8(T_END);
   put64(executed);
   put64(executed > skip ? executed - skip : 0);
   put8(reason);
   put32((UInt)exitcode);
   flush();
   VG_(close)(out_fd);
   out_fd = -1;
}

static VG_REGPARM(1) void h_instr(ULong id)
{
   if (UNLIKELY(executed == stop_at)) {
      /* --count reached: end the program now, before this instruction runs. */
      finish(1, 0);
      VG_(exit)(0);
   }
   executed++;
   if (UNLIKELY(!recording)) {
      if (executed <= skip) {
         pg_touch(code_by_id[id]->pc, code_by_id[id]->len);
         return;
      }
      recording = True;
      if (out_fd >= 0)
         pg_send();
   }
   need(5);
   put8(T_INSTR);
   put32((UInt)id);
}

/* sk: bit 0 store, bits 8.. size */
static VG_REGPARM(3) void h_acc8(ULong addr, ULong sk, ULong v)
{
   UInt size = (UInt)(sk >> 8);
   if (!recording) {
      pg_touch(addr, size);
      return;
   }
   Bool store = sk & 1;
   Bool fresh = sh_word(addr, size, v, store);
   need(1 + 2 + 8 + 8);
   put8(acc_kind(store, fresh));
   put16((UShort)size);
   put64(addr);
   /* Write all 8 bytes (the buffer has room) and advance by the access size. */
   __builtin_memcpy(cur, &v, 8);
   cur += size;
}

static void h_acc16(ULong addr, ULong sk, ULong lo, ULong hi)
{
   if (!recording) {
      pg_touch(addr, 16);
      return;
   }
   ULong w[2] = { lo, hi };
   Bool fresh = sh_vec(addr, 16, w, sk & 1);
   need(1 + 2 + 8 + 16);
   put8(acc_kind(sk & 1, fresh));
   put16(16);
   put64(addr);
   put64(lo);
   put64(hi);
}

static void h_acc32(ULong addr, ULong sk, ULong a, ULong b, ULong c, ULong d)
{
   if (!recording) {
      pg_touch(addr, 32);
      return;
   }
   ULong w[4] = { a, b, c, d };
   Bool fresh = sh_vec(addr, 32, w, sk & 1);
   need(1 + 2 + 8 + 32);
   put8(acc_kind(sk & 1, fresh));
   put16(32);
   put64(addr);
   put64(a);
   put64(b);
   put64(c);
   put64(d);
}

/* Accesses whose value is not in an IR temporary: read guest memory. */
static VG_REGPARM(2) void h_accmem(ULong addr, ULong sk)
{
   UInt size = (UInt)(sk >> 8);
   if (!recording) {
      pg_touch(addr, size);
      return;
   }
   need(1 + 2 + 8 + size);
   UChar* kind = cur;
   put8(0);
   put16((UShort)size);
   put64(addr);
   VG_(memcpy)(cur, (void*)(Addr)addr, size);
   *kind = acc_kind(sk & 1, sh_bytes(addr, size, cur, sk & 1));
   cur += size;
}

/* The system call in progress (getrandom's output is made deterministic). */
static UInt cur_syscall = ~0u;
static ULong random_state = 0x9e3779b97f4a7c15ULL;
#define SYS_getrandom_ 318

#define SYS_execve_ 59
#define SYS_execveat_ 322

static void on_pre_syscall(ThreadId tid, UInt no, UWord* args, UInt nargs)
{
   cur_syscall = no;
   if ((no == SYS_execve_ || no == SYS_execveat_) && out_fd >= 0) {
      /* A successful exec replaces this process without running our fini: hand out what
         is buffered now and say why the stream may end here. A failed exec (a shell
         searching PATH) just continues the stream. */
      need(1);
      put8(T_EXEC);
      flush();
   }
}
static void on_post_syscall(ThreadId tid, UInt no, UWord* args, UInt nargs, SysRes res) { cur_syscall = ~0u; }

static void on_post_mem_write(CorePart part, ThreadId tid, Addr a, SizeT size)
{
   if (clo_fixed_random && part == Vg_CoreSysCall && cur_syscall == SYS_getrandom_) {
      /* glibc seeds malloc's tcache key and more from getrandom(): a fixed sequence
         (xorshift64*) keeps traces identical from run to run. */
      for (SizeT i = 0; i < size; i++) {
         random_state ^= random_state >> 12;
         random_state ^= random_state << 25;
         random_state ^= random_state >> 27;
         ((UChar*)a)[i] = (UChar)((random_state * 2685821657736338717ULL) >> 56);
      }
   }
   if (!recording) {
      pg_touch(a, size);
      return;
   }
   if (out_fd < 0)
      return;
   while (size > 0) {
      UInt n = size > EXT_CHUNK ? EXT_CHUNK : (UInt)size;
      need(1 + 8 + 4 + n);
      put8(T_EXT);
      put64(a);
      put32(n);
      VG_(memcpy)(cur, (void*)a, n);
      sh_bytes(a, n, cur, True);
      cur += n;
      a += n;
      size -= n;
   }
}

/* A forked child keeps running under Valgrind with a copy of our state: it must not write
   into the parent's stream. The trace follows the process that was started. */
static void on_fork_child(ThreadId tid)
{
   if (out_fd >= 0)
      VG_(close)(out_fd);
   out_fd = -1;
   cur = buf;
   recording = False;
   pg_on = False;
   skip = ~0ULL;
   stop_at = ~0ULL;
}

/* The kernel's 16 random bytes (AT_RANDOM) seed the stack-protector canary and glibc's
   pointer guard, which programs then store and load: fixed bytes make the trace's values
   the same from run to run. */
static Bool random_fixed = False;
static void fix_at_random(void)
{
   random_fixed = True;
   if (!clo_fixed_random || !VG_(client_auxv))
      return;
   for (UWord* a = VG_(client_auxv); a[0] != AT_NULL_; a += 2) {
      if (a[0] == AT_RANDOM_ && a[1]) {
         UChar* r = (UChar*)a[1];
         for (Int i = 0; i < 16; i++)
            r[i] = (UChar)(0x5a + 17 * i);
      }
   }
}

static void on_start_client_code(ThreadId tid, ULong blocks)
{
   if (UNLIKELY(!random_fixed))
      fix_at_random();
   if (out_fd >= 0 && tid != cur_tid) {
      cur_tid = tid;
      need(5);
      put8(T_THREAD);
      put32(tid - 1); /* valgrind's first thread is 1; the trace's is 0 */
   }
}

/* rdtsc (the dynamic loader and many programs read it): a time stamp that advances with
   the instructions executed, so traces do not depend on the host's clock. */
static ULong h_rdtsc(void)
{
   return 1000000000ULL + 3 * executed;
}

/* ---------------------------------------------------------------- instrumentation */

static IRExpr* to64(IRSB* sb, IRExpr* e, IRType ty)
{
   IRTemp t = newIRTemp(sb->tyenv, Ity_I64);
   IRExpr* x;
   switch (ty) {
   case Ity_I8: x = IRExpr_Unop(Iop_8Uto64, e); break;
   case Ity_I16: x = IRExpr_Unop(Iop_16Uto64, e); break;
   case Ity_I32: x = IRExpr_Unop(Iop_32Uto64, e); break;
   case Ity_I64: return e;
   case Ity_F64: x = IRExpr_Unop(Iop_ReinterpF64asI64, e); break;
   case Ity_D64: x = IRExpr_Unop(Iop_ReinterpD64asI64, e); break;
   case Ity_F32: {
      IRTemp t32 = newIRTemp(sb->tyenv, Ity_I32);
      addStmtToIRSB(sb, IRStmt_WrTmp(t32, IRExpr_Unop(Iop_ReinterpF32asI32, e)));
      x = IRExpr_Unop(Iop_32Uto64, IRExpr_RdTmp(t32));
      break;
   }
   default: tl_assert(0);
   }
   addStmtToIRSB(sb, IRStmt_WrTmp(t, x));
   return IRExpr_RdTmp(t);
}

static IRExpr* unop64(IRSB* sb, IROp op, IRExpr* e)
{
   IRTemp t = newIRTemp(sb->tyenv, Ity_I64);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, IRExpr_Unop(op, e)));
   return IRExpr_RdTmp(t);
}

static void add_call(IRSB* sb, IRDirty* d, IRExpr* guard)
{
   if (guard)
      d->guard = guard;
   addStmtToIRSB(sb, IRStmt_Dirty(d));
}

/* An access of value `data` (an atom of type ty) at `addr`; false if ty is not handled
   here (the caller then reads memory). */
static Bool emit_value(IRSB* sb, Bool store, IRExpr* addr, IRExpr* data, IRType ty)
{
   ULong sk = (store ? 1 : 0);
   switch (ty) {
   case Ity_I8: case Ity_I16: case Ity_I32: case Ity_I64:
   case Ity_F32: case Ity_F64: case Ity_D64: {
      sk |= (ULong)sizeofIRType(ty) << 8;
      IRExpr* v = to64(sb, data, ty);
      add_call(sb, unsafeIRDirty_0_N(3, "h_acc8", VG_(fnptr_to_fnentry)(h_acc8),
                                     mkIRExprVec_3(addr, IRExpr_Const(IRConst_U64(sk)), v)),
               NULL);
      return True;
   }
   case Ity_V128: {
      sk |= 16 << 8;
      IRExpr* lo = unop64(sb, Iop_V128to64, data);
      IRExpr* hi = unop64(sb, Iop_V128HIto64, data);
      add_call(sb, unsafeIRDirty_0_N(0, "h_acc16", VG_(fnptr_to_fnentry)(h_acc16),
                                     mkIRExprVec_4(addr, IRExpr_Const(IRConst_U64(sk)), lo, hi)),
               NULL);
      return True;
   }
   case Ity_V256: {
      sk |= 32 << 8;
      IRExpr* a = unop64(sb, Iop_V256to64_0, data);
      IRExpr* b = unop64(sb, Iop_V256to64_1, data);
      IRExpr* c = unop64(sb, Iop_V256to64_2, data);
      IRExpr* d = unop64(sb, Iop_V256to64_3, data);
      add_call(sb, unsafeIRDirty_0_N(0, "h_acc32", VG_(fnptr_to_fnentry)(h_acc32),
                                     mkIRExprVec_6(addr, IRExpr_Const(IRConst_U64(sk)), a, b, c, d)),
               NULL);
      return True;
   }
   default:
      return False;
   }
}

static void emit_mem(IRSB* sb, Bool store, IRExpr* addr, Int size, IRExpr* guard)
{
   ULong sk = (store ? 1 : 0) | ((ULong)size << 8);
   add_call(sb, unsafeIRDirty_0_N(2, "h_accmem", VG_(fnptr_to_fnentry)(h_accmem),
                                  mkIRExprVec_2(addr, IRExpr_Const(IRConst_U64(sk)))),
            guard);
}

/* Copy an address expression into a temp so it can be used twice (atoms already can). */
static IRSB* smt_instrument(VgCallbackClosure* closure, IRSB* sbIn, const VexGuestLayout* layout,
                            const VexGuestExtents* vge, const VexArchInfo* archinfo,
                            IRType gWordTy, IRType hWordTy)
{
   IRSB* sb = deepCopyIRSBExceptStmts(sbIn);
   Int i = 0;
   /* Statements before the first IMark (preamble) are copied as they are. */
   while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(sb, sbIn->stmts[i]);
      i++;
   }
   for (; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_IMark: {
         addStmtToIRSB(sb, st);
         UInt id = code_id((Addr)st->Ist.IMark.addr, st->Ist.IMark.len);
         add_call(sb, unsafeIRDirty_0_N(1, "h_instr", VG_(fnptr_to_fnentry)(h_instr),
                                        mkIRExprVec_1(IRExpr_Const(IRConst_U64(id)))),
                  NULL);
         break;
      }
      case Ist_WrTmp: {
         addStmtToIRSB(sb, st);
         IRExpr* e = st->Ist.WrTmp.data;
         if (e->tag == Iex_Load) {
            IRType ty = e->Iex.Load.ty;
            if (!emit_value(sb, False, e->Iex.Load.addr, IRExpr_RdTmp(st->Ist.WrTmp.tmp), ty))
               emit_mem(sb, False, e->Iex.Load.addr, sizeofIRType(ty), NULL);
         }
         break;
      }
      case Ist_Store: {
         addStmtToIRSB(sb, st);
         IRExpr* data = st->Ist.Store.data;
         IRType ty = typeOfIRExpr(sb->tyenv, data);
         if (!emit_value(sb, True, st->Ist.Store.addr, data, ty))
            emit_mem(sb, True, st->Ist.Store.addr, sizeofIRType(ty), NULL);
         break;
      }
      case Ist_StoreG: {
         addStmtToIRSB(sb, st);
         IRStoreG* g = st->Ist.StoreG.details;
         emit_mem(sb, True, g->addr, sizeofIRType(typeOfIRExpr(sb->tyenv, g->data)), g->guard);
         break;
      }
      case Ist_LoadG: {
         addStmtToIRSB(sb, st);
         IRLoadG* g = st->Ist.LoadG.details;
         Int size;
         switch (g->cvt) {
         case ILGop_IdentV128: size = 16; break;
         case ILGop_Ident64: size = 8; break;
         case ILGop_Ident32: size = 4; break;
         case ILGop_16Uto32: case ILGop_16Sto32: size = 2; break;
         default: size = 1; break;
         }
         emit_mem(sb, False, g->addr, size, g->guard);
         break;
      }
      case Ist_CAS: {
         /* Recorded as x86 performs it: a load of the old value, then a store (of the new
            value on success, of the unchanged old one on failure), read back from memory. */
         addStmtToIRSB(sb, st);
         IRCAS* c = st->Ist.CAS.details;
         IRType ty = typeOfIRExpr(sb->tyenv, c->dataLo);
         Int sz = sizeofIRType(ty);
         Bool dbl = c->dataHi != NULL;
         if (!dbl && emit_value(sb, False, c->addr, IRExpr_RdTmp(c->oldLo), ty)) {
         } else if (dbl && ty == Ity_I64) {
            /* cmpxchg16b: one 16-byte load of the old pair */
            IRExpr* lo = IRExpr_RdTmp(c->oldLo);
            IRExpr* hi = IRExpr_RdTmp(c->oldHi);
            add_call(sb, unsafeIRDirty_0_N(0, "h_acc16", VG_(fnptr_to_fnentry)(h_acc16),
                                           mkIRExprVec_4(c->addr, IRExpr_Const(IRConst_U64(16 << 8)), lo, hi)),
                     NULL);
         } else {
            /* A double CAS of narrower words: the old pair lives in two temps; read memory
               (a failed CAS left it unchanged, a successful one has the new pair, which
               callers never load back in the same instruction). */
            emit_mem(sb, False, c->addr, dbl ? 2 * sz : sz, NULL);
         }
         emit_mem(sb, True, c->addr, dbl ? 2 * sz : sz, NULL);
         break;
      }
      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         if (clo_fixed_random && d->cee && VG_(strcmp)(d->cee->name, "amd64g_dirtyhelper_RDTSC") == 0)
            d->cee = mkIRCallee(0, "h_rdtsc", VG_(fnptr_to_fnentry)(h_rdtsc));
         Bool rd = d->mFx == Ifx_Read || d->mFx == Ifx_Modify;
         Bool wr = d->mFx == Ifx_Write || d->mFx == Ifx_Modify;
         if (rd)
            emit_mem(sb, False, d->mAddr, d->mSize, d->guard);
         addStmtToIRSB(sb, st);
         if (wr)
            emit_mem(sb, True, d->mAddr, d->mSize, d->guard);
         break;
      }
      default:
         addStmtToIRSB(sb, st);
         break;
      }
   }
   return sb;
}

/* ---------------------------------------------------------------- setup */

static Bool smt_process_cmd_line_option(const HChar* arg)
{
   if VG_INT_CLO(arg, "--smt-fd", clo_fd) {}
   else if VG_INT_CLO(arg, "--smt-skip", clo_skip) {}
   else if VG_INT_CLO(arg, "--smt-count", clo_count) {}
   else if VG_BOOL_CLO(arg, "--smt-fixed-random", clo_fixed_random) {}
   else if VG_BOOL_CLO(arg, "--smt-splice", clo_splice) {}
   else if VG_BOOL_CLO(arg, "--smt-shadow", clo_shadow) {}
   else
      return False;
   return True;
}

static void smt_print_usage(void)
{
   VG_(printf)("    --smt-fd=N       write the raw trace to file descriptor N (required)\n"
               "    --smt-skip=N     record nothing for the first N instructions [0]\n"
               "    --smt-count=M    end the program after recording M instructions [all]\n"
               "    --smt-fixed-random=no|yes  fixed AT_RANDOM, rdtsc and getrandom(), for deterministic traces [yes]\n"
               "    --smt-splice=no|yes  hand the stream to a pipe by vmsplice rather than copies [yes]\n"
               "    --smt-shadow=no|yes  mark loads the trace had not seen as LOAD_NEW [yes]\n");
}

static void smt_print_debug_usage(void) {}

static void smt_post_clo_init(void)
{
   if (clo_fd < 0) {
      VG_(umsg)("smtrace: --smt-fd=N is required\n");
      VG_(exit)(2);
   }
   if (clo_skip < 0) {
      VG_(umsg)("smtrace: --smt-skip must be >= 0\n");
      VG_(exit)(2);
   }
   Int fd = VG_(safe_fd)((Int)clo_fd);
   if (fd < 0) {
      VG_(umsg)("smtrace: file descriptor %lld is not open\n", clo_fd);
      VG_(exit)(2);
   }
   out_fd = fd;
   skip = (ULong)clo_skip;
   recording = skip == 0;
   if (!recording) {
      pg_on = True;
      pg_set = VG_(calloc)("smtrace.pageset", 1u << pg_bits, sizeof(Addr));
   }
   if (clo_count >= 0)
      stop_at = skip + (ULong)clo_count;
   /* vmsplice into a pipe (see MAX_NBUF); anything else (a file, /dev/null) gets copies. */
   SysRes sz = VG_(do_syscall)(NR_fcntl_, (UWord)out_fd, F_GETPIPE_SZ_, 0, 0, 0, 0, 0, 0);
   by_splice = clo_splice && !sr_isError(sz) && sr_Res(sz) > 0;
   pipe_pages = by_splice ? (sr_Res(sz) + 4095) / 4096 : 0;
   /* The check in flush counts the chunks before the one being flushed: + 3. */
   nbuf = by_splice ? pipe_pages / (MIN_CHUNK / 4096) + 3 : 1;
   if (nbuf > MAX_NBUF)
      nbuf = MAX_NBUF; /* a pipe this large: chunks are copied now and then */
   UChar* ring = VG_(malloc)("smtrace.buf", nbuf * BUF_SIZE + 4096);
   ring = (UChar*)(((Addr)ring + 4095) & ~(Addr)4095); /* whole pages: fewer pipe slots */
   for (UInt k = 0; k < nbuf; k++)
      bufs[k] = ring + k * BUF_SIZE;
   buf = bufs[0];
   cur = buf;
   lim = buf + BUF_SIZE;
   code_table = VG_(calloc)("smtrace.codetable", CODE_BUCKETS, sizeof(Code*));
   sh_table = VG_(calloc)("smtrace.shadowtable", 1u << sh_bits, sizeof(ShPage*));
   for (UInt k = 0; k < SH_RECENT; k++)
      sh_recent[k].pn = ~(Addr)0;
   static const UChar header[8] = { 'S', 'M', 'T', 'R', 'A', 'W', 0, 3 };
   VG_(memcpy)(cur, header, 8);
   cur += 8;
}

static void smt_fini(Int exitcode)
{
   if (out_fd >= 0)
      finish(0, exitcode);
}

static void smt_pre_clo_init(void)
{
   VG_(details_name)("smtrace");
   VG_(details_version)("1");
   VG_(details_description)("secmem's value-carrying tracer");
   VG_(details_copyright_author)("secmem authors");
   VG_(details_bug_reports_to)("secmem");
   VG_(details_avg_translation_sizeB)(400);
   VG_(basic_tool_funcs)(smt_post_clo_init, smt_instrument, smt_fini);
   VG_(needs_command_line_options)(smt_process_cmd_line_option, smt_print_usage,
                                   smt_print_debug_usage);
   VG_(track_post_mem_write)(on_post_mem_write);
   VG_(track_start_client_code)(on_start_client_code);
   VG_(atfork)(NULL, NULL, on_fork_child);
   VG_(needs_syscall_wrapper)(on_pre_syscall, on_post_syscall);
}

VG_DETERMINE_INTERFACE_VERSION(smt_pre_clo_init)
