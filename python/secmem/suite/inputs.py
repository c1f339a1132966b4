"""Deterministic input generators for the workload suite.

Every generator is pure Python (standard library only), takes an output directory and a
seed, writes its files there and returns their names. The same seed gives the same bytes on
every machine and every Python version: randomness comes from :class:`Rng`, a SplitMix64
generator implemented here (``random.Random`` is not promised to be stable across Python
releases for anything but ``random()``).
"""

from __future__ import annotations

import bisect
import hashlib
import math
import struct
from pathlib import Path

MASK64 = (1 << 64) - 1


class Rng:
    """SplitMix64: tiny, fast enough, and identical everywhere."""

    def __init__(self, seed: int):
        self.state = (seed * 0x9E3779B97F4A7C15 + 0x1234567) & MASK64

    def next64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform integer in [0, n) (n < 2**32; the bias is < 2**-32)."""
        return ((self.next64() >> 32) * n) >> 32

    def range(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi]."""
        return lo + self.below(hi - lo + 1)

    def random(self) -> float:
        return (self.next64() >> 11) * (1.0 / (1 << 53))

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, p: float) -> bool:
        return self.random() < p

    def bytes(self, n: int) -> bytes:
        """n pseudo-random bytes: SHAKE-256 keyed by the next 128 bits of the stream (fast
        for megabytes, and just as reproducible)."""
        key = struct.pack("<QQ", self.next64(), self.next64())
        return hashlib.shake_256(key).digest(n)

    def uint32s(self, n: int) -> tuple:
        return struct.unpack(f"<{n}I", self.bytes(4 * n))


class Zipf:
    """Draw items with probability ~ 1/rank (text that compresses like text)."""

    def __init__(self, items, s: float = 1.0):
        self.items = list(items)
        acc, self.cum = 0.0, []
        for r in range(1, len(self.items) + 1):
            acc += 1.0 / r**s
            self.cum.append(acc)
        self.total = acc

    def draw(self, rng: Rng):
        return self.items[min(bisect.bisect_left(self.cum, rng.random() * self.total), len(self.items) - 1)]


# A small English vocabulary, every word known to link-grammar's English dictionary.
NOUNS = (
    "dog cat man woman child teacher student doctor farmer king queen bird horse house car "
    "city river tree book letter table window door garden school market village mountain "
    "computer program memory processor machine engine system network key message secret "
    "apple bread water stone road ship train friend brother sister father mother painter"
).split()
VERBS_T = "saw liked found took gave bought wrote read built sold watched helped followed opened closed chased".split()
VERBS_I = "slept ran arrived laughed waited smiled fell left worked".split()
ADJS = "big small old young red green happy sad quick slow dark bright strange quiet famous secret".split()
ADVS = "quickly slowly quietly often never carefully suddenly".split()
PREPS = "in on near with under behind from".split()
DETS = "the a every some this that".split()
NAMES = "John Mary Alice Bob Carol David Eve Frank".split()
FILLER = "and or but of to for as at by is was are were be have has had not it its they them their".split()
WORDS = NOUNS + VERBS_T + VERBS_I + ADJS + ADVS + PREPS + DETS + FILLER


def _write(path: Path, data) -> None:
    if isinstance(data, str):
        data = data.encode()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def text(rng: Rng, nbytes: int) -> bytes:
    """Pseudo-English prose with numbers and punctuation: Zipf-distributed words, lines of
    6-13 words. Drawn in batches (C-speed bisect): megabytes per second."""
    vocab = FILLER + DETS + PREPS + NOUNS + VERBS_T + ADJS + VERBS_I + ADVS + NAMES
    vocab = vocab + [w + p for w in vocab[:40] for p in (",", ".")] + [str(n) for n in (1, 2, 3, 10, 12, 42, 100, 1999, 2024)]
    cum, acc = [], 0.0
    for r in range(1, len(vocab) + 1):
        acc += 1.0 / r**1.05
        cum.append(acc)
    scale = (1 << 32) / acc
    cum = [int(c * scale) for c in cum]
    cum[-1] = 1 << 32
    out, size = [], 0
    bl = bisect.bisect_right
    while size < nbytes:
        us = rng.uint32s(4096)
        words = [vocab[bl(cum, u)] for u in us]
        lens = rng.bytes(512)
        i = k = 0
        while i < len(words):
            n = 6 + lens[k] % 8
            line = " ".join(words[i:i + n])
            out.append(line)
            size += len(line) + 1
            i += n
            k += 1
    return "\n".join(out).encode()[:nbytes]


