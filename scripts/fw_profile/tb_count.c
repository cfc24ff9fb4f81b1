// tb_count.so: a QEMU TCG plugin that counts, per translated block, how
// many times it ran and how many guest instructions it holds, and writes
// "address instructions executions" per block when QEMU exits (the file
// named by its out= argument). scripts/fw_profile.sh turns that into
// instructions per firmware function. Built against qemu-plugin.h from
// Debian's QEMU source (the header only; nothing of QEMU is linked).
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

typedef struct {
  uint64_t vaddr;
  uint64_t insns;
  uint64_t execs;  // bumped inline by the translated code (one vCPU)
} Block;

// Open addressing on (vaddr, insns); a block translated again keeps its
// counter. Blocks are allocated one by one and never move (the translated
// code holds a pointer to the counter).
static Block** table;
static size_t cap, used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char* out_path;

static size_t slot_of(uint64_t vaddr, uint64_t insns, Block** t, size_t n) {
  size_t i = (size_t)((vaddr * 0x9E3779B97F4A7C15ull) ^ insns) & (n - 1);
  while (t[i] && !(t[i]->vaddr == vaddr && t[i]->insns == insns)) i = (i + 1) & (n - 1);
  return i;
}

static Block* find_or_add(uint64_t vaddr, uint64_t insns) {
  if (2 * (used + 1) > cap) {
    size_t n = cap ? 2 * cap : 4096;
    Block** t = calloc(n, sizeof *t);
    if (!t) abort();
    for (size_t i = 0; i < cap; ++i)
      if (table[i]) t[slot_of(table[i]->vaddr, table[i]->insns, t, n)] = table[i];
    free(table);
    table = t;
    cap = n;
  }
  size_t i = slot_of(vaddr, insns, table, cap);
  if (!table[i]) {
    table[i] = calloc(1, sizeof(Block));
    if (!table[i]) abort();
    table[i]->vaddr = vaddr;
    table[i]->insns = insns;
    ++used;
  }
  return table[i];
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  pthread_mutex_lock(&lock);
  Block* b = find_or_add(qemu_plugin_tb_vaddr(tb), qemu_plugin_tb_n_insns(tb));
  pthread_mutex_unlock(&lock);
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
}

static void write_counts(qemu_plugin_id_t id, void* p) {
  FILE* f = fopen(out_path, "w");
  if (!f) {
    fprintf(stderr, "tb_count: cannot write %s\n", out_path);
    return;
  }
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < cap; ++i)
    if (table[i] && table[i]->execs)
      fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", table[i]->vaddr, table[i]->insns, table[i]->execs);
  pthread_mutex_unlock(&lock);
  fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv) {
  for (int i = 0; i < argc; ++i)
    if (strncmp(argv[i], "out=", 4) == 0) out_path = strdup(argv[i] + 4);
  if (!out_path) {
    fprintf(stderr, "tb_count: needs out=FILE\n");
    return -1;
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, write_counts, NULL);
  return 0;
}
