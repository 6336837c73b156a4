#include "lib/moe/routing_trace.hpp"

#include <charconv>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.hpp"

namespace skew::moe {

namespace {

constexpr const char* kMagic = "skew routing trace";
constexpr int kFormat = 1;
constexpr std::size_t kMaxHeader = 4096;  // a longer first line is not a header

std::map<std::string, std::string> header_values(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream words(line);
  for (std::string word; words >> word;)
    if (const auto eq = word.find('='); eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  return out;
}

}  // namespace

std::vector<TraceField> trace_fields(const Session& s) {
  const MoeTrainOptions& o = s.options;
  auto text = [](auto v) { return std::to_string(v); };
  return {{"arch", "model.arch", o.model.arch},
          {"top_k", "moe.top_k", text(o.moe.top_k)},
          {"experts", "moe.num_experts", text(o.moe.num_experts)},
          {"moe_layers", "MoE layers (model.layers, model.moe_every)", text(s.model->network().moe().size())},
          {"ranks", "ranks", text(s.world.size())},
          {"rank", "rank (the file's .rank<r>)", text(s.world.rank())},
          {"batch_size", "train.batch_size", text(o.train.batch_size)},
          {"seq_len", "model.seq_len", text(o.model.seq_len)},
          {"tokens_per_step", "tokens per step and rank", text(s.model->tokens_per_step())},
          {"seed", "train.seed", text(o.train.seed)}};
}

std::string trace_header(const std::vector<TraceField>& fields, std::int64_t first_iteration) {
  std::string line = std::string(kMagic) + " " + std::to_string(kFormat) + ":";
  for (const TraceField& f : fields) line += " " + f.name + "=" + f.value;
  return line + " first_iteration=" + std::to_string(first_iteration) + "\n";
}

std::int64_t check_trace_header(std::istream& in, const std::string& path, const std::string& key,
                                const std::vector<TraceField>& fields) {
  std::string line;
  char c = 0;
  while (line.size() < kMaxHeader && in.get(c) && c != '\n') line += c;
  const std::string magic = std::string(kMagic) + " ";
  SKEW_CHECK(c == '\n' && line.rfind(magic, 0) == 0,
             key << ": " << path
                 << " has no routing-trace header: it is not a trace, or one recorded before traces carried a header "
                    "(a raw stream of expert ids whose moe.top_k, moe.num_experts and batch cannot be checked); "
                    "record it again with moe.save_trace");
  const std::string version = line.substr(magic.size(), line.find(':') - magic.size());
  SKEW_CHECK(version == std::to_string(kFormat), key << ": " << path << " is routing-trace format " << version
                                                     << ", this moe_train reads format " << kFormat
                                                     << "; record it again with moe.save_trace");
  const auto values = header_values(line);
  for (const TraceField& f : fields) {
    const auto v = values.find(f.name);
    SKEW_CHECK(v != values.end(), key << ": " << path << "'s header does not record " << f.name);
    SKEW_CHECK(v->second == f.value, key << ": " << path << " was recorded with " << f.key << " = " << v->second
                                         << ", but this run has " << f.key << " = " << f.value
                                         << "; replay it with the recording run's settings, or record a new trace");
  }
  const auto first = values.find("first_iteration");
  std::int64_t iteration = -1;
  if (first != values.end()) {
    const std::string& text = first->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), iteration);
    if (ec != std::errc() || end != text.data() + text.size()) iteration = -1;
  }
  SKEW_CHECK(iteration >= 0, key << ": " << path << "'s header records no first_iteration (a number >= 0)");
  return iteration;
}

RoutingTrace::RoutingTrace(Session& s, std::int64_t start)
    : fields_(trace_fields(s)),
      suffix_(".rank" + std::to_string(s.world.rank())),
      replay_name_(s.options.moe.replay_trace),
      choices_(static_cast<std::size_t>(s.model->tokens_per_step() * s.options.moe.top_k)),
      forced_(s.model->network().moe().size(), std::vector<std::int32_t>(choices_)) {
  if (!s.options.moe.save_trace.empty()) open_save(s.options.moe.save_trace + suffix_, start);
  if (!replay_name_.empty()) open_replay(start);
}

// A new run replaces the file; a resumed one keeps the iterations before `start` of a trace
// recorded with the same settings and appends after them.
void RoutingTrace::open_save(const std::string& path, std::int64_t start) {
  const std::size_t iteration_bytes = forced_.size() * choices_ * sizeof(std::int32_t);
  std::error_code ec;
  if (start == 0 || !std::filesystem::exists(path, ec)) {
    pending_header_ = trace_header(fields_, start);
    save_.open(path, OutputFile::Mode::Replace);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  SKEW_CHECK(in, "moe.save_trace: cannot read " << path << " to append to it");
  const std::int64_t first = check_trace_header(in, path, "moe.save_trace", fields_);
  const auto keep = static_cast<std::uintmax_t>(in.tellg()) +
                    static_cast<std::uintmax_t>(std::max<std::int64_t>(start - first, 0)) * iteration_bytes;
  const std::uintmax_t size = std::filesystem::file_size(path);
  SKEW_CHECK(first <= start && size >= keep, "moe.save_trace: " << path << " holds iterations from " << first
                                                                << " on, not all before " << start
                                                                << ", where this run resumes; remove it to start anew");
  in.close();
  std::filesystem::resize_file(path, keep);  // iterations after the checkpoint are rewritten
  save_.open(path, OutputFile::Mode::Append);
}

void RoutingTrace::open_replay(std::int64_t start) {
  const std::string path = replay_name_ + suffix_;
  replay_.open(path, std::ios::binary);
  SKEW_CHECK(replay_, "moe.replay_trace: cannot read " << path);
  const std::int64_t first = check_trace_header(replay_, path, "moe.replay_trace", fields_);
  SKEW_CHECK(first <= start, "moe.replay_trace: " << path << " starts at iteration " << first << ", after iteration "
                                                  << start << " where this run starts");
  const std::size_t iteration_bytes = forced_.size() * choices_ * sizeof(std::int32_t);
  replay_.seekg(static_cast<std::streamoff>(static_cast<std::size_t>(start - first) * iteration_bytes), std::ios::cur);
}

std::vector<const std::int32_t*> RoutingTrace::read(std::int64_t it) {
  std::vector<const std::int32_t*> out;
  if (!replay_.is_open()) return out;
  for (auto& f : forced_) {
    replay_.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(std::int32_t)));
    SKEW_CHECK(replay_, "moe.replay_trace: " << replay_name_ << suffix_ << " ends before iteration " << it);
    out.push_back(f.data());
  }
  return out;
}

void RoutingTrace::write(const std::vector<std::unique_ptr<MoeLayer<float>>>& layers) {
  if (!save_.is_open()) return;
  if (!pending_header_.empty()) save_.write(pending_header_), pending_header_.clear();
  for (const auto& layer : layers)  // the choices live on the layer's device
    save_.write(layer->gate_state().expert.host_copy().data(), choices_ * sizeof(std::int32_t));
}

}  // namespace skew::moe