def mixed_bytes(rng: Rng, nbytes: int) -> bytes:
    """Half text, a quarter random bytes, a quarter structured binary records."""
    parts, size = [], 0
    while size < nbytes:
        kind = rng.below(4)
        n = 4096 + rng.below(60000)
        if kind <= 1:
            p = text(rng, n)
        elif kind == 2:
            p = rng.bytes(n)
        else:
            recs = []
            base = rng.below(1 << 20)
            for i in range(n // 16):
                recs.append(struct.pack("<IIIf", base + i, rng.below(256), (base + i * 7) & 0xFFFF, i * 0.5))
            p = b"".join(recs)
        parts.append(p)
        size += len(p)
    return b"".join(parts)[:nbytes]


# ---------------------------------------------------------------------------------------
# Per-workload generators. Each: gen_x(outdir, seed) -> list of file names written.


def gen_text_file(outdir: Path, seed: int, name: str = "input.txt", nbytes: int = 4 << 20) -> list[str]:
    _write(outdir / name, text(Rng(seed), nbytes))
    return [name]


def gen_binary_file(outdir: Path, seed: int, name: str = "input.bin", nbytes: int = 4 << 20) -> list[str]:
    _write(outdir / name, mixed_bytes(Rng(seed), nbytes))
    return [name]


def gen_c_source(outdir: Path, seed: int, nfuncs: int = 120) -> list[str]:
    """A preprocessed C translation unit (``.i``): structs, tables and functions with loops,
    switches, floating point and calls, all generated."""
    rng = Rng(seed)
    L = ['# 1 "prog.c"', '# 1 "<built-in>"', '# 1 "prog.c"',
         "typedef unsigned long size_t;",
         "extern int printf(const char *, ...);",
         "extern void *memset(void *, int, size_t);",
         "extern double sqrt(double);",
         "struct node { int key; int val; double w; struct node *next; };",
         "struct mat { int n; double a[16][16]; };",
         "static int table[256];",
         "static double coeff[64];",
         "static struct node pool[1024];"]
    for i in range(nfuncs):
        kind = rng.below(5)
        ops = ["+", "-", "*", "^", "&", "|"]
        def expr(vars_, depth=0):
            if depth > 2 or rng.chance(0.3):
                return rng.choice(vars_) if rng.chance(0.7) else str(rng.below(1000))
            return f"({expr(vars_, depth + 1)} {rng.choice(ops)} {expr(vars_, depth + 1)})"
        if kind == 0:
            L.append(f"int f{i}(int a, int b, int *p, int n) {{")
            L.append("  int s = 0, t = a;")
            L.append("  for (int k = 0; k < n; k++) {")
            for _ in range(rng.range(2, 6)):
                L.append(f"    s += {expr(['a', 'b', 's', 't', 'k', 'p[k]'])};")
                if rng.chance(0.5):
                    L.append(f"    if (s > {rng.below(5000)}) t ^= s >> {rng.range(1, 7)}; else t += table[(s + k) & 255];")
            L.append("  }")
            if i > 0 and rng.chance(0.6):
                j = rng.below(i)
                L.append(f"  s += fcall{j}(s, t);")
            L.append("  return s + t;")
            L.append("}")
        elif kind == 1:
            L.append(f"double f{i}(const double *x, int n, double alpha) {{")
            L.append("  double acc = 0.0, m = alpha;")
            L.append("  for (int k = 1; k < n; k++) {")
            L.append(f"    double d = x[k] - x[k-1] * {rng.random() * 2:.4f};")
            L.append(f"    acc += d * d * coeff[k & 63] + m;")
            L.append(f"    if (acc > {rng.range(10, 900)}.0) {{ acc = sqrt(acc); m *= 0.5; }}")
            L.append("  }")
            L.append("  return acc;")
            L.append("}")
        elif kind == 2:
            L.append(f"int f{i}(int op, int x, int y) {{")
            L.append("  switch (op) {")
            for c in range(rng.range(4, 12)):
                L.append(f"  case {c}: return {expr(['x', 'y', 'op'])};")
            L.append(f"  default: return x {rng.choice(ops)} y;")
            L.append("  }")
            L.append("}")
        elif kind == 3:
            L.append(f"struct node *f{i}(struct node *h, int key) {{")
            L.append("  struct node *best = 0;")
            L.append("  for (struct node *q = h; q; q = q->next) {")
            L.append(f"    if (q->key == key || (q->val {rng.choice(['<', '>'])} {rng.below(100)} && q->w > {rng.random():.3f}))")
            L.append("      best = q;")
            L.append(f"    q->val += {expr(['key', 'q->key', 'q->val'])};")
            L.append("  }")
            L.append("  return best;")
            L.append("}")
        else:
            L.append(f"void f{i}(struct mat *r, const struct mat *a, const struct mat *b) {{")
            L.append("  for (int i = 0; i < a->n; i++)")
            L.append("    for (int j = 0; j < a->n; j++) {")
            L.append("      double s = 0;")
            L.append("      for (int k = 0; k < a->n; k++) s += a->a[i][k] * b->a[k][j];")
            L.append(f"      r->a[i][j] = s * {rng.random():.5f} + coeff[(i * j) & 63];")
            L.append("    }")
            L.append("  r->n = a->n;")
            L.append("}")
        L.append(f"int fcall{i}(int u, int v) {{ return (u * {rng.range(3, 97)}) ^ (v + {i}); }}")
    L.append("int main(void) {")
    L.append("  int acc = 0;")
    L.append("  memset(table, 0, sizeof table);")
    for i in range(0, nfuncs, 3):
        L.append(f"  acc += fcall{i}(acc, {i});")
    L.append('  printf("%d\\n", acc);')
    L.append("  return 0;")
    L.append("}")
    _write(outdir / "prog.i", "\n".join(L) + "\n")
    return ["prog.i"]


def gen_mincost(outdir: Path, seed: int, nodes: int = 3000, arcs: int = 12000) -> list[str]:
    """A feasible DIMACS min-cost-flow problem: a bidirectional ring backbone (so every
    supply can reach every demand) plus random arcs with capacities and costs."""
    rng = Rng(seed)
    L = [f"c secmem generated min-cost flow problem, seed {seed}"]
    arcs_out = []
    for v in range(1, nodes + 1):
        w = v % nodes + 1
        arcs_out.append((v, w, 0, 100000, 50 + rng.below(50)))
        arcs_out.append((w, v, 0, 100000, 50 + rng.below(50)))
    while len(arcs_out) < arcs:
        u, v = rng.range(1, nodes), rng.range(1, nodes)
        if u != v:
            arcs_out.append((u, v, 0, 10 + rng.below(500), 1 + rng.below(40)))
    supply = {}
    nsrc = max(2, nodes // 50)
    for _ in range(nsrc):
        s, t = rng.range(1, nodes), rng.range(1, nodes)
        amt = 50 + rng.below(300)
        supply[s] = supply.get(s, 0) + amt
        supply[t] = supply.get(t, 0) - amt
    L.append(f"p min {nodes} {len(arcs_out)}")
    for v in sorted(supply):
        if supply[v]:
            L.append(f"n {v} {supply[v]}")
    for a in arcs_out:
        L.append("a %d %d %d %d %d" % a)
    _write(outdir / "network.min", "\n".join(L) + "\n")
    return ["network.min"]


def sentences(rng: Rng, n: int) -> list[str]:
    """Simple grammatical English sentences."""
    def np_():
        if rng.chance(0.15):
            return rng.choice(NAMES)
        adj = " ".join(rng.choice(ADJS) for _ in range(rng.below(3)))
        return " ".join(x for x in (rng.choice(DETS), adj, rng.choice(NOUNS)) if x)

    out = []
    for _ in range(n):
        if rng.chance(0.3):
            s = f"{np_()} {rng.choice(VERBS_I)}"
        else:
            s = f"{np_()} {rng.choice(VERBS_T)} {np_()}"
        if rng.chance(0.3):
            s += f" {rng.choice(ADVS)}"
        if rng.chance(0.4):
            s += f" {rng.choice(PREPS)} {np_()}"
        if rng.chance(0.2):
            s += f" and {np_()} {rng.choice(VERBS_T)} {np_()}"
        out.append(s[0].upper() + s[1:] + ".")
    return out


def gen_sentences(outdir: Path, seed: int, n: int = 400) -> list[str]:
    _write(outdir / "sentences.txt", "\n".join(sentences(Rng(seed), n)) + "\n")
    return ["sentences.txt"]


def gen_sql(outdir: Path, seed: int, nparts: int = 12000, nperson: int = 3000) -> list[str]:
    """An object-database-like transaction mix (vortex): parts, owners, documents, links;
    inserts, index builds, lookups, joins, updates and deletes."""
    rng = Rng(seed)
    L = ["PRAGMA journal_mode=OFF;", "PRAGMA synchronous=OFF;", "PRAGMA cache_size=-8000;",
         "CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT, city TEXT, age INTEGER);",
         "CREATE TABLE part(id INTEGER PRIMARY KEY, owner INTEGER, kind TEXT, weight REAL, label TEXT);",
         "CREATE TABLE link(a INTEGER, b INTEGER, w INTEGER);",
         "BEGIN;"]
    for i in range(1, nperson + 1):
        L.append(f"INSERT INTO person VALUES({i},'{rng.choice(NAMES)}{i}','{rng.choice(NOUNS)}ville',{rng.range(18, 90)});")
    for i in range(1, nparts + 1):
        label = " ".join(rng.choice(WORDS) for _ in range(rng.range(1, 5)))
        L.append(f"INSERT INTO part VALUES({i},{rng.range(1, nperson)},'{rng.choice(NOUNS)}',{rng.range(1, 10000) / 10},'{label}');")
    for _ in range(nparts * 2):
        L.append(f"INSERT INTO link VALUES({rng.range(1, nparts)},{rng.range(1, nparts)},{rng.below(100)});")
    L.append("COMMIT;")
    L += ["CREATE INDEX part_owner ON part(owner);", "CREATE INDEX part_kind ON part(kind, weight);",
          "CREATE INDEX link_a ON link(a);", "CREATE INDEX person_city ON person(city);"]
    for t in range(40):
        L.append("BEGIN;")
        for _ in range(50):
            r = rng.below(6)
            if r == 0:
                L.append(f"SELECT count(*), sum(weight) FROM part WHERE owner = {rng.range(1, nperson)};")
            elif r == 1:
                L.append(f"UPDATE part SET weight = weight * 1.01, label = label || ' x' WHERE id = {rng.range(1, nparts)};")
            elif r == 2:
                L.append(f"SELECT p.name, count(*) FROM person p JOIN part q ON q.owner = p.id WHERE p.city = '{rng.choice(NOUNS)}ville' GROUP BY p.id ORDER BY 2 DESC LIMIT 3;")
            elif r == 3:
                L.append(f"SELECT sum(l.w) FROM link l JOIN part q ON q.id = l.b WHERE l.a = {rng.range(1, nparts)};")
            elif r == 4:
                L.append(f"DELETE FROM link WHERE a = {rng.range(1, nparts)} AND w < {rng.below(50)};")
            else:
                L.append(f"INSERT INTO part VALUES(NULL,{rng.range(1, nperson)},'{rng.choice(NOUNS)}',{rng.range(1, 999)},'new');")
        L.append("COMMIT;")
    L.append("SELECT kind, count(*), round(avg(weight), 3) FROM part GROUP BY kind ORDER BY kind;")
    L.append("SELECT count(*) FROM link;")
    _write(outdir / "vortex.sql", "\n".join(L) + "\n")
    return ["vortex.sql"]


PERL_SCRIPT = r"""#!/usr/bin/perl
# secmem perlbench stand-in: a mail filter (in the spirit of SPEC's diffmail/splitmail):
# parse messages, tokenize, train per-class word counts, score, report.
use strict;
use warnings;

my $file = shift @ARGV;
open(my $fh, '<', $file) or die "cannot open $file: $!";
local $/ = "\n.\n";
my (%count, %total, @msgs);
while (my $msg = <$fh>) {
    my ($head, $body) = split /\n\n/, $msg, 2;
    next unless defined $body;
    my %h = map { /^([\w-]+):\s*(.*)$/ ? (lc $1, $2) : () } split /\n/, $head;
    my $class = ($h{'x-class'} // 'ham');
    my @tok = grep { length > 2 } map { lc } ($body =~ /([A-Za-z][A-Za-z']+)/g);
    $count{$class}{$_}++ for @tok;
    $total{$class} += @tok;
    (my $subj = $h{subject} // '') =~ s/\s+/ /g;
    push @msgs, [$h{from} // '?', $subj, $class, \@tok];
}
close $fh;
my @classes = sort keys %total;
my ($right, $n) = (0, 0);
for my $m (@msgs) {
    my ($best, $bs);
    for my $c (@classes) {
        my $s = 0;
        $s += log((($count{$c}{$_} // 0) + 1) / ($total{$c} + 1000)) for @{$m->[3]};
        ($best, $bs) = ($c, $s) if !defined $bs || $s > $bs;
    }
    $n++;
    $right++ if $best eq $m->[2];
}
my %senders;
$senders{$_->[0]}++ for @msgs;
my @top = (sort { $senders{$b} <=> $senders{$a} || $a cmp $b } keys %senders)[0 .. 4];
printf "%d messages, %d classified as labelled (%.2f%%)\n", $n, $right, 100 * $right / ($n || 1);
for my $c (@classes) {
    my @w = (sort { $count{$c}{$b} <=> $count{$c}{$a} || $a cmp $b } keys %{$count{$c}})[0 .. 9];
    printf "%-5s %7d tokens; top: %s\n", $c, $total{$c}, join(' ', @w);
}
print "top senders: ", join(', ', map { "$_($senders{$_})" } @top), "\n";
my $digest = 0;
for my $m (@msgs) { $digest = ($digest * 31 + length($m->[1])) % 1000003 }
print "subject digest: $digest\n";
"""


def gen_perl(outdir: Path, seed: int, nmsgs: int = 1500) -> list[str]:
    rng = Rng(seed)
    z = Zipf(WORDS, 1.0)
    spammy = "free money offer winner cheap credit click now urgent prize".split()
    msgs = []
    for i in range(nmsgs):
        spam = rng.chance(0.3)
        frm = f"{rng.choice(NAMES).lower()}{rng.below(40)}@{rng.choice(NOUNS)}.example"
        subj = " ".join((rng.choice(spammy) if spam and rng.chance(0.5) else z.draw(rng)) for _ in range(rng.range(2, 7)))
        body_lines = []
        for _ in range(rng.range(3, 15)):
            words = [(rng.choice(spammy) if spam and rng.chance(0.2) else z.draw(rng)) for _ in range(rng.range(5, 14))]
            body_lines.append(" ".join(words))
        msgs.append(f"From: {frm}\nSubject: {subj}\nMessage-Id: <{i}.{seed}@gen>\nX-Class: {'spam' if spam else 'ham'}\n\n"
                    + "\n".join(body_lines) + "\n.\n")
    _write(outdir / "mail.txt", "".join(msgs))
    _write(outdir / "mailfilter.pl", PERL_SCRIPT)
    return ["mailfilter.pl", "mail.txt"]


def gen_gtp(outdir: Path, seed: int, size: int = 9, opening: int = 8, genmoves: int = 6) -> list[str]:
    """A GTP session: a random opening of ``opening`` stones, then GNU Go generates moves."""
    rng = Rng(seed)
    cols = "ABCDEFGHJKLMNOPQRST"[:size]
    L = [f"boardsize {size}", "clear_board", "komi 5.5"]
    used = set()
    color = "black"
    for _ in range(opening):
        while True:
            c, r = rng.below(size), rng.below(size)
            if (c, r) not in used:
                break
        used.add((c, r))
        L.append(f"play {color} {cols[c]}{r + 1}")
        color = "white" if color == "black" else "black"
    for _ in range(genmoves):
        L.append(f"genmove {color}")
        color = "white" if color == "black" else "black"
    L += ["estimate_score", "quit"]
    _write(outdir / "game.gtp", "\n".join(L) + "\n")
    return ["game.gtp"]


AMINO = "ACDEFGHIKLMNPQRSTVWY"


def gen_hmmer(outdir: Path, seed: int, family_len: int = 180, nfamily: int = 12, ndb: int = 1500) -> list[str]:
    """A protein family (a random ancestor and mutated members, as a Stockholm alignment) and
    a FASTA database of random sequences, some of which embed mutated family members."""
    rng = Rng(seed)
    anc = [rng.choice(AMINO) for _ in range(family_len)]

    def mutate(seq, rate):
        return [rng.choice(AMINO) if rng.chance(rate) else a for a in seq]

    aln = ["# STOCKHOLM 1.0", f"#=GF ID secmemfam{seed}"]
    for i in range(nfamily):
        s = mutate(anc, 0.25)
        s = ["-" if rng.chance(0.03) else a for a in s]
        aln.append(f"member{i:<4} {''.join(s)}")
    aln.append("//")
    _write(outdir / "family.sto", "\n".join(aln) + "\n")
    fa = []
    for i in range(ndb):
        n = rng.range(150, 450)
        seq = [rng.choice(AMINO) for _ in range(n)]
        if rng.chance(0.05):
            m = mutate(anc, 0.4)
            at = rng.below(max(1, n - family_len))
            seq[at:at + family_len] = m
        body = "".join(seq)
        fa.append(f">seq{i} generated\n" + "\n".join(body[k:k + 60] for k in range(0, len(body), 60)))
    _write(outdir / "db.fasta", "\n".join(fa) + "\n")
    return ["family.sto", "db.fasta"]


def gen_y4m(outdir: Path, seed: int, width: int = 176, height: int = 144, frames: int = 30) -> list[str]:
    """A QCIF video (like h264ref's foreman_qcif): a drifting gradient, moving textured
    blocks and a little noise, 4:2:0."""
    rng = Rng(seed)
    blocks = [(rng.below(width), rng.below(height), rng.range(12, 40), rng.range(-3, 3), rng.range(-2, 2), rng.below(256))
              for _ in range(6)]
    noise = rng.bytes(width * height + 4096)
    out = [f"YUV4MPEG2 W{width} H{height} F25:1 Ip A1:1 C420jpeg\n".encode()]
    cw, ch = width // 2, height // 2
    for f in range(frames):
        y = bytearray(width * height)
        for r in range(height):
            base = (r * 2 + f * 3) & 0xFF
            row = r * width
            for c in range(width):
                y[row + c] = (base + c + (noise[(row + c + f * 131) % len(noise)] & 7)) & 0xFF
        for (bx, by, bs, dx, dy, tone) in blocks:
            x0, y0 = (bx + dx * f) % width, (by + dy * f) % height
            for r in range(y0, min(height, y0 + bs)):
                row = r * width
                for c in range(x0, min(width, x0 + bs)):
                    y[row + c] = (tone + ((r - y0) ^ (c - x0)) * 3) & 0xFF
        u = bytes(((128 + (i % cw) - cw // 2 + f) & 0xFF) for i in range(cw * ch))
        v = bytes(((128 + (i // cw) - ch // 2 - f) & 0xFF) for i in range(cw * ch))
        out += [b"FRAME\n", bytes(y), u, v]
    _write(outdir / "video.y4m", b"".join(out))
    return ["video.y4m"]


def gen_povray(outdir: Path, seed: int, nobjects: int = 40) -> list[str]:
    rng = Rng(seed)
    L = [f"// secmem generated scene, seed {seed}", "global_settings { assumed_gamma 1.0 max_trace_level 5 }",
         "camera { location <0, 4, -14> look_at <0, 1, 0> angle 50 }",
         "light_source { <-10, 20, -15> color rgb <1, 1, 1> }",
         "light_source { <12, 8, -6> color rgb <0.5, 0.45, 0.4> }",
         "plane { y, 0 pigment { checker color rgb <0.9, 0.9, 0.9> color rgb <0.2, 0.3, 0.4> } finish { reflection 0.15 } }",
         "sky_sphere { pigment { gradient y color_map { [0 color rgb <0.6, 0.7, 1>] [1 color rgb <0.1, 0.2, 0.6>] } } }"]
    for i in range(nobjects):
        x, z, s = rng.random() * 16 - 8, rng.random() * 12 - 2, 0.3 + rng.random() * 0.9
        col = f"<{rng.random():.3f}, {rng.random():.3f}, {rng.random():.3f}>"
        fin = f"finish {{ phong {rng.random():.2f} reflection {rng.random() * 0.4:.2f} }}"
        k = rng.below(3)
        if k == 0:
            L.append(f"sphere {{ <{x:.3f}, {s:.3f}, {z:.3f}>, {s:.3f} pigment {{ color rgb {col} }} {fin} }}")
        elif k == 1:
            L.append(f"box {{ <{x - s:.3f}, 0, {z - s:.3f}>, <{x + s:.3f}, {2 * s:.3f}, {z + s:.3f}> rotate y*{rng.below(90)} "
                     f"pigment {{ color rgb {col} }} {fin} }}")
        else:
            L.append(f"cylinder {{ <{x:.3f}, 0, {z:.3f}>, <{x:.3f}, {3 * s:.3f}, {z:.3f}>, {s / 2:.3f} "
                     f"pigment {{ color rgb {col} }} {fin} }}")
    _write(outdir / "scene.pov", "\n".join(L) + "\n")
    return ["scene.pov"]


def gen_speech_text(outdir: Path, seed: int, n: int = 3) -> list[str]:
    """Sentences for espeak-ng to speak (the audio itself is made by the prepare step)."""
    _write(outdir / "speech.txt", " ".join(sentences(Rng(seed), n)) + "\n")
    return ["speech.txt"]


def resample_wav_16k(src: Path, dst: Path) -> None:
    """Mono 16-bit WAV at any rate -> 16 kHz mono 16-bit WAV (linear interpolation), what
    pocketsphinx's en-us model expects. Pure Python: deterministic."""
    import wave

    with wave.open(str(src), "rb") as w:
        rate, nch, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        frames = w.readframes(w.getnframes())
    if nch != 1 or width != 2:
        raise ValueError(f"{src}: expected mono 16-bit audio, got {nch} channels of {width * 8} bits")
    x = struct.unpack(f"<{len(frames) // 2}h", frames)
    n = int(len(x) * 16000 / rate)
    out = []
    step = rate / 16000
    for i in range(n):
        t = i * step
        k = int(t)
        a = x[k]
        b = x[k + 1] if k + 1 < len(x) else a
        out.append(max(-32768, min(32767, int(round(a + (b - a) * (t - k))))))
    with wave.open(str(dst), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(struct.pack(f"<{len(out)}h", *out))


def gen_xalan(outdir: Path, seed: int, nitems: int = 3000) -> list[str]:
    """An XML catalog and an XSLT stylesheet that groups, sorts, counts and formats it."""
    rng = Rng(seed)
    L = ['<?xml version="1.0" encoding="UTF-8"?>', "<catalog>"]
    for i in range(nitems):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.range(2, 8)))
        L.append(f'  <item id="i{i}" kind="{rng.choice(NOUNS)}" price="{rng.range(1, 99999) / 100:.2f}" '
                 f'stock="{rng.below(500)}"><name>{rng.choice(ADJS)} {rng.choice(NOUNS)}</name><desc>{words}</desc>'
                 f"<maker>{rng.choice(NAMES)}</maker></item>")
    L.append("</catalog>")
    _write(outdir / "catalog.xml", "\n".join(L) + "\n")
    xsl = """<?xml version="1.0" encoding="UTF-8"?>
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:output method="html" indent="yes"/>
  <xsl:key name="by-kind" match="item" use="@kind"/>
  <xsl:template match="/catalog">
    <html><body>
      <h1>Catalog: <xsl:value-of select="count(item)"/> items</h1>
      <xsl:for-each select="item[generate-id() = generate-id(key('by-kind', @kind)[1])]">
        <xsl:sort select="@kind"/>
        <xsl:variable name="k" select="@kind"/>
        <h2><xsl:value-of select="$k"/> (<xsl:value-of select="count(key('by-kind', $k))"/>)</h2>
        <p>total stock value <xsl:value-of select="format-number(sum(key('by-kind', $k)/@price), '#,##0.00')"/></p>
        <table>
          <xsl:for-each select="key('by-kind', $k)">
            <xsl:sort select="@price" data-type="number" order="descending"/>
            <xsl:if test="position() &lt;= 10">
              <tr><td><xsl:value-of select="@id"/></td><td><xsl:value-of select="translate(name, 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')"/></td>
                <td><xsl:value-of select="@price"/></td><td><xsl:value-of select="string-length(desc)"/></td>
                <td><xsl:value-of select="substring-before(concat(desc, ' '), ' ')"/></td></tr>
            </xsl:if>
          </xsl:for-each>
        </table>
      </xsl:for-each>
    </body></html>
  </xsl:template>
</xsl:stylesheet>
"""
    _write(outdir / "style.xsl", xsl)
    return ["catalog.xml", "style.xsl"]


def gen_graph(outdir: Path, seed: int, nodes: int = 4000, edges: int = 16000) -> list[str]:
    """A connected weighted undirected graph in DOT (edge weight in ``len``)."""
    rng = Rng(seed)
    L = ["graph G {"]
    for v in range(1, nodes):
        L.append(f"  n{rng.below(v)} -- n{v} [len={rng.range(1, 100)}];")
    for _ in range(edges - (nodes - 1)):
        a, b = rng.below(nodes), rng.below(nodes)
        if a != b:
            L.append(f"  n{a} -- n{b} [len={rng.range(1, 100)}];")
    L.append("}")
    _write(outdir / "graph.gv", "\n".join(L) + "\n")
    return ["graph.gv"]


def gen_ppm(outdir: Path, seed: int, width: int = 640, height: int = 480) -> list[str]:
    """A photo-like PPM: smooth colour gradients, circles, stripes and a little noise."""
    rng = Rng(seed)
    circles = [(rng.below(width), rng.below(height), rng.range(20, 120), (rng.below(256), rng.below(256), rng.below(256)))
               for _ in range(12)]
    noise = rng.bytes(8192)
    img = bytearray(width * height * 3)
    for y in range(height):
        for x in range(width):
            i = (y * width + x) * 3
            n = noise[(i // 3 * 7) & 8191] & 15
            img[i] = (x * 255 // width + n) & 0xFF
            img[i + 1] = (y * 255 // height + n) & 0xFF
            img[i + 2] = (128 + ((x // 16 + y // 16) & 1) * 40 + n) & 0xFF
    for (cx, cy, r, col) in circles:
        for y in range(max(0, cy - r), min(height, cy + r)):
            dy = y - cy
            span = int(math.sqrt(max(0, r * r - dy * dy)))
            for x in range(max(0, cx - span), min(width, cx + span)):
                i = (y * width + x) * 3
                img[i], img[i + 1], img[i + 2] = col
    _write(outdir / "image.ppm", f"P6\n{width} {height}\n255\n".encode() + bytes(img))
    return ["image.ppm"]


def _sin(x: float) -> float:
    """sin(x) from + - * only (range reduction, then an odd polynomial): bit-identical on
    every machine, unlike libm's sin whose last bit may differ between C libraries."""
    tau = 6.283185307179586
    x = x - tau * int(x / tau)
    if x < 0:
        x += tau
    sign = 1.0
    if x > 3.141592653589793:
        x -= 3.141592653589793
        sign = -1.0
    if x > 1.5707963267948966:
        x = 3.141592653589793 - x
    x2 = x * x
    return sign * x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 * (1 - x2 / 110)))))


# Equal-tempered semitone ratios as literals (no pow(): its last bit is libm's choice).
SEMITONES = (1.0, 1.0594630943592953, 1.122462048309373, 1.189207115002721, 1.2599210498948732,
             1.3348398541700344, 1.4142135623730951, 1.4983070768766815, 1.5874010519681994,
             1.681792830507429, 1.7817974362806785, 1.8877486253633868)


def gen_wav(outdir: Path, seed: int, seconds: float = 4.0, rate: int = 44100) -> list[str]:
    """Stereo 16-bit music-like audio: notes of a random melody with harmonics and decay,
    a bass line, and a little noise. Arithmetic is + - * / only: identical everywhere."""
    rng = Rng(seed)
    n = int(seconds * rate)
    notes = [220.0 * (1 + rng.below(2)) * SEMITONES[rng.below(12)] for _ in range(int(seconds * 4) + 1)]
    bass = [55.0 * SEMITONES[rng.below(12)] for _ in range(int(seconds) + 1)]
    frames = bytearray(n * 4)
    two_pi = 6.283185307179586
    noise = rng.bytes(4096)
    note_len = rate // 4
    decay = 0.99986  # per sample
    env = 1.0
    for i in range(n):
        t = i / rate
        if i % note_len == 0:
            env = 1.0
        env *= decay
        f = notes[i // note_len]
        s = env * (0.5 * _sin(two_pi * f * t) + 0.2 * _sin(two_pi * 2 * f * t) + 0.1 * _sin(two_pi * 3 * f * t))
        b = 0.3 * _sin(two_pi * bass[i // rate] * t)
        nz = (noise[i & 4095] - 128) / 128 * 0.01
        left = int(max(-1.0, min(1.0, s * 0.8 + b + nz)) * 30000)
        right = int(max(-1.0, min(1.0, s * 0.6 + b * 1.1 - nz)) * 30000)
        struct.pack_into("<hh", frames, i * 4, left, right)
    hdr = b"RIFF" + struct.pack("<I", 36 + len(frames)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 2, rate, rate * 4, 4, 16) + b"data" + struct.pack("<I", len(frames))
    _write(outdir / "music.wav", hdr + bytes(frames))
    return ["music.wav"]


#: The graph workloads' program, after the GAP Benchmark Suite: shipped as C source beside this
#: file and compiled by the workloads' prepare step (no Debian package has GAP's kernels).
GAPGRAPH_SOURCE = Path(__file__).with_name("gapgraph.c")


def gen_gapgraph(outdir: Path, seed: int, scale: int = 16, degree: int = 16, kind: str = "kron") -> list[str]:
    """The graph workloads' inputs: the kernels' C source and the graph's parameters
    (2**scale vertices, degree * 2**scale edges, the seed, and the generator: GAP's ``kron``,
    power-law Kronecker, or ``urand``, uniform random). The prepare step compiles the source
    and generates the graph itself: R-MAT over millions of edges is C's work, not pure
    Python's (minutes here, a second there), and the C generator is as deterministic."""
    if not (1 <= scale <= 28 and 1 <= degree <= 64):
        raise ValueError(f"graph scale {scale} / degree {degree}: scale must be 1-28 and degree 1-64")
    if kind not in ("kron", "urand"):
        raise ValueError(f"graph kind {kind!r}: must be kron or urand")
    _write(outdir / "gapgraph.c", GAPGRAPH_SOURCE.read_bytes())
    # A Kronecker graph's parameters name no kind (the program's default), as before urand.
    _write(outdir / "graph.params", f"{scale} {degree} {seed}" + ("" if kind == "kron" else f" {kind}") + "\n")
    return ["gapgraph.c", "graph.params"]
