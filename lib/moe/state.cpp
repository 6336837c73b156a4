#include "lib/moe/state.hpp"

#include <algorithm>
#include <numeric>

#include "core/checkpoint.hpp"
#include "core/error.hpp"

namespace skew::moe {

std::string expert_tensor_name(std::size_t layer, int e, const char* what) {
  std::string key = "moe";
  key.append(std::to_string(layer)).append(".e").append(std::to_string(e)).append(".").append(what);
  return key;
}

namespace {
std::string expert_key(std::size_t layer, int e, const char* what) {
  return expert_tensor_name(layer, e, what);
}
std::string placement_key(std::size_t layer) {
  return std::string("moe").append(std::to_string(layer)).append(".placement");
}
// A host copy of a buffer on any device: checkpoints are the same files whichever device the
// network trained on.
Tensor host_tensor(const DeviceArray<float>& buffer) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(buffer.size())}, DType::F32, Device::Host);
  buffer.download(t.data<float>(), buffer.size());
  return t;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> save_state(MoeNetwork<float>& model, AdamW& adam) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("dense.w", host_tensor(model.dense_w()));
  out.emplace_back("dense.m", host_tensor(adam.m()));
  out.emplace_back("dense.v", host_tensor(adam.v()));
  for (std::size_t l = 0; l < model.moe().size(); ++l) {
    auto& layer = *model.moe()[l];
    std::vector<double> rows;
    for (int e = 0; e < layer.placement().num_experts(); ++e)
      for (const auto& r : layer.placement().experts[static_cast<std::size_t>(e)])
        rows.insert(rows.end(), {double(e), double(r.rank), r.share});
    out.emplace_back(placement_key(l), Tensor::from_vector(rows, {static_cast<std::int64_t>(rows.size() / 3), 3}));
    for (auto& [e, s] : layer.experts()) {
      out.emplace_back(expert_key(l, e, "w"), s.w.to(Device::Host));
      out.emplace_back(expert_key(l, e, "m"), s.m.to(Device::Host));
      out.emplace_back(expert_key(l, e, "v"), s.v.to(Device::Host));
    }
  }
  return out;
}

namespace {
void load_dense(const TensorLookup& get, MoeNetwork<float>& model, AdamW& adam) {
  auto copy_into = [&](const std::string& name, DeviceArray<float>& dst) {
    const Tensor& t = get(name);
    SKEW_CHECK(t.numel() == dst.size(),
               "checkpoint tensor " << name << " has " << t.numel() << " values, the model needs " << dst.size());
    dst.upload(t.data<float>(), t.numel());
  };
  copy_into("dense.w", model.dense_w());
  copy_into("dense.m", adam.m());
  copy_into("dense.v", adam.v());
}

// Creates the replicas layer `l`'s placement puts on `rank`, their state from the checkpoint.
void load_experts(const TensorLookup& get, MoeLayer<float>& layer, std::size_t l, int rank) {
  layer.experts().clear();
  for (int e : layer.placement().experts_on(rank)) {
    ExpertState<float>& s = layer.create_expert(e);
    for (auto [what, t] : {std::pair{"w", &s.w}, std::pair{"m", &s.m}, std::pair{"v", &s.v}}) {
      const Tensor& src = get(expert_key(l, e, what));
      SKEW_CHECK(src.numel() == t->numel(), "checkpoint tensor " << expert_key(l, e, what) << " has the wrong size");
      t->copy_from(src);  // host file -> the layer's device
    }
  }
}
}  // namespace

void load_state(const TensorFile& file, MoeNetwork<float>& model, AdamW& adam, int rank) {
  const TensorLookup get = [&](const std::string& name) -> const Tensor& { return file.get(name); };
  load_dense(get, model, adam);
  for (std::size_t l = 0; l < model.moe().size(); ++l) {
    auto& layer = *model.moe()[l];
    placement::LayerPlacement p = layer.placement();
    for (auto& reps : p.experts) reps.clear();
    const Tensor& rows = file.get(placement_key(l));
    for (std::int64_t i = 0; i < rows.dim(0); ++i) {
      const double* r = rows.data<double>() + i * 3;
      p.experts.at(static_cast<std::size_t>(r[0])).push_back({static_cast<int>(r[1]), r[2]});
    }
    p.validate();
    layer.set_placement(p);
    load_experts(get, layer, l, rank);
  }
}

void load_state_resharded(const TensorLookup& get, MoeNetwork<float>& model, AdamW& adam, int rank) {
  load_dense(get, model, adam);
  for (std::size_t l = 0; l < model.moe().size(); ++l) load_experts(get, *model.moe()[l], l, rank);
}

Json model_keys(const MoeTrainOptions& options) {
  const ModelSection& m = options.model;
  const std::string& arch = m.arch;
  Json keys = {{"model.arch", arch}};
  // model.heads changes no tensor's shape but what the attention weights mean, so it counts too.
  std::vector<std::pair<const char*, std::int64_t>> shape = {{"model.d_model", m.d_model},
                                                             {"model.heads", m.heads},
                                                             {"model.moe_every", m.moe_every},
                                                             {"moe.num_experts", options.moe.num_experts},
                                                             {"moe.d_ff", options.moe.d_ff}};
  // The dense FFNs' width: Swin's stage 1 always has them, GPT and BERT only with moe_every = 2.
  if (arch == "swin" || m.moe_every != 1) shape.emplace_back("model.d_ff", m.d_ff);
  const SwinOptions& swin = options.swin;
  if (arch == "swin")
    shape.insert(shape.end(), {{"swin.patch", swin.patch},
                               {"swin.window", swin.window},
                               {"swin.stage1_blocks", swin.stage1_blocks},
                               {"swin.stage2_blocks", swin.stage2_blocks}});
  else
    shape.insert(shape.end(), {{"model.layers", m.layers}, {"model.seq_len", m.seq_len}});
  for (const auto& [key, value] : shape) keys[key] = value;
  return keys;
}

