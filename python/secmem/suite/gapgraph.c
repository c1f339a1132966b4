/* secmem's graph workloads, after the GAP Benchmark Suite (Beamer, Asanovic, Patterson 2015):
 * GAP's two synthetic graph generators (Kronecker with the Graph500 parameters, and uniform
 * random), and two kernels over the graph in CSR form, a direction-optimizing breadth-first
 * search and a pull PageRank.
 *
 *   gapgraph gen SCALE DEGREE SEED OUT [KIND]
 *                                        2^SCALE vertices, DEGREE*2^SCALE edges, undirected;
 *                                        KIND kron (the default) or urand
 *   gapgraph bfs GRAPH TRIALS SEED       BFS from TRIALS sources drawn with SEED
 *   gapgraph pr GRAPH ITERS TOLERANCE    PageRank (damping 0.85) until ITERS or TOLERANCE
 *
 * Everything is integer arithmetic or IEEE single/double operations in a fixed order, and the
 * program reads no clock, so the same graph gives byte-identical output and the same
 * instruction stream on every run. The suite's prepare step compiles this file with the
 * system's gcc (-O2, baseline x86-64) and generates the graph with `gen`; the workload runs
 * `bfs` or `pr`, which read the graph with one read() per array and start computing at once.
 *
 * The graph file: "SMGRAPH1", u64 vertices, u64 arcs, (vertices+1) u64 offsets, arcs u32
 * neighbours (each list sorted, no duplicates, no self loops; every edge in both lists). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t node_t;

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "gapgraph: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory", NULL);
    return p;
}

/* SplitMix64: the suite's Python generators use the same one. */
static uint64_t rng_state;
static uint64_t next64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static void seed_rng(uint64_t seed) { rng_state = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull; }
static uint64_t below(uint64_t n) { return (uint64_t)(((unsigned __int128)next64() * n) >> 64); }

typedef struct {
    uint64_t n, m;
    uint64_t *off;
    node_t *adj;
} graph_t;

static int cmp_node(const void *a, const void *b) {
    node_t x = *(const node_t *)a, y = *(const node_t *)b;
    return (x > y) - (x < y);
}

/* kron: Graph500's R-MAT recursion (A=0.57, B=0.19, C=0.19, D=0.05) as 32-bit thresholds,
 * then a random relabelling of the vertices (as Graph500 and GAP do) so that the high-degree
 * vertices are not all at low ids. urand: GAP's uniform random graph (Erdos-Renyi; GAP's
 * generator.h MakeUniformEL draws both endpoints of every edge uniformly from all vertices),
 * whose degrees are all near 2*DEGREE, so no hub vertices stay cached. */
static void generate(int scale, int degree, uint64_t seed, const char *out, int urand) {
    if (scale < 1 || scale > 28 || degree < 1 || degree > 64) die("scale must be 1-28 and degree 1-64", NULL);
    uint64_t n = 1ull << scale, edges = n * (uint64_t)degree;
    const uint64_t A = (uint64_t)(0.57 * 4294967296.0), AB = (uint64_t)(0.76 * 4294967296.0),
                   ABC = (uint64_t)(0.95 * 4294967296.0);
    seed_rng(seed);
    node_t *src = xmalloc(edges * sizeof *src), *dst = xmalloc(edges * sizeof *dst);
    if (urand) {
        for (uint64_t e = 0; e < edges; e++) { src[e] = (node_t)below(n); dst[e] = (node_t)below(n); }
    } else {
        node_t *perm = xmalloc(n * sizeof *perm);
        for (uint64_t i = 0; i < n; i++) perm[i] = (node_t)i;
        for (uint64_t i = n - 1; i > 0; i--) {
            uint64_t j = below(i + 1);
            node_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
        for (uint64_t e = 0; e < edges; e++) {
            uint64_t u = 0, v = 0;
            for (int level = 0; level < scale; level++) {
                uint64_t r = next64() >> 32;
                u <<= 1; v <<= 1;
                if (r >= A) { if (r < AB) v |= 1; else if (r < ABC) u |= 1; else { u |= 1; v |= 1; } }
            }
            src[e] = perm[u]; dst[e] = perm[v];
        }
        free(perm);
    }
    uint64_t *off = xmalloc((n + 1) * sizeof *off);
    memset(off, 0, (n + 1) * sizeof *off);
    for (uint64_t e = 0; e < edges; e++)
        if (src[e] != dst[e]) { off[src[e] + 1]++; off[dst[e] + 1]++; }
    for (uint64_t i = 0; i < n; i++) off[i + 1] += off[i];
    node_t *adj = xmalloc(off[n] * sizeof *adj);
    uint64_t *fill = xmalloc(n * sizeof *fill);
    memcpy(fill, off, n * sizeof *fill);
    for (uint64_t e = 0; e < edges; e++)
        if (src[e] != dst[e]) { adj[fill[src[e]]++] = dst[e]; adj[fill[dst[e]]++] = src[e]; }
    free(src); free(dst); free(fill);
    /* Sort each list and drop duplicate edges, compacting in place. */
    uint64_t w = 0, start = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t end = off[i + 1];
        qsort(adj + start, end - start, sizeof *adj, cmp_node);
        off[i] = w;
        for (uint64_t k = start; k < end; k++)
            if (k == start || adj[k] != adj[k - 1]) adj[w++] = adj[k];
        start = end;
    }
    off[n] = w;
    FILE *f = fopen(out, "wb");
    if (!f) die("cannot write", out);
    uint64_t hdr[2] = {n, w};
    if (fwrite("SMGRAPH1", 1, 8, f) != 8 || fwrite(hdr, 8, 2, f) != 2 || fwrite(off, 8, n + 1, f) != n + 1 ||
        fwrite(adj, sizeof *adj, w, f) != w || fclose(f) != 0)
        die("cannot write", out);
    printf("%s scale %d degree %d seed %llu: %llu vertices, %llu arcs\n", urand ? "urand" : "kronecker", scale, degree,
           (unsigned long long)seed, (unsigned long long)n, (unsigned long long)w);
}

