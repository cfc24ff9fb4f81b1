#include "model/dataset.h"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>

#include "model/graph.h"

namespace ts {

std::vector<float> LabelledImages::input(int i) const {
  if (i < 0 || i >= count()) throw Error(name + ": image index out of range");
  const size_t n = size_t(rows) * size_t(cols);
  std::vector<float> x(n);
  for (size_t k = 0; k < n; ++k) x[k] = float(pixels[size_t(i) * n + k]) / 255.0f;
  return x;
}

std::string fashion_mnist_dir() {
  if (const char* d = std::getenv("TS_FASHION_MNIST_DIR"); d && *d) return d;
  return "/usr/share/datasets/fashion-mnist";
}

std::vector<uint8_t> read_idx_u8(const std::string& path, std::vector<int>* dims, int64_t max_items) {
  if (!std::filesystem::exists(path)) throw Error(path + ": file does not exist");
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) throw Error(path + ": cannot open file");
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};
  auto read = [&](void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const int r = gzread(f, static_cast<char*>(dst) + got, unsigned(std::min<size_t>(n - got, 1u << 30)));
      if (r < 0) throw Error(path + ": corrupt gzip data");
      if (r == 0) break;
      got += size_t(r);
    }
    return got;
  };
  unsigned char head[4];
  if (read(head, 4) != 4) throw Error(path + ": truncated (no IDX header)");
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] < 1 || head[3] > 4)
    throw Error(path + ": not an IDX file of unsigned bytes");
  dims->assign(head[3], 0);
  int64_t total = 1;
  for (int& d : *dims) {
    unsigned char b[4];
    if (read(b, 4) != 4) throw Error(path + ": truncated IDX header");
    d = int((uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3]);
    if (d < 0 || d > (1 << 24)) throw Error(path + ": implausible IDX dimension");
    total *= d;
  }
  if (total > (int64_t(1) << 32)) throw Error(path + ": IDX data too large");
  int64_t items = (*dims)[0];
  if (max_items > 0 && max_items < items) {
    total = total / items * max_items;
    items = max_items;
    (*dims)[0] = int(items);
  }
  std::vector<uint8_t> data(static_cast<size_t>(total));
  if (read(data.data(), data.size()) != data.size())
    throw Error(path + ": truncated (the header declares " + std::to_string(total) + " bytes of data)");
  return data;
}

LabelledImages load_fashion_mnist(const std::string& split, int limit, const std::string& dir_in) {
  if (split != "train" && split != "test") throw Error("fashion-mnist: split must be train or test");
  const std::string dir = dir_in.empty() ? fashion_mnist_dir() : dir_in;
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::filesystem::path d(dir);
  const std::string img = (d / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string lab = (d / (prefix + "-labels-idx1-ubyte.gz")).string();
  if (!std::filesystem::exists(img) || !std::filesystem::exists(lab))
    throw Error("fashion-mnist: " + img + " not found; install Debian's dataset-fashion-mnist package "
                "(apt-get install dataset-fashion-mnist) or set TS_FASHION_MNIST_DIR");
  LabelledImages s;
  s.name = "fashion-mnist " + split;
  s.classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  std::vector<int> di, dl;
  s.pixels = read_idx_u8(img, &di, limit);
  s.labels = read_idx_u8(lab, &dl, limit);
  if (di.size() != 3) throw Error(img + ": expected images of 3 dims (count, rows, cols)");
  if (dl.size() != 1) throw Error(lab + ": expected labels of 1 dim");
  if (di[0] != dl[0])
    throw Error(img + ": " + std::to_string(di[0]) + " images but " + std::to_string(dl[0]) + " labels");
  s.rows = di[1];
  s.cols = di[2];
  for (uint8_t l : s.labels)
    if (l >= s.classes.size()) throw Error(lab + ": label " + std::to_string(l) + " out of range 0..9");
  return s;
}

}  // namespace ts
