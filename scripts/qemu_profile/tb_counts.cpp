// A QEMU TCG plugin for scripts/qemu_profile.sh: counts the guest
// instructions each translation block executes (inline counters, no
// callbacks on the hot path) and writes "start-address instructions
// executions" lines to $TS_TB_COUNTS.<pid> every second and at exit.
//
// The few plugin API entry points it uses are declared here (QEMU 7.2's
// plugin ABI, version 1: the symbols qemu-system-arm exports to plugins),
// so nothing beyond g++ is needed to build it.
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <utility>

extern "C" {
typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;
struct qemu_plugin_tb;
typedef void (*tb_trans_fn)(qemu_plugin_id_t, struct qemu_plugin_tb*);
typedef void (*udata_fn)(qemu_plugin_id_t, void*);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_fn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb*, int op, void* ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_fn, void*);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb*);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb*);
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
}

namespace {

constexpr int kInlineAddU64 = 0;  // QEMU_PLUGIN_INLINE_ADD_U64

struct Block {
  uint64_t pc, insns, runs;
};

// Every block translated, by (start address, instructions): a block
// translated again adds its runs to the same counter. Never freed (the
// counters are written by translated code until QEMU exits).
std::mutex mu;
std::map<std::pair<uint64_t, uint64_t>, Block*>* blocks = new std::map<std::pair<uint64_t, uint64_t>, Block*>;
char out_path[512];

void on_translate(qemu_plugin_id_t, struct qemu_plugin_tb* tb) {
  const uint64_t pc = qemu_plugin_tb_vaddr(tb), n = qemu_plugin_tb_n_insns(tb);
  std::lock_guard<std::mutex> g(mu);
  Block*& b = (*blocks)[{pc, n}];
  if (!b) b = new Block{pc, n, 0};
  qemu_plugin_register_vcpu_tb_exec_inline(tb, kInlineAddU64, &b->runs, 1);
}

void write_counts() {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
  FILE* f = fopen(tmp, "w");
  if (!f) return;
  {
    std::lock_guard<std::mutex> g(mu);
    for (const auto& kv : *blocks)
      if (kv.second->runs)
        fprintf(f, "%llx %llu %llu\n", (unsigned long long)kv.second->pc, (unsigned long long)kv.second->insns,
                (unsigned long long)kv.second->runs);
  }
  fclose(f);
  rename(tmp, out_path);
}

void on_exit(qemu_plugin_id_t, void*) { write_counts(); }

void* writer(void*) {
  for (;;) {  // QEMU may be killed: the counts so far are on disk
    sleep(1);
    write_counts();
  }
  return nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t*,
                                                                          int, char**) {
  const char* base = getenv("TS_TB_COUNTS");
  if (!base || !*base) return -1;  // refused: nowhere to write
  snprintf(out_path, sizeof out_path, "%s.%d", base, int(getpid()));
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_exit, nullptr);
  pthread_t t;
  pthread_create(&t, nullptr, writer, nullptr);
  pthread_detach(t);
  return 0;
}