static void read_all(FILE *f, void *p, size_t size, size_t count, const char *path) {
    if (fread(p, size, count, f) != count) die("truncated graph file", path);
}

static graph_t load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    char magic[8];
    uint64_t hdr[2];
    read_all(f, magic, 1, 8, path);
    if (memcmp(magic, "SMGRAPH1", 8) != 0) die("not a gapgraph file", path);
    read_all(f, hdr, 8, 2, path);
    graph_t g = {hdr[0], hdr[1], NULL, NULL};
    if (g.n == 0 || g.n > (1ull << 31) || g.m > (1ull << 40)) die("implausible graph header", path);
    g.off = xmalloc((g.n + 1) * sizeof *g.off);
    g.adj = xmalloc(g.m * sizeof *g.adj);
    read_all(f, g.off, 8, g.n + 1, path);
    read_all(f, g.adj, sizeof *g.adj, g.m, path);
    fclose(f);
    if (g.off[0] != 0 || g.off[g.n] != g.m) die("inconsistent offsets", path);
    return g;
}

/* Direction-optimizing BFS (Beamer et al., SC 2012) with GAP's alpha=15, beta=18: top-down
 * from a queue while the frontier is small, bottom-up over a bitmap while it is large. */
static void bfs(const graph_t *g, int trials, uint64_t seed) {
    uint64_t n = g->n, words = (n + 63) / 64;
    int32_t *parent = xmalloc(n * sizeof *parent);
    node_t *queue = xmalloc(n * sizeof *queue);
    uint64_t *front = xmalloc(words * 8), *next = xmalloc(words * 8);
    seed_rng(seed);
    for (int t = 0; t < trials; t++) {
        node_t s;
        do s = (node_t)below(n); while (g->off[s + 1] == g->off[s]);
        for (uint64_t v = 0; v < n; v++) parent[v] = -1;
        parent[s] = (int32_t)s;
        uint64_t head = 0, tail = 0, depth = 0, reached = 1, edges_to_check = g->m, switches = 0;
        queue[tail++] = s;
        uint64_t scout = g->off[s + 1] - g->off[s];
        while (head < tail) {
            uint64_t level_end = tail;
            if (scout > edges_to_check / 15) {
                /* Bottom-up: every unvisited vertex looks for a parent in the frontier. */
                memset(front, 0, words * 8);
                for (uint64_t k = head; k < tail; k++) front[queue[k] / 64] |= 1ull << (queue[k] % 64);
                uint64_t awake = tail - head, old_awake;
                head = tail;
                do {
                    switches++;
                    depth++;
                    old_awake = awake;
                    awake = 0;
                    memset(next, 0, words * 8);
                    for (uint64_t v = 0; v < n; v++) {
                        if (parent[v] >= 0) continue;
                        for (uint64_t k = g->off[v]; k < g->off[v + 1]; k++) {
                            node_t u = g->adj[k];
                            if (front[u / 64] >> (u % 64) & 1) {
                                parent[v] = (int32_t)u;
                                next[v / 64] |= 1ull << (v % 64);
                                awake++;
                                break;
                            }
                        }
                    }
                    uint64_t *tmp = front; front = next; next = tmp;
                    reached += awake;
                } while (awake >= old_awake || awake > n / 18);
                if (awake == 0) depth--; /* the last level found nothing new */
                /* Back to top-down: the last bottom-up level becomes the queue. */
                head = tail = 0;
                for (uint64_t v = 0; v < n; v++)
                    if (front[v / 64] >> (v % 64) & 1) queue[tail++] = (node_t)v;
                scout = 1;
                if (tail == 0) break;
                continue;
            }
            /* Top-down: expand the frontier in the queue. */
            depth++;
            scout = 0;
            for (; head < level_end; head++) {
                node_t u = queue[head];
                edges_to_check -= g->off[u + 1] - g->off[u];
                for (uint64_t k = g->off[u]; k < g->off[u + 1]; k++) {
                    node_t v = g->adj[k];
                    if (parent[v] < 0) {
                        parent[v] = (int32_t)u;
                        queue[tail++] = v;
                        scout += g->off[v + 1] - g->off[v];
                        reached++;
                    }
                }
            }
            if (tail == level_end) depth--; /* the last level found nothing new */
        }
        uint64_t sum = 0;
        for (uint64_t v = 0; v < n; v++) sum = sum * 31 + (uint64_t)(uint32_t)parent[v];
        printf("bfs %d: source %u reached %llu vertices in %llu levels (%llu bottom-up), parents %016llx\n", t,
               s, (unsigned long long)reached, (unsigned long long)depth, (unsigned long long)switches,
               (unsigned long long)sum);
    }
}

