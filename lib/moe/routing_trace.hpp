// moe.save_trace / moe.replay_trace: every token's expert choices, per iteration and MoE layer,
// in FILE.rank<r>. The file opens with one text line naming the format and what a replay
// depends on (model.arch, moe.top_k, moe.num_experts, the MoE layers, the ranks and this rank,
// train.batch_size, model.seq_len, the tokens per step, train.seed, the first iteration); then
// int32 expert ids, tokens x top_k per layer and iteration. A replay whose run differs in any of
// these is refused naming both values; a file without the line (a trace from before the header,
// a raw id stream whose top_k and batch cannot be told) is refused, never guessed at. A resumed
// run appends to (or replays from) where it stopped.
#pragma once
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/fileio.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/session.hpp"

namespace skew::moe {

// One value a trace depends on: its name in the header, the key(s) a user changes it with.
struct TraceField {
  std::string name, key, value;
};

// What this rank's trace depends on in run `s`, in header order.
std::vector<TraceField> trace_fields(const Session& s);

// The header line (with its '\n') for `fields`, the trace starting at `first_iteration`.
std::string trace_header(const std::vector<TraceField>& fields, std::int64_t first_iteration);

// Reads the header line of `in` (the file `path`, opened for `key`), checks it against `fields`
// and returns the first iteration it holds; throws naming the file, the key and both values.
std::int64_t check_trace_header(std::istream& in, const std::string& path, const std::string& key,
                                const std::vector<TraceField>& fields);

class RoutingTrace {
 public:
  RoutingTrace(Session& s, std::int64_t start);
  // Iteration `it`'s replayed choices per layer; none when not replaying.
  std::vector<const std::int32_t*> read(std::int64_t it);
  void write(const std::vector<std::unique_ptr<MoeLayer<float>>>& layers);
  // A failed last write or close is an error naming the file, not a line on stderr.
  void close() {
    if (save_.is_open()) save_.close();
  }

 private:
  void open_save(const std::string& path, std::int64_t start);
  void open_replay(std::int64_t start);

  std::vector<TraceField> fields_;
  std::string suffix_, replay_name_;
  std::size_t choices_;  // per layer and iteration: tokens * top_k
  OutputFile save_;
  std::string pending_header_;  // written with the first iteration of a new file
  std::ifstream replay_;
  std::vector<std::vector<std::int32_t>> forced_;
};

}  // namespace skew::moe
