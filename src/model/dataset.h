// Labelled image data sets for accuracy measurements. Fashion-MNIST as
// shipped by Debian's dataset-fashion-mnist package: gzip-compressed IDX
// files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-...),
// 60,000 training and 10,000 test images of 28x28 grey pixels, 10 classes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct LabelledImages {
  std::string name;  // e.g. "fashion-mnist test"
  int rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major per image
  std::vector<uint8_t> labels;  // count
  std::vector<std::string> classes;
  int count() const { return int(labels.size()); }
  // Image i as a model input: 1 x rows x cols floats, pixel / 255.
  std::vector<float> input(int i) const;
};

// Folder of the data set: $TS_FASHION_MNIST_DIR, else Debian's
// /usr/share/datasets/fashion-mnist.
std::string fashion_mnist_dir();

// Loads split "train" or "test" (the first `limit` images if limit > 0).
// Throws ts::Error with one line if a file is missing (naming the Debian
// package), truncated or not IDX, or images and labels disagree.
LabelledImages load_fashion_mnist(const std::string& split, int limit = 0, const std::string& dir = "");

// Reads one gzip-compressed (or plain) IDX file of unsigned bytes: its dims
// and data. Throws ts::Error naming the file on any defect.
std::vector<uint8_t> read_idx_u8(const std::string& path, std::vector<int>* dims, int64_t max_items = 0);

}  // namespace ts