/* Pull PageRank as GAP's pr: each vertex sums its neighbours' score/degree. */
static void pagerank(const graph_t *g, int iters, double tolerance) {
    uint64_t n = g->n;
    const float damping = 0.85f, base = (1.0f - damping) / (float)n;
    float *score = xmalloc(n * sizeof *score), *contrib = xmalloc(n * sizeof *contrib);
    for (uint64_t v = 0; v < n; v++) score[v] = 1.0f / (float)n;
    int it;
    double error = 0;
    for (it = 1; it <= iters; it++) {
        for (uint64_t v = 0; v < n; v++) {
            uint64_t d = g->off[v + 1] - g->off[v];
            contrib[v] = d ? score[v] / (float)d : 0.0f;
        }
        error = 0;
        for (uint64_t v = 0; v < n; v++) {
            float sum = 0;
            for (uint64_t k = g->off[v]; k < g->off[v + 1]; k++) sum += contrib[g->adj[k]];
            float old = score[v];
            score[v] = base + damping * sum;
            error += old > score[v] ? old - score[v] : score[v] - old;
        }
        if (error < tolerance) break;
    }
    if (it > iters) it = iters;
    node_t top[5];
    int ntop = 0;
    for (uint64_t v = 0; v < n; v++) {
        int i = ntop < 5 ? ntop++ : 5;
        while (i > 0 && score[top[i - 1]] < score[v]) {
            if (i < 5) top[i] = top[i - 1];
            i--;
        }
        if (i < 5) top[i] = (node_t)v;
    }
    printf("pagerank: %d iterations, error %.6e\n", it, error);
    for (int i = 0; i < ntop; i++) printf("  vertex %u score %.6e\n", top[i], score[top[i]]);
}

int main(int argc, char **argv) {
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "gen") == 0) {
        const char *kind = argc == 7 ? argv[6] : "kron";
        if (strcmp(kind, "kron") != 0 && strcmp(kind, "urand") != 0) die("graph kind must be kron or urand", kind);
        generate(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), argv[5], strcmp(kind, "urand") == 0);
    } else if (argc == 5 && strcmp(argv[1], "bfs") == 0) {
        graph_t g = load(argv[2]);
        bfs(&g, atoi(argv[3]), strtoull(argv[4], NULL, 10));
    } else if (argc == 5 && strcmp(argv[1], "pr") == 0) {
        graph_t g = load(argv[2]);
        pagerank(&g, atoi(argv[3]), strtod(argv[4], NULL));
    } else {
        die("usage: gapgraph gen SCALE DEGREE SEED OUT [kron|urand] | bfs GRAPH TRIALS SEED | pr GRAPH ITERS TOLERANCE", NULL);
    }
    return 0;
}