std::string model_mismatch(const Json& index, const std::string& index_path, const Json& keys) {
  if (!index.contains("model")) return "";
  const Json& written = index["model"];
  for (const auto& [key, value] : keys.items()) {
    const Json there = written.value(key, Json());
    if (there != value)
      return "checkpoint index " + index_path + " was written with " + key + "=" + there.dump() + " but this run has " +
             key + "=" + value.dump() + ": resume with the checkpoint's " + key +
             ", or start a new checkpoint directory";
  }
  return "";
}

Json checkpoint_index(comm::ProcessGroup& world, const std::vector<std::pair<std::string, Tensor>>& shard,
                      const std::string& policy, const Json& model_keys, MoeNetwork<float>& model) {
  const std::string mine = CheckpointDir::describe_tensors(shard).dump();
  std::vector<std::uint8_t> bytes(mine.begin(), mine.end());
  std::vector<std::int64_t> size = {static_cast<std::int64_t>(bytes.size())},
                            sizes(static_cast<std::size_t>(world.size()));
  world.allgather(comm::view(size), comm::view(sizes));
  std::vector<std::size_t> counts(sizes.begin(), sizes.end());
  std::vector<std::uint8_t> all(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  world.allgatherv(comm::view(bytes), comm::view(all), counts);
  Json index = {{"policy", policy}, {"model", model_keys}, {"placement", Json::array()}, {"tensors", Json::object()}};
  for (auto& layer : model.moe()) index["placement"].push_back(layer->placement().to_string());
  Json& tensors = index["tensors"];
  std::size_t offset = 0;
  for (int r = 0; r < world.size(); ++r) {
    const auto begin = all.begin() + static_cast<std::ptrdiff_t>(offset);
    offset += counts[static_cast<std::size_t>(r)];
    const Json part = Json::parse(begin, all.begin() + static_cast<std::ptrdiff_t>(offset));
    for (const auto& [name, info] : part.items()) {
      Json& entry = tensors[name];
      if (entry.is_null()) entry = {{"dtype", info["dtype"]}, {"shape", info["shape"]}, {"files", Json::array()}};
      SKEW_CHECK(entry["dtype"] == info["dtype"] && entry["shape"] == info["shape"],
                 "checkpoint tensor " << name << " differs between ranks: " << entry.dump() << " vs " << info.dump());
      entry["files"].push_back(CheckpointDir::shard_name(r));
    }
  }
  return index;
}

void check_index_before_load(const Json& index, const std::string& index_path, const TensorFile& file,
                             const std::string& shard_name, const std::string& policy) {
  SKEW_CHECK(index.value("policy", "") == policy, "checkpoint index " << index_path << " was written under moe.policy="
                                                                      << index.value("policy", Json()).dump()
                                                                      << " but this run has moe.policy=" << policy);
  SKEW_CHECK(index.contains("tensors") && index["tensors"].is_object(),
             "checkpoint index " << index_path << " has no \"tensors\" object");
  const Json mine = CheckpointDir::describe_tensors(file.tensors);
  for (const auto& [name, info] : mine.items()) {
    SKEW_CHECK(index["tensors"].contains(name),
               "checkpoint index " << index_path << " does not list tensor " << name << " of " << shard_name);
    const Json& entry = index["tensors"][name];
    SKEW_CHECK(entry.value("dtype", Json()) == info["dtype"] && entry.value("shape", Json()) == info["shape"],
               "checkpoint index " << index_path << ": tensor " << name << " is " << info.dump() << " in " << shard_name
                                   << " but " << entry.dump() << " in the index");
  }
  for (const auto& [name, entry] : index["tensors"].items()) {
    const Json files = entry.value("files", Json::array());
    const bool listed = std::find(files.begin(), files.end(), Json(shard_name)) != files.end();
    SKEW_CHECK(!listed || mine.contains(name), "checkpoint index " << index_path << " places tensor " << name << " in "
                                                                   << shard_name << ", which does not hold it");
  }
}

void check_index_after_load(const Json& index, const std::string& index_path, MoeNetwork<float>& model) {
  const Json placement = index.value("placement", Json::array());
  SKEW_CHECK(placement.size() == model.moe().size(), "checkpoint index "
                                                         << index_path << " has placements for " << placement.size()
                                                         << " MoE layers, the model has " << model.moe().size());
  for (std::size_t l = 0; l < model.moe().size(); ++l)
    SKEW_CHECK(placement[l] == model.moe()[l]->placement().to_string(),
               "checkpoint index " << index_path << ": layer " << l << " placement " << placement[l].dump()
                                   << " differs from the shard's " << model.moe()[l]->placement().to_string());
}

std::vector<Tensor*> ModelExpertStore::replica_state(int layer, int expert) {
  auto& s = model_.moe().at(static_cast<std::size_t>(layer))->experts().at(expert);
  return {&s.w, &s.m, &s.v};
}

void ModelExpertStore::create_replica(int layer, int expert) {
  model_.moe().at(static_cast<std::size_t>(layer))->create_expert(expert);
}

void ModelExpertStore::drop_replica(int layer, int expert) {
  model_.moe().at(static_cast<std::size_t>(layer))->experts().erase(expert);
}

}  // namespace skew::moe
