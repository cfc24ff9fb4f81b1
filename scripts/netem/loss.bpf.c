// tc BPF classifier in direct-action mode for scripts/netem_run.sh: drops a
// random share of the packets arriving at a device (LOSS_PPM per million), so
// TCP really loses segments and retransmits them. Built with Debian's clang:
//   clang -O2 -target bpf -DLOSS_PPM=10000 -c loss.bpf.c -o loss.o
//   tc qdisc add dev DEV clsact
//   tc filter add dev DEV ingress bpf da obj loss.o sec classifier
// No libbpf headers needed: the one helper is called by its number.
#define SEC(name) __attribute__((section(name), used))

// BPF_FUNC_get_prandom_u32 is helper 7 of the kernel's BPF ABI.
static unsigned int (*get_prandom_u32)(void) = (void *)7;

#ifndef LOSS_PPM
#define LOSS_PPM 0
#endif

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

SEC("classifier")
int drop_some(void *skb) {
  (void)skb;
  return get_prandom_u32() % 1000000u < LOSS_PPM ? TC_ACT_SHOT : TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
