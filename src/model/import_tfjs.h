// Importer for TF.js *layers* models (model.json + binary weight shards), as
// written by tensorflowjs_converter from Keras models.
#pragma once

#include <functional>
#include <string>

#include "model/graph.h"

namespace ts {

// Loads model.json and its shards (paths relative to model.json). Weights
// quantised by the converter (uint8/uint16, value = min + q * scale) are
// dequantised to float. `input_size` > 0 overrides the stored square input
// size. A labels.txt beside model.json (one class per line) names the outputs.
//
// Keras AveragePooling2D whose window covers the whole feature map (MobileNet
// heads: 7x7 at 224) becomes GlobalAvgPool; at 112 the same layer sees a 3x3
// map and is also treated as a global average (see docs/model.md).
Graph import_tfjs(const std::string& model_json, int input_size);

// Returns the bytes of a weight shard named in the manifest ("paths").
using ShardReader = std::function<std::string(const std::string& path)>;

// Same as import_tfjs from model.json text already in memory; `model_json`
// names it in errors, shards come from `read_shard`, labels are not read.
// Every number is checked before use: bad input throws ts::Error, one line.
Graph import_tfjs_text(const std::string& text, const std::string& model_json, const ShardReader& read_shard,
                       int input_size);

}  // namespace ts
